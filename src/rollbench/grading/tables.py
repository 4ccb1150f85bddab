"""Grading's DuckDB side: the recorded parquet files loaded once into temporary tables of one in-memory database
per process, and the SQL that reads per-episode facts and policy-call latency from them."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb

from rollbench.core.format import quoted
from rollbench.core.grade_model import Latency, LatencyBlock
from rollbench.grading.files import fill_template, leads_outside, missing_episode_columns, readable_parquet
from rollbench.record.episode_row import EpisodeRow, EpisodeRowError, current_columns

# The most memory grading's DuckDB database may hold (its memory_limit; nothing is spilled to disk: grading writes
# nothing). Every file it reads was checked first (grading.files.parquet_footers: at most 1 GiB decoded each), so this
# is the bound for a run of many files together, and the second line against a file whose sizes lie: past it a query
# ends in OutOfMemoryException, which grading names (a violation, or one line), never the process killed. A step row
# holds ~62 bytes of the steps table (measured: 14 million rows, 864 MB), so 2 GiB is ~34 million steps (68,000
# episodes of 500 steps); a run's episode rows are one per episode.
GRADE_MEMORY_BYTES = 2 << 30


def _sql_glob(path: Path) -> str:
    return str(path).replace("'", "''")


STEP_COLUMNS = (
    'episode_index, frame_index, "index", task_index, "next.reward", "next.success", "next.done", "policy.latency_s", '
    "timestamp, "
    'isnan("action"[1]) AS pad, '  # the padding frame of an episode without steps (record.lerobot): action all NaN
    'len(list_filter("action", lambda x: isnan(x) OR isinf(x))) > 0 AS bad_action'  # rollbench refuses such an action
)


def _load(con: duckdb.DuckDBPyConnection, table: str, files: list[Path], columns: str = "*") -> None:
    """Read ``files`` once into the temporary table ``table`` (an empty table when there are none)."""
    if files:
        listing = ", ".join(f"'{_sql_glob(f)}'" for f in files)
        con.execute(f"CREATE TEMP TABLE {table} AS SELECT {columns} FROM read_parquet([{listing}], union_by_name=true)")
    else:
        con.execute(f"CREATE TEMP TABLE {table} (episode_index BIGINT)")


_INT = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT")
_FLOAT = ("FLOAT", "DOUBLE")
# what rollbench writes, as DuckDB types (``None``: the column may be null; otherwise it never is)
EPISODE_TYPES: dict[str, tuple[tuple[str, ...], bool]] = {
    "episode_index": (_INT, False),
    "length": (_INT, False),
    "dataset_from_index": (_INT, False),
    "dataset_to_index": (_INT, False),
    "rollbench/task": (("VARCHAR",), False),
    "rollbench/trial": (_INT, True),
    "rollbench/seed": (_INT, True),
    "rollbench/initial_state": (_INT, True),
    "rollbench/max_steps": (_INT, False),
    "rollbench/success_rule": (("VARCHAR",), False),
    "rollbench/success": (("BOOLEAN",), False),
    "rollbench/success_at_reset": (("BOOLEAN",), True),
    "rollbench/termination_reason": (("VARCHAR",), False),
    "rollbench/error": (("VARCHAR",), True),
    "rollbench/render_failure": (("VARCHAR",), True),
    "rollbench/render_fault": (("VARCHAR",), True),  # its name before issue 29 (record.episode_row.RENAMED_FIELDS)
    "rollbench/steps": (_INT, True),
    "rollbench/instruction": (("VARCHAR",), True),
    "rollbench/variant": (("VARCHAR",), True),
    "rollbench/transcript": (("VARCHAR",), True),
    "rollbench/return": (_FLOAT, True),
    "rollbench/wall_time_s": (_FLOAT, True),
    # read into record.episode_row.EpisodeRow too (a run of an older rollbench may lack them)
    "tasks": (("VARCHAR[]",), True),
    "data/chunk_index": (_INT, True),
    "data/file_index": (_INT, True),
    "meta/episodes/chunk_index": (_INT, True),
    "meta/episodes/file_index": (_INT, True),
    "rollbench/error_fault": (("VARCHAR",), True),
    "rollbench/wire_capture": (("VARCHAR",), True),
}
STEP_TYPES: dict[str, tuple[tuple[str, ...], bool]] = {
    "episode_index": (_INT, False),
    "frame_index": (_INT, False),
    "index": (_INT, False),
    "task_index": (_INT, False),
    "next.reward": (_FLOAT, True),
    "next.success": (("BOOLEAN",), False),
    "next.done": (("BOOLEAN",), False),
    "policy.latency_s": (_FLOAT, True),
    "timestamp": (_FLOAT, False),
    "pad": (("BOOLEAN",), True),
    "bad_action": (("BOOLEAN",), True),
}


def _not_rollbenchs(
    con: duckdb.DuckDBPyConnection, table: str, types: dict[str, tuple[tuple[str, ...], bool]], one_file: bool = False
) -> str:
    """Why temporary table ``table`` does not hold what rollbench writes ("" when it does): a column of another
    type (a foreign file's clashing column widens the union, e.g. to VARCHAR), or a null where rollbench never
    writes one (a foreign file lacks the column: ``union_by_name`` fills it with nulls); ``one_file``: the table
    holds one file, which must have every column rollbench always writes."""
    described = {row[0]: row[1] for row in con.sql(f"DESCRIBE {table}").fetchall()}
    absent = [c for c, (_, nullable) in types.items() if one_file and not nullable and c not in described]
    if absent:
        return f"no column {absent[0]}"
    wrong = [c for c, (ok, _) in types.items() if c in described and described[c] not in ok]
    if wrong:
        return f"column {wrong[0]} is {described[wrong[0]]}"
    required = [c for c, (_, nullable) in types.items() if c in described and not nullable]
    if required:
        nulls = " OR ".join(f'"{c}" IS NULL' for c in required)
        count = con.sql(f"SELECT count(*) FROM {table} WHERE {nulls}").fetchall()[0][0]
        if count:
            return f"{count} row(s) lack a value rollbench always writes"
    return ""


def load_or_report(
    con: duckdb.DuckDBPyConnection,
    table: str,
    files: list[Path],
    columns: str,
    violations: list[str],
    types: dict[str, tuple[tuple[str, ...], bool]] | None = None,
) -> list[Path]:
    """:func:`_load`; returns the files loaded. When DuckDB cannot read them all, the files whose parquet footer
    does not read are named in ``violations`` (unreadable) and the others loaded; if that fails too (files that are
    not rollbench's: columns missing, types clash), an empty table and a violation saying why. With ``types``
    (:data:`EPISODE_TYPES`, :data:`STEP_TYPES`), a loaded table whose columns are of other types or hold nulls
    where rollbench never writes one, or that cannot be read together at all (a file whose column types clash with
    the others'), is checked file by file: each file that is not rollbench's (a foreign parquet file in place of an
    episode's, any schema, any dtype) is named in ``violations`` and left out. (``files`` passed their footer check
    first, :func:`~rollbench.grading.files.parquet_footers`; single files are loaded only after a failure, so DuckDB
    reads a sound run's files once.)"""
    loaded = _load_reporting(con, table, files, columns, violations, give_up=types is None)
    if types is None:
        return loaded or []
    if loaded is None:  # the readable files do not read together: a file of another schema among them
        loaded = readable_parquet(files, [])
    elif not loaded or not _not_rollbenchs(con, table, types):
        return loaded
    good = []
    for f in loaded:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        try:
            _load(con, table, [f], columns)
            why = _not_rollbenchs(con, table, types, one_file=True)
        except duckdb.Error as exc:  # named by class: duckdb's text can quote a file's bytes (hostile8 F6)
            why = f"duckdb cannot read it: {type(exc).__name__}"
        if why:
            violations.append(f"file {f} is not one of rollbench's ({why}); not read")
        else:
            good.append(f)
    con.execute(f"DROP TABLE IF EXISTS {table}")
    return _load_reporting(con, table, good, columns, violations) or []


def _load_reporting(
    con: duckdb.DuckDBPyConnection,
    table: str,
    files: list[Path],
    columns: str,
    violations: list[str],
    give_up: bool = True,
) -> list[Path] | None:
    """Load ``files`` (those whose footer does not read, and those DuckDB cannot load alone within
    :data:`GRADE_MEMORY_BYTES`, named and left out); when the rest cannot be read together: None unless ``give_up``
    (and they fit in memory), else an empty table and a violation saying why."""
    try:
        _load(con, table, files, columns)
        return files
    except duckdb.OutOfMemoryException:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        files = _within_memory(con, files, columns, violations)
    except duckdb.Error:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    files = readable_parquet(files, violations)
    try:
        _load(con, table, files, columns)
        return files
    except duckdb.Error as exc:
        con.execute(f"DROP TABLE IF EXISTS {table}")
        memory = isinstance(exc, duckdb.OutOfMemoryException)  # each file fits alone: no file to leave out
        if not give_up and not memory:
            return None
        what = "episode rows (meta/episodes)" if table == "episodes" else "step rows (data/)"
        violations.append(
            f"the {what} are not read: together they need more than the {GRADE_MEMORY_BYTES:,} bytes grading lets "
            "DuckDB use"
            if memory
            else f"the {what} cannot be read as rollbench's: {str(exc).splitlines()[0]}"
        )
        _load(con, table, [], columns)
        return []


_database: tuple[int, duckdb.DuckDBPyConnection] | None = None  # (pid, in-memory database) of this process
_database_lock = threading.Lock()


def connection() -> duckdb.DuckDBPyConnection:
    """A new connection (its own temporary tables; close it) to this process's one in-memory DuckDB database.

    Opening a database costs ~13 ms, a connection to an open one well under 0.1 ms, grading a 20-episode run ~30 ms
    (``benchmarks/bench_micro.py``). A child process made by ``fork`` opens its own database: DuckDB's threads do
    not survive a fork. The database holds at most :data:`GRADE_MEMORY_BYTES`, for every connection together."""
    global _database
    with _database_lock:
        if _database is None or _database[0] != os.getpid():
            config: dict[str, str | bool | int | float | list[str]] = {
                "memory_limit": f"{GRADE_MEMORY_BYTES >> 20}MiB",
                "temp_directory": "",
            }
            _database = (os.getpid(), duckdb.connect(config=config))
        return _database[1].cursor()


def query(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.sql(sql)
    cols = rel.columns
    return [dict(zip(cols, row, strict=True)) for row in rel.fetchall()]


def episode_rows(con: duckdb.DuckDBPyConnection, violations: list[str]) -> list[EpisodeRow]:
    """The rows of the loaded ``episodes`` table (``meta/episodes``), by index, as :class:`EpisodeRow` records; none
    (and a violation saying why) when they lack a column grading needs or a row does not read as one (a column of
    another type: :data:`EPISODE_TYPES` names the files of most such, file by file)."""
    rows = query(con, "SELECT * FROM episodes ORDER BY episode_index")
    if rows and (lacking := missing_episode_columns(current_columns(rows[0]))):
        violations.append(f"the episode rows (meta/episodes) lack the columns {lacking}; no episode can be graded")
        return []
    try:
        return [EpisodeRow.from_row(r) for r in rows]
    except EpisodeRowError as exc:
        violations.append(f"the episode rows (meta/episodes) are not rollbench's ({exc}); no episode can be graded")
        return []


PER_EPISODE = """SELECT episode_index, count(*) FILTER (WHERE NOT pad) AS steps, count(*) AS rows,
       count(*) FILTER (WHERE pad) AS pads, sum("next.reward") AS ret,
       sum(abs("next.reward")) AS abs_ret,
       list("next.success" ORDER BY frame_index) AS successes,
       min(frame_index) AS f0, max(frame_index) AS f1, min("index") AS i0, max("index") AS i1,
       count(DISTINCT "index" - frame_index) AS offsets, count(DISTINCT task_index) AS n_task_index,
       min(task_index) AS task_index, count(*) FILTER (WHERE NOT pad AND bad_action) AS bad_actions,
       sum(CASE WHEN "next.done" THEN 1 ELSE 0 END) AS dones,
       min(frame_index) FILTER (WHERE "next.done") AS first_done
FROM steps GROUP BY episode_index"""
"""One row per episode of the step table: steps (padding frames left out), rows, padding rows, return (and the sum of absolute rewards, its rounding scale), the
``next.success`` sequence in frame order, frame and global index ranges, distinct index offsets and task indices,
and the ``next.done`` count and first done frame (what :mod:`rollbench.grading.grade` checks)."""


def percentiles(con: duckdb.DuckDBPyConnection, has_steps: bool) -> Latency:
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

    def block(r: dict[str, Any]) -> LatencyBlock:
        calls, eps = int(r["calls"] or 0), int(r["episodes"] or 0)
        return LatencyBlock(
            policy_calls=calls,
            calls_per_episode=calls / eps if eps else None,
            p50_s=r["p50"],
            p95_s=r["p95"],
            p99_s=r["p99"],
            mean_s=r["mean"],
        )

    empty = {"calls": 0, "episodes": 0, "p50": None, "p95": None, "p99": None, "mean": None}
    rows = query(con, f"SELECT {stats} FROM steps WHERE NOT pad") if has_steps else []
    out = block(rows[0] if rows else empty)
    by_task: list[dict[str, Any]] = []
    if has_steps and "rollbench/task" in con.sql("SELECT * FROM episodes LIMIT 0").columns:  # else: no episode rows
        by_task = query(
            con,
            f"""SELECT m.task, {stats} FROM steps
                JOIN (SELECT DISTINCT episode_index, "rollbench/task" AS task FROM episodes) m
                USING (episode_index) WHERE NOT pad GROUP BY m.task ORDER BY m.task""",
        )
    return Latency(**out.model_dump(), by_task={r["task"]: block(r) for r in by_task})


def data_location_problems(
    con: duckdb.DuckDBPyConnection,
    run_dir: Path,
    meta: list[EpisodeRow],
    info: dict[str, Any],
    data_files: list[Path],
) -> list[str]:
    """Where LeRobot readers look for each episode's step rows, checked against where they are: ``meta/info.json``'s
    ``data_path`` filled with the episode row's ``data/chunk_index`` and ``data/file_index`` must name the one file of
    ``data_files`` holding that episode's rows. One sentence per episode it does not (a reader would load other
    rows, or none), one for a template that cannot be filled or that misses every episode; episodes without step
    rows are named elsewhere."""
    if not data_files or not meta:
        return []
    listing = ", ".join(f"'{_sql_glob(f)}'" for f in data_files)
    sql = f"SELECT episode_index AS e, list(DISTINCT filename) AS files FROM read_parquet([{listing}], filename=true)"
    where = {
        r["e"]: sorted(Path(f).relative_to(run_dir).as_posix() for f in r["files"])
        for r in query(con, sql + " GROUP BY e")
    }
    template, out, seen = info.get("data_path"), [], set()
    for m in meta:
        e = m.episode_index
        if e in seen or e not in where:
            continue
        seen.add(e)
        try:
            rel = fill_template(template, chunk_index=m.data_chunk_index, file_index=m.data_file_index)
        except ValueError as exc:
            return [f"meta/info.json's data_path {quoted(str(template))} cannot be filled in for episode {e} ({exc}): "
                    "LeRobot readers cannot find its step rows"]  # fmt: skip
        if leads_outside(rel):  # hostile round 5, F7: named as such, not as a mismatch
            return [f"meta/info.json's data_path {quoted(str(template))} leads outside the run directory (to {rel} "
                    f"for episode {e}): LeRobot readers would load files that are not this run's"]  # fmt: skip
        if where[e] != [rel]:
            out.append(
                f"episode {e}: its episode record and meta/info.json's data_path lead LeRobot readers to {rel}, but "
                f"its step rows are in {', '.join(where[e])}"
            )
    if len(seen) > 1 and len(out) == len(seen):  # every episode: say it once, of the template
        first = out[0].removeprefix("episode ")
        return [f"meta/info.json's data_path {quoted(str(template))} leads LeRobot readers to none of the {len(seen)} "
                f"episodes' step rows (episode {first})"]  # fmt: skip
    return out


def _within_memory(
    con: duckdb.DuckDBPyConnection, files: list[Path], columns: str, violations: list[str]
) -> list[Path]:
    """The ``files`` DuckDB can load one at a time within :data:`GRADE_MEMORY_BYTES`; each other file (its footer
    understates what its pages hold: its own check passed) is named in ``violations`` and left out. Only after
    loading them together ran out of memory."""
    kept = []
    for f in files:
        try:
            _load(con, "_one_file", [f], columns)
            kept.append(f)
        except duckdb.OutOfMemoryException:
            violations.append(
                f"file {f} is not read (DuckDB needs more than the {GRADE_MEMORY_BYTES:,} bytes grading lets it use "
                "to read it)"
            )
        except duckdb.Error:
            kept.append(f)  # named by the loader's other checks
        finally:
            con.execute("DROP TABLE IF EXISTS _one_file")
    return kept
