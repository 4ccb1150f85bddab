"""Helpers of the dashboard tests: small recorded runs (the scripted env, real recording with video) and a real
uvicorn server on a free loopback port, run in a thread and stopped by the test."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from rollbench.api import evaluate
from rollbench.cli.dashboard import build_dashboard
from rollbench.dashboard.app import create_app


def record_run(out: Path, host: str, policy: str = "random", episodes: int = 2, env: str = "scripted/reach") -> Path:
    """A real run (scripted env, 64x64 video) with identity ``host/point/<out.name>``."""
    evaluate(env=env, policy=policy, episodes=episodes, video=True, image_size=(64, 64), out=out, host_label=host)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """``rollbench dashboard`` served by uvicorn on 127.0.0.1:PORT in a thread (``stop()`` shuts it down)."""

    def __init__(self, roots: list[Path], labels: Path, **options: Any) -> None:
        options.setdefault("sync_budget_s", 600.0)  # tests see every run graded on the first listing
        self.dashboard = build_dashboard(roots, labels, **options)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(self.dashboard), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
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
