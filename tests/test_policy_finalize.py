"""A policy's ``__del__`` is its own code and never runs on a thread rollbench needs (hostile round 12, F1): a
closed policy is finalised on a daemon thread of its own (:mod:`rollbench.run.finalize`), so one whose ``__del__``
never returns costs at most its deadline at exit, and ``eval --json`` still records the run OK and prints its
document. Oracle: the name of the thread ``__del__`` ran on; the CLI's exit status, run.json and the parsed
document."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rollbench.core.contracts import Observation, PolicyInfo, TaskInfo
from rollbench.run.deadline import Deadline
from rollbench.run.lockstep import as_batch_policy


class _Noted:
    """Zero actions; ``__del__`` notes the name of the thread it runs on."""

    info = PolicyInfo(name="noted")

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def reset(self, task: TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return np.zeros((1, 2), np.float32)

    def close(self) -> None:
        pass

    def __del__(self) -> None:
        self.seen.append(threading.current_thread().name)


def test_a_closed_policy_is_finalised_off_the_thread_that_drops_it_last() -> None:
    seen: list[str] = []
    before = set(threading.enumerate())  # threads of earlier tests in this process (a hung policy's) are not waited on
    deadline = Deadline(lambda: as_batch_policy(_Noted(seen), lambda: _Noted(seen), 1), 30.0, "policy")
    deadline.close()
    for thread in set(threading.enumerate()) - before:  # the close's helper let go of the policy: main is last
        if thread.name.startswith("rollbench-policy-c"):
            thread.join(10)
    del deadline
    gc.collect()
    end = time.monotonic() + 30
    while not seen and time.monotonic() < end:
        time.sleep(0.01)
    assert seen == ["rollbench-policy-finalizer"]


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_policy_whose_del_never_returns_still_ends_eval_json_ok(tmp_path: Path, workers: int) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    out = tmp_path / "r"
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:del_never_returns", "--episodes", "2",
            "--max-steps", "3", "--workers", str(workers), "--policy-timeout", "2", "--out", str(out), "--json"]  # fmt: skip
    got = subprocess.run([sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert got.returncode == 0, got.stderr[-1500:]
    assert "Traceback" not in got.stderr
    doc = json.loads(got.stdout)
    assert doc["status"] == "OK" and doc["episodes_recorded"] == 2
    assert json.loads((out / "run.json").read_text())["status"] == "OK"
