"""Grading's DuckDB side: the recorded parquet files loaded once into temporary tables of one in-memory database
per process, and the SQL that reads per-episode facts and policy-call latency from them."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb

from rollbench.grading.files import readable_parquet


def _sql_glob(path: Path) -> str:
    return str(path).replace("'", "''")


STEP_COLUMNS = (
    'episode_index, frame_index, "index", task_index, "next.reward", "next.success", "next.done", "policy.latency_s", '
    'isnan("action"[1]) AS pad'  # the padding frame of an episode without steps (record.lerobot): action all NaN
)


def _load(con: duckdb.DuckDBPyConnection, table: str, files: list[Path], columns: str = "*") -> None:
    """Read ``files`` once into the temporary table ``table`` (an empty table when there are none)."""
    if files:
        listing = ", ".join(f"'{_sql_glob(f)}'" for f in files)
        con.execute(f"CREATE TEMP TABLE {table} AS SELECT {columns} FROM read_parquet([{listing}], union_by_name=true)")
    else:
        con.execute(f"CREATE TEMP TABLE {table} (episode_index BIGINT)")


def load_or_report(
    con: duckdb.DuckDBPyConnection, table: str, files: list[Path], columns: str, violations: list[str]
) -> list[Path]:
    """:func:`_load`; returns the files loaded. When DuckDB cannot read them all, the files whose parquet footer
    does not read are named in ``violations`` (unreadable) and the others loaded; if that fails too (files that are
    not rollbench's: columns missing, types clash), an empty table and a violation saying why. (Footers are read
    only after a failure, so a sound run's files are opened once.)"""
    try:
        _load(con, table, files, columns)
        return files
    except duckdb.Error:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    files = readable_parquet(files, violations)
    try:
        _load(con, table, files, columns)
        return files
    except duckdb.Error as exc:
        what = "episode rows (meta/episodes)" if table == "episodes" else "step rows (data/)"
        violations.append(f"the {what} cannot be read as rollbench's: {str(exc).splitlines()[0]}")
        con.execute(f"DROP TABLE IF EXISTS {table}")
        _load(con, table, [], columns)
        return []


_database: tuple[int, duckdb.DuckDBPyConnection] | None = None  # (pid, in-memory database) of this process
_database_lock = threading.Lock()


def connection() -> duckdb.DuckDBPyConnection:
    """A new connection (its own temporary tables; close it) to this process's one in-memory DuckDB database.

    Opening a database costs ~13 ms, a connection to an open one well under 0.1 ms, grading a 20-episode run ~30 ms
    (``benchmarks/bench_micro.py``). A child process made by ``fork`` opens its own database: DuckDB's threads do
    not survive a fork."""
    global _database
    with _database_lock:
        if _database is None or _database[0] != os.getpid():
            _database = (os.getpid(), duckdb.connect())
        return _database[1].cursor()


def query(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.sql(sql)
    cols = rel.columns
    return [dict(zip(cols, row, strict=True)) for row in rel.fetchall()]


PER_EPISODE = """SELECT episode_index, count(*) FILTER (WHERE NOT pad) AS steps, count(*) AS rows,
       count(*) FILTER (WHERE pad) AS pads, sum("next.reward") AS ret,
       list("next.success" ORDER BY frame_index) AS successes,
       min(frame_index) AS f0, max(frame_index) AS f1, min("index") AS i0, max("index") AS i1,
       count(DISTINCT "index" - frame_index) AS offsets, count(DISTINCT task_index) AS n_task_index,
       sum(CASE WHEN "next.done" THEN 1 ELSE 0 END) AS dones,
       min(frame_index) FILTER (WHERE "next.done") AS first_done
FROM steps GROUP BY episode_index"""
"""One row per episode of the step table: steps (padding frames left out), rows, padding rows, return, the
``next.success`` sequence in frame order, frame and global index ranges, distinct index offsets and task indices,
and the ``next.done`` count and first done frame (what :mod:`rollbench.grading.grade` checks)."""


def percentiles(con: duckdb.DuckDBPyConnection, has_steps: bool) -> dict[str, Any]:
    """Policy-call latency over all calls (NaN rows were served from a queued chunk), calls per episode (mean over
    recorded episodes with steps), and the same per task (``by_task``)."""
    # pyarrow leaves NaN out of float min/max statistics and DuckDB then assumes a column holds no NaN, folding
    # isnan() to false in some plans (duckdb/duckdb#25521): steps served from a queued chunk counted as calls.
    lat = '"policy.latency_s"'
    stats = f"""count(*) FILTER (WHERE NOT isnan({lat})) AS calls, count(DISTINCT episode_index) AS episodes,
                quantile_cont({lat}, 0.5) FILTER (WHERE NOT isnan({lat})) AS p50,
                quantile_cont({lat}, 0.95) FILTER (WHERE NOT isnan({lat})) AS p95,
                quantile_cont({lat}, 0.99) FILTER (WHERE NOT isnan({lat})) AS p99,
                avg({lat}) FILTER (WHERE NOT isnan({lat})) AS mean"""

    def block(r: dict[str, Any]) -> dict[str, Any]:
        calls, eps = int(r["calls"] or 0), int(r["episodes"] or 0)
        return {
            "policy_calls": calls,
            "calls_per_episode": calls / eps if eps else None,
            "p50_s": r["p50"],
            "p95_s": r["p95"],
            "p99_s": r["p99"],
            "mean_s": r["mean"],
        }

    empty = {"calls": 0, "episodes": 0, "p50": None, "p95": None, "p99": None, "mean": None}
    rows = query(con, f"SELECT {stats} FROM steps WHERE NOT pad") if has_steps else []
    out = block(rows[0] if rows else empty)
    by_task = []
    if has_steps and "rollbench/task" in con.sql("SELECT * FROM episodes LIMIT 0").columns:  # else: no episode rows
        by_task = query(
            con,
            f"""SELECT m.task, {stats} FROM steps
                JOIN (SELECT DISTINCT episode_index, "rollbench/task" AS task FROM episodes) m
                USING (episode_index) WHERE NOT pad GROUP BY m.task ORDER BY m.task""",
        )
    out["by_task"] = {r["task"]: block(r) for r in by_task}
    return out
