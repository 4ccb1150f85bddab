"""Grading a run made with ``--latency``: how late the executed actions were and how often the robot held, from the
recorded per-step columns (:data:`rollbench.record.lerobot.DELAY_COLUMNS`).

``delay`` block of ``grade --json`` (only for runs with a latency other than ``none``):

* ``latency``, ``stale``: the spec's; ``call_delay_steps``: the delay ``d`` of every policy call in steps
  (:func:`rollbench.core.latency.fixed_delay`; None for ``measured``);
* ``steps``: steps recorded (padding frames left out); ``hold_steps`` and ``hold_share``: steps that ran the task's
  hold action, and their share of ``steps``;
* ``mean_delay_steps``, ``max_delay_steps``: over steps that ran a policy action, ``frame_index`` minus the frame
  index of the observation the action was computed from (0 for every step of ``--latency none`` with
  ``--replan-every 1``; a chunk's later actions are older);
* ``by_task``: the same per task.

A row that contradicts the rules (a hold row with a source, a policy row whose observation is later than its step or
negative, or a negative chunk index) is a violation.
"""

from __future__ import annotations

from typing import Any

import duckdb

from rollbench.core.grade_model import Delay, DelayStats
from rollbench.core.latency import fixed_delay
from rollbench.core.runlog_model import RunLog
from rollbench.grading.tables import query

DELAY_STEP_COLUMNS = '"policy.obs_frame_index" AS src, "policy.chunk_index" AS chunk_row, "policy.hold" AS hold'
"""Extra columns :mod:`rollbench.grading.grade` loads into its step table for a run with a latency."""

_STATS = """count(*) AS steps, count(*) FILTER (WHERE hold) AS holds,
    avg(frame_index - src) FILTER (WHERE NOT hold) AS mean_delay, max(frame_index - src) FILTER (WHERE NOT hold) AS max_delay,
    count(*) FILTER (WHERE (hold AND (src <> -1 OR chunk_row <> -1))
                        OR (NOT hold AND (src < 0 OR src > frame_index OR chunk_row < 0))) AS bad"""


def _block(r: dict[str, Any]) -> DelayStats:
    steps = int(r["steps"] or 0)
    holds = int(r["holds"] or 0)
    return DelayStats(
        steps=steps,
        hold_steps=holds,
        hold_share=holds / steps if steps else None,
        mean_delay_steps=float(r["mean_delay"]) if r["mean_delay"] is not None else None,
        max_delay_steps=int(r["max_delay"]) if r["max_delay"] is not None else None,
    )


def delay_block(con: duckdb.DuckDBPyConnection, log: RunLog, violations: list[str]) -> Delay | None:
    """The ``delay`` block (see the module docstring) from the ``steps`` and ``episodes`` tables, or None for a run
    without a latency. Contradicting rows are added to ``violations``."""
    spec = log.spec
    latency = spec.latency
    if latency == "none":
        return None
    fps = log.plan.tasks[0].fps if log.plan.tasks else 1
    columns = con.sql("SELECT * FROM steps LIMIT 0").columns
    overall: dict[str, Any] = {"steps": 0, "holds": 0, "mean_delay": None, "max_delay": None, "bad": 0}
    by_task: list[dict[str, Any]] = []
    if "src" in columns:
        overall = query(con, f"SELECT {_STATS} FROM steps WHERE NOT pad")[0]
        if "rollbench/task" in con.sql("SELECT * FROM episodes LIMIT 0").columns:
            by_task = query(
                con,
                f"""SELECT m.task, {_STATS} FROM steps
                    JOIN (SELECT DISTINCT episode_index, "rollbench/task" AS task FROM episodes) m
                    USING (episode_index) WHERE NOT pad GROUP BY m.task ORDER BY m.task""",
            )
    if overall["bad"]:
        violations.append(
            f"{overall['bad']} step row{'s' if overall['bad'] != 1 else ''} "
            f"contradict{'' if overall['bad'] != 1 else 's'} the latency rules (a hold row with a source, or a policy row "
            "whose observation is negative or later than its step, or a negative chunk index)"
        )
    return Delay(
        latency=latency,
        stale=spec.stale,
        call_delay_steps=fixed_delay(latency, fps),
        **_block(overall).model_dump(),
        by_task={r["task"]: _block(r) for r in by_task},
    )
