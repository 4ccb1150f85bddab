"""``rollbench serve-policy --protocol http``: the JSON /act protocol (FastAPI on uvicorn), bounded.

Imported only to serve http (it imports FastAPI at module level: the endpoints' annotations must resolve there).

The wire format is specified in :mod:`rollbench.policies.remote.http`. This module adds what a server facing
untrusted peers needs (limits in :class:`rollbench.serve.sessions.Limits`):

* the body is read by the endpoint itself, not by FastAPI's ``Body``: a declared ``Content-Length`` above
  ``max_request_bytes`` is answered 413 before a byte of the body is read, a chunked body is cut off at the limit
  (uvicorn stops reading from the socket while the app does not consume, so memory stays bounded); both close
  the connection;
* parsing (JSON, base64, numpy), the policy call and the reply's encoding run in a worker thread
  (``anyio.to_thread``), so a large body never blocks the event loop that serves the other clients;
* the server is :func:`rollbench.wire.inbound_http.bounded_server`, the one of every rollbench HTTP surface: a
  request whose headers do not arrive within ``request_timeout_s`` is closed, one whose body does not is answered
  408, a client that takes no byte of its answer for that long is cut off, a connection over ``--max-connections``
  is answered 503 (:mod:`rollbench.wire.inbound`); idle keep-alive connections close after 5 s;
* every non-2xx reply has one shape, ``{"error": "message"}``, FastAPI's own 404/405/422 included.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from rollbench.core.format import is_decimal
from rollbench.serve.batch import item_error, session_key
from rollbench.serve.limits import MalformedReply, connection_cap
from rollbench.serve.requests import handle_batch, http_locate
from rollbench.serve.sessions import PolicyHost, Session
from rollbench.wire.act_request import decode_json
from rollbench.wire.decode import ProtocolError, loads_json
from rollbench.wire.guard import Guard, asgi_guard
from rollbench.wire.inbound import ConnectionBounds

JSON = "application/json"


def error_body(message: str) -> bytes:
    """The one error shape of the JSON /act protocol: ``{"error": message}``."""
    return json.dumps({"error": message}).encode()


def serve_body(host: PolicyHost, body: bytes | bytearray) -> tuple[int, bytes, str]:
    """One POST body -> ``(status, reply bytes, media type)``. Runs in a worker thread; never raises."""
    from rollbench.wire.decode import encode_array

    try:
        request = loads_json(body)
        if not isinstance(request, dict):
            raise ProtocolError(f"the request body must be a JSON object, got {type(request).__name__}")
        sid = request.get("session")
        if "batch" in request:  # one item per session (rollbench.serve.batch)
            reply = handle_batch(host, request["batch"], http_locate(host), decode_json)
        elif sid is not None and request.get("close") is True:  # the client is done: its instance returns at once
            host.end_session(session_key(sid))
            return 200, b'{"closed": true}', JSON
        else:
            session = session_of(host, request, sid)
            try:
                reply = host.handle(session, request, decode_json)
            except Exception:
                if "reset" in request and session.evictable and session.task is None:
                    host.end_session(session.key)  # a session whose reset never succeeded gives its slot back
                raise
    except MalformedReply:
        return 200, b"injected failure: this is not JSON", "text/plain"
    except Exception as exc:  # the status a batch item with this error gets too (410, 503, 400, 500)
        err = item_error(exc)
        return err["status"], error_body(err["error"]), JSON
    if "actions" in reply:
        reply = {**reply, "actions": encode_array(reply["actions"])}
    if "batch" in reply:
        reply["batch"] = [{**e, "actions": encode_array(e["actions"])} if "actions" in e else e for e in reply["batch"]]
    return 200, json.dumps(reply).encode(), JSON


def session_of(host: PolicyHost, request: dict[str, Any], sid: Any) -> Session:
    """The session a single (reset or act) request is for."""
    if sid is None:  # clients that send no id share one session, reset to --env on first use, never evicted
        return host.open_session("default", evictable=False)
    key = session_key(sid)
    if "reset" in request:  # a reset starts (or restarts) the session of this id
        return host.open_session(key, evictable=True, revive=True)
    return host.get_session(key)


def http_app(host: PolicyHost, path: str) -> Any:
    """The FastAPI app of the JSON /act protocol at ``path``."""
    app = FastAPI(title="rollbench serve-policy", description="JSON /act protocol v1 (rollbench.policies.remote.http)")
    limit = host.limits.max_request_bytes

    def error(status: int, message: str, close: bool = False, headers: Any = None) -> Response:
        extra = {**(headers or {}), **({"connection": "close"} if close else {})}
        return Response(error_body(message), status_code=status, media_type=JSON, headers=extra)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error(exc.status_code, f"{exc.detail} ({request.method} {request.url.path}; the protocol is at {path})")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        return error(400, f"invalid request: {exc.errors()!r:.500}")

    @app.get(path)
    def ready() -> dict[str, Any]:
        return {"ready": True, "metadata": host.metadata()}

    @app.post(path)
    async def act(request: Request) -> Response:
        too_large = f"the request body exceeds this server's limit of {limit} bytes (serve-policy --max-request-mb)"
        declared = request.headers.get("content-length")
        if declared is not None:
            if not is_decimal(declared):
                return error(400, "Content-Length is not a number", close=True)
            if int(declared) > limit:
                return error(413, too_large, close=True)
        body = bytearray()
        try:  # the server answers 408 (and this reads a disconnect) when the body is late: wire.inbound_http
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    return error(413, too_large, close=True)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it
        status, payload, media = await anyio.to_thread.run_sync(serve_body, host, body)
        headers = {"retry-after": "5"} if status == 503 else None
        return Response(payload, status_code=status, media_type=media, headers=headers)

    return app


def run_http(
    host: PolicyHost, path: str, sock: socket.socket, guard: Guard | None = None, bounds: ConnectionBounds | None = None
) -> None:
    """Serve the JSON /act protocol on ``sock`` until interrupted, every request passing ``guard`` first
    (:func:`rollbench.wire.guard.asgi_guard`; default: loopback names, no token), the connections held to ``bounds``
    (default: ``--request-timeout-s`` of ``host.limits`` and :func:`connection_cap`)."""
    from rollbench.wire.inbound_http import bounded_server

    checks = guard or Guard.for_binding("127.0.0.1", None, what="run the served policy")
    limits = bounds or ConnectionBounds(host.limits.request_timeout_s, connection_cap(host.limits.max_sessions))
    bounded_server(asgi_guard(http_app(host, path), checks), limits, "rollbench serve-policy").run(sockets=[sock])
