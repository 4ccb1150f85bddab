"""A staged episode that contradicts run.json's plan, or holds a non-finite number, is never committed by a resume
(issue 42, item 7's leftovers): it is named on one line, removed, and runs again at its planned seed and state.
Oracle: a clean run of the same spec, recorded by the real CLI and never interrupted; its rows are what the resumed
run must end up holding (every column but the wall-clock ones)."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke

ARGS = ["--env", "scripted/reach", "--policy", "random", "--episodes", "5", "--max-steps", "4", "--seed", "1"]
ROWS, DATA = "meta/episodes/chunk-000", "data/chunk-000"
CLOCK_COLUMNS = {"rollbench/wall_time_s", "policy.latency_s"}  # measured time: differs between any two runs


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "run"
    r = invoke("eval", *ARGS, "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def rows(run: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every episode's meta row and data rows, without the wall-clock columns."""
    out = []
    for e in range(5):
        meta = pq.read_table(run / ROWS / f"file-{e:03d}.parquet").to_pylist()[0]
        data = pq.read_table(run / DATA / f"file-{e:03d}.parquet").to_pylist()
        out.append(
            (
                {k: v for k, v in meta.items() if k not in CLOCK_COLUMNS},
                [{k: v for k, v in r.items() if k not in CLOCK_COLUMNS} for r in data],
            )
        )
    return out


def stage_last(
    run: Path, edit_row: Callable[[dict[str, Any]], None], edit_data: Callable[[pa.Table], pa.Table]
) -> None:
    """Episode 4 staged as the writer stages it (from its committed files), edited, and episodes 3 and 4 taken back,
    so that a resume runs 3 and then would commit the staged 4."""
    staged = run / ".staging/episode-000004"
    staged.mkdir(parents=True)
    row = pq.read_table(run / ROWS / "file-004.parquet").to_pylist()[0]
    row["task_index"] = 0
    edit_row(row)
    (staged / "episode.json").write_text(json.dumps(row))  # json writes NaN and Infinity as Python reads them
    data = pq.read_table(run / DATA / "file-004.parquet").drop_columns(["index"])
    pq.write_table(edit_data(data), staged / "data.parquet")
    for e in (4, 3):
        (run / ROWS / f"file-00{e}.parquet").unlink()
        (run / DATA / f"file-00{e}.parquet").unlink()


