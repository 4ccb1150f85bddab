"""The statistics of one comparison block (a task, or pooled) of :mod:`rollbench.analysis.compare`: rates with
Wilson intervals, the paired test and bootstrap on the pairs that are pairs (the pair or, when initial states
repeat, the scene as the unit), the unpaired ones, and each arm's coverage counts with the gated verdict."""

from __future__ import annotations

from typing import Any

import numpy as np

from rollbench.grading.coverage import ArmCoverage, CoverageRule, Outcome, Pairs, coverage_gate, score, verdict
from rollbench.grading.scenes import cluster_bootstrap_difference, scene_differences, sign_flip_test
from rollbench.grading.stats import bootstrap_difference, fisher_exact_test, mcnemar_exact, wilson_interval


def rate(s: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(s, n)
    return {"successes": s, "episodes": n, "success_rate": s / n if n else None, "ci95_low": lo, "ci95_high": hi}


def paired_block(
    pairs: Pairs, strata: list[str] | None, seed: int, n_resamples: int, scenes: list[Any] | None = None
) -> dict[str, Any]:
    """Rates, bootstrap interval and test on the pairs that are pairs (both episodes scored); ``a`` and ``b``
    count over those pairs (``episodes`` = pairs compared). ``scenes`` (one label per pair, given when a task
    repeats an initial state): the unit is the scene (:mod:`rollbench.grading.scenes`: sign-flip test, cluster
    bootstrap); else the pair (exact McNemar, paired bootstrap)."""
    xa, xb = pairs.a, pairs.b
    mc = mcnemar_exact(xa, xb)
    if scenes is not None:
        boot = cluster_bootstrap_difference(xa, xb, scenes, strata=strata, seed=seed, n_resamples=n_resamples)
        flip = sign_flip_test(scene_differences(xa, xb, scenes).diffs, seed=seed)
        unit = {"unit": "scene", "scenes": flip.scenes, "p_value": flip.p_value, "test": f"sign-flip over scenes, "
                f"two-sided ({'exact' if flip.method == 'exact' else f'{flip.patterns} random sign patterns'})"}  # fmt: skip
    else:
        boot = bootstrap_difference(xa, xb, strata=strata, seed=seed, n_resamples=n_resamples)
        unit = {"unit": "pair", "scenes": None, "p_value": mc.p_value, "test": "exact McNemar (two-sided)"}
    return {
        "a": rate(int(xa.sum()), xa.size),
        "b": rate(int(xb.sum()), xb.size),
        "pairs": int(xa.size),
        "pairs_dropped": len(pairs.dropped),
        "pairs_dropped_by_reason": pairs.dropped_by_reason(),
        "difference": boot.difference,
        "diff_ci95_low": boot.low,
        "diff_ci95_high": boot.high,
        "a_only": mc.a_only,
        "b_only": mc.b_only,
        **unit,
    }


def unpaired_block(
    xa: np.ndarray, xb: np.ndarray, sa: list[str] | None, sb: list[str] | None, seed: int, n_resamples: int
) -> dict[str, Any]:
    """Rates, bootstrap interval and Fisher's test on each arm's scored episodes."""
    boot = bootstrap_difference(xa, xb, paired=False, strata=sa, strata_b=sb, seed=seed, n_resamples=n_resamples)
    fi = fisher_exact_test(int(xa.sum()), xa.size, int(xb.sum()), xb.size)
    return {
        "a": rate(int(xa.sum()), xa.size),
        "b": rate(int(xb.sum()), xb.size),
        "pairs": None,
        "difference": boot.difference,
        "diff_ci95_low": boot.low,
        "diff_ci95_high": boot.high,
        "p_value": fi.p_value,
        "test": "Fisher exact (two-sided), unpaired",
    }


def scored(outcomes: list[Outcome], rule: CoverageRule) -> np.ndarray:
    return np.array([v for o in outcomes if (v := score(o, rule)) is not None], dtype=np.int8)


def with_coverage(block: dict[str, Any], ca: ArmCoverage, cb: ArmCoverage, rule: CoverageRule) -> dict[str, Any]:
    """``block`` with each arm's coverage counts, the notes naming its errors, the gate and the gated verdict
    (``p_holm`` / ``p_holm_pairs`` are applied later by :func:`_decide`)."""
    gate = coverage_gate(ca, cb, rule)
    block["coverage"] = {"a": ca.to_dict(), "b": cb.to_dict()}
    block["error_notes"] = ca.notes("A") + cb.notes("B")
    block["coverage_gate"] = gate
    block["verdict"] = verdict(block["p_value"], block["difference"], gate=gate)
    return block


def decide(block: dict[str, Any], p_key: str) -> None:
    """Re-judge ``block``'s verdict on its corrected p-value ``p_key`` (the gate still comes first)."""
    block["verdict"] = verdict(block[p_key], block["difference"], gate=block["coverage_gate"])


def cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)


def concat(parts: list[Pairs]) -> Pairs:
    """The pooled pairs of several tasks (positions are per task; the dropped pairs are all kept)."""
    dropped = [d for p in parts for d in p.dropped]
    return Pairs(cat([p.a for p in parts]), cat([p.b for p in parts]), [i for p in parts for i in p.positions], dropped)
