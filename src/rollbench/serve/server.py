"""``rollbench serve-policy``: serve any rollbench policy over the openpi websocket protocol or JSON /act (the
command and its options: :mod:`rollbench.cli.serve`; here: listening, serving and the protocols' errors).

The same wire formats the clients speak (:mod:`rollbench.policies.remote.ws`, :mod:`rollbench.policies.remote.http`),
so scripted baselines sit behind the same interface as a VLA server, and the tests exercise real servers.

Episodes and sessions (:mod:`rollbench.serve.sessions`): the policy is built with
:func:`rollbench.core.registry.make_policy`. A *session* is one websocket connection, or one ``session`` id of the JSON
protocol; each live session owns its own policy instance (idle instances are reused, never shared). A reset
request ``{"reset": {"task", "seed", "instruction"}}`` calls ``policy.reset(task, seed)`` with the task resolved
from rollbench's registry, so stateful policies start every episode fresh. Metadata says ``"reset": true`` so
rollbench clients send it; a plain openpi client never does, and then ``--env TASK`` names the task the policy is
reset to (seed 0) when a websocket session (or the JSON protocol's shared session of requests without a
``session`` id) starts. Without either, an observation is answered with an error. A JSON request with a
``session`` id the server does not know (never reset, evicted, or from before a restart) gets HTTP 410, never a
silent reset to ``--env``.

Limits, recorded in the metadata under ``"limits"`` (:class:`rollbench.serve.sessions.Limits`):
``--max-request-mb`` (largest websocket frame / HTTP body, default 16 MiB: 8 cameras of 512x512 RGB as base64 JSON,
twice over; larger ones are refused, websocket close 1009 / HTTP 413, before they are read),
``--max-sessions`` (default 64; past it a new session is refused: websocket close 1013 after an error text frame,
HTTP 503), ``--session-idle-s`` (an HTTP session idle this long may be evicted to make room),
``--request-timeout-s`` (an HTTP request's headers and body, and a websocket handshake, must arrive within it; a
client must take each answer within it too: an HTTP connection whose peer takes no byte of its answer for that
long is aborted, and a websocket reply, pong or ping the peer has not taken within it closes the connection and
releases its session, with one line on stderr; idle keep-alive HTTP connections close after 5 s, idle websocket
peers are detected by pings). Not in the metadata: HTTP's
``--max-connections`` (default 256, or 4 x ``--max-sessions`` if more; one more connection is answered 503), which
with the request deadline is the HTTP server every rollbench surface shares (:mod:`rollbench.wire.inbound`). Decoding happens off the
event loop: websocket connections each run in their own thread, HTTP bodies are parsed in a worker thread.

Access (:mod:`rollbench.wire.guard`, the guard every surface shares): loopback by default; another ``--host``
needs ``--token`` (or ``ROLLBENCH_SERVER_TOKEN``, at least 16 characters; rollbench's clients send that variable as
``Authorization: Bearer``, openpi's ``api_key`` as ``Api-Key`` is accepted too); ``Host`` must be a bound name
(``--allow-host`` adds names), a browser's ``Origin`` must be the server's own, an HTTP body must be JSON. A refused
websocket handshake gets the guard's HTTP status. At most ``--max-sessions`` + :data:`HANDSHAKE_SLOTS` websocket
connections (handshaking or open) are served at once; past that a new connection gets ``503`` and is closed, so
half-open handshakes cannot pile up threads (each connection has two). A reset names a task only as an installed
family's named task (:func:`rollbench.core.registry.remote_task`): a request can never make the server import a
module.

Observations are decoded safely (:mod:`rollbench.wire.decode`: numeric and boolean arrays only, bounded
shapes) and mapped with the task family's :mod:`rollbench.wire.obs_map` (overridable with ``--obs-map``):
images back to camera names, the state as ``observation.state`` (``float32``) with the array as received in
``observation.raw`` (so MetaWorld's experts read the full-precision vector), the prompt/instruction passed to
``act``. A state or image with NaN or infinity is refused. Each reply is ``{"actions": float32 (k, action_dim),
"server_timing": {"infer_ms": ...}}``.

Errors: websocket: a text frame with the error, then a close with a reason (1008 for a request that breaks the
protocol, 1011 for the policy's own exception, whose traceback is the text frame, as openpi does; 1013 busy).
HTTP: every non-2xx body is ``{"error": "message"}`` (400 protocol, 404/405 wrong path or method, 408 request too
slow, 410 unknown session, 413 too large, 500 the policy raised, 503 busy).

Batches (:mod:`rollbench.serve.batch`): the metadata says ``"max_batch": N`` (``--max-batch``, default 1); a request
may hold up to N act items, one per session (HTTP ``{"batch": [...]}``; websocket slots of one connection), answered
one entry per item. With N > 1, acts arriving from all clients within ``--batch-window-ms`` are gathered into one
call of the policy's batched form (``batched(--max-sessions)``, one slot per session; a policy without one is
called in turn for each session). rollbench clients with ``--batch-size B >= 2`` send one batch request per
lockstep step to such a server, and single observations to any other.

``--log-requests FILE`` appends one JSON line per request: ``{"time", "protocol", "session", "kind": "reset" |
"act", "task", "seed", "instruction", "state": [dtype, shape], "images": {camera: shape}, "outcome"}`` (acts of a
batch request add ``"batch": items``), and with ``--max-batch`` above 1 one line per policy call ``{"kind":
"call", "call": n, "size", "sessions": [keys]}``; the tests read it to check, on the server side, which
instruction arrived and which sessions shared a call.

``--inject`` injects a failure, for tests and drills, recorded in the metadata (``injection``; so in the client's
run.json):
``wrong-shape`` (actions get one extra column), ``malformed`` (the reply is not msgpack / not JSON), ``error``
(every act raises), ``short-batch`` (a batch reply of more than one entry loses its last one), ``slow:SECONDS`` (sleep before every act reply), ``die-after:N`` (the process exits with
code 70, without replying, on act request N + 1: a crashed server).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import sys
import threading
import traceback
from typing import Any

from rollbench.core.contracts import ConfigError, RollbenchError, describe
from rollbench.serve.limits import MalformedReply, SessionRefused
from rollbench.serve.requests import WsConnection
from rollbench.serve.sessions import PolicyHost
from rollbench.wire.decode import unpack_msgpack
from rollbench.wire.guard import Guard
from rollbench.wire.inbound import ConnectionBounds

MAX_QUEUE = 2  # frames a websocket connection buffers before it stops reading: bounds memory per connection
HANDSHAKE_SLOTS = 16  # websocket connections beyond --max-sessions that may be handshaking (then refused or 1013)
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _Counted(socket.socket):
    """An accepted connection that gives its slot back to its listener when first closed."""

    listener: BoundedListener | None = None

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.release()
        super().close()


class BoundedListener(socket.socket):
    """A listening socket whose ``accept`` keeps at most ``limit`` connections open: a connection past it is sent
    ``503`` and closed at once, without a thread (websockets' sync server starts threads per accepted socket)."""

    limit = 1 << 30
    live = 0

    def release(self) -> None:
        with _slots_lock:
            self.live -= 1

    def accept(self) -> tuple[socket.socket, Any]:
        while True:
            fd, addr = self._accept()  # type: ignore[attr-defined]
            conn = _Counted(self.family, self.type, self.proto, fileno=fd)
            with _slots_lock:
                full = self.live >= self.limit
                if not full:
                    self.live += 1
            if not full:
                conn.listener = self
                if socket.getdefaulttimeout() is None and self.gettimeout():  # as socket.socket.accept does
                    conn.setblocking(True)
                return conn, addr
            with contextlib.suppress(OSError):
                conn.setblocking(False)
                conn.send(_BUSY)
            conn.close()


_slots_lock = threading.Lock()


def close_reason(text: str) -> str:
    """The last line of ``text`` (a traceback's exception), cut to a websocket close reason's 123 bytes of UTF-8 (RFC 6455 section 5.5)."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line.encode()[:123].decode(errors="ignore")


def serve_ws(host: PolicyHost, sock: socket.socket, guard: Guard | None = None) -> None:
    """Serve the openpi websocket protocol on ``sock`` (a thread per connection) until interrupted; every handshake
    passes ``guard`` first (default: loopback names, no token)."""
    import http

    from openpi_client import msgpack_numpy
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.server import ServerConnection, serve

    packb = msgpack_numpy.Packer().pack

    def refuse(conn: ServerConnection, code: int, text: str) -> None:
        conn.send(text)  # openpi's convention: the error as a text frame; then a close that says it too
        conn.close(code=code, reason=close_reason(text))

    def handler(conn: ServerConnection) -> None:
        key = f"ws-{id(conn):x}"
        connection = WsConnection(host, key)
        peer = conn.remote_address
        try:
            try:
                connection.session = host.open_session(key, evictable=False, wait_s=1.0)
            except SessionRefused as exc:
                refuse(conn, 1013, f"{describe(exc)}")
                return
            conn.send(packb(host.metadata()))
            while True:
                frame = conn.recv()
                try:
                    reply = packb(connection.handle(unpack_msgpack(frame)))
                except MalformedReply:
                    conn.send(b"\xc1 injected failure: not msgpack")
                    continue
                except SessionRefused as exc:  # a batch slot past --max-sessions
                    refuse(conn, 1013, f"{describe(exc)}")
                    return
                except (ValueError, RollbenchError) as exc:  # the request breaks the protocol or cannot be served
                    refuse(conn, 1008, f"{describe(exc)}")
                    return
                except Exception:  # the policy's own failure: as openpi, the traceback as a text frame, then close
                    text = traceback.format_exc(limit=8)
                    conn.send(text)
                    conn.close(code=1011, reason=close_reason(text))
                    return
                conn.send(reply)
        except ConnectionClosed as exc:
            if isinstance(exc.__cause__, TimeoutError):  # a send past the deadline: the client stopped reading
                stalled(peer, host.limits.request_timeout_s)
        finally:
            connection.close()

    checks = guard or Guard.for_binding("127.0.0.1", None, what="run the served policy")

    def health(conn: ServerConnection, request: Any) -> Any:
        refused = checks.check("GET", request.headers, websocket=request.path != "/healthz")
        if refused is not None:
            return conn.respond(http.HTTPStatus(refused[0]), refused[1] + "\n")
        return conn.respond(http.HTTPStatus.OK, "OK\n") if request.path == "/healthz" else None

    limits = host.limits
    if isinstance(sock, BoundedListener):
        sock.limit = limits.max_sessions + HANDSHAKE_SLOTS
    with serve(
        handler,
        sock=sock,
        compression=None,
        max_size=limits.max_request_bytes,  # a larger frame is refused from its header: close 1009, never read
        max_queue=MAX_QUEUE,
        open_timeout=limits.request_timeout_s,
        process_request=health,
        create_connection=timed_connection(limits.request_timeout_s),
    ) as server:
        server.serve_forever()


def timed_connection(send_timeout_s: float) -> Any:
    """websockets' sync ``ServerConnection`` whose socket has a send deadline of ``send_timeout_s`` seconds: each
    frame (a reply, a pong, a keepalive ping) must be taken by the peer within it. Without one, a peer that stops
    reading blocks ``sendall`` forever while it holds the connection's lock, so even the keepalive that drops silent
    peers never runs (hostile round 21, F1); with it, the send raises ``TimeoutError``, the socket is shut so that
    the connection's other threads waiting to send fail at once (one deadline in all, not one per thread),
    websockets closes it (with a reset: what the peer never took is dropped, not left to the kernel) and the
    handler's ``recv``/``send`` raise ``ConnectionClosed`` (its ``__cause__`` the ``TimeoutError``)."""
    from websockets.sync.server import ServerConnection

    class TimedConnection(ServerConnection):
        def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
            sock.settimeout(send_timeout_s)  # reads are unaffected: websockets reads only once select() says ready
            super().__init__(sock, *args, **kwargs)

        def send_data(self) -> None:
            try:
                super().send_data()
            except TimeoutError:  # no later frame waits again (the handler's reply after a pong, a keepalive ping):
                with contextlib.suppress(OSError):  # their sends fail at once, and the close is a reset
                    self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.socket.shutdown(socket.SHUT_RDWR)
                raise

        def close_socket(self) -> None:
            if isinstance(self.connection_exc, TimeoutError):  # a reset: the kernel drops what the peer never took
                with contextlib.suppress(OSError):
                    self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            super().close_socket()

    return TimedConnection


def stalled(peer: Any, timeout_s: float) -> None:
    """The one stderr line of a websocket connection closed because its peer took no reply within ``timeout_s``."""
    where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "a client"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(
            f"rollbench serve-policy: closed the websocket connection of {where}: it took no reply within "
            f"{timeout_s:g} s (--request-timeout-s); its session is released\n"
        )
        sys.stderr.flush()


def listen(host: str, port: int, bounded: bool = False) -> socket.socket:
    """A listening TCP socket. Created with ``proto=IPPROTO_TCP`` on purpose: asyncio only sets ``TCP_NODELAY``
    on connections whose socket says so, and ``socket.create_server`` leaves ``proto`` 0, which under uvicorn left
    Nagle's algorithm on and cost ~40 ms per keep-alive request (delayed ACK)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = (BoundedListener if bounded else socket.socket)(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except BaseException:
        sock.close()
        raise
    return sock


def check_address(protocol: str, path: str) -> None:
    """ConfigError for an unknown protocol or an http path not starting with ``/``."""
    if protocol not in ("ws", "http"):
        raise ConfigError(f"unknown protocol {protocol!r}; valid protocols: ws, http")
    if not path.startswith("/"):
        raise ConfigError(f"--path must start with '/', got {path!r}")


def load_protocol(protocol: str) -> None:
    """Import what serving ``protocol`` needs (FastAPI for ``http``: seconds on a loaded machine). Called before the
    port is bound, so that a port that accepts connections belongs to a server ready to answer, and a Ctrl-C right
    after start-up lands in the serving loop (exit 130), not in the middle of an import."""
    if protocol == "http":
        import rollbench.serve.http  # noqa: F401


def serve(
    served: PolicyHost,
    sock: socket.socket,
    host: str,
    protocol: str,
    path: str,
    guard: Guard,
    bounds: ConnectionBounds | None = None,
) -> None:
    """Print the URL clients use, then serve on ``sock`` until interrupted (Ctrl-C: KeyboardInterrupt propagates,
    the command exits 130 as every rollbench command does; SIGTERM ends the process by the signal). ``bounds``: the
    HTTP server's request deadline and connection cap (:mod:`rollbench.wire.inbound`; default from the limits)."""
    bound = sock.getsockname()[1]
    url = f"ws://{host}:{bound}" if protocol == "ws" else f"http://{host}:{bound}{path}"
    print(f"serving {served.name} at {url}", flush=True)
    if protocol == "ws":
        serve_ws(served, sock, guard)
    else:
        from rollbench.serve.http import run_http

        run_http(served, path, sock, guard, bounds)
