"""Test helper: a real ``rollbench serve-policy`` subprocess on a free loopback port (``served``), what it received
(``requests``, from its own ``--log-requests`` file), and the recorded rows/actions of a run evaluated against it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from rollbench import GradeDocument

ROLLBENCH = str(Path(sys.executable).parent / "rollbench")
PROTOCOLS = ("ws", "http")
REACH = "move the point to the goal"  # scripted/reach's declared instruction
MW_TASK, MW_INSTRUCTION = "metaworld/pick-place-v3", "pick up the puck and place it at the goal"  # as declared


@contextmanager
def served(tmp: Path, policy: str, protocol: str, *extra: str) -> Iterator[tuple[str, Path, subprocess.Popen]]:
    """Start ``rollbench serve-policy --port 0``; yield (url, request log, process); kill it afterwards."""
    log = tmp / f"requests-{protocol}-{time.monotonic_ns()}.jsonl"
    cmd = [ROLLBENCH, "serve-policy", "--policy", policy, "--protocol", protocol, "--port", "0"]
    proc = subprocess.Popen(
        [*cmd, "--log-requests", str(log), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving POLICY at URL", printed once the port is open
        assert line.startswith("serving "), (
            f"server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
        yield line.split()[-1], log, proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def requests(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(
    proc: subprocess.Popen, port: int, timeout: float, what: str | Callable[[], str] = "the server did not start"
) -> None:
    """Return once ``127.0.0.1:port`` accepts a connection; fail with ``what`` (a text, or a function giving it,
    called only then) if ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, what() if callable(what) else what
            time.sleep(0.2)


def dropped_after(client: socket.socket, since: float, within_s: float = 30) -> float | None:
    """Seconds from ``since`` until the loopback server ``client`` is connected to no longer holds its end of the
    connection (its socket gone from ``/proc/net/tcp``: closed or reset), looked at without reading or sending on
    ``client`` (whose own view may learn of a reset only at its next zero-window probe, seconds later); None if the
    server still holds it after ``within_s``."""
    here, there = client.getsockname()[1], client.getpeername()[1]
    while time.monotonic() - since < within_s:
        if not any(_tcp_ports(line) == (there, here) for line in Path("/proc/net/tcp").read_text().splitlines()[1:]):
            return time.monotonic() - since
        time.sleep(0.05)
    return None


def _tcp_ports(line: str) -> tuple[int, int]:
    """(local port, remote port) of one /proc/net/tcp line (``sl local rem st ...``, ports in hex)."""
    local, remote = line.split()[1:3]
    return int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16)


def url_of(protocol: str, port: int) -> str:
    return f"ws://127.0.0.1:{port}" if protocol == "ws" else f"http://127.0.0.1:{port}/act"


def rows(result: GradeDocument) -> list[tuple[Any, ...]]:
    keys = ("episode_index", "seed", "success", "length", "return", "termination_reason", "error")
    return [tuple(e.to_json()[k] for k in keys) for e in result.episodes]


def actions(run_dir: Path) -> np.ndarray:
    table = pq.read_table(sorted(run_dir.glob("data/chunk-*/file-*.parquet")))
    return np.asarray(table.column("action").to_pylist(), dtype=np.float32)


# ---------------------------------------------------------------------------------------------- MetaWorld
