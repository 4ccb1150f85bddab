"""A resume refuses a handed-over run whose committed files are not what rollbench's writer wrote (hostile round 19,
F1): an episode row of another type or contradicting the run's plan, or a data file of other columns than
meta/info.json declares, is named in one line (exit 2, the file and the column) before anything is written: run.json's
bytes and the run's files unchanged, a run recorded OK still OK. The resume used to end in a traceback
(``EpisodeRowError`` from the retry of errored episodes, ``ValueError`` from the statistics the writer rebuilds, from
re-staging a row whose task is not the run's) and leave the run INTERRUPTED. The same refusal reaches the other
surfaces that resume a run through ``evaluate``: the API, MCP ``run_policy_rollout``, ``optimize-instruction``'s runs,
``checkpoints``' step runs.

Oracles: runs damaged by hand with pyarrow (one cell, one column, two row files swapped), the refusal line written out
here, run.json's plan read back with ``json``, the run's bytes (``os.walk`` + ``hashlib``), and ``grade``'s own line
for the same data file."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from file_trees import tree_hash
from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError

ROW = "meta/episodes/chunk-000/file-{:03d}.parquet"
DATA = "data/chunk-000/file-{:03d}.parquet"
TASK = "move the point to the goal"  # scripted/reach's instruction (`rollbench envs scripted`)


@pytest.fixture(scope="module")
def sound_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "R"
    evaluate(out=out, env="scripted/reach", policy="scripted-expert", episodes=3)
    assert json.loads((out / "run.json").read_text())["status"] == "OK"
    return out


@pytest.fixture(scope="module")
def errored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``scripted/faulty`` fails at reset for seed % 3 == 2: episode 2 of 4 is recorded as an error."""
    out = tmp_path_factory.mktemp("runs") / "F"
    evaluate(out=out, env="scripted/faulty", policy="scripted-expert", episodes=4)
    assert [json.loads(json.dumps(e))["termination_reason"] for e in grade(out).to_json()["episodes"]][2] == "error"
    return out


def copy_of(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / run.name))


def set_column(path: Path, column: str, values: pa.Array | None) -> None:
    """Rewrite parquet file ``path`` with ``column`` holding ``values`` (None: the column dropped; a new name: added)."""
    t = pq.read_table(path)
    if values is None:
        t = t.drop_columns([column])
    elif column in t.column_names:
        t = t.set_column(t.schema.get_field_index(column), column, values)
    else:
        t = t.append_column(column, values)
    pq.write_table(t, path)


def entries(root: Path) -> dict[str, str]:
    """Every file's bytes (hashed) and every directory of ``root``: what a refusal must leave as it was."""
    dirs = {str(Path(d).relative_to(root)): "directory" for d, _, _ in os.walk(root)}
    return {**tree_hash(root), **dirs}


def refused(run: Path, why: str) -> str:
    return (
        f"{run} is damaged and cannot be resumed: {why}; nothing was changed "
        f"(`rollbench grade {run}` reports every problem)"
    )


def assert_refused_unchanged(run: Path, args: list[object], why: str) -> None:
    """``rollbench ARGS`` exits 2 with exactly the refusal line, and the run is as it was (still OK)."""
    before, status = entries(run), json.loads((run / "run.json").read_text())["status"]
    r = invoke(*args)
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr
    assert r.stderr.splitlines() == [f"error: {refused(run, why)}"]
    assert entries(run) == before
    assert json.loads((run / "run.json").read_text())["status"] == status


def one_row(value: object, kind: pa.DataType | None = None) -> pa.Array:
    return pa.array([value], kind)


@pytest.mark.parametrize(
    ("episode", "column", "values", "why"),
    [
        (1, "rollbench/success", one_row(0, pa.int64()), "rollbench/success is a int, not a bool"),
        (0, "rollbench/steps", one_row(2.5), "rollbench/steps is a float, not a int64"),
        (2, "rollbench/error", one_row(7, pa.int32()), "rollbench/error is a int, not a string"),
        (1, "rollbench/success_at_reset", one_row([False]), "rollbench/success_at_reset is a list, not a bool"),
        (2, "rollbench/termination_reason", one_row(1.0), "rollbench/termination_reason is a float, not a string"),
        (0, "rollbench/initial_state", one_row(math.inf), "rollbench/initial_state is a float, not a int64"),
        (1, "data/chunk_index", one_row([0]), "data/chunk_index is a list, not a int64"),
        (2, "rollbench/task", one_row(None, pa.string()), "rollbench/task is null"),
        (0, "tasks", one_row(TASK), "tasks is a str, not a list<string>"),
        (1, "rollbench/return", one_row(True), "rollbench/return is a bool, not a double"),
        (2, "rollbench/max_steps", one_row("50"), "rollbench/max_steps is a str, not a int64"),
    ],
)  # fmt: skip
def test_an_episode_row_of_another_type_is_refused_naming_its_file_and_column_and_nothing_changes(
    sound_run: Path, tmp_path: Path, episode: int, column: str, values: pa.Array, why: str
) -> None:
    run = copy_of(sound_run, tmp_path)
    set_column(run / ROW.format(episode), column, values)
    row = ROW.format(episode)
    assert_refused_unchanged(
        run, ["eval", "--resume", run], f"episode row file {row} is not one of rollbench's ({why})"
    )


