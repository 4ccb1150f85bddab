"""A run's files checked against what its own ``meta/`` declares: every step file's columns against the
``features`` of ``meta/info.json`` (dtype and width; the comparison is :mod:`rollbench.record.step_schema`'s, which
a resume refuses by too), ``meta/tasks.parquet`` (its schema, and the task every
episode's rows name), and ``meta/stats.json`` against the statistics recomputed from the step rows.

Each reader turns damage into a sentence appended to ``violations`` (see :mod:`rollbench.grading.files`) and
never raises for a damaged file. Bounds: ``meta/tasks.parquet`` is read only up to :data:`MAX_TASKS` rows, a
JSON file only up to :data:`MAX_META_BYTES`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from rollbench.core.format import quoted
from rollbench.grading.files import parquet_files
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import open_parquet
from rollbench.record.lerobot import NUMERIC_FEATURES
from rollbench.record.safe_files import read_regular_json
from rollbench.record.step_schema import declared_columns, step_file_differences

MAX_TASKS = 1_000_000  # rows of meta/tasks.parquet (one per distinct instruction; LIBERO-Plus has ~10,000)
MAX_META_BYTES = 256 * 2**20  # a meta/ JSON file larger than this is not read


def declared_step_files(
    run_dir: Path, schemas: dict[Path, pa.Schema], info: dict[str, Any], violations: list[str]
) -> list[Path]:
    """The step files (``schemas``: each file's arrow schema, read by
    :func:`~rollbench.grading.files.parquet_footers`) whose columns are exactly the step features ``info``
    declares, each of the declared dtype and width; each other file is named in ``violations`` (its first differing
    column: declared vs found) and left out. A difference every step file shares (two or more files) is
    meta/info.json's: named once, as info.json's, and no file is left out for it. Without declared features (a
    damaged info.json, named by :func:`~rollbench.grading.files.read_info`) every file is returned."""
    files = list(schemas)
    declared = declared_columns(info)
    if not declared:
        return files
    shared, own = step_file_differences(declared, schemas)
    violations += [f"meta/info.json: every step file differs from it: {why}" for why in shared]
    for f in files:
        if f in own:
            violations.append(f"file {f.relative_to(run_dir)}: {own[f]}; not read")
    return [f for f in files if f not in own]


def read_tasks(run_dir: Path, info: dict[str, Any], violations: list[str]) -> dict[int, str] | None:
    """``meta/tasks.parquet`` as task_index -> task string (None, with the reason in ``violations``, when it is
    missing, not a regular file, unreadable, over :data:`MAX_TASKS` rows, lacks an integer ``task_index`` or a
    string ``task`` column, holds nulls or repeats an index). Its row count is checked against info.json's
    ``total_tasks``."""
    rel = "meta/tasks.parquet"
    path = run_dir / rel
    listing = parquet_files(run_dir, rel, violations)  # names a link, FIFO or directory in its place
    if not listing:
        if not os.path.lexists(path):
            violations.append(f"{rel} is missing")
        return None
    try:
        with open_parquet(path, run_dir) as pf:
            if pf.metadata.num_rows > MAX_TASKS:
                violations.append(f"{rel} holds {pf.metadata.num_rows} rows, over the {MAX_TASKS} rollbench reads")
                return None
            names = pf.schema_arrow.names
            if "task_index" not in names or "task" not in names:
                violations.append(f"{rel} has no task_index and task columns (it has {names[:6]})")
                return None
            table = pf.read(columns=["task_index", "task"])
    except Exception as exc:
        violations.append(f"{rel} is unreadable ({type(exc).__name__}: {str(exc)[:200]})")
        return None
    index, task = table.column("task_index"), table.column("task")
    if not pa.types.is_integer(index.type) or not pa.types.is_string(task.type):
        violations.append(f"{rel}: task_index is {index.type} and task is {task.type}, not int64 and string")
        return None
    if index.null_count or task.null_count:
        violations.append(f"{rel} has rows without a task_index or task")
        return None
    tasks = dict(zip(index.to_pylist(), task.to_pylist(), strict=True))
    if len(tasks) != table.num_rows:
        violations.append(f"{rel} repeats a task_index")
    total = info.get("total_tasks")
    if isinstance(total, int) and not isinstance(total, bool) and total != table.num_rows:
        violations.append(f"meta/info.json says total_tasks={total} but {rel} holds {table.num_rows} tasks")
    return tasks


def check_episode_tasks(
    meta: list[EpisodeRow], data: dict[int, dict[str, Any]], tasks: dict[int, str] | None, violations: list[str]
) -> None:
    """Each episode's step rows name a task index of ``meta/tasks.parquet`` whose task is the one its episode
    record lists (``tasks``); one violation per task index and kind of difference, naming its episodes. Nothing to
    check without the table."""
    if tasks is None:
        return
    lacking: dict[int, list[int]] = {}
    other: dict[tuple[int, str], list[int]] = {}
    for m in meta:
        e, d = m.episode_index, data.get(m.episode_index)
        if d is None or d.get("task_index") is None:
            continue
        ti, listed = int(d["task_index"]), m.tasks
        if ti not in tasks:
            lacking.setdefault(ti, []).append(e)
        elif listed and listed[0] != tasks[ti]:
            other.setdefault((ti, str(listed[0])), []).append(e)
    for ti, eps in sorted(lacking.items()):
        violations.append(f"{_episodes(eps)}: the step rows name task_index {ti}, which meta/tasks.parquet lacks")
    for (ti, listed_task), eps in sorted(other.items()):
        violations.append(
            f"{_episodes(eps)}: the step rows name task {ti} ({quoted(tasks[ti])} in meta/tasks.parquet) but the "
            f"episode record lists {quoted(listed_task)}"
        )


def _episodes(eps: list[int]) -> str:
    shown = ", ".join(map(str, sorted(eps)[:10])) + (" ..." if len(eps) > 10 else "")
    return f"episode {shown}" if len(eps) == 1 else f"episodes {shown}"


def check_stats(con: duckdb.DuckDBPyConnection, run_dir: Path, files: list[Path], violations: list[str]) -> None:
    """``meta/stats.json`` against the statistics of :data:`~rollbench.record.lerobot.NUMERIC_FEATURES`
    recomputed from the step ``files`` (padding frames and rows with a NaN left out, as the writer does): the same
    features, each ``min``/``max`` equal, ``count`` equal, ``mean`` and ``std`` equal up to float64 rounding
    (1e-9 of the feature's scale; the writer's std comes from sums of squares). Call it only for a finished run
    whose step files were all read (the writer rewrites stats.json when a run ends)."""
    rel = "meta/stats.json"
    path = run_dir / rel
    if not parquet_files(run_dir, rel, violations):
        if not os.path.lexists(path):
            violations.append(f"{rel} is missing")
        return
    try:
        if os.lstat(path).st_size > MAX_META_BYTES:
            violations.append(f"{rel} is larger than {MAX_META_BYTES >> 20} MiB; not read")
            return
        recorded = read_regular_json(path, run_dir)
    except (OSError, ValueError) as exc:
        violations.append(f"{rel} is not readable JSON ({str(exc)[:200]})")
        return
    if not isinstance(recorded, dict):
        violations.append(f"{rel} is not a JSON object (it holds a {type(recorded).__name__})")
        return
    want = recompute_stats(con, files)
    for name in sorted(set(want) | set(recorded), key=str):
        if name not in recorded:
            violations.append(f"{rel} has no statistics for {name}, which the step rows hold")
        elif name not in want:
            violations.append(f"{rel} has statistics for {quoted(str(name))}, which the step rows do not hold")
        elif why := _stats_difference(recorded[name], want[name]):
            violations.append(f"{rel}: {name} {why}")


def _numbers(v: Any, n: int) -> list[float] | None:
    if not isinstance(v, list) or len(v) != n:
        return None
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
        return None
    return [float(x) for x in v]


def _stats_difference(got: Any, want: dict[str, Any]) -> str:
    if not isinstance(got, dict):
        return f"is a {type(got).__name__}, not an object of statistics"
    width = len(want["min"])
    if got.get("count") != want["count"]:
        return f"count is {quoted(got.get('count'), as_text=True)} but the step rows give {want['count']}"
    scale = max([abs(x) for x in want["min"] + want["max"] if math.isfinite(x)] + [1.0])
    for key in ("min", "max", "mean", "std"):
        values = _numbers(got.get(key), width)
        if values is None:
            return f"{key} is not a list of {width} numbers"
        for i, (a, b) in enumerate(zip(values, want[key], strict=True)):
            exact = key in ("min", "max")
            tol = 0.0 if exact else (1e-8 * scale**2 + 1e-12 if key == "std" else 1e-9 * scale + 1e-12)
            diff = abs(a * a - b * b) if key == "std" else abs(a - b)
            if not (diff <= tol or a == b or (math.isnan(a) and math.isnan(b))):
                return f"{key}[{i}] is {a:.9g} but the step rows give {b:.9g}"
    return ""


def recompute_stats(con: duckdb.DuckDBPyConnection, files: list[Path]) -> dict[str, dict[str, Any]]:
    """LeRobot's per-feature statistics (``min``, ``max``, ``mean``, ``std`` per element, ``count``) of the
    step rows in ``files``, as :class:`rollbench.record.on_disk.FeatureStats` forms them; only features with rows."""
    if not files:
        return {}
    listing = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    source = f"read_parquet([{listing}], union_by_name=true)"
    ran = 'len(list_filter("action", lambda x: isnan(x))) = 0'  # a padding frame's action is all NaN
    out: dict[str, dict[str, Any]] = {}
    for name in NUMERIC_FEATURES:
        col = f'"{name}"'
        kind = con.sql(f"SELECT {col} FROM {source} LIMIT 0").types[0]
        listed = str(kind).endswith("[]")
        if listed:
            sql = f"""SELECT i, min(v), max(v), avg(v), stddev_pop(v), count(v) FROM (
                        SELECT unnest({col}) AS v, generate_subscripts({col}, 1) AS i, r FROM (
                            SELECT {col}, row_number() OVER () AS r FROM {source}
                            WHERE {ran} AND len(list_filter({col}, lambda x: isnan(x))) = 0))
                      GROUP BY i ORDER BY i"""
        else:
            sql = f"""SELECT 1, min({col}), max({col}), avg({col}), stddev_pop({col}), count({col}) FROM {source}
                      WHERE {ran} AND NOT isnan({col})"""
        rows = [r for r in con.sql(sql).fetchall() if r[5]]
        if rows:
            counts = {int(r[5]) for r in rows}
            out[name] = {
                "min": [float(r[1]) for r in rows],
                "max": [float(r[2]) for r in rows],
                "mean": [float(r[3]) for r in rows],
                "std": [float(r[4]) for r in rows],
                "count": [counts.pop()] if len(counts) == 1 else sorted(counts),
            }
    return out


__all__ = ["check_episode_tasks", "check_stats", "declared_step_files", "read_tasks", "recompute_stats"]
