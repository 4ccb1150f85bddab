"""docs/cluster.md's one-machine path works as written (issue 42, item 16): ``ray start --head`` on a machine whose
``~/.ray/auth_token`` exists starts a cluster with token authentication; ``rollbench eval --executor ray
--ray-address`` then connects with that token without ``RAY_AUTH_MODE`` exported (Ray's driver alone does not use
it for an explicit address and was refused with InvalidAuthToken), and a driver with another token gets
rollbench's one line, without Ray's C++ warning per second before it.

A real head (``ray start --block`` in its own session, :mod:`ray_processes`), ``HOME`` pointing at the cluster's
directory so that ``~/.ray/auth_token`` is the cluster's token, no ``RAY_AUTH_*`` variable in any environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import rollbench
from ray_processes import ProcessCluster

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
SRC = str(Path(rollbench.__file__).resolve().parents[1])
NO_AUTH = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


class HomeTokenCluster(ProcessCluster):
    """A head whose only token is ``$HOME/.ray/auth_token`` (HOME = the cluster's directory), as after a first
    ``ray.init()`` or ``ray get-auth-token --generate`` on that machine."""

    worker_mode = False  # `ray start --address` (a worker node) needs RAY_AUTH_MODE=token itself (docs/cluster.md)

    def environ(self) -> dict[str, str]:
        home = self.base / "home"
        if not (home / ".ray" / "auth_token").exists():
            (home / ".ray").mkdir(parents=True)
            (home / ".ray" / "auth_token").write_text((self.base / "token").read_text())
        env = {k: v for k, v in os.environ.items() if k not in NO_AUTH}
        return {
            **env,
            "HOME": str(home),
            "RAY_USAGE_STATS_ENABLED": "0",
            **({"RAY_AUTH_MODE": "token"} if self.worker_mode else {}),
        }


@pytest.fixture(scope="module")
def head() -> Iterator[HomeTokenCluster]:
    c = HomeTokenCluster()
    try:
        assert "Token authentication is enabled" in c.head.log.read_text(errors="replace")
        c.worker_mode = True
        node = c._spawn([f"--address={c.address}", "--num-cpus=2"], [], "node")  # the head has no CPUs
        c.worker_mode = False
        c.nodes.append(node)
        c._wait_log(node, "Ray runtime started", 120)
        yield c
    finally:
        c.shutdown()


def _eval(c: HomeTokenCluster, out: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**c.environ(), "PYTHONPATH": SRC, **extra}
    cmd = [sys.executable, "-m", "rollbench", "eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2",
           "--max-steps", "3", "--executor", "ray", "--ray-address", c.address, "--out", str(out)]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)


def test_eval_reaches_a_token_cluster_with_the_token_file_and_no_auth_mode_set(
    head: HomeTokenCluster, tmp_path: Path
) -> None:
    r = _eval(head, tmp_path / "run")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "InvalidAuthToken" not in r.stderr and (tmp_path / "run" / "run.json").is_file()


def test_a_driver_with_another_token_gets_one_line_and_no_native_warnings(
    head: HomeTokenCluster, tmp_path: Path
) -> None:
    r = _eval(head, tmp_path / "run", RAY_AUTH_TOKEN="0" * 32)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-2000:]
    assert lines[0].startswith(f"error: cannot start or reach Ray at {head.address}: ")
    assert "gcs_client" not in r.stderr and not (tmp_path / "run").exists()