@pytest.mark.parametrize(
    ("episode", "column", "value", "plan_field"),
    [
        (1, "rollbench/seed", 99, "seed"),
        (2, "rollbench/trial", 0, "trial"),
        (0, "rollbench/max_steps", 7, "max_steps"),
        (2, "rollbench/success_rule", "final_step", "success_rule"),
        (1, "rollbench/task", "scripted/reach-final", "task"),
    ],
)
def test_an_episode_row_contradicting_the_runs_plan_is_refused_naming_the_field(
    sound_run: Path, tmp_path: Path, episode: int, column: str, value: object, plan_field: str
) -> None:
    run = copy_of(sound_run, tmp_path)
    planned = json.loads((run / "run.json").read_text())["plan"]["episodes"][episode][plan_field]
    assert planned != value
    kind = pq.read_schema(run / ROW.format(episode)).field(column).type
    set_column(run / ROW.format(episode), column, one_row(value, kind))
    why = f"contradicts the run's plan ({column} {value!r} is not the plan's {planned!r})"
    assert_refused_unchanged(run, ["eval", "--resume", run], f"episode row file {ROW.format(episode)} {why}")
    assert (
        f"episode {episode}: recorded {plan_field} {value!r} differs from the planned {planned!r}"
        in grade(run).violations
    )  # grade names it too


def test_two_episode_row_files_swapped_are_refused_naming_the_first(sound_run: Path, tmp_path: Path) -> None:
    run = copy_of(sound_run, tmp_path)
    one, two = run / ROW.format(1), run / ROW.format(2)
    data = one.read_bytes()
    one.write_bytes(two.read_bytes())
    two.write_bytes(data)
    assert_refused_unchanged(
        run, ["eval", "--resume", run], f"episode row file {ROW.format(1)} holds the row of episode 2"
    )


def _ragged(t: pa.Table) -> pa.Array:
    rows = t["observation.state"].to_pylist()
    return pa.array([[1.0], *rows[1:]])  # list<double>, its first row one wide (the hostile repro's kind)


def _wider(t: pa.Table) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array([0.5] * 5 * t.num_rows, pa.float32()), 5)


def _float32_action(t: pa.Table) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(pa.array([0.0] * 2 * t.num_rows, pa.float32()), 2)


@pytest.mark.parametrize(
    ("episode", "column", "values", "why"),
    [
        (0, "observation.state", _ragged,
         "column observation.state is declared float32[4] in meta/info.json but holds float64[]"),
        (2, "observation.state", _wider,
         "column observation.state is declared float32[4] in meta/info.json but holds float32[5]"),
        (1, "action", _float32_action, "column action is declared float64[2] in meta/info.json but holds float32[2]"),
        (2, "next.success", lambda t: pa.array([0] * t.num_rows, pa.int64()),
         "column next.success is declared bool in meta/info.json but holds int64"),
        (0, "task_index", lambda t: pa.array([0.0] * t.num_rows),
         "column task_index is declared int64 in meta/info.json but holds float64"),
        (1, "timestamp", lambda t: None, "column timestamp declared in meta/info.json (float32) is missing"),
        (2, "note", lambda t: pa.array(["x"] * t.num_rows), "column note (string) is not declared in meta/info.json"),
    ],
)  # fmt: skip
def test_a_data_file_of_other_columns_than_info_json_declares_is_refused_as_grade_names_it(
    sound_run: Path, tmp_path: Path, episode: int, column: str, values: Callable[[pa.Table], pa.Array | None], why: str
) -> None:
    run = copy_of(sound_run, tmp_path)
    path = run / DATA.format(episode)
    set_column(path, column, values(pq.read_table(path)))
    assert_refused_unchanged(run, ["eval", "--resume", run], f"data file {DATA.format(episode)}: {why}")
    assert f"file {DATA.format(episode)}: {why}; not read" in grade(run).violations  # one check, both readers


