"""``rollbench grade`` names an episode row that records an error over step data whose last step ended the episode
(an ``any_step`` success held on it, or the horizon's last step) when nothing recorded explains it (hostile round 15,
F2): the episode loop never records an error there except a render failure found after the last step
(``rollbench/render_failure`` set) or the policy's ``finish_episode`` raising (recorded as
``policy.finish_episode raised ...``). Both of those are real runs here, graded without a violation.

Oracle: the step rows read with pyarrow (last ``next.success``, step counts), the episode rows relabelled by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate
from sequential_support import invoke

WHY = (
    "which ends the episode; nothing recorded explains an error after it (no rollbench/render_failure, not a "
    "policy.finish_episode error)"
)


def _relabel(run: Path, episodes: set[int], **values: Any) -> None:
    """Set ``rollbench/<key>`` to each value in the episode rows of ``episodes``, as a hand edit would."""
    for f in sorted((run / "meta" / "episodes").rglob("*.parquet")):
        t = pq.read_table(f)
        rows = t.to_pylist()
        for r in rows:
            if r["episode_index"] in episodes:
                r.update({f"rollbench/{k}": v for k, v in values.items()})
        pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), f)


def _steps(run: Path) -> dict[int, list[bool]]:
    """Per episode, its ``next.success`` rows in frame order (by hand, from the step files)."""
    out: dict[int, list[tuple[int, bool]]] = {}
    for f in sorted((run / "data").rglob("*.parquet")):
        t = pq.read_table(f, columns=["episode_index", "frame_index", "next.success"]).to_pylist()
        for r in t:
            out.setdefault(r["episode_index"], []).append((r["frame_index"], r["next.success"]))
    return {e: [s for _, s in sorted(rows)] for e, rows in out.items()}


def _grade(run: Path) -> dict[str, Any]:
    r = invoke(["grade", str(run), "--json"])
    return json.loads(r.stdout)


@pytest.mark.slow
def test_an_error_relabelled_over_steps_that_reached_success_is_named_for_each_episode(tmp_path: Path) -> None:
    run = tmp_path / "b"
    evaluate(out=run, env="scripted/reach", policy="scripted-expert", episodes=3, seed=0)
    steps = _steps(run)
    assert all(s[-1] and not any(s[:-1]) for s in steps.values())  # each ended on its first success
    _relabel(
        run, {0, 1, 2}, termination_reason="error", error="RuntimeError: boom", error_fault="policy", success=False
    )
    doc = _grade(run)
    assert doc["violations"] == [
        f"episode {e}: termination error (policy fault), but its step data reached success (hold 1) on its last "
        f"step, {WHY}"
        for e in range(3)
    ]
    evaluate(out=tmp_path / "a", env="scripted/reach", policy="scripted-expert", episodes=3, seed=0)
    r = invoke(["compare", str(tmp_path / "a"), str(run)])  # never "A better" from the relabelled errors
    assert r.returncode == 2 and r.stderr.startswith(f"error: {run} is damaged (3 violation(s) by rollbench grade")


def test_an_environment_error_relabelled_over_a_full_horizon_is_named(tmp_path: Path) -> None:
    run = tmp_path / "r"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=2, max_steps=4, seed=0)
    assert [len(s) for s in _steps(run).values()] == [4, 4]
    _relabel(run, {0}, termination_reason="error", error="RuntimeError: sim", error_fault="environment")
    assert _grade(run)["violations"] == [
        f"episode 0: termination error (environment fault), but its step data ran all 4 steps of its horizon, {WHY}"
    ]


def test_an_error_relabelled_after_success_was_already_reached_is_named(tmp_path: Path) -> None:
    run = tmp_path / "e"
    evaluate(out=run, env="scripted/reach", policy="scripted-expert", episodes=1, seed=0)
    rows = _steps(run)[0]
    _relabel(run, {0}, termination_reason="error", error="RuntimeError: x", error_fault="infrastructure", success=False)
    f = next((run / "data").rglob("*.parquet"))  # and the last step's success cleared, the one before set
    t = pq.read_table(f).to_pylist()
    last = len(rows) - 1
    for r in t:
        if r["frame_index"] == last - 1:
            r["next.success"] = True
        if r["frame_index"] == last:
            r["next.success"] = False
    pq.write_table(pa.Table.from_pylist(t, schema=pq.read_schema(f)), f)
    assert _grade(run)["violations"] == [
        "episode 0: termination error, but its step data reached success (hold 1) before it"
    ]


def test_a_finish_episode_error_after_success_or_the_horizon_is_recorded_as_such_and_no_violation(
    tmp_path: Path,
) -> None:
    for name, inner, max_steps in (("s", "scripted-expert", None), ("h", "zero", 3)):
        run = tmp_path / name
        evaluate(out=run, env="scripted/reach", policy="fault_policies:finish_raises", episodes=2, seed=0,
                 max_steps=max_steps, policy_options={"inner": inner})  # fmt: skip
        doc = _grade(run)
        assert doc["violations"] == []
        steps = _steps(run)
        for e in doc["episodes"]:
            assert (e["termination_reason"], e["error_fault"], e["render_failure"]) == ("error", "policy", None)
            assert e["error"] == "policy.finish_episode raised RuntimeError: transcript store is full"
            s = steps[e["episode_index"]]
            assert s[-1] if inner == "scripted-expert" else (len(s) == 3 and not any(s))


def test_a_render_failure_found_after_the_last_step_of_the_horizon_is_no_violation(tmp_path: Path) -> None:
    run = tmp_path / "f"
    evaluate(out=run, env="gym:fault_envs:RollbenchFrozenRender-v0", policy="fault_policies:constant", episodes=1,
             max_steps=5, seed=0, success_rule="final_step")  # fmt: skip
    doc = _grade(run)
    (e,) = doc["episodes"]
    assert (e["termination_reason"], e["error_fault"], e["length"]) == ("error", "environment", 5)
    assert e["render_failure"] is not None and doc["violations"] == []
