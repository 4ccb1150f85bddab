"""The ranking of evaluated checkpoints: each one's success rate and 95% interval, each one's paired difference to
the best with a Holm-corrected p-value, and the verdict, all computed from the graded run directories.

Errors follow the coverage rule (:mod:`rollbench.grading.coverage`, docs/analysis.md): environment and
infrastructure errors are left out of rates and pairs, policy errors are failures (unless
``exclude_policy_errors``); when any checkpoint's coverage is below ``min_coverage`` the numbers are still reported
but there is no "best" verdict. Pairs are the planned episodes (same ``episode_index``: same task, seed, initial
state) that both checkpoints scored; the test is the exact McNemar test, two-sided; Holm's correction is over the
K - 1 comparisons with the best (:func:`rollbench.grading.stats.holm`, statsmodels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rollbench.core.grade_model import GradeDocument
from rollbench.grading.coverage import (
    DEFAULT_RULE,
    CoverageRule,
    Outcome,
    coverage_gate,
    outcome_of,
    pair,
    tally,
)
from rollbench.grading.stats import holm, mcnemar_exact, wilson_interval

BEST = "best"  # the best is better than every other checkpoint at alpha (Holm)
TIED = "best_not_separated"  # the highest rate, but some checkpoint is not significantly worse
INSUFFICIENT = "insufficient_coverage"
ONLY = "only_one_evaluated"  # one checkpoint ranked: compared with nothing, so no "best" (hostile round 15, F3)
SAYS = {
    BEST: "best: better than every other checkpoint",
    ONLY: "only checkpoint evaluated; nothing compared",
    TIED: "highest rate, not separated from",
    INSUFFICIENT: "no verdict: insufficient coverage",
}


def outcomes(result: GradeDocument) -> dict[int, Outcome]:
    """``episode_index -> Outcome`` of a graded run (:func:`rollbench.grade`)."""
    return {e.episode_index: outcome_of(e) for e in result.episodes}


def rank(
    runs: Sequence[tuple[int, str, Mapping[int, Outcome]]],
    *,
    alpha: float = 0.05,
    rule: CoverageRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """The ranking document of ``runs`` (``(step, run directory, outcomes)`` per checkpoint, any order).

    Returns ``{"alpha", "rule", "best": step | None, "verdict", "says", "checkpoints": [...]}`` with one row per
    checkpoint in rank order (highest rate first; ties: more successes, then the earlier step): ``step``,
    ``run_dir``, ``coverage`` (the rule's counts), ``success_rate`` (None when nothing was scored),
    ``ci95`` (Wilson), and for all but the best ``paired`` (``pairs``, ``difference`` = this rate minus the best's
    on the pairs, ``p_value``, ``p_holm``, ``worse``: p_holm <= alpha and difference < 0). One checkpoint alone is
    compared with nothing: verdict :data:`ONLY`, no ``best``."""
    rows: list[dict[str, Any]] = []
    for step, run_dir, outs in runs:
        cov = tally(outs.values(), rule)
        rate = cov.success_rate
        low, high = wilson_interval(cov.successes, cov.scored) if cov.scored else (None, None)
        rows.append({"step": step, "run_dir": run_dir, "coverage": cov, "success_rate": rate, "ci95": [low, high]})
    rows.sort(key=lambda r: (-(r["success_rate"] or 0.0), -r["coverage"].successes, r["step"]))
    by_step = {step: outs for step, _, outs in runs}
    doc: dict[str, Any] = {"alpha": alpha, "rule": rule.to_dict(), "best": None, "checkpoints": rows}
    if not rows:
        return {**doc, "verdict": None, "says": "no checkpoint evaluated", "notes": []}
    best = rows[0]
    p_values = []
    for r in rows[1:]:
        r["paired"] = _paired(by_step[best["step"]], by_step[r["step"]], rule)
        p_values.append(r["paired"]["p_value"])
    for r, adjusted in zip(rows[1:], holm(p_values, alpha), strict=True):
        r["paired"]["p_holm"] = adjusted
        r["paired"]["worse"] = adjusted <= alpha and r["paired"]["difference"] < 0
    gates = [g for r in rows[1:] if (g := coverage_gate(best["coverage"], r["coverage"], rule))]
    if len(rows) == 1 and best["coverage"].coverage < rule.min_coverage:
        gates.append(coverage_gate(best["coverage"], best["coverage"], rule) or "")
    notes = [n for r in rows for n in r["coverage"].notes(f"step {r['step']}")]
    if gates:
        verdict, says = INSUFFICIENT, f"{SAYS[INSUFFICIENT]} ({gates[0]})"
    elif len(rows) == 1:
        verdict, says = ONLY, f"step {best['step']}: {SAYS[ONLY]}"
    else:
        doc["best"] = best["step"]
        tied = [r["step"] for r in rows[1:] if not r["paired"]["worse"]]
        verdict = TIED if tied else BEST
        says = f"step {best['step']}: " + (
            SAYS[TIED] + " " + ", ".join(f"step {s}" for s in tied) if tied else SAYS[BEST]
        )
    for r in rows:
        r["coverage"] = r["coverage"].to_dict()
    return {**doc, "verdict": verdict, "says": says, "notes": notes}


def _paired(best: Mapping[int, Outcome], other: Mapping[int, Outcome], rule: CoverageRule) -> dict[str, Any]:
    """The paired comparison of ``other`` with ``best`` on the episodes both recorded."""
    common = sorted(set(best) & set(other))
    pairs = pair([best[i] for i in common], [other[i] for i in common], rule)
    if not pairs.n:
        return {"pairs": 0, "difference": 0.0, "p_value": 1.0, "dropped": len(pairs.dropped)}
    test = mcnemar_exact(pairs.b, pairs.a)
    diff = float(np.mean(pairs.b) - np.mean(pairs.a))
    return {"pairs": pairs.n, "difference": diff, "p_value": test.p_value, "dropped": len(pairs.dropped)}
