"""The statistics rollbench reports: one implementation of each, used by grade, summarize, compare and report.

Conventions: a success is ``1``, a failure ``0``. "A" and "B" are the two policies (runs) being compared; a
*difference* is always ``rate(B) - rate(A)``. Paired data are two equal-length 0/1 sequences where position ``i`` is
the same episode (same task, seed, initial state and instruction) run by A and by B.

Unit of independence: every statistic here assumes its units are independent draws. For a rate (Wilson) and for
unpaired comparisons (Fisher, unpaired bootstrap) the unit is one episode: n episodes are n independent Bernoulli
trials. For paired comparisons (McNemar, paired bootstrap) the unit is one *pair* of episodes (A's and B's episode of
one task, seed, initial state and instruction); the two episodes of a pair may be correlated, pairs may not. An
episode recorded twice with the same (task, seed, initial state, instruction) is an independent draw only when the
policy or env is stochastic: ``summarize`` counts such repeats and warns about them.

Sources:

* Wilson score interval: E. B. Wilson (1927), "Probable inference, the law of succession, and statistical
  inference", JASA 22:209-212.
* Exact McNemar test: Q. McNemar (1947), Psychometrika 12:153-157; the exact (conditional) form is a binomial test of
  the discordant pairs against 1/2 (e.g. Agresti, *Categorical Data Analysis*, 3rd ed., §11.1), computed with
  :func:`scipy.stats.binomtest`.
* Bootstrap percentile interval: B. Efron and R. Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13;
  resampling whole pairs keeps the pairing (paired bootstrap), resampling within each task keeps the task mix
  (stratified bootstrap, ch. 6).
* Holm step-down correction: S. Holm (1979), Scand. J. Statist. 6:65-70, computed with
  :func:`statsmodels.stats.multitest.multipletests`.
* Paired sample size for McNemar's test: A. J. Connor (1987), "Sample size for testing differences in proportions
  for the paired-sample design", Biometrics 43:207-211, eq. (3); the exact power of the exact test at that size is
  computed by enumeration (the number of discordant pairs is Binomial(n, psi); given it, the test is a binomial test).
* Unpaired comparison (``compare --unpaired``; ``report`` for pairs whose episodes do not pair): Fisher's exact test (:func:`scipy.stats.fisher_exact`).

scipy and statsmodels are imported inside the functions that use them, so ``rollbench grade`` (which needs only the
Wilson interval) does not pay for importing them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from rollbench.core.contracts import ConfigError
from rollbench.core.records import JsonRecord

MAX_RESAMPLES = 1_000_000  # bootstrap resamples (compare --resamples)
MAX_BOOTSTRAP_DRAWS = 2**27  # resamples x episodes of one stratum drawn at once: 1 GiB of int64 indices

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal distribution

Alternative = Literal["two-sided", "greater", "less"]
ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for a binomial proportion ``successes / n``; 95% with the default ``z``.
    The ``n`` trials (episodes) are assumed independent with one success probability.

    Returns ``(low, high)`` as floats in [0, 1]; ``(0.0, 1.0)`` when ``n == 0`` (nothing is known).
    Raises ValueError when ``successes`` is outside ``0..n``.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the bounds are exactly 0 at 0 successes and exactly 1 at n (rounding would give e.g. 5.6e-17)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def _as01(values: Sequence[Any] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of 0/1 outcomes, got shape {arr.shape}")
    if arr.size and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"{what} must hold only 0/1 (or False/True) outcomes")
    return arr.astype(np.int8)


def _paired(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = _as01(a, "a"), _as01(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired outcomes need equal lengths, got {x.size} and {y.size}")
    return x, y


@dataclass(frozen=True)
class McNemarResult(JsonRecord):
    """Exact McNemar test. ``a_only``: pairs where only A succeeded; ``b_only``: only B succeeded (the discordant
    pairs); ``both`` / ``neither``: the concordant pairs. ``p_value`` in [0, 1] (1.0 with no discordant pair)."""

    a_only: int
    b_only: int
    both: int
    neither: int
    p_value: float
    alternative: str


def mcnemar_exact(
    a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray, alternative: Alternative = "two-sided"
) -> McNemarResult:
    """Exact McNemar test on paired 0/1 outcomes ``a`` and ``b`` (equal length, position i = the same episode).
    The unit of independence is the pair: pairs are independent; A's and B's outcome within a pair need not be.

    Conditional on the ``n = a_only + b_only`` discordant pairs, ``a_only ~ Binomial(n, 1/2)`` under the null
    hypothesis that A and B succeed equally often; the p-value is :func:`scipy.stats.binomtest` of ``a_only`` in
    ``n``. ``alternative``: ``"two-sided"``; ``"greater"`` (A succeeds more often than B); ``"less"`` (A less often).
    Raises ValueError on unequal lengths, non-0/1 values or an unknown alternative.
    """
    x, y = _paired(a, b)
    a_only = int(np.sum((x == 1) & (y == 0)))
    b_only = int(np.sum((x == 0) & (y == 1)))
    both, neither = int(np.sum((x == 1) & (y == 1))), int(np.sum((x == 0) & (y == 0)))
    return mcnemar_from_counts(a_only, b_only, both=both, neither=neither, alternative=alternative)


def mcnemar_from_counts(
    a_only: int, b_only: int, *, both: int = 0, neither: int = 0, alternative: Alternative = "two-sided"
) -> McNemarResult:
    """:func:`mcnemar_exact` from the counts of the 2x2 table of pairs (only the discordant ones matter)."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; valid: {', '.join(ALTERNATIVES)}")
    if min(a_only, b_only, both, neither) < 0:
        raise ValueError("McNemar counts must be non-negative")
    n = a_only + b_only
    if n == 0:
        p = 1.0
    else:
        from scipy.stats import binomtest

        p = float(binomtest(a_only, n, 0.5, alternative=alternative).pvalue)
    return McNemarResult(a_only, b_only, both, neither, min(1.0, p), alternative)


