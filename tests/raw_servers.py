"""Loopback servers written on plain sockets, for what no HTTP framework will do on purpose: answer every request
with a redirect, or send a status line and then one byte a second (hostile round 5, F3 and F4). Real TCP servers on
127.0.0.1, never doubles of rollbench; each records what reached it (the oracle for "was it contacted")."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

Handler = Callable[[socket.socket, bytes], None]


@contextlib.contextmanager
def raw_server(handle: Handler) -> Iterator[tuple[int, list[bytes]]]:
    """Serve ``handle(conn, first_request_bytes)`` per connection on 127.0.0.1; yield (port, requests seen)."""
    seen: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(30)
            data = conn.recv(65536)
            seen.append(data)
            handle(conn, data)

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # shut down below
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1], seen
    finally:
        with contextlib.suppress(OSError):
            srv.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (Linux)
        thread.join(timeout=5)
        srv.close()


def redirect(status: int, location: Callable[[], str]) -> Handler:
    """Answer every request ``status`` with ``Location: location()`` and an empty body."""

    def handle(conn: socket.socket, _: bytes) -> None:
        where = location()
        conn.sendall(
            f"HTTP/1.1 {status} Moved\r\nLocation: {where}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )

    return handle


def trickle(conn: socket.socket, interval_s: float = 0.5) -> None:
    """Send a status line, then one header byte every ``interval_s`` until the client goes away (or 120 s)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    end = time.monotonic() + 120
    while time.monotonic() < end:
        conn.sendall(b"X")
        time.sleep(interval_s)


def trickling(when: Callable[[bytes], bool], answer: Callable[[bytes], Any] | None = None) -> Handler:
    """Answer requests on one keep-alive connection: those for which ``when(request)`` holds trickle
    (:func:`trickle`); the others get ``200`` with the JSON ``answer(request)``."""

    def handle(conn: socket.socket, data: bytes) -> None:
        while True:
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)  # fmt: skip
            while len(body) < length:
                body += conn.recv(65536)
            request = head + b"\r\n\r\n" + body
            if when(request) or answer is None:
                trickle(conn)
                return
            reply = json.dumps(answer(request)).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(reply) + reply)  # fmt: skip
            data = conn.recv(65536)
            if not data:
                return

    return handle


def deaf_websocket(conn: socket.socket, request: bytes) -> None:
    """Accept a websocket handshake (RFC 6455 4.2.2), send openpi's metadata frame, then never read again: a client
    sending more than the socket buffers hold blocks until the server gives up (60 s)."""
    import base64
    import hashlib
    import re

    import msgpack

    found = re.search(rb"sec-websocket-key: *(\S+)", request, re.IGNORECASE)
    key = found.group(1) if found else b""
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")  # fmt: skip
    metadata = msgpack.packb({"needs_images": False})
    conn.sendall(bytes([0x82, len(metadata)]) + metadata)  # one unmasked binary frame of < 126 bytes
    time.sleep(60)
