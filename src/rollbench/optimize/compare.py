"""Paired comparisons of instruction variants, built from ``grade``'s per-episode rows (numbers from disk).

Two variants of one task are paired by trial: same seed, same initial state. With ``b`` = pairs only the variant
solved and ``c`` = pairs only the reference solved, the exact McNemar test conditions on the ``b + c`` discordant
pairs, where ``b ~ Binomial(b + c, 1/2)`` under "no difference" (McNemar 1947; the exact form: binomial test on the
discordant pairs). The statistics themselves are :mod:`rollbench.grading.stats`'s; this module only pairs episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollbench.core.grade_model import GradeDocument
from rollbench.core.records import JsonRecord


def mcnemar_p(b: int, c: int, alternative: str = "greater") -> float:
    """Exact McNemar p-value with ``b`` = pairs only the variant solved, ``c`` = only the reference;
    ``alternative="greater"``: the variant is better (one-sided), ``"two-sided"``: they differ.
    :func:`rollbench.grading.stats.mcnemar_from_counts` with the variant as its A."""
    from rollbench.grading.stats import mcnemar_from_counts

    return mcnemar_from_counts(b, c, alternative=alternative).p_value  # type: ignore[arg-type]


def paired_interval(ref: list[bool], var: list[bool], seed: int = 0) -> tuple[float, float]:
    """95% paired bootstrap interval of ``rate(var) - rate(ref)`` (:func:`rollbench.grading.stats.bootstrap_difference`,
    10 000 resamples, ``seed``); ``(0.0, 0.0)`` for no pair."""
    from rollbench.grading.stats import bootstrap_difference

    ci = bootstrap_difference(ref, var, paired=True, seed=seed)
    return (ci.low or 0.0, ci.high or 0.0) if ci.low is not None else (0.0, 0.0)


@dataclass(frozen=True)
class Paired(JsonRecord):
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


def successes_by_trial(result: GradeDocument, task: str, variant: str) -> dict[int, bool]:
    """Trial -> success of ``variant`` on ``task``, from a grade document's ``episodes``."""
    return {e.trial: e.success for e in result.episodes if e.task == task and e.variant == variant}


def paired(result: GradeDocument, task: str, reference: str, variant: str, alternative: str = "greater") -> Paired:
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
