"""Early elimination of checkpoints with a stated guarantee (``rollbench checkpoints --eliminate``).

**Rule.** K checkpoints run the same planned trials, in plan order, up to looks ``n_1 < n_2 < ... < n_L = N_max``
trials (doubling from ``first_look``). At each look, among the surviving checkpoints, ``i*`` is the one with the
highest rate; for each other survivor ``j`` the paired mean difference ``D(i*, j)`` over the ``m`` pairs both scored
gets the one-sided radius ``r(m) = sqrt(2 ln(1 / level) / m)``, ``level = alpha / ((K - 1) L)`` (Hoeffding for a
mean of m values in [-1, 1], union-bounded over the L looks and the K - 1 pairs with the best). Then

* ``j`` is **eliminated** when ``D(i*, j) - r(m) > 0`` (clearly worse than ``i*``);
* the rule **stops** and chooses ``i*`` when one checkpoint survives, or when every survivor ``j`` has
  ``D(i*, j) - r(m) >= -delta`` (none can be more than delta better than ``i*``); ``N_max`` is the smallest count
  with ``r(N_max) <= delta``, so the last look always stops.

**Guarantee.** P(the chosen checkpoint's success rate is more than ``delta`` below the best's) <= ``alpha``, for any
rates, any dependence between checkpoints on a trial, i.i.d. trials (plan order; seeds are independent scenes). Proof:
with probability >= 1 - alpha every lower bound ``D(j, b) - r <= p_j - p_b`` holds for the best ``b``, every other
``j`` and every look; then ``b`` is never eliminated, and at the stop ``p_{i*} - p_b >= D(i*, b) - r >= -delta``.
The fixed-N design with the same guarantee and the same inequality evaluates every checkpoint at
:func:`fixed_n` trials and chooses the highest rate. ``tests/test_checkpoint_elimination.py`` checks the guarantee by
seeded simulation; ``benchmarks/bench_checkpoints.py`` measures the episodes saved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError

MIN_FIRST_LOOK = 1
MAX_TRIALS = 1_000_000  # N_max bound (a stated upper bound on the work)


@dataclass(frozen=True)
class Design:
    """``k`` checkpoints, ``delta``, ``alpha`` and the ``looks`` (cumulative trials; the last is N_max)."""

    k: int
    delta: float
    alpha: float
    looks: tuple[int, ...]

    @property
    def level(self) -> float:
        """Each one-sided bound's error: alpha / ((K - 1) L), L = the number of looks."""
        return self.alpha / (max(1, self.k - 1) * len(self.looks))

    def radius(self, m: int | np.ndarray) -> Any:
        """One-sided Hoeffding radius of a mean of ``m`` paired differences (each in [-1, 1]); inf for m = 0."""
        m = np.asarray(m, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(m > 0, np.sqrt(2.0 * math.log(1.0 / self.level) / np.maximum(m, 1)), np.inf)

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "delta": self.delta,
            "alpha": self.alpha,
            "looks": list(self.looks),
            "level": self.level,
            "fixed_n": fixed_n(self.k, self.delta, self.alpha),
        }


def _n_for(level: float, delta: float) -> int:
    return math.ceil(2.0 * math.log(1.0 / level) / delta**2)


def fixed_n(k: int, delta: float, alpha: float) -> int:
    """Trials per checkpoint of the fixed-N design with the same guarantee: ``(K-1) exp(-N delta^2 / 2) <= alpha``."""
    return _n_for(alpha / max(1, k - 1), delta)


def design(k: int, delta: float, alpha: float, first_look: int = 16) -> Design:
    """The looks for ``k`` checkpoints: ``first_look``, doubling, up to N_max where ``r(N_max) <= delta`` at the
    level that the number of looks itself implies (the smallest consistent number of looks). ConfigError for k < 2,
    delta or alpha outside (0, 1), a first look < 1, or N_max over :data:`MAX_TRIALS`."""
    if k < 2:
        raise ConfigError(f"--eliminate needs at least 2 checkpoints, found {k}")
    if not 0.0 < delta < 1.0 or not 0.0 < alpha < 1.0:
        raise ConfigError(f"--delta and --alpha must be between 0 and 1, got {delta} and {alpha}")
    if first_look < MIN_FIRST_LOOK:
        raise ConfigError(f"--first-look must be >= {MIN_FIRST_LOOK}, got {first_look}")
    for n_looks in range(1, 64):
        n_max = _n_for(alpha / ((k - 1) * n_looks), delta)
        if n_max > MAX_TRIALS:
            break
        looks = [n for n in (first_look * 2**i for i in range(40)) if n < n_max] + [n_max]
        if len(looks) <= n_looks:  # fewer looks than the union bound paid for: pad with repeats of N_max
            return Design(k, delta, alpha, tuple(looks + [n_max] * (n_looks - len(looks))))
    raise ConfigError(f"--delta {delta} needs over {MAX_TRIALS} trials per checkpoint; give a larger one")


