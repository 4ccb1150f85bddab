"""A real Ray cluster on this machine for tests: a head and worker nodes, each started as its own ``ray start --block``
process group (so a node can be killed like a lost machine), with token authentication on (a fresh token in the
cluster's own directory: ``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN_PATH``).

A worker node can be started in its own mount namespace (``unshare -m``) where given directories are hidden under a
private tmpfs: there the driver's run directory does not exist, as on a cluster node with only its local disk.
Everything lives under one short directory in /tmp (Ray's socket paths must stay under 108 bytes) that
:meth:`ProcessCluster.shutdown` removes after stopping every process it started (by process group, SIGTERM then
SIGKILL). Ray needs root for ``unshare -m`` and ``mount``; the tests using it skip elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
RAY_CLI = [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]


def can_unshare() -> bool:
    """Whether this process may make mount namespaces (root and a working ``unshare -m``)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc, self.log = proc, log
        self.node_id: str | None = None


class ProcessCluster:
    """Head (no CPUs: every actor runs on a worker node) plus worker nodes; see the module docstring."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="rbc-", dir="/tmp"))
        self.runs = self.base / "runs"  # hidden from nodes started with hide_runs=True
        self.runs.mkdir()
        (self.base / "token").write_text(secrets.token_hex(32))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.base / "token"),
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p),
        }
        self.nodes: list[Node] = []
        self.head = self._spawn(
            ["--head", f"--port={self.port}", "--num-cpus=0", f"--temp-dir={self.base / 'ray'}"], [], "head"
        )
        self._wait_log(self.head, "Ray runtime started", 120)

    def environ(self) -> dict[str, str]:
        """This process's environment plus what a driver of this cluster needs."""
        return {**os.environ, **self.env}

    def _spawn(self, args: list[str], hide: list[Path], name: str) -> Node:
        head = ["--include-dashboard=false"] if "--head" in args else []
        cmd = [*RAY_CLI, "start", *args, *head, "--disable-usage-stats", "--block"]
        if hide:
            mounts = " && ".join(f"mount -t tmpfs tmpfs {h}" for h in hide)
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh", *cmd]
        log = self.base / f"{name}-{len(self.nodes)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=self.environ(), start_new_session=True
            )
        return Node(proc, log)

    @staticmethod
    def _wait_log(node: Node, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in node.log.read_text(errors="replace"):
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start failed: {node.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)

    def add_node(self, cpus: float = 1, gpus: float = 0, hide_runs: bool = True, resources: str = "") -> Node:
        """Start a worker node (``hide_runs``: in its own mount namespace without :attr:`runs`); returns once the
        cluster lists it alive (needs a connected ``ray`` in this process)."""
        import ray

        before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        args = [f"--address={self.address}", f"--num-cpus={cpus}", f"--num-gpus={gpus}"]
        if resources:
            args.append(f"--resources={resources}")
        node = self._spawn(args, [self.runs] if hide_runs else [], "node")
        self.nodes.append(node)
        deadline = time.monotonic() + 120
        while not (new := {n["NodeID"] for n in ray.nodes() if n["Alive"]} - before):
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"node did not join: {node.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
        node.node_id = new.pop()
        return node

    @staticmethod
    def _session(sid: int) -> list[tuple[int, str]]:
        """``(pid, command line)`` of every process of session ``sid``: a node's processes (Ray puts each worker
        in a process group of its own, inside the session of its node's ``ray start``)."""
        ps = subprocess.run(["ps", "-eo", "pid=,sid=,args="], capture_output=True, text=True, check=True).stdout
        rows = [line.split(None, 2) for line in ps.splitlines()]
        return [(int(r[0]), r[2] if len(r) > 2 else "") for r in rows if len(r) >= 2 and int(r[1]) == sid]

    def node_running(self, title: str) -> Node:
        """The live worker node one of whose processes has ``title`` in its command line (a Ray worker's process
        title, e.g. ``ray::EpisodeActor``)."""
        for node in self.nodes:
            if node.proc.poll() is None and any(title in args for _, args in self._session(node.proc.pid)):
                return node
        raise LookupError(f"no worker node runs {title!r}")

    def kill(self, node: Node, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: a machine lost) to every process of ``node``: raylet, object store, its
        actors; waits for its ``ray start`` to end."""
        for pid, _ in self._session(node.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if sig == signal.SIGKILL:
            node.proc.wait(timeout=30)

    def shutdown(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after 8 s for what is left) and remove the cluster's directory."""
        nodes = [*self.nodes, self.head]
        for node in nodes:
            self.kill(node, signal.SIGTERM)
        deadline = time.monotonic() + 8
        for node in nodes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        for node in nodes:
            self.kill(node)
        shutil.rmtree(self.base, ignore_errors=True)

    def connect(self) -> Any:
        """``ray.init`` this process into the cluster (with the cluster's token in os.environ)."""
        import ray
        from ray._private.authentication_test_utils import reset_auth_token_state

        os.environ.update(self.env)
        reset_auth_token_state()  # Ray caches the token it found first (at import): read this cluster's
        ray.init(address=self.address, logging_level="WARNING")
        return ray
