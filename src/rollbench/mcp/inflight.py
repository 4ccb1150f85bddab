"""What an MCP session's HTTP requests mean for it (``rollbench mcp --transport http``): which hold it, and what a
closed connection does to the call it carried. An ASGI layer in front of the MCP SDK's app (pinned, ``mcp==2.3.0``),
keyed by each request's ``mcp-session-id`` header.

**Only calls hold a session.** The SDK suspends a session's idle countdown (its ``idle_scope.deadline``, infinite)
while any HTTP request of it is in flight, its standalone ``GET`` event stream included. That stream carries only a
ping every 15 s when nothing else happens, so one client that held one open on each of ``--max-sessions`` sessions
kept every session "busy" for as long as it liked: none idled out, none could be evicted, and every new client got
503 (hostile round 24, F1). Here a session counts as busy only while one of its POSTs (a call, a notification) is in
flight (:meth:`SessionRequests.posting`): when a POST ends with none left in flight, and when a GET stream's answer
starts with none in flight, the session's idle countdown starts from that moment (the deadline the SDK itself would
set), whatever event stream stays open. A session idle for ``--session-idle-s`` is then closed by the SDK's own
means, and evicted like any idle one; closing it ends its event stream.

**A closed connection cancels its call.** A POST whose answer (an event stream ending with the JSON-RPC response)
did not reach its end, because the client closed the connection, was cut off as a stalled reader, or the server is
stopping, has its request cancelled as if the client had sent ``notifications/cancelled`` for it: the same message
is handed to the session, so a rollout stops between episodes and stays resumable (hostile round 24, F3: the run
used to go on until the session idled out). The MCP specification says a disconnection SHOULD NOT be taken as a
cancellation where the client may resume the stream; this server keeps no event store, so a lost answer can never
be resumed, and work nobody can receive is only a cost. A cancellation for a request already answered, or of a
session already closed, changes nothing.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

log = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
MAX_BODY_KEPT = 4 * 1024 * 1024  # the SDK's own body limit: a longer one is answered 413, never dispatched
CANCEL_SEND_S = 5.0  # the longest the cancellation waits for the session to take it (it is read at once normally)


class SessionRequests:
    """The POSTs in flight per session of the SDK's session ``manager`` (a ``StreamableHTTPSessionManager``), whose
    sessions idle out after ``idle_s`` seconds; :meth:`app` is the ASGI layer that keeps them (module docstring)."""

    def __init__(self, manager: Any, idle_s: float) -> None:
        self.manager = manager
        self.idle_s = idle_s
        self.posts: dict[str, int] = {}  # session id -> POSTs in flight (absent: none)

    def posting(self, session_id: str) -> bool:
        """Whether a POST of the session is in flight (a call being answered): only then is it never evicted."""
        return session_id in self.posts

    def app(self, inner: Any) -> Any:
        """The ASGI app: ``inner`` (the SDK's Starlette app) with the session bookkeeping of the module docstring."""

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            session_id = _session_id(scope) if scope["type"] == "http" else None
            if session_id is None:  # no session yet (initialize), or not HTTP (lifespan)
                await inner(scope, receive, send)
            elif scope["method"] == "POST":
                await self._post(inner, session_id, scope, receive, send)
            elif scope["method"] == "GET":
                await inner(scope, receive, self._idle_once_started(session_id, send))
            else:
                try:
                    await inner(scope, receive, send)
                finally:
                    self._idle_from_now(session_id)

        return app

    async def _post(self, inner: Any, session_id: str, scope: Any, receive: Any, send: Any) -> None:
        body, answered = bytearray(), False

        async def receive_kept() -> Any:
            message = await receive()
            if message["type"] == "http.request" and len(body) <= MAX_BODY_KEPT:
                body.extend(message.get("body", b""))
            return message

        counted = True

        def uncount() -> None:  # once: when the answer's last bytes go out, else when the SDK's handler returns
            nonlocal counted
            if counted:
                counted = False
                if left := self.posts.pop(session_id) - 1:
                    self.posts[session_id] = left

        async def send_seen(message: Any) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True
                uncount()  # before the client can read the answer and send its next request
            await send(message)

        self.posts[session_id] = self.posts.get(session_id, 0) + 1
        try:
            await inner(scope, receive_kept, send_seen)
        finally:
            uncount()
            if not answered and (request_id := _request_id(bytes(body))) is not None:
                with anyio.CancelScope(shield=True):
                    await self._cancel(session_id, request_id)
            self._idle_from_now(session_id)

    def _idle_once_started(self, session_id: str, send: Any) -> Any:
        async def send_seen(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.start":  # the SDK suspended the countdown when the GET came in
                self._idle_from_now(session_id)

        return send_seen

    def _idle_from_now(self, session_id: str) -> None:
        """Start the session's idle countdown now unless a POST of it is in flight (or it is already ending)."""
        transport = self.manager._server_instances.get(session_id)
        scope = getattr(transport, "idle_scope", None)
        if scope is not None and not scope.cancel_called and not self.posting(session_id):
            scope.deadline = anyio.current_time() + self.idle_s

    async def _cancel(self, session_id: str, request_id: str | int) -> None:
        """Hand the session a ``notifications/cancelled`` for ``request_id``, as the client would have sent it."""
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCNotification

        transport = self.manager._server_instances.get(session_id)
        writer = getattr(transport, "_read_stream_writer", None)
        if transport is None or transport.is_terminated or writer is None:
            return  # the session is gone: its calls were cancelled with it
        reason = "the client closed the connection before the answer"
        params = {"requestId": request_id, "reason": reason}
        note = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params))
        with anyio.move_on_after(CANCEL_SEND_S):
            try:
                await writer.send(note)
                log.info("request %r of session %s cancelled: %s", request_id, session_id[:64], reason)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the session ended meanwhile


def _session_id(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == SESSION_HEADER:
            return bytes(value).decode("latin-1")
    return None


def _request_id(body: bytes) -> str | int | None:
    """The id of the JSON-RPC request ``body`` holds; None for anything else (a notification, a response, not JSON,
    a body cut at :data:`MAX_BODY_KEPT`)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    request_id = message.get("id")
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