def test_a_data_file_holding_a_column_twice_is_refused_and_grade_names_it(sound_run: Path, tmp_path: Path) -> None:
    """A repeated column name used to stop the resume with pyarrow's KeyError, and grade as a whole."""
    run = copy_of(sound_run, tmp_path)
    path = run / DATA.format(2)
    t = pq.read_table(path)
    pq.write_table(t.append_column("next.reward", t["next.reward"]), path)
    why = "column next.reward is held 2 times"
    assert_refused_unchanged(run, ["eval", "--resume", run], f"data file {DATA.format(2)}: {why}")
    assert f"file {DATA.format(2)}: {why}; not read" in grade(run).violations


def _null_first(column: str) -> Callable[[pa.Table], pa.Array]:
    def values(t: pa.Table) -> pa.Array:
        cells = t[column].to_pylist()
        return pa.array([None, *cells[1:]], t.schema.field(column).type)  # same type: the footer's schema is sound

    return values


@pytest.mark.parametrize(
    ("episode", "column"),
    [(1, "observation.state"), (0, "action"), (2, "next.reward"), (1, "next.success")],
)
def test_a_data_file_holding_a_null_step_value_is_refused_before_run_json_is_touched(
    sound_run: Path, tmp_path: Path, episode: int, column: str
) -> None:
    """Hostile round 21, F1: the schema was checked, the values were not; the writer's statistics then stopped on
    pyarrow's ArrowInvalid after run.json had gone from OK to INTERRUPTED."""
    run = copy_of(sound_run, tmp_path)
    path = run / DATA.format(episode)
    set_column(path, column, _null_first(column)(pq.read_table(path)))
    r = invoke("eval", "--resume", run)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line = r.stderr.splitlines()[0]
    assert line.startswith(f"error: {run} is damaged and cannot be resumed: data file {DATA.format(episode)} "), line
    assert json.loads((run / "run.json").read_text())["status"] == "OK"


def test_a_data_file_with_a_damaged_page_is_refused_as_unreadable_not_as_a_full_disk(
    sound_run: Path, tmp_path: Path
) -> None:
    """Bytes flipped inside a column chunk, the footer intact: pyarrow's OSError used to reach the run's disk-full
    advice ("once there is room, resume with ...") after run.json said INTERRUPTED."""
    run = copy_of(sound_run, tmp_path)
    path = run / DATA.format(1)
    data = bytearray(path.read_bytes())
    first_page = pq.ParquetFile(path).metadata.row_group(0).column(0).data_page_offset
    for i in range(first_page + 20, first_page + 28):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(OSError):
        pq.read_table(path)  # the oracle: pyarrow itself cannot read it
    assert_refused_unchanged(run, ["eval", "--resume", run], f"data file {DATA.format(1)} is unreadable (OSError)")


def test_an_episode_row_file_of_many_rows_is_refused_from_its_footer(sound_run: Path, tmp_path: Path) -> None:
    """The writer writes one row per row file; a handed-over one of 200,000 rows is refused without being read."""
    run = copy_of(sound_run, tmp_path)
    path = run / ROW.format(2)
    row = pq.read_table(path)
    pq.write_table(pa.concat_tables([row] * 200_000), path)
    assert_refused_unchanged(
        run,
        ["eval", "--resume", run],
        f"episode row file {ROW.format(2)} holds 200,000 rows, where the writer writes one",
    )


# ---- hostile round 24, F4: meta/tasks.parquet is read before the resume writes anything -------------------------
TASKS = "meta/tasks.parquet"
SWEEP = ("reach the goal", "touch the goal")  # the sweep run's instructions (task_index 0, 1)


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "S"
    variants = [{"name": n, "instruction": i} for n, i in zip("ab", SWEEP, strict=True)]
    evaluate(out=out, env="scripted/reach", policy="scripted-expert", episodes=1, instructions=variants)
    assert json.loads((out / "run.json").read_text())["plan"]["instructions"] == list(SWEEP)
    return out


