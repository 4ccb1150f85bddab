"""``--latency``: the world does not wait for the policy, deterministically.

The policy is ``rollbench.testing.stamped`` on ``scripted/clock``: every executed action says which observation it
was computed from and its row in its chunk (``[t + 1, i + 1]``; the hold action is ``[0, 0]``). The expected tables
below were worked out by hand from the rules in the issue (a call on observation t delivers at step t + d; meanwhile
the chunk's actions beyond the replan point, then the hold action; the first d actions of a delayed chunk skipped or
executed late), not by running the code. ``H`` is a hold step; ``(t, i)`` is row i of the chunk computed on
observation t.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from rollbench import GradeDocument
from rollbench.api import Execution, evaluate
from rollbench.core.contracts import ConfigError, PolicyInfo, TaskInfo
from rollbench.core.latency import check_latency, delay_rule
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.envs.metaworld import HOLD as METAWORLD_HOLD
from rollbench.envs.pusht import HOLD as PUSHT_HOLD
from run_tables import recorded_tables
from served_policy import served

STAMP = "rollbench.testing.stamped:make_stamp_policy"
H = (-1, -1)
T = 12  # steps per episode of the tables


def _run(out: Path, chunk: int, replan: int, latency: str = "none", stale: str = "skip", **kw: Any) -> GradeDocument:
    fields: dict[str, Any] = {"env": "scripted/clock", "episodes": 1, "max_steps": T, "policy": STAMP}
    fields.update(kw)
    fields.setdefault("policy_options", {"chunk_size": chunk})
    return evaluate(out=out, replan_every=replan, latency=latency, stale=stale, **fields)


def _executed(run_dir: Path) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Per step of the run's data: ``(t, i)`` decoded from the executed action (H for the hold action ``[0, 0]``),
    and ``(t, i)`` as the recorded ``policy.obs_frame_index``/``policy.chunk_index`` columns say."""
    table = pq.read_table(sorted(run_dir.glob("data/chunk-*/file-*.parquet")))
    acts = np.asarray(table.column("action").to_pylist())
    from_actions = [(int(a[0]) - 1, int(a[1]) - 1) for a in acts]
    if "policy.hold" not in table.column_names:
        return from_actions, []
    cols = zip(table["policy.obs_frame_index"].to_pylist(), table["policy.chunk_index"].to_pylist(), strict=True)
    holds = table["policy.hold"].to_pylist()
    assert holds == [c == H for c in from_actions]
    return from_actions, [(s, i) for s, i in cols]


