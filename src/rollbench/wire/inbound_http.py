"""The uvicorn server of every rollbench HTTP surface (``serve-policy --protocol http``, the dashboard, MCP over
HTTP), holding peers to :class:`rollbench.wire.inbound.ConnectionBounds` (the rules are that module's docstring).

uvicorn is imported by :func:`bounded_server` only (``wire`` is imported by every client too): the protocol and
the server here are mixins, put in front of uvicorn's classes there.

Why uvicorn's own settings do not do it (uvicorn 0.54): its ``H11Protocol`` arms its keep-alive timer only after a
response and cancels it on the first byte, so a peer that connects and sends nothing, half a request line, or
headers and a short body, holds the connection forever (a slowloris); nothing bounds the body's arrival; and
``limit_concurrency`` answers 503 only once a request's headers are complete, so idle connections are never
refused. Each such connection is a file descriptor: at the usual ``ulimit -n`` of 1024, about a thousand made the
dashboard unreachable, and asyncio's report of the failed ``accept()`` went through the MCP SDK's rich logging
handler, which imports a module on its first traceback, failed to open it, and ended the process (hostile round
19, F3). Here:

* :class:`BoundedH11Protocol` times each request's arrival (headers, then body) from the connection's opening or
  its previous answer, refuses a connection over the cap before reading it (a running count, not a scan of every
  connection), and times the sending of answers: a peer that takes no byte of them for the deadline is cut off,
  and no pipelined request is started while an answer waits to be taken (hostile round 21, F2);
* :class:`BoundedServer` runs on asyncio's own loop (not uvloop, whose accept errors take another path) and gives
  the loop an exception handler that reports running out of file descriptors in one plain line, written with
  ``os.write``: no logging handler and no import runs while the process has no descriptor to spare.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rollbench.wire.inbound import (
    KEEP_ALIVE_S,
    NOTICE_EVERY_S,
    ConnectionBounds,
    body_late,
    error_reply,
    too_many,
)

OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)  # asyncio pauses accept() on these
LINGER_S = 1.0  # a refused connection is read (and dropped) this long after its 503, then closed
PIPELINED_BYTES = 65_536  # unparsed bytes of further requests read behind the one in progress before reading stops
WATCH_STEPS = 4  # a stalled answer is looked at this many times per deadline: cut between 1 and 1.25 deadlines

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Protocol
    from uvicorn.server import Server as _Server
else:
    _Protocol = _Server = object


class Held:
    """The connections one server holds (refused ones not counted): a running count, kept by the protocol."""

    def __init__(self) -> None:
        self.count = 0


class BoundedH11Protocol(_Protocol):
    """uvicorn's h11 protocol (``H11Protocol``, behind this mixin) with a request deadline, an answer deadline and a
    connection cap (``bounds`` and ``held``, set per server by :func:`bounded_server`).

    The request deadline runs from the connection's opening, and again from each complete answer, until a request's
    headers and body have all arrived. When it passes: with no request in progress (headers incomplete, or nothing
    sent) the connection is closed; with the headers in and the body short, a 408 ``{"error": ...}`` is sent and
    the connection closed (the app's ``receive()`` then reports a disconnect, and what it sends is dropped). A
    request that has arrived is never timed again.

    The answer deadline (the same seconds) times the peer's taking of what the server has written: once bytes wait
    in the transport's buffer (its writing paused, or the connection closing with bytes unsent), the connection is
    aborted when the peer has taken none of them (:func:`unsent` did not shrink) for that long. A slow reader that
    keeps taking bytes (a video download, an event stream) is never cut. While an answer waits to be taken, the next
    pipelined request is not started, and reading stops while :data:`PIPELINED_BYTES` of them wait unparsed.
    """

    bounds: ClassVar[ConnectionBounds] = ConnectionBounds()
    held: ClassVar[Held] = Held()
    refused = False  # over the cap: answered 503 at once; read and dropped until it closes
    _counted = False  # counted in held: given back when the connection is lost
    _timer: asyncio.TimerHandle | None = None
    _watch: asyncio.TimerHandle | None = None  # the answer deadline's next look, while bytes wait to be taken
    _resumes = 0  # times the transport resumed our writing (the peer took enough bytes)
    _seen: tuple[int, int] = (0, 0)  # (unsent bytes, resumes) at the last look
    _stalled_since = 0.0  # loop time of the last look at which the peer had taken bytes
    _next_waits = False  # an answer completed while not taken: the next pipelined request waits for resume_writing

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.flow.resume_reading = self._resume_reading  # type: ignore[method-assign]
        if self.held.count >= self.bounds.max_connections:
            self.refused = True
            transport.write(error_reply(503, "Service Unavailable", too_many(self.bounds.max_connections), 1))
            if transport.can_write_eof():
                transport.write_eof()  # the answer, then FIN; closing only later keeps an unread request from resetting it
            self._arm(LINGER_S)
        else:
            self.held.count += 1
            self._counted = True
            self._arm(self.bounds.request_timeout_s)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        super().data_received(data)
        if self._arrived():
            self._disarm()

    def on_response_complete(self) -> None:
        if self.flow.write_paused and not self.transport.is_closing():
            self._next_waits = True  # backpressure: the next pipelined request once this answer is taken
            return
        super().on_response_complete()  # may start a pipelined request
        if not self.transport.is_closing() and not self._arrived():
            self._arm(self.bounds.request_timeout_s)
        self._watch_answer()  # closed (Connection: close) with bytes unsent: they are timed too

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_answer()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._resumes += 1
        if self._next_waits and not self.transport.is_closing():
            self._next_waits = False
            self.on_response_complete()

    def timeout_keep_alive_handler(self) -> None:
        super().timeout_keep_alive_handler()
        self._watch_answer()

    def shutdown(self) -> None:
        super().shutdown()  # the server stops: a connection closed with bytes unsent must not hold it up forever
        self._watch_answer()

    def send_400_response(self, msg: str) -> None:
        import h11

        try:
            super().send_400_response(msg)
        except h11.LocalProtocolError:  # garbage pipelined behind an answer in progress: no room for a 400
            abort(self.transport)  # (uvicorn let it escape data_received: asyncio's "Fatal error" and a traceback)
            return
        self._watch_answer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._counted:
            self._counted = False
            self.held.count -= 1
        super().connection_lost(exc)

    def _arrived(self) -> bool:
        """A request is in progress and all of it (headers and body) has arrived."""
        return self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body

    def _resume_reading(self) -> None:
        """uvicorn's ``flow.resume_reading`` (called at every answer, and whenever the app awaits ``receive()``, as
        a file answer does), held back while more than :data:`PIPELINED_BYTES` of further requests wait unparsed:
        each read takes up to 256 kB, so a peer pipelining small requests made the server buffer ~200 MB. No
        deadlock: so many bytes always hold a complete request (h11 refuses an incomplete one over 16 kB), whose
        answer resumes reading again."""
        if len(self.conn.trailing_data[0]) <= PIPELINED_BYTES:
            type(self.flow).resume_reading(self.flow)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.transport.is_closing() or (not self.refused and self._arrived()):
            return
        cycle = self.cycle
        if not self.refused and cycle is not None and not cycle.response_complete and not cycle.response_started:
            message = body_late(self.bounds.request_timeout_s)  # the headers are in, the body is short
            self.transport.write(error_reply(408, "Request Timeout", message))
            cycle.disconnected = True  # the app's receive() says the peer left; its own answer is dropped
            cycle.message_event.set()
        self.transport.close()
        self._watch_answer()

    def _watch_answer(self) -> None:
        """Start the answer deadline if bytes wait in the transport's buffer and it is not running yet."""
        if self._watch is None and self.transport.get_write_buffer_size() > 0:
            self._seen = (unsent(self.transport), self._resumes)
            self._stalled_since = self.loop.time()
            self._watch = self.loop.call_later(self.bounds.request_timeout_s / WATCH_STEPS, self._look)

    def _look(self) -> None:
        """One look of the answer deadline: done when the buffer is empty, on while the peer takes bytes; the
        connection aborted once it has taken none for the deadline."""
        self._watch = None
        if self.transport.get_write_buffer_size() == 0:
            return  # all handed to the kernel: the app writes on (a later pause starts the deadline again)
        now, seen = self.loop.time(), (unsent(self.transport), self._resumes)
        if seen[0] < self._seen[0] or seen[1] != self._seen[1]:
            self._stalled_since = now
        self._seen = seen
        if now - self._stalled_since >= self.bounds.request_timeout_s - 1e-3:
            abort(self.transport)  # the peer stopped reading: the app's sends are dropped, the slot is given back
            return
        self._watch = self.loop.call_later(self.bounds.request_timeout_s / WATCH_STEPS, self._look)