@pytest.fixture(scope="module")
def other_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another run of the same task, told another instruction: its tasks.parquet is a sound file of another run."""
    out = tmp_path_factory.mktemp("runs") / "O"
    evaluate(out=out, env="scripted/reach", policy="scripted-expert", episodes=1, instruction="reach the red dot")
    return out


def write_tasks(run: Path, rows: list[tuple[int, str]], index: pa.DataType | None = None) -> None:
    columns = {"task_index": pa.array([i for i, _ in rows], index or pa.int64()), "task": [t for _, t in rows]}
    pq.write_table(pa.table(columns), run / TASKS)


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


TASKS_DAMAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "truncated": (lambda run, other: truncate(run / TASKS, 100), "is unreadable (ArrowInvalid)"),
    "another run's": (
        lambda run, other: shutil.copyfile(other / TASKS, run / TASKS),
        f"row 0 is task 0 'reach the red dot', where the run's plan has task 0 {TASK!r}",
    ),
    "an extra task": (
        lambda run, other: write_tasks(run, [(0, TASK), (1, "pick the cube")]),
        "holds 2 tasks, where the run's plan has 1",
    ),
    "missing": (
        lambda run, other: (run / TASKS).unlink(),
        "is missing, yet episodes are committed (the writer writes it before the first)",
    ),
    "task_index of int32": (
        lambda run, other: write_tasks(run, [(0, TASK)], pa.int32()),
        "has columns task_index (int32), task (string), not task_index (int64) and task (string)",
    ),
}


@pytest.mark.parametrize("case", sorted(TASKS_DAMAGE))
def test_a_damaged_or_foreign_tasks_parquet_is_refused_naming_it_before_anything_is_written(
    sound_run: Path, other_run: Path, tmp_path: Path, case: str
) -> None:
    """The resume used to record the missing episodes into the run, then end PARTIAL (grade's complaint)."""
    run = copy_of(sound_run, tmp_path)
    plant, why = TASKS_DAMAGE[case]
    plant(run, other_run)
    assert_refused_unchanged(run, ["eval", "--resume", run], f"{TASKS} {why}")


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ([(0, SWEEP[1]), (1, SWEEP[0])], f"row 0 is task 0 {SWEEP[1]!r}, where the run's plan has task 0 {SWEEP[0]!r}"),
        ([(1, SWEEP[0]), (0, SWEEP[1])], f"row 0 is task 1 {SWEEP[0]!r}, where the run's plan has task 0 {SWEEP[0]!r}"),
        ([(0, SWEEP[0]), (1, SWEEP[0])], f"row 1 is task 1 {SWEEP[0]!r}, where the run's plan has task 1 {SWEEP[1]!r}"),
    ],
    ids=["tasks-swapped", "indices-swapped", "a-task-twice"],
)
def test_a_tasks_parquet_of_the_plans_tasks_in_another_order_is_refused(
    sweep_run: Path, tmp_path: Path, rows: list[tuple[int, str]], why: str
) -> None:
    run = copy_of(sweep_run, tmp_path)
    write_tasks(run, rows)
    assert_refused_unchanged(run, ["eval", "--resume", run], f"{TASKS} {why}")


def test_a_tasks_parquet_absent_before_the_first_commit_is_written_by_the_resume(
    sound_run: Path, tmp_path: Path
) -> None:
    """A run killed after its run.json and before its writer opened holds no tasks.parquet and no episode."""
    run = copy_of(sound_run, tmp_path)
    for f in [run / TASKS, *(run / "meta/episodes/chunk-000").iterdir(), *(run / "data/chunk-000").iterdir()]:
        f.unlink()
    r = invoke("eval", "--resume", run)
    assert r.returncode == 0, r.stderr
    assert pq.read_table(run / TASKS).to_pylist() == [{"task_index": 0, "task": TASK}]
    assert grade(run).episodes_recorded == 3


def test_an_errored_run_is_refused_before_its_retry_logs_or_takes_back_anything(
    errored_run: Path, tmp_path: Path
) -> None:
    """Retrying episode 2 re-stages episode 3 from its row: a row naming another task used to stop that with a
    ValueError after run.json had logged the replacement."""
    run = copy_of(errored_run, tmp_path)
    set_column(run / ROW.format(3), "tasks", one_row(["pick the cube"]))
    why = f"contradicts the run's plan (tasks ['pick the cube'] is not the plan's [{TASK!r}])"
    args = ["eval", "--resume", run, "--retry-errors", "all"]
    assert_refused_unchanged(run, args, f"episode row file {ROW.format(3)} {why}")


