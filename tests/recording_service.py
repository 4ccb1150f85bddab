"""Test helper: a loopback "internal service" that answers every request ``200`` with a secret text body and records
what it got (path, Authorization header). The oracle for "rollbench connected there" and "its reply came back"."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

SECRET = "SECRET-internal-service-body-7f3a"


class Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def _answer(self) -> None:
        type(self).seen.append((self.path, self.headers.get("authorization")))
        body = SECRET.encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def recording_service() -> Iterator[tuple[int, list[tuple[str, str | None]]]]:
    """(port, requests seen so far) of a fresh Recorder server on 127.0.0.1, shut down on exit."""
    handler: type[Recorder] = type("Recorded", (Recorder,), {"seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], handler.seen
    finally:
        server.shutdown()
        server.server_close()
