"""A sequential arm stopped by its rule (issue 40, item 5): the episodes after the pair that decided were planned as
the budget's upper bound, never needed, so their absence does not make the arm PARTIAL.

An arm of ``rollbench sequential`` records in run.json's ``sequential`` block the ``decision`` of its test and
``stopped_at`` (the pairs at the look that decided). Pair ``k`` (1-based) is planned episode ``k - 1`` of the arm, so
the episodes a decision needed are ``0 .. stopped_at - 1``. Grade's status rule is unchanged for those: a missing
(lost) one, an errored one or any violation still makes the arm PARTIAL or FAILED (:mod:`rollbench.grading.summary`).

A checkpoint's run of ``rollbench checkpoints --eliminate`` is stopped the same way: run.json's ``elimination`` block
records the look at which the rule ended for it (the look that eliminated it, or the final look for the chosen and
kept ones) and its ``trials``; the episodes it needed are ``0 .. trials - 1``.
"""

from __future__ import annotations

from rollbench.core.runlog_model import RunLog

DECISION_LABELS: dict[str, str] = {
    "b_better": "B better",
    "a_better": "A better",
    "futility": "futility (no difference of delta)",
    "budget_exhausted": "budget exhausted",
    "insufficient_coverage": "insufficient coverage",
}


def sequential_stop(log: RunLog) -> tuple[int, str] | None:
    """``(stopped_at, decision)`` when run.json's ``sequential`` block records a decision made at pair
    ``stopped_at`` (>= 1); None for any other run (no block, or no decision yet)."""
    block = log.sequential
    if block is None or block.decision is None or block.stopped_at is None:
        return None
    return block.stopped_at, block.decision


def _needed(log: RunLog) -> tuple[int, str] | None:
    """``(episodes the stop needed, its words)`` for a sequential arm stopped by its rule or a checkpoint run stopped
    by the elimination, else None."""
    stop = sequential_stop(log)
    if stop is not None:
        at, decision = stop
        return at, f"stopped by the sequential rule at pair {at}: {DECISION_LABELS.get(decision, decision)}"
    e = log.elimination
    if e is not None:
        return e.trials, f"stopped by the checkpoint elimination at look {e.look} ({e.trials} episodes): {e.decision}"
    return None


def split_missing(missing: list[int], log: RunLog) -> tuple[list[int], list[int]]:
    """``(lost, not_needed)``: the planned episodes not recorded that the run needed, and those after a sequential
    or elimination stop (none for a run that was not stopped by a rule)."""
    stop = _needed(log)
    if stop is None:
        return list(missing), []
    return [e for e in missing if e < stop[0]], [e for e in missing if e >= stop[0]]


def stop_reason(log: RunLog, not_needed: int) -> str | None:
    """``"stopped by the sequential rule at pair k: B better"`` or ``"stopped by the checkpoint elimination at look
    L (N episodes): eliminated|chosen|kept"`` (with how many planned episodes it left unrun) for a run stopped by its
    rule, else None."""
    stop = _needed(log)
    if stop is None:
        return None
    return stop[1] + (f" ({not_needed} planned episodes after it were not needed)" if not_needed else "")


def listed_status(log: RunLog) -> str:
    """The status ``rollbench runs`` and MCP ``list_runs`` show for a run from its run.json alone (no regrade): the
    recorded ``results`` re-judged for a sequential stop (OK when the only shortfall is the episodes after the
    stop: a run recorded before ``rollbench.api.record_stop`` regraded it with its decision stored the grade made
    before it), else run.json's ``status``."""
    results = log.results
    if log.status != "PARTIAL" or _needed(log) is None or results is None:
        return log.status
    recorded = {e.episode_index for e in results.episodes}
    lost, _ = split_missing(sorted({ep.episode_index for ep in log.plan.episodes} - recorded), log)
    errored = any(e.termination_reason == "error" for e in results.episodes)
    return "OK" if not (lost or errored or results.violations) else log.status
