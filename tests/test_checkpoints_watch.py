"""``rollbench checkpoints --watch``: a checkpoint written while the command runs is evaluated once its files are
complete and stable, never half-written; Ctrl-C stops it (exit 130) and the same command resumes.

Oracle: ``checkpoint_policies.expected_success`` (each checkpoint's successes known in advance from its skill)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from checkpoint_policies import expected_success, write_checkpoint
from conftest import REPO, rollbench_bin
from rollbench.checkpoints.runner import Settings
from rollbench.checkpoints.watch import Polling, watch
from rollbench.run.runners import Execution

N = 6
FIELDS = {"env": "scripted/reach", "episodes": N, "policy_options": {"checkpoint": "{path}"}}
SETTINGS = Settings(FIELDS, "checkpoint_policies:make")


def _rate(skill: float) -> float:
    return sum(expected_success(skill, s) for s in range(N)) / N


def test_a_checkpoint_still_being_written_is_evaluated_only_once_stable(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    folder = write_checkpoint(run, 1000, 0.0)  # being written: its skill changes until the writer is done
    writes = iter([0.2, 0.4, 1.0])  # one write per poll, then it stays as it is
    polls: list[int] = []

    def sleep(_: float) -> None:
        polls.append(len(list(out.glob("*/run.json"))) if out.exists() else 0)
        skill = next(writes, None)
        if skill is not None:
            (folder / "config.json").write_text(json.dumps({"skill": skill, "pad": "x" * len(polls)}))

    doc = watch(run, out, SETTINGS, Execution(), Polling(poll_s=0, max_checkpoints=1), sleep=sleep)
    assert polls == [0, 0, 0, 0]  # nothing evaluated while the files changed (3 writes, then one stable poll)
    assert [(r["step"], r["success_rate"]) for r in doc["checkpoints"]] == [(1000, _rate(1.0))]


def test_until_idle_ends_the_watch_and_incomplete_checkpoints_wait(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    write_checkpoint(run, 1000, 0.5)
    (write_checkpoint(run, 2000, 0.5) / "model.safetensors").unlink()  # no weights yet: never evaluated
    clock = iter(float(t) for t in range(100))
    polling = Polling(poll_s=0, until_idle_s=5)
    doc = watch(run, out, SETTINGS, Execution(), polling, sleep=lambda _: None, clock=lambda: next(clock))
    assert [r["step"] for r in doc["checkpoints"]] == [1000] and not (out / "002000").exists()


def _start(run: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}
    args = [
        rollbench_bin(),
        "checkpoints",
        str(run),
        "--env",
        "scripted/reach",
        "--episodes",
        str(N),
        "--out",
        str(out),
    ]
    args += ["--policy-template", "checkpoint_policies:make", "--policy-options", json.dumps({"checkpoint": "{path}"})]
    # SIGINT as a terminal gives it, however pytest was launched: a background job (CI's second test run) ignores
    # SIGINT and its children inherit that, so Ctrl-C would never reach the watch.
    return subprocess.Popen([*args, "--watch", "--poll-s", "0.2", *extra], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def _wait_for(path: Path, proc: subprocess.Popen[str], limit_s: float = 240) -> None:
    end = time.monotonic() + limit_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.slow
def test_watch_picks_up_a_checkpoint_written_after_it_started(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    write_checkpoint(run, 1000, 0.3)
    proc = _start(run, out, "--max-checkpoints", "2", "--json")
    _wait_for(out / "checkpoints.json", proc)  # the first checkpoint is ranked: now training writes the next
    write_checkpoint(run, 2000, 0.9)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    doc = json.loads(stdout)
    assert {r["step"]: r["success_rate"] for r in doc["checkpoints"]} == {1000: _rate(0.3), 2000: _rate(0.9)}


@pytest.mark.slow
def test_ctrl_c_stops_with_130_and_the_same_command_resumes(tmp_path: Path) -> None:
    run, out = tmp_path / "train", tmp_path / "out"
    write_checkpoint(run, 1000, 0.3)
    proc = _start(run, out)
    _wait_for(out / "checkpoints.json", proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr
    write_checkpoint(run, 2000, 0.9)
    again = _start(run, out, "--max-checkpoints", "2")
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    assert "step 1000: already evaluated" in stderr and "step 2000: evaluating" in stderr
    doc = json.loads((out / "checkpoints.json").read_text())
    assert {r["step"]: r["success_rate"] for r in doc["checkpoints"]} == {1000: _rate(0.3), 2000: _rate(0.9)}
