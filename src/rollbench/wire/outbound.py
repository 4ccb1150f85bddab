"""Every connection rollbench opens to a server someone named: policy servers (``ws://``, ``http://``), model APIs
(``agent:``) and peer dashboards. Two rules hold for all of them (issue 42, "one bad run or peer costs only itself";
hostile round 5, F3 and F4):

**No redirect is followed.** A server that answers ``3xx`` is an error naming that status; its ``Location`` is
neither followed nor quoted. Following one would let a server allowed by ``rollbench mcp --allow-policy URL`` send
the rollout to a server that is not allowed, with run.json naming the first. httpx never follows unless asked
(:func:`http_client` says ``follow_redirects=False`` all the same); websockets' sync ``connect`` (17.4, the pinned version) follows up to ten redirects and has no switch to stop it, so
:func:`ws_connect` passes the documented escape hatch ``create_connection``: a
:class:`~websockets.sync.client.ClientConnection` whose handshake turns a 3xx answer into :class:`RedirectRefused`,
an error that websockets' redirect loop does not take for a redirect (tests/test_outbound.py checks that websockets
still follows by itself, and that no client does).

**Every exchange has a total deadline.** httpx's timeouts bound each read of the socket, so a server that sends
``HTTP/1.1 200 OK`` and then one byte a second holds a request for hours (16 KiB of headers). Inside
:func:`total_deadline` (the calling thread only: a :class:`contextvars.ContextVar`), every connect, read and write
of a client made by :func:`http_client` is given at most the time left, so connect + request + headers + body end
within the deadline; past it, httpx raises :class:`httpx.ConnectTimeout`, :class:`httpx.WriteTimeout` or
:class:`httpx.ReadTimeout` saying ``no complete answer within the total deadline of S s``, which each client
already handles as its timeout. The websocket client is bounded by websockets for the handshake (``open_timeout``)
and each reply (``recv(timeout)``); websockets' ``send`` has no timeout (a server that stops reading blocks it once
the socket buffers are full), so :func:`socket_deadline` shuts the socket down when a send outlives its deadline
(``socket.shutdown`` wakes a blocked send).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import ssl

    import httpcore
    import httpx


T = TypeVar("T")
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("rollbench_total_deadline", default=None)


@contextlib.contextmanager
def total_deadline(seconds: float) -> Iterator[None]:
    """Bound every request of an :func:`http_client` made in this block (this thread) to ``seconds`` in all, from
    now: connect, request, response headers and body. Nested blocks keep the earlier end."""
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set((end, seconds) if outer is None or end < outer[0] else outer)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` (one socket operation's own bound, None for none) cut to the time left before the current total
    deadline; ``error`` when none is left."""
    bound = _DEADLINE.get()
    if bound is None:
        return timeout
    left = bound[0] - time.monotonic()
    if left <= 0:
        raise error(_past(bound[1]))
    return left if timeout is None else min(timeout, left)


def _past(seconds: float) -> str:
    return f"no complete answer within the total deadline of {seconds:g} s"


def _bounded(error: type[Exception], timeout: float | None, call: Callable[[float | None], T]) -> T:
    """``call(timeout)`` with ``timeout`` cut to the total deadline; a timeout that the deadline caused is raised as
    ``error`` saying so."""
    try:
        return call(_time_left(timeout, error))
    except error:
        bound = _DEADLINE.get()
        if bound is not None and time.monotonic() >= bound[0]:
            raise error(_past(bound[1])) from None
        raise


