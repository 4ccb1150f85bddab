"""Ctrl-C during ``rollbench sequential`` (SIGINT to its process group, as a terminal sends it) while an episode of
arm A is in flight: the command stops with 130, the episode it interrupted is discarded (never recorded as an error),
and the same command resumes to the looks and decision of an uninterrupted comparison (run in this process with the
scripted expert, which the interrupted policy is, step for step, once its one hold is spent)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from rollbench.api import grade
from rollbench.core.spec import build_spec
from rollbench.sequential.runner import SequentialConfig, run_sequential

# Real sequential runs of both arms, one of them as two processes: outside the contributors' fast tier.
pytestmark = pytest.mark.slow

SEED, BUDGET = 26, 12  # with these, B is decided better at pair 10 (of 12): the interruption at pair 4 is before it
HELD = 3  # arm A's planned episode in flight when the signal arrives (pair 4)


def _argv(out: Path, marker: Path, held_seed: int) -> list[str]:
    options = {"seed": held_seed, "step": 1, "marker": str(marker), "hold_s": 10}
    return [
        sys.executable, "-m", "rollbench", "sequential", "--env", "scripted/reach", "--delta", "0.2",
        "--policy-a", "interrupting_policies:hold_once", "--policy-options-a", json.dumps(options),
        "--action-noise-a", "6", "--policy-b", "scripted-expert", "--action-noise-b", "0",
        "--seed", str(SEED), "--budget", str(BUDGET), "--out", str(out), "--json",
    ]  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])}


def test_ctrl_c_mid_episode_exits_130_records_no_error_and_resumes_to_the_same_decision(tmp_path: Path) -> None:
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=SEED)
    b = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=0.0, episodes=1, seed=SEED)
    whole = run_sequential(a, b, tmp_path / "whole", SequentialConfig(delta=0.2, budget=BUDGET))["tasks"][0]
    assert (whole["decision"], whole["stopped_at"]) == ("b_better", 10)
    plan = json.loads((tmp_path / "whole/a-scripted_reach/run.json").read_text())["plan"]["episodes"]
    held_seed = plan[HELD]["seed"]

    out, marker = tmp_path / "cut", tmp_path / "in-flight"
    # SIGINT as a terminal gives it, however pytest was launched: a background job (CI's second test run) ignores
    # SIGINT and its children inherit that, so Ctrl-C would never reach the command.
    proc = subprocess.Popen(_argv(out, marker, held_seed), env=_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    end = time.monotonic() + 300
    while not marker.exists():  # the policy made it inside act, at step 1 of arm A's episode HELD, and holds there
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the held episode never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted: committed episodes are kept" in stderr
    assert stdout == ""  # no decision document: the comparison did not finish

    arm_a, arm_b = out / "a-scripted_reach", out / "b-scripted_reach"
    log_a = json.loads((arm_a / "run.json").read_text())
    assert log_a["status"] == "INTERRUPTED" and log_a.get("replacements", []) == []
    for arm in (arm_a, arm_b):
        graded = grade(arm, check_videos=False)
        assert [e.episode_index for e in graded.episodes] == list(range(HELD))  # the held one discarded
        assert [e.error for e in graded.episodes] == [None] * HELD

    r = subprocess.run(_argv(out, marker, held_seed), env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    resumed = json.loads(r.stdout)["tasks"][0]
    assert resumed["looks"] == whole["looks"]
    assert (resumed["decision"], resumed["stopped_at"]) == ("b_better", 10)
    for arm in (arm_a, arm_b):
        assert all(e.error is None for e in grade(arm, check_videos=False).episodes)
