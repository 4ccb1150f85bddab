"""Grade a run directory from its files alone: every reported number, plus invariant checks.

Pure: reads ``run.json`` (for what was *requested*: the spec and the plan) and the LeRobot files (for what
*happened*), writes nothing. Per-episode numbers come from the per-step rows via DuckDB:

* length = number of step rows (an episode without steps has one padding frame, see :mod:`rollbench.record.lerobot`,
  which is checked and not counted); return = sum of ``next.reward``;
* success = ``bool_or(next.success)`` for the ``any_step`` rule, the last row's ``next.success`` for ``final_step``,
  and never for an episode that errored or was already successful at reset;
* mean and median length, mean return per task: over the episodes that ran (an episode that errored before its
  first step is left out; ``episodes_ran`` counts the others);
* with the spec's ``success_hold`` K > 1, success needs K consecutive true rows (``rollout.held_success``, the
  same function the episode loop uses);
* success rate per task = successes / recorded episodes (errored episodes count as failures; status says so),
  with the 95% Wilson score interval (Wilson 1927; z = 1.959964; :func:`rollbench.analysis.stats.wilson_interval`).

Errors are counted per fault (``errors_by_fault``: ``policy``, ``environment``, ``infrastructure``, from the
``rollbench/error_fault`` column; ``unclassified`` for runs recorded before it existed), per task and overall.

LLM agent runs (episodes with a ``rollbench/transcript``): ``agent_usage`` gives model calls, tokens and cost
(``overall`` and ``by_task``) summed from the transcripts' ``call`` lines; an unreadable transcript, or one whose
stated totals or termination reason disagree with its lines or the episode row, is a violation.

Status: ``OK`` only when every requested episode is recorded, none errored and no invariant is violated;
``FAILED`` when no episode completed without error; otherwise ``PARTIAL``. ``reasons`` says why, in words, naming
the fault of every error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb

from rollbench.analysis.stats import Z95, wilson_interval
from rollbench.grading_files import (
    link_violations,
    missing_episode_columns,
    parquet_files,
    read_info,
    readable_parquet,
    run_timing,
    video_violation,
)
from rollbench.record.transcript import check_transcript, sum_totals
from rollbench.rollout import held_success
from rollbench.types import FAULTS, ConfigError

__all__ = ["Z95", "grade", "load_run_log", "wilson_interval"]  # the Wilson interval lives in rollbench.analysis


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


def _load_or_report(
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


def _connection() -> duckdb.DuckDBPyConnection:
    """A new connection (its own temporary tables; close it) to this process's one in-memory DuckDB database.

    Opening a database costs ~13 ms, a connection to an open one well under 0.1 ms, grading a 20-episode run ~30 ms
    (``benchmarks/bench_micro.py``). A child process made by ``fork`` opens its own database: DuckDB's threads do
    not survive a fork."""
    global _database
    with _database_lock:
        if _database is None or _database[0] != os.getpid():
            _database = (os.getpid(), duckdb.connect())
        return _database[1].cursor()


def _query(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.sql(sql)
    cols = rel.columns
    return [dict(zip(cols, row, strict=True)) for row in rel.fetchall()]


def load_run_log(run_dir: Path) -> dict[str, Any]:
    """run.json, or ConfigError when ``run_dir`` is not a rollbench run directory (see ``read_run_log``)."""
    from rollbench.record.runlog import read_run_log

    log = read_run_log(run_dir)
    if log is None:
        raise ConfigError(f"{run_dir} is not a rollbench run directory (no run.json)")
    return log


def _percentiles(con: duckdb.DuckDBPyConnection, has_steps: bool) -> dict[str, Any]:
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
    rows = _query(con, f"SELECT {stats} FROM steps WHERE NOT pad") if has_steps else []
    out = block(rows[0] if rows else empty)
    by_task = []
    if has_steps and "rollbench/task" in con.sql("SELECT * FROM episodes LIMIT 0").columns:  # else: no episode rows
        by_task = _query(
            con,
            f"""SELECT m.task, {stats} FROM steps
                JOIN (SELECT DISTINCT episode_index, "rollbench/task" AS task FROM episodes) m
                USING (episode_index) WHERE NOT pad GROUP BY m.task ORDER BY m.task""",
        )
    out["by_task"] = {r["task"]: block(r) for r in by_task}
    return out


def grade(run_dir: str | Path, *, check_videos: bool = True) -> dict[str, Any]:
    """Recompute a run's results from ``run_dir`` and check its invariants. See the module docstring.

    Returns the ``grade --json`` document: ``status``, ``reasons``, ``violations``, ``episodes_requested``,
    ``episodes_recorded``, ``tasks``, ``suites``, ``overall``, ``latency``, ``episodes``, and for an instruction
    sweep ``variants`` (task -> variant -> results and paired counts; see :func:`_variants`). In a sweep, ``tasks``
    pools every variant of the task; ``agent_usage`` when any episode has a transcript.
    Raises RollbenchError only when ``run_dir`` is not a run directory at all.
    """
    run_dir = Path(run_dir)
    log = load_run_log(run_dir)
    violations: list[str] = link_violations(run_dir)  # files behind a link leading outside are not read
    con = _connection()
    try:
        return _grade(run_dir, log, violations, con, check_videos)
    finally:
        con.close()


def _grade(
    run_dir: Path, log: dict[str, Any], violations: list[str], con: duckdb.DuckDBPyConnection, check_videos: bool
) -> dict[str, Any]:
    planned = {ep["episode_index"]: ep for ep in log["plan"]["episodes"]}
    hold = int(log.get("spec", {}).get("success_hold", 1))
    requested = len(planned)
    meta_files = parquet_files(run_dir, "meta/episodes/chunk-*/file-*.parquet")
    data_files = parquet_files(run_dir, "data/chunk-*/file-*.parquet")
    con.execute("SET parquet_can_have_nan = true")  # see _percentiles
    meta_files = _load_or_report(con, "episodes", meta_files, "*", violations)
    data_files = _load_or_report(con, "steps", data_files, STEP_COLUMNS, violations)
    meta = _query(con, "SELECT * FROM episodes ORDER BY episode_index") if meta_files else []
    if meta and (lacking := missing_episode_columns(list(meta[0]))):
        violations.append(f"the episode rows (meta/episodes) lack the columns {lacking}; no episode can be graded")
        meta = []
    per_episode = """SELECT episode_index, count(*) FILTER (WHERE NOT pad) AS steps, count(*) AS rows,
                      count(*) FILTER (WHERE pad) AS pads, sum("next.reward") AS ret,
                      list("next.success" ORDER BY frame_index) AS successes,
                      min(frame_index) AS f0, max(frame_index) AS f1, min("index") AS i0, max("index") AS i1,
                      count(DISTINCT "index" - frame_index) AS offsets, count(DISTINCT task_index) AS n_task_index,
                      sum(CASE WHEN "next.done" THEN 1 ELSE 0 END) AS dones,
                      min(frame_index) FILTER (WHERE "next.done") AS first_done
               FROM steps GROUP BY episode_index"""
    data = {r["episode_index"]: r for r in (_query(con, per_episode) if data_files else [])}
    info = read_info(run_dir, violations)

    seen: dict[int, int] = {}
    for m in meta:
        seen[m["episode_index"]] = seen.get(m["episode_index"], 0) + 1
    for e, count in sorted(seen.items()):
        if count > 1:
            violations.append(f"episode {e} is recorded {count} times")
        if e not in planned:
            violations.append(f"episode {e} is recorded but was never planned (indices must be 0..{requested - 1})")
    missing = sorted(set(planned) - set(seen))
    extra_data = sorted(set(data) - set(seen))
    if extra_data:
        violations.append(f"data rows exist for episodes without an episode record: {extra_data}")
    recorded = len(seen)  # distinct episode rows (info.json counts each committed episode once)
    if info and info.get("total_episodes") != recorded:
        violations.append(
            f"meta/info.json says total_episodes={info.get('total_episodes')} but {recorded} episodes are recorded"
        )
    total_rows = sum(int(d["rows"]) for d in data.values())
    if info and info.get("total_frames") != total_rows:
        violations.append(
            f"meta/info.json says total_frames={info.get('total_frames')} but the data files hold {total_rows} rows"
        )

    video_keys = [k for k, v in info.get("features", {}).items() if v.get("dtype") == "video"]
    episodes: list[dict[str, Any]] = []
    graded: set[int] = set()
    for m in meta:
        e = m["episode_index"]
        if e in graded or e not in planned:
            continue  # a duplicate or unplanned row is a violation above and never counts (nor inflates a task)
        graded.add(e)
        plan_ep = planned[e]
        d = data.get(e)
        rows = int(d["rows"]) if d else 0  # LeRobot frames: the steps, or the one padding frame
        length = int(d["steps"]) if d else 0  # steps executed
        if m["length"] != rows:
            violations.append(f"episode {e}: episode record says length {m['length']} but data holds {rows} rows")
        if d and d["pads"] and (length or d["pads"] != 1 or m["rollbench/termination_reason"] != "error"):
            violations.append(
                f"episode {e}: {d['pads']} rows with a NaN action; only an errored episode without steps may have "
                "one (its padding frame)"
            )
        if m.get("rollbench/steps") is not None and m["rollbench/steps"] != length:
            violations.append(f"episode {e}: episode record says {m['rollbench/steps']} steps but data holds {length}")
        if d:
            if (d["f0"], d["f1"]) != (0, rows - 1):
                violations.append(f"episode {e}: frame_index is not 0..{rows - 1}")
            if d["offsets"] != 1 or d["i0"] != m["dataset_from_index"] or d["i1"] != m["dataset_to_index"] - 1:
                violations.append(f"episode {e}: global index is not dataset_from_index + frame_index")
            if d["n_task_index"] != 1:
                violations.append(f"episode {e}: expected one task_index, found {d['n_task_index']}")
            if d["dones"] == 0:
                violations.append(f"episode {e}: no row has next.done (its last frame {rows - 1} must)")
            elif d["first_done"] != rows - 1 or d["dones"] != 1:
                violations.append(
                    f"episode {e}: next.done is true on frame {d['first_done']}, but only the last frame "
                    f"({rows - 1}) may be done"
                )
        for key in ("task", "seed", "initial_state", "success_rule", "max_steps", "instruction", "variant"):
            if plan_ep and m.get(f"rollbench/{key}") != plan_ep.get(key):
                violations.append(
                    f"episode {e}: recorded {key} {m.get(f'rollbench/{key}')!r} differs from the "
                    f"planned {plan_ep.get(key)!r}"
                )
        rule = m["rollbench/success_rule"]
        reason = m["rollbench/termination_reason"]
        reached = d is not None and held_success(d["successes"], hold, rule == "final_step")
        success = reached and reason != "error" and not m["rollbench/success_at_reset"]
        if success != m["rollbench/success"]:
            violations.append(
                f"episode {e}: recorded success={m['rollbench/success']} but its step data gives "
                f"{success} under the {rule} rule" + (f" with success held {hold} steps" if hold > 1 else "")
            )
        if length > m["rollbench/max_steps"]:
            violations.append(f"episode {e}: {length} steps exceed its horizon of {m['rollbench/max_steps']}")
        if check_videos and rows:
            for key in video_keys:
                if (why := video_violation(run_dir, info, m, key, rows)) is not None:
                    violations.append(why)
        episodes.append(
            {
                "episode_index": e,
                "task": m["rollbench/task"],
                "trial": m["rollbench/trial"],
                "seed": m["rollbench/seed"],
                "initial_state": m["rollbench/initial_state"],
                "instruction": m.get("rollbench/instruction"),
                # an instruction variant the run declared (episode row column, else the plan), None when canonical
                "variant": m.get("rollbench/variant", plan_ep.get("variant")),
                "success": success,
                "success_at_reset": bool(m["rollbench/success_at_reset"]),
                "length": length,
                "return": float(d["ret"]) if d else 0.0,
                "termination_reason": reason,
                "error": m["rollbench/error"],
                "error_fault": _fault(m) if reason == "error" else None,
                "render_fault": m["rollbench/render_fault"],
                "transcript": m.get("rollbench/transcript"),
            }
        )
        if m.get("rollbench/transcript"):
            usage = check_transcript(run_dir, m["rollbench/transcript"], episodes[-1], violations)
            if usage is not None:
                episodes[-1]["agent_usage"] = usage
    result = _summarise(log, episodes, requested, missing, violations, _percentiles(con, bool(data_files)))
    if any("agent_usage" in e for e in episodes):
        with_usage = [e for e in episodes if "agent_usage" in e]
        result["agent_usage"] = {
            "overall": sum_totals([e["agent_usage"] for e in with_usage]),
            "by_task": {
                t: sum_totals([e["agent_usage"] for e in with_usage if e["task"] == t])
                for t in sorted({e["task"] for e in with_usage})
            },
        }
    result["timing"] = run_timing(log, [m.get("rollbench/wall_time_s") for m in meta if m["episode_index"] in graded])
    return result


def _fault(meta_row: dict[str, Any]) -> str:
    """An errored episode's fault; ``unclassified`` for runs recorded before ``rollbench/error_fault`` existed."""
    fault = meta_row.get("rollbench/error_fault")
    return fault if fault in FAULTS else "unclassified"


