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
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

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
class McNemarResult:
    """Exact McNemar test. ``a_only``: pairs where only A succeeded; ``b_only``: only B succeeded (the discordant
    pairs); ``both`` / ``neither``: the concordant pairs. ``p_value`` in [0, 1] (1.0 with no discordant pair)."""

    a_only: int
    b_only: int
    both: int
    neither: int
    p_value: float
    alternative: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
class BootstrapInterval:
    """A bootstrap percentile interval for ``rate(B) - rate(A)``: the observed ``difference``, ``low`` and ``high``
    at ``confidence``, from ``n_resamples`` resamples drawn with numpy's PCG64 seeded by ``seed``."""

    difference: float | None
    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    seed: int
    paired: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[float]:
    """Holm (1979) step-down adjusted p-values, in the input order, via statsmodels ``multipletests(method="holm")``.
    A hypothesis is rejected at family-wise level ``alpha`` when its adjusted p-value is <= ``alpha``."""
    if not len(p_values):
        return []
    from statsmodels.stats.multitest import multipletests

    _, adjusted, _, _ = multipletests(list(p_values), alpha=alpha, method="holm")
    return [float(p) for p in adjusted]


@dataclass(frozen=True)
class FisherResult:
    """Fisher's exact test on the 2x2 table (successes, failures) x (A, B) of two independent samples."""

    successes_a: int
    n_a: int
    successes_b: int
    n_b: int
    p_value: float
    alternative: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


@dataclass(frozen=True)
class SampleSize:
    """Paired episodes per task needed to detect ``p_b - p_a`` with the exact McNemar test.

    ``n``: Connor (1987)'s normal-approximation size; ``exact_power``: the exact test's actual power at ``n``;
    ``n_exact``: the smallest size >= ``n`` at which the exact test reaches the target power (the recommendation);
    ``p_a_only`` / ``p_b_only``: the assumed probabilities that only A / only B succeeds on an episode (their sum
    ``discordant`` is the discordant-pair probability psi)."""

    n: int
    n_exact: int
    p_a: float
    p_b: float
    alpha: float
    power_target: float
    alternative: str
    p_a_only: float
    p_b_only: float
    discordant: float
    exact_power: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _discordant_split(p_a: float, p_b: float, discordant: float | None) -> tuple[float, float]:
    """(P(only A succeeds), P(only B succeeds)). Without ``discordant``, A and B are assumed to succeed independently
    on an episode, which gives p_a(1-p_b) and p_b(1-p_a); positively correlated policies (the usual case when both
    see the same scenes) have fewer discordant pairs and need fewer episodes, so this assumption is conservative."""
    if discordant is None:
        return p_a * (1 - p_b), p_b * (1 - p_a)
    delta = p_b - p_a
    if not abs(delta) <= discordant <= min(p_a + p_b, 2 - p_a - p_b):
        raise ValueError(
            f"discordant probability {discordant} is impossible for p_a={p_a}, p_b={p_b}: it must lie in "
            f"[|p_b - p_a|, min(p_a + p_b, 2 - p_a - p_b)] = [{abs(delta):.4g}, {min(p_a + p_b, 2 - p_a - p_b):.4g}]"
        )
    return (discordant - delta) / 2, (discordant + delta) / 2