def abort(transport: Any) -> None:
    """Close ``transport`` at once with a reset (``SO_LINGER`` 0): what it and the kernel hold unsent is dropped, so
    the kernel keeps no orphan socket trying to deliver it to a peer that does not read, and the peer learns it."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def unsent(transport: Any) -> int:
    """Bytes written to ``transport`` that its peer has not taken: its buffer plus, on Linux, the socket's send queue
    (``TIOCOUTQ``: not yet sent or not yet acknowledged), so a peer that reads slowly shows progress at once."""
    size = int(transport.get_write_buffer_size())
    sock = transport.get_extra_info("socket")
    try:
        import fcntl
        import termios

        outq = termios.TIOCOUTQ
    except (ImportError, AttributeError):  # pragma: no cover - not Linux: the buffer alone
        return size
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            size += struct.unpack("i", fcntl.ioctl(sock.fileno(), outq, b"\0\0\0\0"))[0]
    return size


class BoundedServer(_Server):
    """uvicorn's server (``uvicorn.Server``, behind this mixin), whose event loop reports running out of file descriptors in one plain line on stderr
    (``what``: the command, e.g. ``rollbench dashboard``) and keeps serving."""

    what = "rollbench"  # the command, set per server by bounded_server

    async def serve(self, sockets: Any = None) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(loop_errors(self.what))
        await super().serve(sockets)


def loop_errors(what: str) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """An event-loop exception handler that never raises. A failed ``accept()`` for want of file descriptors
    (asyncio then pauses accepting for a second and retries) is one plain line, at most every
    :data:`~rollbench.wire.inbound.NOTICE_EVERY_S` seconds; those retries (asyncio 3.11 schedules one per failed
    ``accept()`` and does not cancel them when the server stops) finding the server's socket closed are dropped; anything else goes to asyncio's default handler, and if
    logging it fails (it may need a descriptor too) a plain line says what could not be logged."""
    limit = _open_file_limit()
    last = [-NOTICE_EVERY_S]

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        try:
            if isinstance(exc, OSError) and exc.errno in OUT_OF_DESCRIPTORS and "accept" in context.get("message", ""):
                now = time.monotonic()
                if now - last[0] >= NOTICE_EVERY_S:
                    last[0] = now
                    _say(
                        f"{what}: out of file descriptors ({os.strerror(exc.errno or 0)}; the limit is {limit}, "
                        "`ulimit -n`): new connections wait until some close"
                    )
                return
            callback = getattr(getattr(context.get("handle"), "_callback", None), "__name__", "")
            if callback == "_start_serving" and isinstance(exc, OSError | ValueError):
                return  # an accept retry of a server that has stopped since: its socket is closed
            loop.default_exception_handler(context)
        except Exception:
            _say(f"{what}: {context.get('message', 'an error')} ({type(exc).__name__}: {exc}) could not be logged")

    return handle


def _say(line: str) -> None:
    """One line on stderr, written directly (no logging handler, no import); dropped if even that fails."""
    with contextlib.suppress(OSError, ValueError):
        os.write(2, (line.replace("\n", " ")[:500] + "\n").encode("utf-8", "replace"))


def _open_file_limit() -> str:
    """This process's soft limit on open files, in words (``unlimited``, or ``unknown`` off POSIX)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return "unknown"
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def bounded_server(
    app: Any, bounds: ConnectionBounds, what: str, host: str = "127.0.0.1", port: int = 0
) -> BoundedServer:
    """A :class:`BoundedServer` serving the ASGI ``app`` under ``bounds``; ``.run()`` binds ``host``:``port``,
    ``.run(sockets=[sock])`` serves a socket bound by the caller. HTTP/1.1 only (h11; no websocket upgrade), asyncio's
    loop, idle kept-alive connections closed after :data:`~rollbench.wire.inbound.KEEP_ALIVE_S` s, no access log."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    protocol = type("BoundedH11Protocol", (BoundedH11Protocol, H11Protocol), {"bounds": bounds, "held": Held()})
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        ws="none",
        loop="asyncio",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=int(KEEP_ALIVE_S),
    )
    server: BoundedServer = type("BoundedServer", (BoundedServer, uvicorn.Server), {"what": what})(config)
    return server