TABLES = [
    # chunk 1 (a single-step policy), replanned every step
    (1, 1, "steps:0", "skip", [(t, 0) for t in range(T)]),
    (1, 1, "steps:1", "skip", [H] * T),  # every 1-action chunk arrives stale: the robot only holds
    (1, 1, "steps:1", "execute", [H, (0, 0), H, (2, 0), H, (4, 0), H, (6, 0), H, (8, 0), H, (10, 0)]),
    (1, 1, "steps:3", "skip", [H] * T),
    (1, 1, "steps:3", "execute", [H, H, H, (0, 0), H, H, H, (4, 0), H, H, H, (8, 0)]),
    # chunk 8, replanned after 4 executed actions: 4 leftovers bridge the next call
    (8, 4, "steps:0", "skip", [(0, 0), (0, 1), (0, 2), (0, 3), (4, 0), (4, 1), (4, 2), (4, 3), (8, 0), (8, 1), (8, 2), (8, 3)]),
    (8, 4, "steps:1", "skip", [H, (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (5, 1), (5, 2), (5, 3), (5, 4), (5, 5), (10, 1)]),
    (8, 4, "steps:1", "execute", [H, (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (5, 0), (5, 1), (5, 2), (5, 3), (5, 4), (10, 0)]),
    (8, 4, "steps:3", "skip", [H, H, H, (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), H, H, (7, 3), (7, 4)]),
    (8, 4, "steps:3", "execute", [H, H, H, (0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (7, 0), (7, 1)]),
    # chunk 8 executed whole (replan 8): no leftovers, so the robot holds while the next call is out
    (8, 8, "steps:3", "skip", [H, H, H, (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), H, H, H, (8, 3)]),
]  # fmt: skip


@pytest.mark.parametrize(("chunk", "replan", "latency", "stale", "expected"), TABLES)
def test_each_step_runs_the_hand_worked_action_for_the_delay_and_stale_rule(
    tmp_path: Path, chunk: int, replan: int, latency: str, stale: str, expected: list[tuple[int, int]]
) -> None:
    result = _run(tmp_path / "run", chunk, replan, latency, stale)
    from_actions, from_columns = _executed(tmp_path / "run")
    assert from_actions == expected
    assert from_columns == expected
    assert result.status == "OK"


def test_grade_reports_the_mean_delay_and_the_hold_share_of_the_recorded_steps(tmp_path: Path) -> None:
    delay = _run(tmp_path / "run", 8, 4, "steps:3", "skip").delay
    # the steps:3 skip table above: actions of ages 3, 4, 5, 6, 7 (steps 3-7) and 3, 4 (steps 10-11); 5 holds
    assert Fraction(delay.mean_delay_steps).limit_denominator(100) == Fraction(32, 7)
    assert (delay.hold_steps, delay.steps, delay.max_delay_steps) == (5, 12, 7)
    assert delay.hold_share == 5 / 12
    assert (delay.latency, delay.stale, delay.call_delay_steps) == ("steps:3", "skip", 3)


def test_latency_none_runs_what_steps_0_runs_and_records_no_delay_columns(tmp_path: Path) -> None:
    none = _run(tmp_path / "none", 8, 4)
    zero = _run(tmp_path / "zero", 8, 4, "steps:0")
    assert _executed(tmp_path / "none") == (TABLES[5][4], [])
    assert _executed(tmp_path / "zero")[0] == TABLES[5][4]
    assert "delay" not in none.to_json() and zero.delay.hold_steps == 0
    features = json.loads((tmp_path / "none/meta/info.json").read_text())["features"]
    assert "policy.hold" not in features
    features = json.loads((tmp_path / "zero/meta/info.json").read_text())["features"]
    assert features["policy.hold"] == {"dtype": "bool", "shape": [1], "names": None}
    assert features["policy.obs_frame_index"] == {"dtype": "int64", "shape": [1], "names": None}


@pytest.mark.parametrize(
    ("latency", "fps", "steps"),
    [("fixed:100", 20, 2), ("fixed:150", 20, 3), ("fixed:151", 20, 4), ("fixed:149", 20, 3), ("fixed:150", 80, 12),
     ("fixed:12.5", 80, 1), ("fixed:0", 20, 0), ("steps:5", 20, 5)],
)  # fmt: skip
def test_a_fixed_latency_is_ceil_of_milliseconds_times_fps_exactly(latency: str, fps: int, steps: int) -> None:
    rule = delay_rule(latency, fps)
    assert rule is not None and rule(123.0) == steps  # the measured time is ignored


def test_fixed_200_ms_at_10_hz_records_exactly_what_steps_2_records(tmp_path: Path) -> None:
    _run(tmp_path / "fixed", 8, 4, "fixed:200", env="scripted/reach", episodes=3, max_steps=None)
    _run(tmp_path / "steps", 8, 4, "steps:2", env="scripted/reach", episodes=3, max_steps=None)
    assert recorded_tables(tmp_path / "fixed")[0].equals(recorded_tables(tmp_path / "steps")[0])


def test_the_same_spec_twice_records_the_same_run(tmp_path: Path) -> None:
    for name in ("a", "b"):
        _run(tmp_path / name, 8, 4, "steps:3", env="scripted/reach", episodes=3, max_steps=None)
    (data_a, meta_a), (data_b, meta_b) = recorded_tables(tmp_path / "a"), recorded_tables(tmp_path / "b")
    assert data_a.equals(data_b) and meta_a == meta_b


@pytest.mark.slow
def test_batch_size_4_and_2_workers_record_exactly_what_one_episode_at_a_time_records(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"env": "scripted/reach", "episodes": 6, "max_steps": None}
    _run(tmp_path / "one", 8, 4, "steps:3", **kw)
    evaluate(out=tmp_path / "b4", replan_every=4, latency="steps:3", execution=Execution(batch_size=4),
             policy=STAMP, policy_options={"chunk_size": 8}, **kw)  # fmt: skip
    evaluate(out=tmp_path / "w2", replan_every=4, latency="steps:3", execution=Execution(workers=2),
             policy=STAMP, policy_options={"chunk_size": 8}, **kw)  # fmt: skip
    reference = recorded_tables(tmp_path / "one")
    assert reference[0].num_rows > 6 * 3  # episodes ran more than a few steps
    for other in ("b4", "w2"):
        data, meta = recorded_tables(tmp_path / other)
        assert data.equals(reference[0]) and meta == reference[1], other


def test_a_served_policy_records_exactly_what_it_records_in_process(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"env": "scripted/reach", "episodes": 2, "max_steps": None, "replan_every": 4}
    evaluate(out=tmp_path / "local", policy=STAMP, policy_options={"chunk_size": 8}, latency="steps:2", **kw)
    with served(tmp_path, STAMP, "ws", "--policy-options", '{"chunk_size": 8}') as (url, _, _):
        evaluate(out=tmp_path / "remote", policy=url, latency="steps:2", **kw)
    local, remote = recorded_tables(tmp_path / "local"), recorded_tables(tmp_path / "remote")
    assert remote[0].equals(local[0]) and remote[1] == local[1]


def test_measured_latency_delays_every_call_at_least_one_step_and_warns_it_is_not_reproducible(tmp_path: Path) -> None:
    result = _run(tmp_path / "run", 8, 4, "measured")
    steps, _ = _executed(tmp_path / "run")
    assert steps[0] == H  # no call takes zero time: the first chunk arrives at step 1 or later
    assert result.delay.call_delay_steps is None
    log = json.loads((tmp_path / "run/run.json").read_text())
    assert any("not reproducible" in w for w in log["warnings"])


def test_an_episode_that_never_started_gets_the_delay_columns_too(tmp_path: Path) -> None:
    """LeRobot's reader needs one schema across data files: the padding frame of an errored episode has them."""
    result = evaluate(out=tmp_path / "run", env="scripted/faulty", policy="zero", episodes=3, latency="steps:1")
    assert [e.termination_reason for e in result.episodes][2] == "error"  # seed 2: reset fails on purpose
    schemas = {str(pq.read_schema(f)) for f in (tmp_path / "run").glob("data/chunk-*/file-*.parquet")}
    assert len(schemas) == 1
    assert not result.violations


def test_hold_actions_keep_the_gripper_command_and_start_from_the_robot_state() -> None:
    state = np.array([101.0, 202.0, 0, 0, 0], dtype=np.float32)
    assert METAWORLD_HOLD.action(None, state[:4]).tolist() == [0, 0, 0, -1]  # _reset_hand's open gripper
    assert METAWORLD_HOLD.action(np.array([0.3, 0.2, 0.1, 0.7]), state).tolist() == [0, 0, 0, pytest.approx(0.7)]
    assert PUSHT_HOLD.action(None, state).tolist() == [101, 202]  # the agent's own position
    assert PUSHT_HOLD.action(np.array([300.0, 310.0]), state).tolist() == [300, 310]


def test_a_task_without_a_hold_action_cannot_run_with_a_latency() -> None:
    task = TaskInfo("gym/X", "", 10, ("rgb",), "any_step", 1, 1, (-1.0,), (1.0,), has_instruction=False)
    assert check_latency("none", "skip", [task], PolicyInfo("zero")) == []
    with pytest.raises(ConfigError, match=r"--latency steps:1 needs a hold action .* gym/X declares none"):
        check_latency("steps:1", "skip", [task], PolicyInfo("zero"))


def test_default_latency_keeps_the_identity_runs_had_before_it_existed() -> None:
    # computed with rollbench at main a0cda3e (before --latency): old run directories keep resuming
    assert EvalSpec(env="scripted/clock", policy="zero", episodes=2).identity() == "c9cdd3ecfe8b9c8b"
    assert EvalSpec(env="scripted/clock", policy="zero", episodes=2, latency="steps:0").identity() != "c9cdd3ecfe8b9c8b"
    assert EvalSpec(env="e/t", policy="p", episodes=1, latency="fixed:150.0").latency == "fixed:150"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"latency": "fixed:x"}, "latency must be one of none, fixed:MS, steps:K, measured"),
        ({"latency": "fixed:60001"}, "fixed latency must be at most 60000 ms"),
        ({"stale": "execute"}, "stale applies only to a run with a latency"),
        ({"latency": "steps:1", "stale": "later"}, "stale: Input should be 'skip' or 'execute'"),
    ],
)
def test_bad_latency_options_are_config_errors_naming_the_valid_forms(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_spec(env="scripted/reach", policy="zero", episodes=1, **fields)


def test_a_bad_latency_on_the_command_line_exits_2_with_one_line(tmp_path: Path) -> None:
    r = run_cli(
        "eval", "--env", "scripted/reach", "--policy", "zero", "--latency", "steps:-1", "--out", "x", cwd=tmp_path
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "latency must be one of none, fixed:MS, steps:K, measured" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_runs_differing_only_in_latency_form_one_sweep_with_grade_numbers(tmp_path: Path) -> None:
    from rollbench.analysis.figures import latency_sweep_figure
    from rollbench.analysis.html_report import render_report
    from rollbench.analysis.latency_sweep import latency_sweeps
    from rollbench.analysis.sources import load_runs

    kw: dict[str, Any] = {"env": "scripted/reach", "policy": "scripted-expert", "episodes": 4, "max_steps": 20}
    results = {
        "none": evaluate(out=tmp_path / "none", **kw),
        "steps:3": evaluate(out=tmp_path / "s3", latency="steps:3", stale="execute", **kw),
        "fixed:100": evaluate(out=tmp_path / "f100", latency="fixed:100", stale="execute", **kw),
    }
    evaluate(out=tmp_path / "other", latency="steps:1", stale="execute", **{**kw, "episodes": 2})  # another spec
    evaluate(out=tmp_path / "skip", latency="steps:1", **kw)  # another stale rule: a sweep of its own with none
    loaded = load_runs([tmp_path])
    sweeps = latency_sweeps(loaded.runs)
    assert sorted((s["stale"], len(s["points"])) for s in sweeps) == [("execute", 3), ("skip", 2)]
    sweep = next(s for s in sweeps if s["stale"] == "execute")
    # scripted/reach runs at 10 Hz: fixed:100 is 1 step = 100 ms, steps:3 is 300 ms
    assert [(p["latency"], p["delay_steps"], p["delay_ms"]) for p in sweep["points"]] == [
        ("none", 0, 0.0),
        ("fixed:100", 1, 100.0),
        ("steps:3", 3, 300.0),
    ]
    for p in sweep["points"]:
        overall = results[p["latency"]].overall
        assert (p["successes"], p["episodes"]) == (overall.successes, overall.episodes)
        assert (p["ci95_low"], p["ci95_high"]) == (overall.pooled_ci95_low, overall.pooled_ci95_high)
    assert sweep["points"][1]["hold_share"] == results["fixed:100"].delay.hold_share
    fig = latency_sweep_figure(sweep)
    assert [t.get_text() for t in fig.axes[0].texts] == ["none", "fixed:100", "steps:3"]
    section = render_report(loaded)  # the report's "Success rate against latency" section
    assert "<td>fixed:100</td><td class=num>1</td><td class=num>100.0</td>" in section
    ok = results["fixed:100"].overall.successes
    assert f"<td class=num>{ok}/4</td>" in section


def test_a_recorded_row_that_contradicts_the_latency_rules_is_a_violation(tmp_path: Path) -> None:
    from rollbench.api import grade

    _run(tmp_path / "run", 8, 4, "steps:3")
    (data,) = sorted((tmp_path / "run").glob("data/chunk-*/file-*.parquet"))
    table = pq.read_table(data)
    src = table["policy.obs_frame_index"].to_pylist()
    src[0] = 5  # step 0 is a hold step (see the steps:3 skip table): it cannot have come from observation 5
    i = table.schema.get_field_index("policy.obs_frame_index")
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array(src, pa.int64())), data)
    result = grade(tmp_path / "run", check_videos=False)
    assert result.status == "PARTIAL"
    assert result.violations == [
        "1 step row contradicts the latency rules (a hold row with a source, or a policy row whose observation is "
        "negative or later than its step, or a negative chunk index)"
    ]


def test_summarize_keeps_runs_with_and_without_latency_apart(tmp_path: Path) -> None:
    """A run with --latency is another condition: summarize gives it its own cell instead of pooling its episodes
    with the frozen-world run of the same policy and task (a new user saw 40 episodes at 50% in one cell)."""
    from rollbench.analysis.sources import load_runs
    from rollbench.analysis.summarize import summarize_runs

    kw: dict[str, Any] = {"env": "scripted/reach", "policy": "scripted-expert", "episodes": 3, "max_steps": 20}
    frozen = evaluate(out=tmp_path / "none", **kw)
    moving = evaluate(out=tmp_path / "s3", latency="steps:3", stale="execute", **kw)
    cells = summarize_runs(load_runs([tmp_path / "none", tmp_path / "s3"]))["cells"]
    by_model = {c["model"]: (c["episodes"], c["successes"]) for c in cells}
    assert by_model == {
        "scripted-expert": (3, frozen.overall.successes),
        "scripted-expert (latency steps:3, stale execute)": (3, moving.overall.successes),
    }
