"""Planning a paired comparison: the episodes per task the exact McNemar test needs (:func:`paired_sample_size`,
``rollbench compare --power``) and the exact power at a given size (:func:`mcnemar_power`).

Bounded work: a size above :data:`MAX_POWER_EPISODES` (the most episodes a run holds per task) is refused before
any exact power is computed, and the sizes searched stop there too.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from rollbench.core.records import JsonRecord
from rollbench.grading.stats import ALTERNATIVES, Alternative

MAX_POWER_EPISODES = 100_000  # = core.spec.MAX_EPISODES_PER_TASK: a plan for more episodes could not be run


@dataclass(frozen=True)
class SampleSize(JsonRecord):
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
    psi = p_a_only + p_b_only
    if n <= 0 or psi <= 0:
        return 0.0
    return _power_at(n, psi, _rejection(n, p_a_only / psi, alpha, alternative))


def _rejection(n_max: int, theta: float, alpha: float, alternative: Alternative) -> np.ndarray:
    """``P(reject | d discordant pairs)`` for ``d = 1 .. n_max`` (float64, shape ``(n_max,)``): it does not depend
    on the number of pairs, so one array serves every ``n <= n_max``."""
    from scipy.stats import binom

    d = np.arange(1, n_max + 1)
    level = alpha / 2 if alternative == "two-sided" else alpha
    with warnings.catch_warnings():  # boost's quantile search gives up far in the tail (alpha 1e-300): a guess
        warnings.simplefilter("ignore", RuntimeWarning)
        c = np.nan_to_num(binom.ppf(level, d, 0.5), nan=-1.0, posinf=-1.0, neginf=-1.0)
    # the largest c with P(X <= c) <= level, made exact from the guess (a few steps down or up at most)
    for _ in range(10_000):
        too_big = (c >= 0) & (binom.cdf(c, d, 0.5) > level * (1 + 1e-12))
        if not too_big.any():
            break
        c = np.where(too_big, c - 1, c)
    for _ in range(10_000):
        room = (c + 1 < d) & (binom.cdf(c + 1, d, 0.5) <= level * (1 + 1e-12))
        if not room.any():
            break
        c = np.where(room, c + 1, c)
    low = binom.cdf(c, d, theta)  # K <= c: A-only pairs few (B better)
    high = binom.sf(d - c - 1, d, theta)  # K >= d - c: A-only pairs many (A better)
    out: np.ndarray = {"two-sided": low + high, "greater": high, "less": low}[alternative]
    return out


def _power_at(n: int, psi: float, reject: np.ndarray) -> float:
    from scipy.stats import binom

    return float(np.sum(binom.pmf(np.arange(1, n + 1), n, psi) * reject[:n]))


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
    target. Raises ValueError for rates outside (0, 1), ``p_a == p_b``, or bad alpha/power, and when ``n`` is above
    :data:`MAX_POWER_EPISODES` (the sizes searched stop there too, so the work is bounded).
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
    # the upper quantiles by the inverse survival function: 1 - alpha/2 rounds to 1.0 (quantile inf) for a tiny alpha
    z_a = float(norm.isf(alpha / 2 if alternative == "two-sided" else alpha))
    z_b = float(norm.ppf(power))
    size = (z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / (delta * delta)
    if not math.isfinite(size) or size > MAX_POWER_EPISODES:
        shown = f"about {math.ceil(size)}" if math.isfinite(size) else "an unbounded number of"
        raise ValueError(
            f"detecting {p_a:g} vs {p_b:g} at alpha {alpha:g} and power {power:g} needs {shown} paired episodes per "
            f"task (Connor 1987), more than the {MAX_POWER_EPISODES} a run holds per task"
        )
    n = math.ceil(size)
    if n > MAX_POWER_EPISODES:
        raise ValueError(
            f"detecting {p_a:g} vs {p_b:g} needs about {n} paired episodes per task (Connor 1987), more than the "
            f"{MAX_POWER_EPISODES} a run holds per task; the difference is too small to plan a comparison for"
        )
    n_stop = min(4 * n + 50, MAX_POWER_EPISODES)
    reject = _rejection(n_stop, a_only / psi, alpha, alternative)
    exact = _power_at(n, psi, reject)
    n_exact, exact_at = n, exact
    while exact_at < power and n_exact < n_stop:  # the exact test is conservative: step up to the target power
        n_exact += 1
        exact_at = _power_at(n_exact, psi, reject)
    return SampleSize(
        n, n_exact, p_a, p_b, alpha, power, alternative, a_only, b_only, psi, exact,
        "Connor (1987) eq. 3; exact power of the exact McNemar test by enumeration",
    )  # fmt: skip