def _set(column: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda row: row.__setitem__(column, value)


def _rewards(value: float) -> Callable[[pa.Table], pa.Table]:
    def edit(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("next.reward")
        return t.set_column(i, "next.reward", pa.array([value] * t.num_rows, pa.float32()))

    return edit


def _same(t: pa.Table) -> pa.Table:
    return t


# case -> (row edit, data edit, what the warning names)
CONTRADICTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], Callable[[pa.Table], pa.Table], str]] = {
    "another seed": (_set("rollbench/seed", 99), _same, "rollbench/seed 99 is not the plan's 5"),
    "another trial": (_set("rollbench/trial", 0), _same, "rollbench/trial 0 is not the plan's 4"),
    "an initial state the plan has not": (
        _set("rollbench/initial_state", 3),
        _same,
        "rollbench/initial_state 3 is not the plan's None",
    ),
    "another task": (
        _set("rollbench/task", "scripted/push"),
        _same,
        "rollbench/task 'scripted/push' is not the plan's",
    ),
    "another instruction": (_set("rollbench/instruction", "x"), _same, "rollbench/instruction 'x' is not the plan's"),
    "another horizon": (_set("rollbench/max_steps", 40), _same, "rollbench/max_steps 40 is not the plan's 4"),
    "another success rule": (
        _set("rollbench/success_rule", "final_step"),
        _same,
        "rollbench/success_rule 'final_step' is not the plan's 'any_step'",
    ),
    "a variant the plan has not": (_set("rollbench/variant", "v1"), _same, "rollbench/variant 'v1' is not the plan's"),
    "the seed a bool": (_set("rollbench/seed", True), _same, "rollbench/seed is a bool"),
    "the seed missing": (lambda row: row.pop("rollbench/seed"), _same, "rollbench/seed None is not the plan's 5"),
    "a NaN return": (_set("rollbench/return", math.nan), _same, "rollbench/return is nan, not a finite number"),
    "an infinite return": (_set("rollbench/return", math.inf), _same, "rollbench/return is inf, not a finite number"),
    "a NaN wall time": (_set("rollbench/wall_time_s", math.nan), _same, "rollbench/wall_time_s is nan"),
    "NaN rewards with a NaN return": (
        _set("rollbench/return", math.nan),
        _rewards(math.nan),
        "rollbench/return is nan",
    ),
    "NaN rewards": (lambda row: None, _rewards(math.nan), "next.reward column holds NaN or inf"),
    "infinite rewards": (lambda row: None, _rewards(-math.inf), "next.reward column holds NaN or inf"),
    "rewards that do not sum to the return": (lambda row: None, _rewards(1.0), "next.reward rows sum to 4"),
}


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
@pytest.mark.slow
def test_a_staged_episode_contradicting_the_plan_is_rerun_as_planned(clean: Path, tmp_path: Path, case: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    edit_row, edit_data, named = CONTRADICTIONS[case]
    stage_last(run, edit_row, edit_data)
    r = invoke("eval", "--resume", run)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    said = [ln for ln in r.stderr.splitlines() if "staged episode 4" in ln]
    assert len(said) == 1 and named in said[0] and said[0].endswith("it will run again"), said
    assert rows(run) == rows(clean)
    assert not (run / ".staging").exists()  # removed: every file in it was one the writer stages
    g = json.loads(invoke("grade", run, "--json").stdout)
    assert (g["status"], g["violations"]) == ("OK", [])


def test_a_staged_episode_agreeing_with_the_plan_is_committed_as_staged(clean: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    staged_return = -1.5  # only the staged copy has it: a re-run would record the clean run's return
    stage_last(run, _set("rollbench/return", staged_return), _rewards(staged_return / 4))
    r = invoke("eval", "--resume", run)
    assert r.returncode == 0 and "staged episode 4" not in r.stderr, r.stderr
    assert pq.read_table(run / ROWS / "file-004.parquet")["rollbench/return"].to_pylist() == [staged_return]
    assert rows(run)[:4] == rows(clean)[:4]


def test_a_staged_file_not_the_writers_is_left_when_its_episode_is_discarded(clean: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    stage_last(run, _set("rollbench/seed", 99), _same)
    (run / ".staging/episode-000004/notes.txt").write_text("mine")
    r = invoke("eval", "--resume", run)
    assert r.returncode == 0 and "staged episode 4 is damaged" in r.stderr, r.stderr
    kept = list((run / ".staging").glob(".tmp-000004-discarded/*"))
    assert [p.name for p in kept] == ["notes.txt"] and kept[0].read_text() == "mine"
    assert rows(run) == rows(clean)


@pytest.mark.parametrize("wall", [math.nan, math.inf, -5.0])
def test_a_committed_non_finite_wall_time_is_a_named_violation_never_a_traceback(
    clean: Path, tmp_path: Path, wall: float
) -> None:
    run = tmp_path / "run"
    shutil.copytree(clean, run)
    f = run / ROWS / "file-001.parquet"
    t = pq.read_table(f)
    i = t.schema.get_field_index("rollbench/wall_time_s")
    pq.write_table(t.set_column(i, "rollbench/wall_time_s", pa.array([wall], pa.float64())), f)
    others = [
        pq.read_table(run / ROWS / f"file-{e:03d}.parquet")["rollbench/wall_time_s"][0].as_py() for e in (0, 2, 3, 4)
    ]
    r = invoke("eval", "--resume", run)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    g = json.loads(invoke("grade", run, "--json").stdout)
    assert g["violations"] == [f"episode 1: its wall time {wall:g} s is not a finite number >= 0 (not counted)"]
    assert g["timing"]["episode_time_s"] == pytest.approx(sum(others), rel=1e-12)