def decide(
    sums: np.ndarray, pairs: np.ndarray, alive: np.ndarray, rates: np.ndarray, d: Design, last: bool
) -> tuple[np.ndarray, int | None]:
    """One look: ``sums[i, j]`` = sum over scored pairs of (x_i - x_j), ``pairs[i, j]`` their count, ``rates[i]``
    the scored rate of i, ``alive`` the survivors (bool K). Returns the new survivors and the chosen index (None
    to go on). Ties for the best rate go to the lower index."""
    idx = np.flatnonzero(alive)
    best = int(idx[np.argmax(rates[idx])])
    others = idx[idx != best]
    m = pairs[best, others]
    mean = np.where(m > 0, sums[best, others] / np.maximum(m, 1), 0.0)
    lower = mean - d.radius(m)
    alive = alive.copy()
    alive[others[lower > 0]] = False
    rest = others[lower <= 0]
    if rest.size == 0 or last or bool(np.all(lower[lower <= 0] >= -d.delta)):
        return alive, best
    return alive, None


def look_counts(scores: Sequence[Mapping[int, int | None]], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sums, pairs, rates)`` of :func:`decide` from each checkpoint's ``episode_index -> 1 / 0 / None`` (None:
    left out by the coverage rule) over the first ``n`` planned episodes (indices 0..n-1)."""
    k = len(scores)
    x = np.full((k, n), np.nan)
    for i, s in enumerate(scores):
        for e, v in s.items():
            if e < n and v is not None:
                x[i, e] = v
    ok = ~np.isnan(x)
    both = ok[:, None, :] & ok[None, :, :]
    xz = np.nan_to_num(x)
    sums = ((xz[:, None, :] - xz[None, :, :]) * both).sum(axis=2)
    pairs = both.sum(axis=2)
    scored = ok.sum(axis=1)
    rates = np.where(scored > 0, xz.sum(axis=1) / np.maximum(scored, 1), -1.0)
    return sums, pairs, rates


def simulate(p: Sequence[float], d: Design, runs: int, rng: np.random.Generator) -> dict[str, Any]:
    """The rule on ``runs`` simulated training runs with true rates ``p`` (independent Bernoulli trials), vectorised
    over runs: ``{"runs", "wrong"`` (chosen more than delta below the best), ``"trials"`` (mean trials run over
    all checkpoints), ``"fixed_trials"`` (K x fixed N)``}``. The looks are :func:`decide`'s, on the same counts."""
    rate = np.asarray(p, dtype=float)
    k = rate.size
    alive = np.ones((runs, k), dtype=bool)
    chosen = np.full(runs, -1)
    succ = np.zeros((runs, k))
    used = np.zeros((runs, k))
    prev = 0
    for n_look, n in enumerate(d.looks):
        inc = n - prev
        prev = n
        going = chosen < 0
        succ += rng.binomial(inc, rate, size=(runs, k)) * (alive & going[:, None])
        used += inc * (alive & going[:, None])
        rates = np.where(alive, succ / n, -1.0)
        best = np.argmax(rates, axis=1)  # ties: the lower index, as decide()
        diff = (succ[np.arange(runs), best][:, None] - succ) / n  # D(i*, j), every pair scored
        lower = diff - d.radius(n)
        other = alive & (np.arange(k)[None, :] != best[:, None])
        out = other & (lower > 0) & going[:, None]
        alive &= ~out
        rest = other & ~out
        stop = going & (~rest.any(axis=1) | (n_look == len(d.looks) - 1) | np.all(~rest | (lower >= -d.delta), axis=1))
        chosen[stop] = best[stop]
    wrong = int(np.sum(rate.max() - rate[chosen] > d.delta))
    return {
        "runs": runs,
        "wrong": wrong,
        "trials": float(used.sum(axis=1).mean()),
        "fixed_trials": k * fixed_n(k, d.delta, d.alpha),
    }
