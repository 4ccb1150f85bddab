"""Paired comparisons of instruction variants, built from ``grade``'s per-episode rows (numbers from disk).

Two variants of one task are paired by trial: same seed, same initial state. With ``b`` = pairs only the variant
solved and ``c`` = pairs only the reference solved, the exact McNemar test conditions on the ``b + c`` discordant
pairs, where ``b ~ Binomial(b + c, 1/2)`` under "no difference" (McNemar 1947; the exact form: binomial test on the
discordant pairs). The tests themselves come from :mod:`rollbench.analysis.stats` once it exists; until then
:func:`mcnemar_p` and :func:`paired_interval` are the only statistics here, each a thin call into scipy / numpy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


def mcnemar_p(b: int, c: int, alternative: str = "greater") -> float:
    """Exact McNemar p-value: ``scipy.stats.binomtest(b, b + c, 0.5, alternative)``; 1.0 with no discordant pair.

    ``alternative="greater"``: the variant is better (one-sided); ``"two-sided"``: they differ.
    """
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative=alternative).pvalue)


def paired_interval(ref: list[bool], var: list[bool], seed: int = 0, n_boot: int = 10_000) -> tuple[float, float]:
    """95% paired percentile-bootstrap interval of ``mean(var) - mean(ref)`` (pairs resampled together).

    ``numpy.random.default_rng(seed)``; ``(0.0, 0.0)`` for no pair. Efron & Tibshirani 1993, ch. 13.
    """
    if not ref:
        return 0.0, 0.0
    d = np.asarray(var, dtype=float) - np.asarray(ref, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))
    means = d[idx].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


@dataclass(frozen=True)
class Paired:
    """A variant against a reference on the trials both recorded.

    ``pairs``; ``reference_successes`` / ``variant_successes``; ``variant_only`` (b) and ``reference_only`` (c);
    ``difference`` = (variant - reference) / pairs in success-rate units; ``p_value`` of the given alternative.
    """

    reference: str
    variant: str
    pairs: int
    reference_successes: int
    variant_successes: int
    variant_only: int
    reference_only: int
    difference: float
    p_value: float
    alternative: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def successes_by_trial(result: dict[str, Any], task: str, variant: str) -> dict[int, bool]:
    """Trial -> success of ``variant`` on ``task``, from a graded result's ``episodes`` rows."""
    return {e["trial"]: bool(e["success"]) for e in result["episodes"] if e["task"] == task and e["variant"] == variant}


def paired(result: dict[str, Any], task: str, reference: str, variant: str, alternative: str = "greater") -> Paired:
    """Compare ``variant`` with ``reference`` on ``task`` over the trials both recorded in ``result``."""
    ref, var = successes_by_trial(result, task, reference), successes_by_trial(result, task, variant)
    trials = sorted(set(ref) & set(var))
    r, v = [ref[k] for k in trials], [var[k] for k in trials]
    b = sum(1 for x, y in zip(r, v, strict=True) if y and not x)
    c = sum(1 for x, y in zip(r, v, strict=True) if x and not y)
    return Paired(
        reference=reference,
        variant=variant,
        pairs=len(trials),
        reference_successes=sum(r),
        variant_successes=sum(v),
        variant_only=b,
        reference_only=c,
        difference=(sum(v) - sum(r)) / len(trials) if trials else 0.0,
        p_value=mcnemar_p(b, c, alternative),
        alternative=alternative,
    )
