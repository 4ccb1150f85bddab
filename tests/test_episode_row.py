"""An episode's meta/episodes row as a typed record: read from a row as written, written back column for column,
and a damaged column named (rollbench.record.episode_row)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rollbench.grading.tables import connection, episode_rows
from rollbench.record.derived import meta_schema
from rollbench.record.episode_row import EpisodeRow, EpisodeRowError, VideoSpan

KEY = "observation.images.front"

# a committed row as the writer lays it out, written by hand (meta_schema's column order)
ROW = {
    "episode_index": 3,
    "tasks": ["pick the cube"],
    "length": 17,
    "data/chunk_index": 0,
    "data/file_index": 3,
    "dataset_from_index": 40,
    "dataset_to_index": 57,
    f"videos/{KEY}/chunk_index": 0,
    f"videos/{KEY}/file_index": 3,
    f"videos/{KEY}/from_timestamp": 0.0,
    f"videos/{KEY}/to_timestamp": 1.7,
    "meta/episodes/chunk_index": 0,
    "meta/episodes/file_index": 3,
    "rollbench/task": "scripted/reach",
    "rollbench/trial": 1,
    "rollbench/seed": 1001,
    "rollbench/initial_state": 2,
    "rollbench/instruction": "pick the cube",
    "rollbench/variant": None,
    "rollbench/max_steps": 50,
    "rollbench/success_rule": "any_step",
    "rollbench/success": True,
    "rollbench/success_at_reset": False,
    "rollbench/termination_reason": "success",
    "rollbench/error": None,
    "rollbench/error_fault": None,
    "rollbench/steps": 17,
    "rollbench/return": 1.5,
    "rollbench/wall_time_s": 0.25,
    "rollbench/render_failure": None,
    "rollbench/transcript": None,
    "rollbench/wire_capture": None,
}


def test_a_committed_row_reads_as_attributes_and_writes_back_the_same_parquet_row() -> None:
    row = EpisodeRow.from_row(ROW)
    assert (row.episode_index, row.length, row.task, row.seed, row.steps) == (3, 17, "scripted/reach", 1001, 17)
    assert (row.return_, row.success, row.tasks) == (1.5, True, ("pick the cube",))
    assert (row.data_chunk_index, row.data_file_index, row.dataset_from_index, row.dataset_to_index) == (0, 3, 40, 57)
    assert row.video(KEY).to_timestamp == 1.7 and row.video("observation.images.wrist").file_index is None
    assert row.to_row([KEY]) == ROW
    written = pa.Table.from_pylist([row.to_row([KEY])], schema=meta_schema([KEY]))
    assert written.to_pylist() == [ROW]


def test_a_row_of_a_rollbench_before_a_column_existed_or_was_renamed_reads_the_old_name_and_nulls() -> None:
    old = {k: v for k, v in ROW.items() if k not in ("rollbench/variant", "rollbench/render_failure")}
    row = EpisodeRow.from_row({**old, "rollbench/render_fault": "camera front: EGL failed"})
    assert row.render_failure == "camera front: EGL failed"
    assert row.variant is None and row.missing == {"rollbench/variant"}
    assert row.to_row([KEY])["rollbench/render_failure"] == "camera front: EGL failed"


def test_a_staged_row_carries_its_task_index_and_is_committed_with_lerobot_bookkeeping() -> None:
    staged = {k: v for k, v in ROW.items() if k.startswith("rollbench/")}
    staged.update({"length": 17, "episode_index": 3, "task_index": 0, "traceback": None})
    row = EpisodeRow.from_row(staged)
    assert row.to_staged() == staged and list(row.to_staged()) == list(staged)
    committed = row.committed(["pick the cube"], 17, (0, 3), 40, {KEY: VideoSpan(0, 3, 0.0, 1.7)})
    assert committed.to_row([KEY]) == ROW


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("length", -1, "length -1 is not an integer >= 0"),
        ("length", True, "length True is not an integer >= 0"),
        ("episode_index", "3", "episode_index '3' is not an integer"),
        ("rollbench/seed", 1.5, "rollbench/seed is a float, not a int64"),
        ("rollbench/success", 1, "rollbench/success is a int, not a bool"),
        ("rollbench/return", "1.5", "rollbench/return is a str, not a double"),
        ("rollbench/error", ["x"], "rollbench/error is a list, not a string"),
        ("rollbench/task", None, "rollbench/task is null"),
        ("tasks", "pick the cube", "tasks is a str, not a list<string>"),
        ("data/chunk_index", "0", "data/chunk_index is a str, not a int64"),
        (f"videos/{KEY}/to_timestamp", "1.7", f"videos/{KEY}/to_timestamp is a str, not a double"),
    ],
)
def test_a_damaged_column_is_named(column: str, value: object, why: str) -> None:
    with pytest.raises(EpisodeRowError) as exc:
        EpisodeRow.from_row({**ROW, column: value})
    assert str(exc.value) == why


def test_a_missing_required_column_and_a_non_finite_float_are_named() -> None:
    with pytest.raises(EpisodeRowError, match=r"^rollbench/max_steps is missing$"):
        EpisodeRow.from_row({k: v for k, v in ROW.items() if k != "rollbench/max_steps"})
    assert EpisodeRow.from_row({**ROW, "rollbench/return": float("nan")}).return_ != 1.5  # grade names it itself
    with pytest.raises(EpisodeRowError, match=r"^rollbench/return is nan, not a finite number$"):
        EpisodeRow.from_row({**ROW, "rollbench/return": float("nan")}, finite=True)


def _graded_rows(rows: list[dict[str, object]]) -> tuple[list[EpisodeRow], list[str]]:
    """grading's reading of a loaded ``episodes`` table holding ``rows``."""
    con = connection()
    try:
        con.register("given_rows", pa.Table.from_pylist(rows))
        con.execute("CREATE TEMP TABLE episodes AS SELECT * FROM given_rows")
        violations: list[str] = []
        return episode_rows(con, violations), violations
    finally:
        con.close()


def test_grading_reads_the_rows_duckdb_loaded_as_records() -> None:
    second = {**ROW, "episode_index": 4, "rollbench/render_failure": None, "rollbench/seed": 1002}
    rows, violations = _graded_rows([second, ROW])
    assert violations == []
    assert [(r.episode_index, r.seed, r.video(KEY).to_timestamp) for r in rows] == [(3, 1001, 1.7), (4, 1002, 1.7)]


def test_grading_names_episode_rows_that_do_not_read_and_grades_none_of_them() -> None:
    rows, violations = _graded_rows([{**ROW, f"videos/{KEY}/to_timestamp": "1.7"}])
    assert rows == [] and violations == [
        f"the episode rows (meta/episodes) are not rollbench's (videos/{KEY}/to_timestamp is a str, not a double); "
        "no episode can be graded"
    ]
    rows, violations = _graded_rows([{k: v for k, v in ROW.items() if k != "rollbench/success"}])
    assert rows == [] and violations == [
        "the episode rows (meta/episodes) lack the columns ['rollbench/success']; no episode can be graded"
    ]