@functools.cache
def _backend_class() -> type[httpcore.NetworkBackend]:
    import httpcore

    class DeadlineStream(httpcore.NetworkStream):
        """A network stream whose every read, write and TLS handshake ends by the total deadline."""

        def __init__(self, inner: httpcore.NetworkStream) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return _bounded(httpcore.ReadTimeout, timeout, lambda t: self.inner.read(max_bytes, t))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            _bounded(httpcore.WriteTimeout, timeout, lambda t: self.inner.write(buffer, t))

        def close(self) -> None:
            self.inner.close()

        def start_tls(
            self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
        ) -> httpcore.NetworkStream:
            start = self.inner.start_tls
            return DeadlineStream(
                _bounded(httpcore.ConnectTimeout, timeout, lambda t: start(ssl_context, server_hostname, t))
            )

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class DeadlineBackend(httpcore.NetworkBackend):
        """httpcore's backend ``inner``, each of its connections a :class:`DeadlineStream`."""

        def __init__(self, inner: httpcore.NetworkBackend) -> None:
            self.inner = inner

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore.NetworkStream:
            connect = self.inner.connect_tcp
            return DeadlineStream(
                _bounded(
                    httpcore.ConnectTimeout, timeout, lambda t: connect(host, port, t, local_address, socket_options)
                )
            )

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
        ) -> httpcore.NetworkStream:
            connect = self.inner.connect_unix_socket
            return DeadlineStream(
                _bounded(httpcore.ConnectTimeout, timeout, lambda t: connect(path, t, socket_options))
            )

        def sleep(self, seconds: float) -> None:
            self.inner.sleep(seconds)

    return DeadlineBackend


def http_client(**options: Any) -> httpx.Client:
    """An ``httpx.Client(**options)`` that never follows a redirect and whose requests inside
    :func:`total_deadline` end by its deadline (see the module docstring). Proxies from the environment are kept."""
    import httpx

    client = httpx.Client(follow_redirects=False, **options)
    _bound_connections(client)
    return client


def _bound_connections(client: httpx.Client) -> None:
    """Give every connection pool of ``client`` (its transport and the proxies' mounted from the environment) the
    deadline backend. httpx 0.28 has no public way to hand httpcore a network backend, so this is the one place that
    reads private names (``Client._transport``, ``Client._mounts``, ``HTTPTransport._pool``,
    ``ConnectionPool._network_backend``); a library change that moves them fails here, loudly, and in
    tests/test_outbound.py, never silently drops the deadline."""
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if inner is None:
            raise RuntimeError(
                f"httpx {type(transport).__name__} has no httpcore pool with a network backend: the total deadline "
                "of rollbench.wire.outbound cannot be installed (httpx or httpcore changed)"
            )
        pool._network_backend = _backend_class()(inner)  # type: ignore[union-attr,call-arg]


@contextlib.contextmanager
def socket_deadline(sock: socket.socket, seconds: float) -> Iterator[threading.Event]:
    """Shut ``sock`` down if the block still runs ``seconds`` from now: a send or receive blocked on it then fails at
    once. Yields an event that is set when that happened (the caller then reports a timeout, not a lost
    connection)."""
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()


class RedirectRefused(Exception):
    """A server answered a websocket handshake with a redirect (``status``, 3xx), which is never followed."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the handshake was answered HTTP {status}, a redirect (rollbench never follows one)")
        self.status = status


def ws_connect(url: str, **options: Any) -> Any:
    """``websockets.sync.client.connect(url, **options)`` that refuses a redirect: :class:`RedirectRefused` (a
    :class:`websockets.exceptions.InvalidHandshake`) instead of a connection to the ``Location`` it names."""
    from websockets.sync.client import connect

    return connect(url, create_connection=_no_redirect_connection(), **options)


@functools.cache
def _no_redirect_connection() -> type:
    from websockets.exceptions import InvalidHandshake, InvalidStatus
    from websockets.sync.client import ClientConnection

    class Refused(RedirectRefused, InvalidHandshake):
        pass

    class NoRedirect(ClientConnection):
        """A client connection whose handshake answered 3xx raises :class:`RedirectRefused`: websockets follows
        only an ``InvalidStatus`` carrying a redirect, so this one ends the connect."""

        def handshake(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().handshake(*args, **kwargs)
            except InvalidStatus as exc:
                status = exc.response.status_code
                if 300 <= status < 400:
                    raise Refused(status) from None
                raise

    return NoRedirect