def errors_by_fault(eps: list[dict[str, Any]]) -> dict[str, int]:
    """Errored episodes per fault: every fault of :data:`rollbench.types.FAULTS` (0 if none), plus ``unclassified``
    when there are any."""
    counts = dict.fromkeys(FAULTS, 0)
    for e in eps:
        if e["termination_reason"] == "error":
            counts[e["error_fault"]] = counts.get(e["error_fault"], 0) + 1
    return counts


def _task_block(eps: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(eps)
    s = sum(1 for e in eps if e["success"])
    lo, hi = wilson_interval(s, n)
    # lengths and returns are over the episodes that ran: an episode that errored before its first step has none
    ran = [e for e in eps if e["length"] or e["termination_reason"] != "error"]
    k = len(ran)
    lengths = sorted(e["length"] for e in ran)
    reasons: dict[str, int] = {}
    for e in eps:
        reasons[e["termination_reason"]] = reasons.get(e["termination_reason"], 0) + 1
    median = (lengths[(k - 1) // 2] + lengths[k // 2]) / 2 if k else None
    return {
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else None,
        "ci95_low": lo,
        "ci95_high": hi,
        "episodes_ran": k,
        "mean_length": sum(lengths) / k if k else None,
        "median_length": median,
        "mean_return": sum(e["return"] for e in ran) / k if k else None,
        "errors": reasons.get("error", 0),
        "errors_by_fault": errors_by_fault(eps),
        "success_at_reset": sum(1 for e in eps if e["success_at_reset"]),
        "termination_reasons": dict(sorted(reasons.items())),
    }


def _summarise(
    log: dict[str, Any],
    episodes: list[dict[str, Any]],
    requested: int,
    missing: list[int],
    violations: list[str],
    latency: dict[str, Any],
) -> dict[str, Any]:
    task_names = [t["name"] for t in log["plan"]["tasks"]]
    tasks = {t: _task_block([e for e in episodes if e["task"] == t]) for t in task_names}
    suites = {name: _overall({t: tasks[t] for t in members}) for name, members in log["plan"].get("suites", {}).items()}
    errored = [e for e in episodes if e["termination_reason"] == "error"]
    reasons: list[str] = []
    if missing:
        shown = ", ".join(map(str, missing[:20])) + (" ..." if len(missing) > 20 else "")
        reasons.append(f"{len(missing)} of {requested} requested episodes are not recorded (episodes {shown})")
    for e in errored[:20]:
        reasons.append(
            f"episode {e['episode_index']} ({e['task']}, seed {e['seed']}) ended in error "
            f"({e['error_fault']} fault): {e['error']}"
        )
    if len(errored) > 20:
        reasons.append(f"... and {len(errored) - 20} more episodes ended in error")
    by_fault = errors_by_fault(errored)
    if errored:
        reasons.append("errors by fault: " + ", ".join(f"{n} {fault}" for fault, n in by_fault.items() if n))
    if by_fault["infrastructure"]:
        reasons.append(
            f"{by_fault['infrastructure']} episode(s) failed through no fault of the policy (infrastructure: server "
            "unreachable, disconnect, timeout, worker death, env build); re-running the same command re-runs them"
        )
    for e in episodes:
        if e["success_at_reset"]:
            reasons.append(f"episode {e['episode_index']} was already successful at reset (not counted as success)")
        if e["render_fault"]:
            reasons.append(f"episode {e['episode_index']} has a render fault: {e['render_fault']}")
    reasons.extend(violations)
    completed = len(episodes) - len(errored)
    if completed == 0:
        status = "FAILED"
    elif missing or errored or violations:
        status = "PARTIAL"
    else:
        status = "OK"
    if status == "FAILED" and not reasons:
        reasons.append("no episode was recorded")
    result = {
        "status": status,
        "reasons": reasons,
        "violations": violations,
        "episodes_requested": requested,
        "episodes_recorded": len(episodes),
        "tasks": tasks,
        "suites": suites,
        "overall": _overall(tasks),
        "latency": latency,
        "episodes": episodes,
    }
    if any(ep.get("variant") is not None for ep in log["plan"]["episodes"]):
        result["variants"] = _variants(log["plan"]["episodes"], episodes)
    return result


def _variants(planned: list[dict[str, Any]], episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Instruction sweeps: task -> variant (plan order; the first is the reference) -> the task block of its
    recorded episodes, its ``instruction``, and ``paired``: counts over trials recorded for both it and the
    reference (same seed and initial state): ``pairs``, ``both``, ``reference_only``, ``variant_only``, ``neither``.
    Counts only; tests on them (McNemar) are :mod:`rollbench.analysis`'s."""
    out: dict[str, Any] = {}
    for p in planned:
        out.setdefault(p["task"], {}).setdefault(p["variant"], p["instruction"])
    blocks: dict[str, Any] = {}
    for task, variants in out.items():
        names = list(variants)
        won = {
            v: {e["trial"]: e["success"] for e in episodes if e["task"] == task and e["variant"] == v} for v in names
        }
        ref = won[names[0]]
        blocks[task] = {}
        for v in names:
            trials = sorted(set(ref) & set(won[v]))
            pairs = [(ref[k], won[v][k]) for k in trials]
            blocks[task][v] = {
                "instruction": variants[v],
                **_task_block([e for e in episodes if e["task"] == task and e["variant"] == v]),
                "paired": {
                    "reference": names[0],
                    "pairs": len(pairs),
                    "both": sum(1 for a, b in pairs if a and b),
                    "reference_only": sum(1 for a, b in pairs if a and not b),
                    "variant_only": sum(1 for a, b in pairs if b and not a),
                    "neither": sum(1 for a, b in pairs if not a and not b),
                },
            }
    return blocks


def _overall(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pooled count over all episodes and the unweighted mean of per-task success rates, labelled as such."""
    n = sum(t["episodes"] for t in tasks.values())
    s = sum(t["successes"] for t in tasks.values())
    rates = [t["success_rate"] for t in tasks.values() if t["success_rate"] is not None]
    lo, hi = wilson_interval(s, n)
    faults: dict[str, int] = {}
    for t in tasks.values():
        for fault, k in t["errors_by_fault"].items():
            faults[fault] = faults.get(fault, 0) + k
    return {
        "tasks": len(tasks),
        "episodes": n,
        "successes": s,
        "errors": sum(t["errors"] for t in tasks.values()),
        "errors_by_fault": faults,
        "pooled_success_rate": s / n if n else None,
        "pooled_ci95_low": lo,
        "pooled_ci95_high": hi,
        "mean_task_success_rate": sum(rates) / len(rates) if rates else None,
    }
