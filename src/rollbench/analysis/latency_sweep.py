"""Latency sweeps: run directories whose specs differ only in ``--latency`` (and ``--stale``, which only a run with a
latency has), read as one curve of success rate against the simulated delay per policy call.

Grouping: two runs belong to one sweep when their recorded specs (run.json ``spec``) are equal once ``latency`` and
``stale`` are left out, and the runs with a latency share one ``stale`` rule; a ``--latency none`` run joins every
sweep of its group (its point is the delay 0 baseline). A sweep needs two runs or more and at least one with a latency.

Each point is one run: its pooled success rate with the 95% Wilson interval, both from grade (``overall``), and
``delay_ms``: the delay of every call in control steps (:func:`rollbench.core.latency.fixed_delay`) times
``1000 / fps``, so ``fixed:MS`` is drawn at the delay the run really had (``ceil(MS x fps / 1000)`` steps); a
``measured`` run is drawn at its mean measured call latency (``latency.mean_s``); ``none`` at 0. ``hold_share`` and
``mean_delay_steps`` come from grade's ``delay`` block (:mod:`rollbench.grading.delay`).
"""

from __future__ import annotations

import json
from typing import Any

from rollbench.analysis.sources import RunData
from rollbench.core.latency import fixed_delay
from rollbench.core.runlog_model import RunLog
from rollbench.core.spec import EvalSpec

_IGNORED = ("latency", "stale")


def _point(run: RunData) -> dict[str, Any] | None:
    if run.log is None or run.result is None:
        return None
    result, spec, tasks = run.result, run.log.spec, run.log.plan.tasks
    overall = result.overall
    if not tasks:
        return None
    fps = int(tasks[0].fps)
    latency = spec.latency
    steps = 0 if latency == "none" else fixed_delay(latency, fps)
    if steps is not None:
        delay_ms: float | None = steps * 1000 / fps
    else:  # measured: the mean of the recorded call latencies
        mean_s = result.latency.mean_s
        delay_ms = mean_s * 1000 if mean_s is not None else None
    delay = result.delay
    return {
        "run": run.key,
        "latency": latency,
        "stale": spec.stale if latency != "none" else None,
        "delay_steps": steps,
        "delay_ms": delay_ms,
        "episodes": overall.episodes,
        "successes": overall.successes,
        "success_rate": overall.pooled_success_rate,
        "ci95_low": overall.pooled_ci95_low,
        "ci95_high": overall.pooled_ci95_high,
        "hold_share": delay.hold_share if delay is not None else (0.0 if latency == "none" else None),
        "mean_delay_steps": delay.mean_delay_steps if delay is not None else None,
    }


def _log(run: RunData) -> RunLog:
    assert run.log is not None  # latency_sweeps groups run directories only
    return run.log


def _spec(run: RunData) -> EvalSpec:
    return _log(run).spec


def latency_sweeps(runs: list[RunData]) -> list[dict[str, Any]]:
    """The sweeps among ``runs`` (run directories; exports have no spec and are left out), each ``{"policy",
    "env", "stale", "fps", "points": [...]}`` with points sorted by ``delay_ms`` (see the module docstring)."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        if run.run_dir is None or run.log is None:
            continue
        spec = run.log.to_json()["spec"]  # as run.json holds it
        key = json.dumps({k: v for k, v in spec.items() if k not in _IGNORED}, sort_keys=True)
        groups.setdefault(key, []).append(run)
    sweeps = []
    for members in groups.values():
        base = [r for r in members if _spec(r).latency == "none"]
        by_stale: dict[str, list[RunData]] = {}
        for r in members:
            if _spec(r).latency != "none":
                by_stale.setdefault(_spec(r).stale, []).append(r)
        for stale, timed in sorted(by_stale.items()):
            points = [p for r in [*base, *timed] if (p := _point(r)) is not None]
            if len(points) < 2:
                continue
            points.sort(key=lambda p: (p["delay_ms"] is None, p["delay_ms"] or 0.0, p["latency"]))
            first = _spec(timed[0])
            fps = int(_log(timed[0]).plan.tasks[0].fps)
            sweeps.append({"policy": first.policy, "env": first.env, "stale": stale, "fps": fps, "points": points})
    return sweeps
