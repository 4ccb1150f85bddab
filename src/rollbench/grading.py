"""Grade a run directory from its files alone: every reported number, plus invariant checks.

Pure: reads ``run.json`` (for what was *requested*: the spec and the plan) and the LeRobot files (for what
*happened*), writes nothing. Per-episode numbers come from the per-step rows via DuckDB:

* length = number of rows; return = sum of ``next.reward``;
* success = ``bool_or(next.success)`` for the ``any_step`` rule, the last row's ``next.success`` for ``final_step``,
  and never for an episode that errored or was already successful at reset;
* success rate per task = successes / recorded episodes (errored episodes count as failures; status says so),
  with the 95% Wilson score interval (Wilson 1927; z = 1.959964).

LLM agent runs (episodes with a ``rollbench/transcript``): ``agent_usage`` gives model calls, tokens and cost
(``overall`` and ``by_task``) summed from the transcripts' ``call`` lines; an unreadable transcript, or one whose
stated totals or termination reason disagree with its lines or the episode row, is a violation.

Status: ``OK`` only when every requested episode is recorded, none errored and no invariant is violated;
``FAILED`` when no episode completed without error; otherwise ``PARTIAL``. ``reasons`` says why, in words.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from rollbench.record.transcript import check_transcript, sum_totals
from rollbench.types import RollbenchError

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion; ``(0.0, 1.0)`` when n == 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _sql_glob(path: Path) -> str:
    return str(path).replace("'", "''")


def _readable(files: list[Path], violations: list[str]) -> list[Path]:
    ok = []
    for f in files:
        try:
            pq.ParquetFile(f).metadata  # noqa: B018 - reading the footer is the check
            ok.append(f)
        except Exception as exc:
            violations.append(f"file {f} is unreadable ({type(exc).__name__}: {exc})")
    return ok


STEP_COLUMNS = (
    'episode_index, frame_index, "index", task_index, "next.reward", "next.success", "next.done", "policy.latency_s"'
)


def _load(con: duckdb.DuckDBPyConnection, table: str, files: list[Path], columns: str = "*") -> None:
    """Read ``files`` once into the temporary table ``table`` (an empty table when there are none)."""
    if files:
        listing = ", ".join(f"'{_sql_glob(f)}'" for f in files)
        con.execute(f"CREATE TEMP TABLE {table} AS SELECT {columns} FROM read_parquet([{listing}], union_by_name=true)")
    else:
        con.execute(f"CREATE TEMP TABLE {table} (episode_index BIGINT)")


def _query(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.sql(sql)
    cols = rel.columns
    return [dict(zip(cols, row, strict=True)) for row in rel.fetchall()]


def load_run_log(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.exists():
        raise RollbenchError(f"{run_dir} is not a rollbench run directory (no run.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RollbenchError(f"{path} is not valid JSON: {exc}") from None


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
    rows = _query(con, f"SELECT {stats} FROM steps") if has_steps else []
    out = block(rows[0] if rows else empty)
    by_task = []
    if has_steps:
        by_task = _query(
            con,
            f"""SELECT m.task, {stats} FROM steps
                JOIN (SELECT DISTINCT episode_index, "rollbench/task" AS task FROM episodes) m
                USING (episode_index) GROUP BY m.task ORDER BY m.task""",
        )
    out["by_task"] = {r["task"]: block(r) for r in by_task}
    return out


def grade(run_dir: str | Path, *, check_videos: bool = True) -> dict[str, Any]:
    """Recompute a run's results from ``run_dir`` and check its invariants. See the module docstring.

    Returns the ``grade --json`` document: ``status``, ``reasons``, ``violations``, ``episodes_requested``,
    ``episodes_recorded``, ``tasks``, ``suites``, ``overall``, ``latency``, ``episodes``; ``agent_usage`` when
    any episode has a transcript.
    Raises RollbenchError only when ``run_dir`` is not a run directory at all.
    """
    run_dir = Path(run_dir)
    log = load_run_log(run_dir)
    planned = {ep["episode_index"]: ep for ep in log["plan"]["episodes"]}
    requested = len(planned)
    violations: list[str] = []
    con = duckdb.connect()
    meta_files = _readable(sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet")), violations)
    data_files = _readable(sorted(run_dir.glob("data/chunk-*/file-*.parquet")), violations)
    con.execute("SET parquet_can_have_nan = true")  # see _percentiles
    _load(con, "episodes", meta_files)
    _load(con, "steps", data_files, STEP_COLUMNS)
    meta = _query(con, "SELECT * FROM episodes ORDER BY episode_index") if meta_files else []
    per_episode = """SELECT episode_index, count(*) AS rows, sum("next.reward") AS ret,
                      bool_or("next.success") AS any_success, arg_max("next.success", frame_index) AS last_success,
                      min(frame_index) AS f0, max(frame_index) AS f1, min("index") AS i0, max("index") AS i1,
                      count(DISTINCT "index" - frame_index) AS offsets, count(DISTINCT task_index) AS n_task_index,
                      sum(CASE WHEN "next.done" THEN 1 ELSE 0 END) AS dones
               FROM steps GROUP BY episode_index"""
    data = {r["episode_index"]: r for r in (_query(con, per_episode) if data_files else [])}
    info_path = run_dir / "meta" / "info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    if not info:
        violations.append("meta/info.json is missing")

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
    recorded = len(seen)
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
    for m in meta:
        e = m["episode_index"]
        plan_ep = planned.get(e, {})
        d = data.get(e)
        length = int(d["rows"]) if d else 0
        if m["length"] != length:
            violations.append(f"episode {e}: episode record says length {m['length']} but data holds {length} rows")
        if d:
            if (d["f0"], d["f1"]) != (0, length - 1):
                violations.append(f"episode {e}: frame_index is not 0..{length - 1}")
            if d["offsets"] != 1 or d["i0"] != m["dataset_from_index"] or d["i1"] != m["dataset_to_index"] - 1:
                violations.append(f"episode {e}: global index is not dataset_from_index + frame_index")
            if d["n_task_index"] != 1 or d["dones"] != 1:
                violations.append(f"episode {e}: expected one task_index and exactly one next.done row")
        for key in ("task", "seed", "initial_state", "success_rule", "max_steps"):
            if plan_ep and m[f"rollbench/{key}"] != plan_ep.get(key):
                violations.append(
                    f"episode {e}: recorded {key} {m[f'rollbench/{key}']!r} differs from the "
                    f"planned {plan_ep.get(key)!r}"
                )
        rule = m["rollbench/success_rule"]
        reason = m["rollbench/termination_reason"]
        reached = bool(d and (d["last_success"] if rule == "final_step" else d["any_success"]))
        success = reached and reason != "error" and not m["rollbench/success_at_reset"]
        if success != m["rollbench/success"]:
            violations.append(
                f"episode {e}: recorded success={m['rollbench/success']} but its step data gives "
                f"{success} under the {rule} rule"
            )
        if length > m["rollbench/max_steps"]:
            violations.append(f"episode {e}: {length} steps exceed its horizon of {m['rollbench/max_steps']}")
        if check_videos and length:
            for key in video_keys:
                if m.get(f"videos/{key}/file_index") is None:
                    violations.append(f"episode {e}: no video for {key}")
                    continue
                vpath = run_dir / info["video_path"].format(
                    video_key=key,
                    chunk_index=m[f"videos/{key}/chunk_index"],
                    file_index=m[f"videos/{key}/file_index"],
                )
                frames = _video_frames(vpath)
                if frames != length:
                    violations.append(f"episode {e}: video {key} has {frames} frames for {length} steps")
        episodes.append(
            {
                "episode_index": e,
                "task": m["rollbench/task"],
                "trial": m["rollbench/trial"],
                "seed": m["rollbench/seed"],
                "initial_state": m["rollbench/initial_state"],
                "success": success,
                "success_at_reset": bool(m["rollbench/success_at_reset"]),
                "length": length,
                "return": float(d["ret"]) if d else 0.0,
                "termination_reason": reason,
                "error": m["rollbench/error"],
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
    return result


def _video_frames(path: Path) -> int:
    from rollbench.record.files import count_video_frames

    try:
        return count_video_frames(path)
    except Exception:
        return -1


def _task_block(eps: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(eps)
    s = sum(1 for e in eps if e["success"])
    lo, hi = wilson_interval(s, n)
    lengths = sorted(e["length"] for e in eps)
    reasons: dict[str, int] = {}
    for e in eps:
        reasons[e["termination_reason"]] = reasons.get(e["termination_reason"], 0) + 1
    median = (lengths[(n - 1) // 2] + lengths[n // 2]) / 2 if n else None
    return {
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else None,
        "ci95_low": lo,
        "ci95_high": hi,
        "mean_length": sum(lengths) / n if n else None,
        "median_length": median,
        "errors": reasons.get("error", 0),
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
        reasons.append(f"episode {e['episode_index']} ({e['task']}, seed {e['seed']}) ended in error: {e['error']}")
    if len(errored) > 20:
        reasons.append(f"... and {len(errored) - 20} more episodes ended in error")
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
    return {
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


def _overall(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pooled count over all episodes and the unweighted mean of per-task success rates, labelled as such."""
    n = sum(t["episodes"] for t in tasks.values())
    s = sum(t["successes"] for t in tasks.values())
    rates = [t["success_rate"] for t in tasks.values() if t["success_rate"] is not None]
    lo, hi = wilson_interval(s, n)
    return {
        "tasks": len(tasks),
        "episodes": n,
        "successes": s,
        "pooled_success_rate": s / n if n else None,
        "pooled_ci95_low": lo,
        "pooled_ci95_high": hi,
        "mean_task_success_rate": sum(rates) / len(rates) if rates else None,
    }
