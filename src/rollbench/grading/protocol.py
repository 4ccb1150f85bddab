"""The benchmark protocol of a recorded task: the settings that change what an episode is or what success means, so
that two sets of episodes recorded under different values measure different things.

One check (:func:`protocol_difference`, worded by :func:`protocol_problem`) decides for every analysis that puts
episodes side by side: ``compare`` (paired or not; ``report``'s comparisons), ``compare --sequential``'s recompute,
``robustness`` (a perturbed task against its control), the ranking of ``checkpoints`` and the cells of ``summarize``
and ``report``. The fields (run.json; docs/analysis.md "Protocol"):

- ``horizon``: ``plan.tasks[].max_steps`` (``--max-steps``, else the task's own), env steps;
- ``success rule``: ``plan.tasks[].success_rule`` (``--success-rule``, else the task's declared rule);
- ``success hold``: ``spec.success_hold`` (``--success-hold K``), consecutive steps;
- ``settle steps``: ``plan.tasks[].settle_steps`` (the task's own), env steps before the policy acts;
- ``image size``: ``spec.image_size`` (``--image-size``), else the task's declared size (looked up in the installed
  family; ``the task's own`` when the family is not installed), ``HxW`` pixels;
- ``fast render``: ``spec.fast_render`` (what the env draws);
- ``latency`` and ``stale``: ``spec.latency``, ``spec.stale`` (the world keeps stepping during a policy call).

The instruction is not a protocol field: it is part of each episode's key (compare pairs by it, summarize keys its
cells by its text). What may differ: the policy and everything that is the policy's own (``policy``,
``policy_options``, ``replan_every``, ``cameras`` it reads, ``action_noise`` on its actions, labelled in the model
name), which episodes ran (``episodes``, ``seed``, ``first_trial``, ``trial_order_seed``: judged episode by
episode), and how the run was executed or recorded (``video``, ``policy_timeout_s``, workers). An export of the
dashboard's ``/api/runs`` records no protocol: nothing is compared for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from rollbench.core.runlog_model import RunLog

PROTOCOL_FIELDS: tuple[str, ...] = (
    "horizon",
    "success rule",
    "success hold",
    "settle steps",
    "image size",
    "fast render",
    "latency",
    "stale",
)


@cache
def _declared_size(task: str) -> str:
    try:
        from rollbench.core.registry import resolve_remote_tasks  # a recorded name never imports

        h, w = resolve_remote_tasks(task)[0].image_size
    except Exception:  # a family not installed here, or a task no longer known: the size is not guessed
        return "the task's own"
    return f"{h}x{w}"


def task_protocol(log: RunLog, task: str) -> dict[str, Any] | None:
    """The protocol of ``task`` in the run recorded by ``log``: field (:data:`PROTOCOL_FIELDS`) -> value, or None
    when the run's plan holds no such task."""
    planned = next((t for t in log.plan.tasks if t.name == task), None)
    if planned is None:
        return None
    spec = log.spec
    size = f"{spec.image_size[0]}x{spec.image_size[1]}" if spec.image_size else _declared_size(task)
    return {
        "horizon": planned.max_steps,
        "success rule": planned.success_rule,
        "success hold": spec.success_hold,
        "settle steps": planned.settle_steps,
        "image size": size,
        "fast render": spec.fast_render,
        "latency": spec.latency,
        "stale": spec.stale,
    }


def protocol_difference(
    a: RunLog | None, task_a: str, b: RunLog | None, task_b: str | None = None
) -> tuple[str, Any, Any] | None:
    """The first protocol field in which ``task_a`` of run ``a`` and ``task_b`` (default: the same task) of run
    ``b`` differ, as ``(field, value in a, value in b)``; None when they agree or either side has no record (an
    export, a task outside the plan)."""
    pa = task_protocol(a, task_a) if a is not None else None
    pb = task_protocol(b, task_b or task_a) if b is not None else None
    if pa is None or pb is None:
        return None
    return next(((f, pa[f], pb[f]) for f in PROTOCOL_FIELDS if pa[f] != pb[f]), None)


def protocol_problem(
    a_name: str, a: RunLog | None, b_name: str, b: RunLog | None, tasks: list[str] | list[tuple[str, str]]
) -> str | None:
    """``"FIELD differs (task T: A has X, B has Y)"`` for the first of ``tasks`` (names, or ``(task in a, task in b)``
    pairs) whose protocol differs between run ``a`` (called ``a_name``) and run ``b``, else None. The one wording of
    a protocol difference every analysis uses."""
    for item in tasks:
        ta, tb = item if isinstance(item, tuple) else (item, item)
        diff = protocol_difference(a, ta, b, tb)
        if diff is not None:
            field, va, vb = diff
            where = f"task {ta}" if ta == tb else f"tasks {ta} and {tb}"
            return f"{field} differs ({where}: {a_name} has {va}, {b_name} has {vb})"
    return None


def first_conflict(items: Iterable[tuple[str, RunLog | None, str]]) -> tuple[str, str, str] | None:
    """Among ``items`` (``(run name, run log, task)``, e.g. the episodes of one summary cell), the first two runs
    that recorded the same task under different protocols: ``(run a, run b, the protocol_problem wording)``; None
    when every task has one protocol."""
    first: dict[str, tuple[str, RunLog]] = {}
    seen: set[tuple[str, str]] = set()
    for name, log, task in items:
        if log is None or (name, task) in seen:
            continue
        seen.add((name, task))
        if task not in first:
            first[task] = (name, log)
        elif problem := protocol_problem(first[task][0], first[task][1], name, log, [task]):
            return first[task][0], name, problem
    return None
