"""A policy's output never reaches a ``--json`` document (issue 42, item 12): printing at exit (``atexit``), in
``__del__`` or from a non-daemon thread that outlives the run lands on stderr, for ``eval`` and ``sequential``
alike. Oracle: stdout parsed whole by Python's strict JSON parser, and the policy's marks found on stderr."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli

POLICY = """
import atexit, threading, time
import numpy as np

class P:
    def __init__(self, name, how):
        from rollbench.core.contracts import PolicyInfo
        self.info = PolicyInfo(name=name)
        self.how = how
        if how == "atexit":
            atexit.register(lambda: print("MARK from atexit", flush=True))
        if how == "thread":
            def later():
                time.sleep(1.0)
                for _ in range(5):
                    print("MARK from a thread", flush=True)
                    time.sleep(0.2)
            threading.Thread(target=later, daemon=False).start()

    def reset(self, task):
        pass

    def act(self, obs):
        return np.zeros((1, 2))

    def close(self):
        pass

    def __del__(self):
        if self.how == "del":
            print("MARK from __del__", flush=True)

def make(name, options):
    return P(name, options.get("how", "atexit"))
"""


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(name)

    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["atexit", "del", "thread"])
@pytest.mark.parametrize("command", ["eval", "sequential"])
def test_what_a_policy_prints_after_the_run_never_follows_the_json_document(
    tmp_path: Path, how: str, command: str
) -> None:
    (tmp_path / "markpol.py").write_text(POLICY)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    options = json.dumps({"how": how})
    if command == "eval":
        args = ["eval", "--env", "scripted/reach", "--policy", "markpol:make", "--policy-options", options]
        args += ["--episodes", "2", "--max-steps", "3", "--json", "--out", str(tmp_path / "run")]
    else:
        args = ["sequential", "--env", "scripted/reach", "--policy-a", "zero", "--policy-b", "markpol:make"]
        args += ["--policy-options-b", options, "--budget", "4", "--delta", "0.3", "--max-steps", "3"]
        args += ["--json", "--out", str(tmp_path / "s")]
    r = run_cli(*args, env=env, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "MARK" not in r.stdout
    assert isinstance(_strict(r.stdout), dict)
    assert "MARK from" in r.stderr
