"""A sequential arm stopped by its rule (issue 40, item 5): the episodes after the pair that decided were planned as
the budget's upper bound, never needed, so their absence does not make the arm PARTIAL.

An arm of ``rollbench sequential`` records in run.json's ``sequential`` block the ``decision`` of its test and
``stopped_at`` (the pairs at the look that decided). Pair ``k`` (1-based) is planned episode ``k - 1`` of the arm, so
the episodes a decision needed are ``0 .. stopped_at - 1``. Grade's status rule is unchanged for those: a missing
(lost) one, an errored one or any violation still makes the arm PARTIAL or FAILED (:mod:`rollbench.grading.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DECISION_LABELS: dict[str, str] = {
    "b_better": "B better",
    "a_better": "A better",
    "futility": "futility (no difference of delta)",
    "budget_exhausted": "budget exhausted",
    "insufficient_coverage": "insufficient coverage",
}


def sequential_stop(log: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(stopped_at, decision)`` when run.json's ``sequential`` block records a decision made at pair
    ``stopped_at`` (>= 1); None for any other run (no block, no decision yet, or a malformed block)."""
    block = log.get("sequential")
    if not isinstance(block, Mapping):
        return None
    decision, at = block.get("decision"), block.get("stopped_at")
    if not isinstance(decision, str) or type(at) is not int or at < 1:
        return None
    return at, decision


def split_missing(missing: list[int], log: Mapping[str, Any]) -> tuple[list[int], list[int]]:
    """``(lost, not_needed)``: the planned episodes not recorded that the run needed, and those after a sequential
    stop (none for a run that is not a stopped sequential arm)."""
    stop = sequential_stop(log)
    if stop is None:
        return list(missing), []
    return [e for e in missing if e < stop[0]], [e for e in missing if e >= stop[0]]


def stop_reason(log: Mapping[str, Any], not_needed: int) -> str | None:
    """``"stopped by the sequential rule at pair k: B better"`` (with how many planned episodes it left unrun) for
    a stopped sequential arm, else None."""
    stop = sequential_stop(log)
    if stop is None:
        return None
    at, decision = stop
    text = f"stopped by the sequential rule at pair {at}: {DECISION_LABELS.get(decision, decision)}"
    return text + (f" ({not_needed} planned episodes after it were not needed)" if not_needed else "")


def listed_status(log: Mapping[str, Any]) -> str | None:
    """The status ``rollbench runs`` and the dashboard show for a run from its run.json alone (no regrade): the
    recorded ``results`` re-judged for a sequential stop (OK when the only shortfall is the episodes after the
    stop), else run.json's ``status``. None when run.json has no status."""
    status = log.get("status")
    results = log.get("results")
    if status != "PARTIAL" or sequential_stop(log) is None or not isinstance(results, Mapping):
        return status if isinstance(status, str) else None
    planned = {ep.get("episode_index") for ep in (log.get("plan") or {}).get("episodes", [])}
    episodes = results.get("episodes") or []
    recorded = {e.get("episode_index") for e in episodes if isinstance(e, Mapping)}
    lost, _ = split_missing(sorted(i for i in planned - recorded if isinstance(i, int)), log)
    errored = any(isinstance(e, Mapping) and e.get("termination_reason") == "error" for e in episodes)
    return "OK" if not (lost or errored or results.get("violations")) else status