@dataclass(frozen=True)
class BootstrapInterval(JsonRecord):
    """A bootstrap percentile interval for ``rate(B) - rate(A)``: the observed ``difference``, ``low`` and ``high``
    at ``confidence``, from ``n_resamples`` resamples drawn with numpy's PCG64 seeded by ``seed``."""

    difference: float | None
    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    seed: int
    paired: bool


def bootstrap_difference(
    a: Sequence[Any] | np.ndarray,
    b: Sequence[Any] | np.ndarray,
    *,
    paired: bool = True,
    strata: Sequence[Any] | None = None,
    strata_b: Sequence[Any] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> BootstrapInterval:
    """Bootstrap percentile interval (Efron & Tibshirani 1993) for the difference in success rate, B minus A.

    ``paired=True``: ``a`` and ``b`` are paired 0/1 outcomes (equal length); each resample draws pair indices with
    replacement, so both policies keep the same episodes. ``paired=False``: ``a`` and ``b`` are resampled
    independently (lengths may differ). ``strata`` (one label per position of ``a``; ``strata_b`` for ``b`` when
    unpaired, defaulting to ``strata``) resamples within each stratum, e.g. each task, so a pooled interval keeps the
    task mix. The same ``seed`` gives the same interval. Empty input gives ``None`` fields. The resampled units (pairs
    when paired, episodes otherwise) are assumed independent.
    Raises ValueError on non-0/1 values, unequal paired lengths or a confidence outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    check_resamples(n_resamples, max(len(a), len(b)))
    x, y = _paired(a, b) if paired else (_as01(a, "a"), _as01(b, "b"))
    empty = BootstrapInterval(None, None, None, confidence, n_resamples, seed, paired)
    if x.size == 0 or y.size == 0:
        return empty
    rng = np.random.Generator(np.random.PCG64(seed))
    sa = np.asarray(strata if strata is not None else np.zeros(x.size, dtype=np.int8))
    if paired:
        sb = sa
    elif strata_b is not None:
        sb = np.asarray(strata_b)
    else:
        sb = sa if strata is not None else np.zeros(y.size, dtype=np.int8)
    if sa.size != x.size or sb.size != y.size:
        raise ValueError("strata must give one label per outcome")
    sums_a = np.zeros(n_resamples)
    sums_b = np.zeros(n_resamples)
    for label in sorted(set(sa.tolist()) | set(sb.tolist()), key=str):
        ia, ib = np.flatnonzero(sa == label), np.flatnonzero(sb == label)
        if paired:
            draw = rng.integers(0, ia.size, size=(n_resamples, ia.size))
            sums_a += x[ia][draw].sum(axis=1)
            sums_b += y[ia][draw].sum(axis=1)
        else:
            if ia.size:
                sums_a += x[ia][rng.integers(0, ia.size, size=(n_resamples, ia.size))].sum(axis=1)
            if ib.size:
                sums_b += y[ib][rng.integers(0, ib.size, size=(n_resamples, ib.size))].sum(axis=1)
    diffs = sums_b / y.size - sums_a / x.size
    tail = (1 - confidence) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    observed = float(y.mean() - x.mean())
    return BootstrapInterval(observed, float(low), float(high), confidence, n_resamples, seed, paired)


def check_resamples(n_resamples: int, episodes: int) -> None:
    """ConfigError when ``n_resamples`` is above :data:`MAX_RESAMPLES`, or when drawing it for ``episodes``
    outcomes at once would take more than :data:`MAX_BOOTSTRAP_DRAWS` indices (a bound on memory)."""
    if n_resamples > MAX_RESAMPLES:
        raise ConfigError(f"--resamples {n_resamples} is more than the limit of {MAX_RESAMPLES}")
    if n_resamples * episodes > MAX_BOOTSTRAP_DRAWS:
        raise ConfigError(
            f"--resamples {n_resamples} for {episodes} episodes is more than {MAX_BOOTSTRAP_DRAWS} bootstrap draws "
            f"(1 GiB); use at most {MAX_BOOTSTRAP_DRAWS // episodes} resamples"
        )


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[float]:
    """Holm (1979) step-down adjusted p-values, in the input order, via statsmodels ``multipletests(method="holm")``.
    A hypothesis is rejected at family-wise level ``alpha`` when its adjusted p-value is <= ``alpha``."""
    if not len(p_values):
        return []
    from statsmodels.stats.multitest import multipletests

    _, adjusted, _, _ = multipletests(list(p_values), alpha=alpha, method="holm")
    return [float(p) for p in adjusted]


@dataclass(frozen=True)
class FisherResult(JsonRecord):
    """Fisher's exact test on the 2x2 table (successes, failures) x (A, B) of two independent samples."""

    successes_a: int
    n_a: int
    successes_b: int
    n_b: int
    p_value: float
    alternative: str


def fisher_exact_test(
    successes_a: int, n_a: int, successes_b: int, n_b: int, alternative: Alternative = "two-sided"
) -> FisherResult:
    """Fisher's exact test (:func:`scipy.stats.fisher_exact`) for unpaired runs: are A's and B's success rates
    equal? ``"greater"``: A's rate is higher. Returns p = 1.0 when either sample is empty. The unit of independence
    is one episode: every episode of A and of B is an independent draw (no pairing)."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; valid: {', '.join(ALTERNATIVES)}")
    if not (0 <= successes_a <= n_a and 0 <= successes_b <= n_b):
        raise ValueError("Fisher's test needs 0 <= successes <= n for both samples")
    if n_a == 0 or n_b == 0:
        p = 1.0
    else:
        from scipy.stats import fisher_exact

        table = [[successes_a, n_a - successes_a], [successes_b, n_b - successes_b]]
        p = float(fisher_exact(table, alternative=alternative).pvalue)
    return FisherResult(successes_a, n_a, successes_b, n_b, min(1.0, p), alternative)
