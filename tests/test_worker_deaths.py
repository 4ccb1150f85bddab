"""A worker process that dies is charged to the side whose code it was running (:mod:`rollbench.run.phase`): inside
the policy's call its episode is a ``policy`` error, scored as a failure and never re-run; inside the env's call an
``environment`` error; anywhere else (rollbench's own code, waiting for work) an ``infrastructure`` death whose
episode is run again. And in one process, an episode that ended is committed before the policy is called again, so
a policy that ends the process loses none of the episodes before it.

Everything is real: spawned worker processes that end themselves (``os._exit``, ``os.abort``) inside a test double
of the policy or the env (``tests/fault_policies.py``, ``tests/fault_envs.py``), a worker stopped and SIGKILLed from
the test while it waits for work, ``rollbench eval`` as a subprocess. Oracles: a run of the scripted expert without
any death (the same plan), and hand counts of which episodes end how.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from observers import KillWaitingWorker
from rollbench import GradeDocument
from rollbench.api import Execution, evaluate, grade
from run_tables import last_execution

TESTS = Path(__file__).resolve().parent
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))
SPEC: dict[str, Any] = dict(env="scripted/reach", episodes=8, max_steps=20)


@pytest.fixture(autouse=True)
def _tests_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes import the test doubles by name: ``tests/`` on their PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))


def outcomes(result: GradeDocument) -> list[tuple[bool, str | None]]:
    return [(e.success, e.error_fault) for e in result.episodes]


@pytest.mark.parametrize("how", ["exit", "abort"])
@pytest.mark.slow
def test_a_policy_that_ends_its_worker_process_fails_that_episode_as_a_policy_error(tmp_path: Path, how: str) -> None:
    ref = evaluate(**SPEC, policy="scripted-expert", out=tmp_path / "ref")
    assert [s for s, _ in outcomes(ref)] == [True] * 8  # the expert reaches every goal: the oracle's hand count
    out = tmp_path / "run"
    r = evaluate(**SPEC, policy="fault_policies:exits_in_act", policy_options={"bad_seeds": [3], "how": how},
                 out=out, execution=Execution(workers=2))  # fmt: skip
    assert outcomes(r) == [(True, None)] * 3 + [(False, "policy")] + [(True, None)] * 4
    code = "exited with code 0" if how == "exit" else "killed by SIGABRT"
    error = r.episodes[3].error
    assert error.startswith("WorkerDied: the worker process died (process ") and code in error
    assert error.endswith("while the policy's act ran; not re-run")
    assert r.overall.errors_by_fault == {"policy": 1, "environment": 0, "infrastructure": 0}
    ex = last_execution(out)
    assert ex["worker_deaths"] == 1 and ex["episodes_rerun"] == 0 and ex["episodes_lost"] == 0
    assert grade(out) == r
    # compare scores it as B's failure: all 8 pairs kept, 7 of 8 successes, full coverage
    cmp = invoke("compare", tmp_path / "ref", out, "--json")
    assert cmp.returncode == 0, cmp.stderr
    task = json.loads(cmp.stdout)["comparisons"][0]["tasks"][0]
    assert (task["a"]["successes"], task["b"]["successes"], task["pairs"], task["a_only"]) == (8, 7, 8, 1)
    assert task["coverage"]["b"]["coverage"] == 1.0 and task["coverage"]["b"]["policy_errors_as_failures"] == 1


@pytest.mark.slow
def test_with_batch_size_2_only_the_episode_whose_act_ended_the_worker_is_charged(tmp_path: Path) -> None:
    r = evaluate(**SPEC, policy="fault_policies:exits_in_act", policy_options={"bad_seeds": [2]},
                 out=tmp_path / "b2", execution=Execution(workers=2, batch_size=2))  # fmt: skip
    assert outcomes(r) == [(True, None)] * 2 + [(False, "policy")] + [(True, None)] * 5
    assert last_execution(tmp_path / "b2")["worker_deaths"] == 1


@pytest.mark.slow
def test_a_policy_that_sigkills_itself_in_reset_is_charged_at_once_not_retried(tmp_path: Path) -> None:
    r = evaluate(env="scripted/reach", policy="fault_policies:die_on_seed", policy_options={"bad_seed": 1},
                 episodes=3, out=tmp_path / "r", execution=Execution(workers=2))  # fmt: skip
    assert outcomes(r) == [(True, None), (False, "policy"), (True, None)]
    error = r.episodes[1].error
    assert error.startswith("WorkerDied: the worker process died (process ")
    assert error.endswith("killed by SIGKILL) while the policy's reset ran; not re-run")
    assert last_execution(tmp_path / "r")["worker_deaths"] == 1  # one death: no re-roll


@pytest.mark.slow
def test_an_env_that_ends_its_worker_process_in_step_is_an_environment_error(tmp_path: Path) -> None:
    r = evaluate(env="scripted/reach,gym:fault_envs:RollbenchStepEndsProcess-v0", policy="zero", episodes=2,
                 max_steps=5, out=tmp_path / "e", execution=Execution(workers=2))  # fmt: skip
    assert [e.error_fault for e in r.episodes] == [None, None, "environment", "environment"]
    assert r.episodes[2].error.endswith("while the env's step ran; not re-run")
    assert last_execution(tmp_path / "e")["episodes_rerun"] == 0


@pytest.mark.slow
def test_a_worker_killed_while_it_waits_for_work_is_infrastructure_and_its_episode_runs_again(tmp_path: Path) -> None:
    ref = evaluate(**SPEC, policy="scripted-expert", out=tmp_path / "ref")
    killer = KillWaitingWorker()
    out = tmp_path / "run"
    r = evaluate(**SPEC, policy="fault_policies:slow", out=out, execution=Execution(workers=2), observer=killer)
    assert len(killer.killed) == 1
    assert r.episodes == ref.episodes  # the lost episode ran again: same seeds, same outcomes, no error
    ex = last_execution(out)
    assert ex["worker_deaths"] == 1 and ex["episodes_rerun"] == 1 and ex["episodes_lost"] == 0


@pytest.mark.slow
def test_an_episode_whose_workers_keep_dying_outside_any_call_is_an_infrastructure_error(tmp_path: Path) -> None:
    killer = KillWaitingWorker(times=3)  # the same episode, handed to a waiting worker three times, each killed
    r = evaluate(**SPEC, policy="fault_policies:slow", out=tmp_path / "r", execution=Execution(workers=2),
                 observer=killer)  # fmt: skip
    assert len(killer.killed) == 3 and len(set(killer.killed)) == 1
    lost = killer.killed[0]
    assert [e.error_fault for e in r.episodes] == [("infrastructure" if i == lost else None) for i in range(8)]
    assert r.episodes[lost].error.startswith("WorkerLost: the worker running this episode died 3 times")
    ex = last_execution(tmp_path / "r")
    assert ex["worker_deaths"] == 3 and ex["episodes_rerun"] == 2 and ex["episodes_lost"] == 1


def committed(run_dir: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in run_dir.glob("meta/episodes/chunk-*/file-*.parquet"))


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.slow
def test_in_process_episodes_that_ended_are_committed_before_the_policy_ends_the_process(
    tmp_path: Path, k: int
) -> None:
    out = tmp_path / "run"
    options = json.dumps({"bad_seeds": [k]})
    args = ["eval", "--env", "scripted/reach", "--policy", "fault_policies:exits_in_act", "--policy-options",
            options, "--episodes", "5", "--max-steps", "10", "--out", str(out)]  # fmt: skip
    proc = subprocess.run([ROLLBENCH, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0  # os._exit(0) in the policy: the process ended with the policy's code
    assert committed(out) == list(range(k))  # episodes 0..k-1 ended before the policy's exit: all committed
    g = invoke("grade", out, "--json")
    recorded = [e["episode_index"] for e in json.loads(g.stdout)["episodes"]]
    assert recorded == list(range(k))
