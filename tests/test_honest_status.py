"""Every way an episode or a run can end is recorded as what it was (issue 20, item 6).

* A policy or env raising any ``BaseException`` (``SystemExit``, its own ``KeyboardInterrupt``, ``GeneratorExit``,
  a custom subclass) ends that episode as an ``error`` of whoever raised it; the run goes on and is graded.
* Black or frozen images given to the policy end the episode as an ``environment`` error, without ``--video``.
* A complex action is refused (not cast to its real part); NaN options are refused before anything is written.
* When something outside the episodes stops the run, run.json says INTERRUPTED, never RUNNING.

Real parts throughout: rollbench's episode loop, its gymnasium adapter driving real gymnasium envs
(``tests/fault_envs.py``) and policies loaded by their ``module:factory`` name (``tests/fault_policies.py``).
Expected values are written out from the doubles' definitions, never read from rollbench.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from observers import OnEpisodeEnd
from rollbench.api import Execution, evaluate
from rollbench.cli.main import app
from rollbench.core.contracts import ConfigError

pytestmark = pytest.mark.timeout(120)

KINDS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "custom"]
SHOWN = {"custom": "PolicyPanic"}  # the class name the error starts with


def run_log(out: Path) -> dict[str, Any]:
    return json.loads((out / "run.json").read_text())


@pytest.mark.parametrize("batch_size", [1, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_a_policy_raising_any_base_exception_ends_that_episode_as_a_policy_error(
    kind: str, batch_size: int, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = evaluate(
        out=out,
        env="scripted/reach",
        policy="fault_policies:raise_on_seed",
        policy_options={"kind": kind, "bad_seed": 1, "step": 1},
        episodes=3,
        max_steps=4,
        seed=0,
        execution=Execution(batch_size=batch_size),
    )
    eps = {e.seed: e for e in result.episodes}
    bad = eps[1]
    assert (bad.termination_reason, bad.error_fault, bad.length) == ("error", "policy", 1)
    assert bad.error == f"{SHOWN.get(kind, kind)}: the policy failed on seed 1"
    assert [eps[s].termination_reason != "error" for s in (0, 2)] == [True, True]
    assert result.status == "PARTIAL"
    log = run_log(out)
    assert log["status"] == "PARTIAL" and not log["executions"][-1].get("interrupted")


@pytest.mark.slow
def test_in_worker_processes_too_a_policy_base_exception_ends_only_its_episode(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(
        out=out, env="scripted/reach", policy="fault_policies:raise_on_seed", episodes=4, max_steps=4, seed=0,
        policy_options={"kind": "KeyboardInterrupt", "bad_seed": 2, "step": 0}, execution=Execution(workers=2),
    )  # fmt: skip
    assert [(e.seed, e.termination_reason == "error", e.error_fault) for e in result.episodes] == [
        (0, False, None), (1, False, None), (2, True, "policy"), (3, False, None),
    ]  # fmt: skip
    assert result.episodes[2].error == "KeyboardInterrupt: the policy failed on seed 2"
    assert run_log(out)["status"] == "PARTIAL"


def test_a_policy_keyboard_interrupt_is_not_the_users_ctrl_c_on_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    options = '{"kind": "KeyboardInterrupt", "bad_seed": 0}'
    args = ["eval", "--env", "scripted/reach", "--policy", "fault_policies:raise_on_seed", "--policy-options", options]
    r = CliRunner().invoke(app, [*args, "--episodes", "2", "--max-steps", "3", "--out", str(out)])
    assert r.exit_code == 1, r.stdout + r.stderr  # PARTIAL, not 130 (interrupted)
    assert "interrupted" not in r.stderr
    log = run_log(out)
    assert log["status"] == "PARTIAL"
    assert [e["error"] for e in log["results"]["episodes"]] == ["KeyboardInterrupt: the policy failed on seed 0", None]


@pytest.mark.parametrize(
    ("env_id", "shown"),
    [
        ("RollbenchStepExit-v0", "SystemExit"),
        ("RollbenchStepKeyboard-v0", "KeyboardInterrupt"),
        ("RollbenchStepPanic-v0", "SimulatorPanic"),
    ],
)
def test_an_env_raising_any_base_exception_ends_that_episode_as_an_environment_error(
    env_id: str, shown: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = evaluate(out=out, env=f"gym:fault_envs:{env_id}", policy="random", episodes=2, max_steps=5, seed=0)
    assert [(e.termination_reason, e.error_fault, e.length) for e in result.episodes] == [
        ("error", "environment", 2)
    ] * 2  # step() raises at its third call (step_error_at=2): two steps recorded
    assert {e.error for e in result.episodes} == {f"{shown}: fault_envs: the simulator failed at step 2"}
    assert result.status == "FAILED" and run_log(out)["status"] == "FAILED"


def test_black_frames_the_policy_sees_end_the_episode_as_an_environment_error_without_video(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(
        out=out, env="gym:fault_envs:RollbenchBlackRender-v0", policy="fault_policies:constant", episodes=2,
        max_steps=5, seed=0, success_rule="final_step",
    )  # fmt: skip
    assert not (out / "videos").exists()
    for e in result.episodes:  # frame 0 is drawn, frame 1 (before step 1's action) is all zeros
        assert (e.termination_reason, e.error_fault, e.length) == ("error", "environment", 1)
        assert e.render_failure.endswith(": black: the frame of step 1 has no pixel brighter than 8")
        assert e.error == f"RenderFailure: render failure: {e.render_failure}"
    assert result.status == "FAILED"
    assert any("render failure" in r for r in result.reasons)


def test_a_frozen_picture_while_the_state_moves_is_an_environment_error_without_video(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(
        out=out, env="gym:fault_envs:RollbenchFrozenRender-v0", policy="fault_policies:constant", episodes=1,
        max_steps=5, seed=0, success_rule="final_step",
    )  # fmt: skip
    (e,) = result.episodes
    assert (e.termination_reason, e.error_fault, e.length, e.success) == ("error", "environment", 5, False)
    assert e.render_failure.endswith(
        ": frozen: all 5 frames are identical while the state changed (first change at step 1)"
    )


def test_a_sound_renderer_is_not_flagged(tmp_path: Path) -> None:
    result = evaluate(
        out=tmp_path / "run", env="gym:fault_envs:RollbenchPoint-v0", policy="fault_policies:constant", episodes=1,
        max_steps=5, seed=0, success_rule="final_step",
    )  # fmt: skip
    (e,) = result.episodes
    assert (e.termination_reason, e.render_failure, e.length) == ("max_steps", None, 5)


def test_a_complex_action_is_refused_not_cast_to_its_real_part(tmp_path: Path) -> None:
    result = evaluate(
        out=tmp_path / "run", env="scripted/reach", policy="fault_policies:constant", episodes=1, max_steps=3,
        policy_options={"dtype": "complex64", "images": False},
    )  # fmt: skip
    (e,) = result.episodes
    assert (e.termination_reason, e.error_fault, e.length) == ("error", "policy", 0)
    assert e.error == (
        "EpisodeError: policy returned a non-numeric action at step 0: its dtype is complex64, not a real number type"
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, float("-inf")], {"x": 1j}])
def test_options_that_are_not_plain_json_are_refused_before_anything_is_written(value: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"policy_options\.a"):
        evaluate(out=tmp_path / "run", env="scripted/reach", policy="zero", episodes=1, policy_options={"a": value})
    assert not (tmp_path / "run").exists()


def test_run_json_says_interrupted_when_anything_else_stops_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"

    def end(summary: object) -> None:
        raise SystemExit(9)

    with pytest.raises(SystemExit):
        evaluate(out=out, env="scripted/reach", policy="zero", episodes=3, max_steps=3, observer=OnEpisodeEnd(end))
    log = run_log(out)
    assert log["status"] == "INTERRUPTED"
    assert log["executions"][-1]["error"] == "SystemExit: 9"


def test_only_a_signal_is_the_users_interrupt() -> None:
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, however pytest was launched
    try:
        _check_only_a_signal_is_the_users_interrupt()
    finally:
        signal.signal(signal.SIGINT, before)


def _check_only_a_signal_is_the_users_interrupt() -> None:
    import os
    import signal
    import threading
    import time

    from rollbench.core.interrupts import UserInterrupt, is_user_interrupt, user_signals

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert is_user_interrupt(KeyboardInterrupt())  # outside a run: indistinguishable from Ctrl-C, as before
    seen: list[bool] = []
    worker = threading.Thread(target=lambda: seen.append(is_user_interrupt(KeyboardInterrupt())))
    worker.start()
    worker.join()
    assert seen == [False]  # signals reach the main thread only
    with user_signals():
        assert not is_user_interrupt(KeyboardInterrupt()) and not is_user_interrupt(SystemExit())
        with pytest.raises(UserInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler runs at the next bytecode boundary, well before this ends
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_under_a_callers_own_sigint_handler_stops_the_run_and_is_never_an_episode_error(tmp_path: Path) -> None:
    """A caller that installed its own SIGINT handler (raising ``KeyboardInterrupt``, as ``rollbench sequential``
    did) runs evaluate; the user's Ctrl-C lands inside the policy's ``act`` in episode 1. The run stops INTERRUPTED,
    the handler still ran, no episode holds an error, and the resume records what an uninterrupted run records."""
    import signal

    out, marker = tmp_path / "run", tmp_path / "in-flight"
    options = {"seed": 1, "step": 1, "marker": str(marker), "signal": True, "hold_s": 1}
    kwargs: dict[str, Any] = dict(env="scripted/reach", episodes=3, max_steps=8, seed=0)
    calls: list[int] = []

    def callers_handler(signum: int, frame: object) -> None:
        calls.append(signum)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, callers_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluate(out=out, policy="interrupting_policies:hold_once", policy_options=options, **kwargs)
        assert signal.getsignal(signal.SIGINT) is callers_handler  # given back as it was
    finally:
        signal.signal(signal.SIGINT, before)
    assert marker.exists() and calls == [signal.SIGINT]  # the signal arrived mid-episode, through the caller's handler
    log = run_log(out)
    assert log["status"] == "INTERRUPTED"
    assert [e["episode_index"] for e in log["results"]["episodes"]] == [0]  # episode 1 was discarded, not recorded
    assert all(e["error"] is None for e in log["results"]["episodes"])
    resumed = evaluate(out=out, policy="interrupting_policies:hold_once", policy_options=options, **kwargs)
    whole = evaluate(out=tmp_path / "whole", policy="scripted-expert", **kwargs)

    def facts(result: Any) -> list[tuple[Any, ...]]:
        return [(e.episode_index, e.seed, e.success, e.length, e.termination_reason, e.error) for e in result.episodes]

    assert facts(resumed) == facts(whole) and all(e[-1] is None for e in facts(resumed))
    assert resumed.status == whole.status == "OK"


def _as_recorded_before_issue_29(run_dir: Path) -> list[Any]:
    """Rename every episode row's ``rollbench/render_failure`` column back to ``rollbench/render_fault``, its name in
    runs recorded before issue 29; returns the values as they stand in the files."""
    import pyarrow.parquet as pq

    values = []
    for f in sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet")):
        table = pq.read_table(f)
        names = ["rollbench/render_fault" if n == "rollbench/render_failure" else n for n in table.column_names]
        pq.write_table(table.rename_columns(names), f)
        values += table.column("rollbench/render_failure").to_pylist()
    return values


def test_a_run_recorded_with_the_old_render_fault_column_still_grades_and_resumes(tmp_path: Path) -> None:
    """``rollbench/render_fault`` (the column's name before issue 29) is read as ``render_failure``: a run recorded
    with it grades the same, and a resume that records new episodes beside old ones grades every one."""
    from rollbench.api import grade

    out, black = tmp_path / "run", ": black: the frame of step 1 has no pixel brighter than 8"
    kwargs: dict[str, Any] = dict(
        env="gym:fault_envs:RollbenchBlackRender-v0", policy="fault_policies:constant", episodes=2, max_steps=5, seed=0
    )
    evaluate(out=out, success_rule="final_step", **kwargs)
    old = _as_recorded_before_issue_29(out)
    assert len(old) == 2 and all(v.endswith(black) for v in old)
    graded = grade(out)
    assert graded.violations == [] and graded.status == "FAILED"
    assert [e.render_failure for e in graded.episodes] == old
    with pytest.deprecated_call():  # the deprecated name (pydantic warns on reading it), the same value
        assert [e.render_fault for e in graded.episodes] == old
    # episode 1 as if the old run stopped before committing it: the resume records it under the new column
    (out / "meta/episodes/chunk-000/file-001.parquet").unlink()
    resumed = evaluate(out=out, success_rule="final_step", **kwargs)
    assert resumed.violations == [] and resumed.episodes_recorded == 2
    assert [e.render_failure for e in resumed.episodes] == old
    assert [e.render_failure for e in grade(out).episodes] == old