def mcnemar_power(
    n: int, p_a_only: float, p_b_only: float, alpha: float = 0.05, alternative: Alternative = "two-sided"
) -> float:
    """Exact power of the exact McNemar test (:func:`mcnemar_exact`) with ``n`` pairs, a float in [0, 1].

    The number of discordant pairs is ``d ~ Binomial(n, psi)`` with ``psi = p_a_only + p_b_only``; given ``d``, the
    number of A-only pairs is ``K ~ Binomial(d, p_a_only / psi)``. With success probability 1/2 the null distribution
    is symmetric, so the two-sided test rejects exactly when ``min(K, d - K) <= c_d``, ``c_d`` the largest ``m`` with
    ``2 * P(X <= m) <= alpha`` (one-sided: ``P(X <= m) <= alpha``, on the side of ``alternative``). Power =
    sum over d of P(d) * P(reject | d), computed exactly for every d at once (no simulation).
    """
    from scipy.stats import binom

    psi = p_a_only + p_b_only
    if n <= 0 or psi <= 0:
        return 0.0
    theta = p_a_only / psi
    d = np.arange(1, n + 1)
    level = alpha / 2 if alternative == "two-sided" else alpha
    m = binom.ppf(level, d, 0.5)
    c = np.where(binom.cdf(m, d, 0.5) <= level * (1 + 1e-12), m, m - 1)  # largest m with P(X <= m) <= level
    low = binom.cdf(c, d, theta)  # K <= c: A-only pairs few (B better)
    high = binom.sf(d - c - 1, d, theta)  # K >= d - c: A-only pairs many (A better)
    reject = {"two-sided": low + high, "greater": high, "less": low}[alternative]
    return float(np.sum(binom.pmf(d, n, psi) * reject))


def paired_sample_size(
    p_a: float,
    p_b: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    discordant: float | None = None,
    alternative: Alternative = "two-sided",
) -> SampleSize:
    """Paired episodes per task needed for the exact McNemar test to detect success rates ``p_a`` vs ``p_b``.

    Connor (1987), eq. (3): ``n = (z_a * sqrt(psi) + z_b * sqrt(psi - delta^2))^2 / delta^2``, rounded up, where
    ``delta = p_b - p_a``, ``psi`` = P(discordant pair), ``z_a`` the ``1 - alpha/2`` (two-sided) or ``1 - alpha``
    (one-sided) normal quantile and ``z_b`` the ``power`` quantile. ``discordant`` is psi when known (e.g. from a pilot
    run); otherwise A and B are assumed independent per episode (conservative, see :func:`_discordant_split`).
    ``exact_power`` reports the exact test's power at that ``n`` (it can fall slightly short of the target because the
    exact test is conservative) and ``n_exact`` the smallest size from ``n`` up at which the exact power reaches the
    target. Raises ValueError for rates outside (0, 1), ``p_a == p_b``, or bad alpha/power.
    """
    from scipy.stats import norm

    if not (0 < p_a < 1 and 0 < p_b < 1):
        raise ValueError(f"success rates must be strictly between 0 and 1, got p_a={p_a}, p_b={p_b}")
    if p_a == p_b:
        raise ValueError("p_a equals p_b: there is no difference to detect")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha}, power={power}")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; valid: {', '.join(ALTERNATIVES)}")
    if (alternative == "greater" and p_a <= p_b) or (alternative == "less" and p_a >= p_b):
        raise ValueError(
            f"alternative {alternative!r} tests that A's rate is {'higher' if alternative == 'greater' else 'lower'} "
            f"than B's, but p_a={p_a}, p_b={p_b}"
        )
    a_only, b_only = _discordant_split(p_a, p_b, discordant)
    psi, delta = a_only + b_only, p_b - p_a
    z_a = float(norm.ppf(1 - alpha / 2 if alternative == "two-sided" else 1 - alpha))
    z_b = float(norm.ppf(power))
    n = math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (delta * delta))
    exact = mcnemar_power(n, a_only, b_only, alpha, alternative)
    n_exact, exact_at = n, exact
    while exact_at < power and n_exact < 4 * n + 50:  # the exact test is conservative: step up to the target power
        n_exact += 1
        exact_at = mcnemar_power(n_exact, a_only, b_only, alpha, alternative)
    return SampleSize(
        n, n_exact, p_a, p_b, alpha, power, alternative, a_only, b_only, psi, exact,
        "Connor (1987) eq. 3; exact power of the exact McNemar test by enumeration",
    )  # fmt: skip