@pytest.mark.parametrize(
    "fields",
    [
        {"env": "scripted/reach", "policy": "scripted-expert", "episodes": 3},
        {"env": "scripted/reach-init", "policy": "random", "episodes": 2, "max_steps": 4, "video": True,
         "latency": "steps:1", "instruction_perturb": ("synonym",)},
        {"env": "scripted/faulty", "policy": "scripted-expert", "episodes": 4},
    ],
    ids=["plain", "video-latency-sweep", "errored"],
)  # fmt: skip
def test_the_runs_rollbench_writes_resume_past_the_check(tmp_path: Path, fields: dict[str, object]) -> None:
    run = tmp_path / "R"
    evaluate(out=run, **fields)  # type: ignore[arg-type]
    status = json.loads((run / "run.json").read_text())["status"]
    r = invoke("eval", "--resume", run, "--retry-errors", "all")
    assert r.returncode in (0, 1) and "damaged" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert json.loads((run / "run.json").read_text())["status"] == status


def test_the_api_raises_the_same_refusal_and_keeps_the_run(sound_run: Path, tmp_path: Path) -> None:
    run = copy_of(sound_run, tmp_path)
    set_column(run / DATA.format(1), "next.done", pa.array([1] * pq.read_metadata(run / DATA.format(1)).num_rows))
    before = entries(run)
    with pytest.raises(ConfigError) as exc:
        evaluate(out=run, env="scripted/reach", policy="scripted-expert", episodes=3)
    why = "column next.done is declared bool in meta/info.json but holds int64"
    assert str(exc.value) == refused(run, f"data file {DATA.format(1)}: {why}")
    assert entries(run) == before


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_run_policy_rollout_of_a_damaged_run_is_a_tool_error_naming_it(tmp_path: Path) -> None:
    from mcp_support import error_text, mcp_session, structured

    args = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 2, "max_steps": 50, "run_name": "r"}
    run = tmp_path / "r"
    with anyio.fail_after(120):
        async with mcp_session(tmp_path) as s:
            assert structured(await s.call_tool("run_policy_rollout", args))["status"] == "OK"
            set_column(run / ROW.format(0), "rollbench/steps", one_row(1.5))
            before = entries(run)
            text = error_text(await s.call_tool("run_policy_rollout", args))
    why = "rollbench/steps is a float, not a int64"
    line = refused(run, f"episode row file {ROW.format(0)} is not one of rollbench's ({why})")
    hint = " (list_envs and list_policies give every valid name)"  # what every refused run_policy_rollout adds
    assert text == f"Error executing tool run_policy_rollout: {line}{hint}"
    assert "Traceback" not in text and entries(run) == before
    assert json.loads((run / "run.json").read_text())["status"] == "OK"


@pytest.mark.slow
def test_optimize_instruction_refuses_its_damaged_held_out_run_on_the_next_invocation(tmp_path: Path) -> None:
    out = tmp_path / "opt"
    cmd = ["optimize-instruction", "--env", "scripted/reach", "--policy", "scripted-expert", "--out", out,
           "--rounds", "1", "--candidates", "1", "--episodes-per-candidate", "2", "--holdout-episodes", "2",
           "--proposer", "drop", "--json"]  # fmt: skip
    assert invoke(*cmd).returncode == 0
    held_out = out / "opt-holdout"  # resumed (an idle invocation) every time the search is run again
    set_column(held_out / ROW.format(1), "rollbench/success", one_row(1))
    why = "rollbench/success is a int, not a bool"
    assert_refused_unchanged(held_out, cmd, f"episode row file {ROW.format(1)} is not one of rollbench's ({why})")


@pytest.mark.slow
def test_checkpoints_skips_a_damaged_step_run_it_resumes_with_the_refusal(tmp_path: Path) -> None:
    """A step run not recorded OK (here: killed, run.json INTERRUPTED) is resumed through ``evaluate``."""
    from checkpoint_policies import write_checkpoint

    train, out = tmp_path / "train", tmp_path / "out"
    for step in (1000, 2000):
        write_checkpoint(train, step, 0.5)
    cmd = ["checkpoints", train, "--env", "scripted/reach", "--episodes", "2", "--policy-template",
           "checkpoint_policies:make", "--policy-options", json.dumps({"checkpoint": "{path}"}), "--out", out,
           "--json"]  # fmt: skip
    assert invoke(*cmd).returncode == 0
    step_run = out / "002000"
    log = json.loads((step_run / "run.json").read_text())
    (step_run / "run.json").write_text(json.dumps({**log, "status": "INTERRUPTED"}))
    rows = pq.read_metadata(step_run / DATA.format(0)).num_rows
    set_column(step_run / DATA.format(0), "episode_index", pa.array([0.0] * rows))
    before = entries(step_run)
    r = invoke(*cmd)
    why = "column episode_index is declared int64 in meta/info.json but holds float64"
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines() == [f"skipped step 2000: {refused(step_run, f'data file {DATA.format(0)}: {why}')}"]
    assert entries(step_run) == before
