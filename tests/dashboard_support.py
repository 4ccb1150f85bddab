"""Helpers of the dashboard tests: small recorded runs (the scripted env, real recording with video), a real
uvicorn server on a free loopback port (the bounded one `rollbench dashboard` runs), run in a thread and stopped by
the test, and a hostile peer (a real loopback HTTP server answering fixed bytes, dripped when asked) for the
peer-bound tests."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from rollbench.api import evaluate
from rollbench.cli.dashboard import DashboardOptions, build_dashboard
from rollbench.dashboard.app import create_app
from rollbench.wire.inbound import ConnectionBounds
from rollbench.wire.inbound_http import bounded_server


def record_run(out: Path, host: str, policy: str = "random", episodes: int = 2, env: str = "scripted/reach") -> Path:
    """A real run (scripted env, 64x64 video) with identity ``host/point/<out.name>``."""
    evaluate(env=env, policy=policy, episodes=episodes, video=True, image_size=(64, 64), out=out, host_label=host)
    return out


def peer_run(host: str = "h", robot: str = "r", name: str = "n", episodes: int = 1) -> dict[str, Any]:
    """A peer's run summary as ``/api/runs`` serves it (the fields rollbench.dashboard.summary.run_summary writes
    that a central dashboard reads, written out here by hand), with ``episodes`` episodes that all succeeded."""
    key = f"{host}/{robot}/{name}"
    eps = [
        {"episode_index": e, "key": f"{key}/{e}", "task": "scripted/reach", "trial": e, "seed": e,
         "initial_state": None, "instruction": "reach the goal", "success": True, "length": 3, "return": 1.0,
         "termination_reason": "success", "error": None, "render_failure": None, "status": "success",
         "video_ready": False, "videos": {}, "urls": {"review": f"/episode/{key}/{e}", "transcript": None}}
        for e in range(episodes)
    ]  # fmt: skip
    return {
        "source": "local", "host": host, "robot": robot, "name": name, "key": key, "status": "OK",
        "env": "scripted/reach", "policy": "zero", "model": None, "created": None, "tasks": ["scripted/reach"],
        "episodes_requested": episodes, "episodes_recorded": episodes, "success_rate": 1.0, "ci95_low": 0.5,
        "ci95_high": 1.0, "cameras": [], "fps": 10, "urls": {"page": f"/run/{key}"}, "episodes": eps,
    }  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """``rollbench dashboard`` served by uvicorn on 127.0.0.1:PORT in a thread (``stop()`` shuts it down)."""

    def __init__(self, roots: list[Path], labels: Path, bounds: ConnectionBounds | None = None, **options: Any) -> None:
        options.setdefault("sync_budget_s", 600.0)  # tests see every run graded on the first listing
        options["peers"] = tuple(options.get("peers", ()))
        self.dashboard = build_dashboard(roots, labels, DashboardOptions(**options))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = create_app(self.dashboard)  # served as `rollbench dashboard` serves it (rollbench.wire.inbound_http)
        self.server = bounded_server(app, bounds or ConnectionBounds(), "rollbench dashboard", port=self.port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url + "/static/dashboard.css", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("dashboard did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def listed_by_a_dashboard(root: Path, tmp_path: Path) -> list[str]:
    """The run names a dashboard over ``root`` lists (``/api/runs``, sorted), after checking that its listing and its
    front page answer 200: what one damaged run among others must not break."""
    srv = ServerThread([root], tmp_path / "labels.json", cache_dir=tmp_path / "cache").start()
    try:
        listing = httpx.get(srv.url + "/api/runs", timeout=120)
        assert listing.status_code == 200
        assert httpx.get(srv.url + "/", timeout=120).status_code == 200
        return sorted(run["name"] for run in listing.json()["runs"])
    finally:
        srv.stop()


@contextmanager
def fake_peer(
    body: bytes, drip_s: float = 0.0, runs_listing: bytes | None = None, gate: threading.Event | None = None
) -> Iterator[str]:
    """Serve on loopback and yield the peer's base URL. ``GET /api/runs`` answers ``runs_listing`` at once when it
    is given; every other GET (and ``/api/runs`` without a listing) answers ``body``, one byte every ``drip_s``
    seconds when ``drip_s`` is set, and the rest at once after ``gate`` is set (a test's way to end its slow answers
    when it has looked at them in flight). The declared Content-Length is always the whole answer's."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            listing = runs_listing is not None and self.path == "/api/runs"
            data = runs_listing if listing and runs_listing is not None else body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                if drip_s and not listing:
                    for i, b in enumerate(data):
                        if gate is not None and gate.is_set():
                            self.wfile.write(data[i:])
                            break
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(drip_s)
                else:
                    self.wfile.write(data)
            except OSError:
                pass  # the client gave up, as the bounds under test make it

        def log_message(self, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
