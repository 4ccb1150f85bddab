"""Early elimination of checkpoints with a stated guarantee (``rollbench checkpoints --eliminate``).

**Rule.** K checkpoints run the same planned trials, in plan order, up to looks ``n_1 < n_2 < ... < n_L = N_max``
trials (``first_look``, doubling). At each look, among the surviving checkpoints, ``i*`` has the highest rate; for
each other survivor ``j`` the paired differences ``x_i* - x_j`` (in {-1, 0, 1}) over the ``m`` pairs both scored
have mean ``D`` and ``c`` discordant pairs, and get the one-sided lower bound ``D - r`` with ``r`` the smaller of
two radii, each at level ``l / 2``, ``l = alpha / ((K - 1) L)``:

* Hoeffding (values in [-1, 1]): ``sqrt(2 ln(2 / l) / m)``;
* empirical Bernstein (Maurer & Pontil 2009, Theorem 4, for ``(1 - x) / 2`` in [0, 1]):
  ``sqrt(2 v ln(4 / l) / m) + 14 ln(4 / l) / (3 (m - 1))``, ``v`` the unbiased sample variance of the differences
  (``(c - m D^2) / (m - 1)``), small when checkpoints succeed and fail on the same scenes.

Then ``j`` is **eliminated** when ``D - r > 0``; the rule **stops** and chooses ``i*`` when one checkpoint survives,
when every survivor has ``D - r >= -delta``, or at the last look (``N_max`` is the smallest count whose Hoeffding
radius is at most ``delta``, so there ``D >= 0`` gives ``D - r >= -delta``).

**Guarantee.** P(the chosen checkpoint's success rate is more than ``delta`` below the best's) <= ``alpha``, for any
rates and any dependence between checkpoints on a trial, trials independent (seeds are independent scenes).
Proof: with probability >= 1 - alpha every bound ``D(j, b) - r <= p_j - p_b`` holds for the best ``b``, all
``K - 1`` others and all ``L`` looks (a union of ``2 (K - 1) L`` events of level ``l / 2``); then ``b`` is never
eliminated and at the stop ``p_i* - p_b >= D(i*, b) - r >= -delta``. The fixed-N design with the same guarantee and
no knowledge of the variance evaluates every checkpoint at :func:`fixed_n` trials (Hoeffding, union over the K - 1
pairs) and chooses the highest rate. ``tests/test_checkpoint_elimination.py`` checks the guarantee by seeded
simulation; ``benchmarks/bench_checkpoints.py`` measures the episodes it saves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError

MAX_TRIALS = 1_000_000  # N_max bound (a stated upper bound on the work)


@dataclass(frozen=True)
class Design:
    """``k`` checkpoints, ``delta``, ``alpha`` and the ``looks`` (cumulative trials; the last is N_max; a repeated
    N_max pads the looks to the count the union bound paid for)."""

    k: int
    delta: float
    alpha: float
    looks: tuple[int, ...]

    @property
    def level(self) -> float:
        """``l = alpha / ((K - 1) L)``: each pair's and look's share; each of its two radii gets ``l / 2``."""
        return self.alpha / (max(1, self.k - 1) * len(self.looks))

    def radius(self, m: Any, discordant: Any, total: Any) -> Any:
        """The radius of the lower bound on a mean of ``m`` paired differences with ``discordant`` nonzero ones
        summing to ``total`` (arrays broadcast); inf for m < 2."""
        m = np.asarray(m, dtype=float)
        mm = np.maximum(m, 2.0)
        log_h, log_b = math.log(2.0 / self.level), math.log(4.0 / self.level)
        hoeffding = np.sqrt(2.0 * log_h / mm)
        var = np.maximum(np.asarray(discordant, dtype=float) - np.asarray(total, dtype=float) ** 2 / mm, 0.0) / (mm - 1)
        bernstein = np.sqrt(2.0 * var * log_b / mm) + 14.0 * log_b / (3.0 * (mm - 1))
        return np.where(m >= 2, np.minimum(hoeffding, bernstein), np.inf)

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "delta": self.delta, "alpha": self.alpha, "looks": list(self.looks), "level": self.level,
                "fixed_n": fixed_n(self.k, self.delta, self.alpha)}  # fmt: skip


def _n_for(level: float, delta: float) -> int:
    return math.ceil(2.0 * math.log(1.0 / level) / delta**2)


def fixed_n(k: int, delta: float, alpha: float) -> int:
    """Trials per checkpoint of the fixed-N design with the same guarantee: ``(K-1) exp(-N delta^2 / 2) <= alpha``."""
    return _n_for(alpha / max(1, k - 1), delta)


def design(k: int, delta: float, alpha: float, first_look: int = 16) -> Design:
    """The looks for ``k`` checkpoints: ``first_look``, doubling, up to N_max (Hoeffding radius <= delta at the level
    the number of looks implies). ConfigError for k < 2, delta or alpha outside (0, 1), a first look < 2 or above
    the N_max of a single look (the largest N_max of any design here: it would be cut to it), or N_max over
    :data:`MAX_TRIALS`."""
    if k < 2:
        raise ConfigError(f"--eliminate needs at least 2 checkpoints, found {k}")
    if not 0.0 < delta < 1.0 or not 0.0 < alpha < 1.0:
        raise ConfigError(f"--delta and --alpha must be between 0 and 1, got {delta} and {alpha}")
    most = _n_for(alpha / (2 * (k - 1)), delta)  # N_max of a single look: a larger first look would be cut to it
    if not 2 <= first_look <= most:
        raise ConfigError(
            f"--first-look must be between 2 and {most} (the episodes per checkpoint of a single look for {k} "
            f"checkpoints at delta {delta:g}, alpha {alpha:g}), got {first_look}"
        )
    for n_looks in range(1, 64):
        n_max = _n_for(alpha / (2 * (k - 1) * n_looks), delta)
        if n_max > MAX_TRIALS:
            break
        looks = [n for n in (first_look * 2**i for i in range(40)) if n < n_max] + [n_max]
        if len(looks) <= n_looks:
            return Design(k, delta, alpha, tuple(looks + [n_max] * (n_looks - len(looks))))
    raise ConfigError(f"--delta {delta} needs over {MAX_TRIALS} trials per checkpoint; give a larger one")


@dataclass(frozen=True)
class Counts:
    """One look's counts over K checkpoints: ``sums[i, j]`` = sum of (x_i - x_j) over pairs both scored,
    ``pairs[i, j]`` their number, ``discordant[i, j]`` those with x_i != x_j, ``rates[i]`` i's scored rate (-1 when
    nothing scored)."""

    sums: np.ndarray
    pairs: np.ndarray
    discordant: np.ndarray
    rates: np.ndarray


def look_counts(scores: Sequence[Mapping[int, int | None]], n: int) -> Counts:
    """The :class:`Counts` of each checkpoint's ``episode_index -> 1 / 0 / None`` (None: left out by the coverage
    rule) over the first ``n`` planned episodes (indices 0..n-1)."""
    x = np.full((len(scores), n), np.nan)
    for i, s in enumerate(scores):
        for e, v in s.items():
            if 0 <= e < n and v is not None:
                x[i, e] = v
    ok = ~np.isnan(x)
    both = ok[:, None, :] & ok[None, :, :]
    xz = np.nan_to_num(x)
    diff = (xz[:, None, :] - xz[None, :, :]) * both
    scored = ok.sum(axis=1)
    rates = np.where(scored > 0, xz.sum(axis=1) / np.maximum(scored, 1), -1.0)
    return Counts(diff.sum(axis=2), both.sum(axis=2), (diff != 0).sum(axis=2), rates)


def decide(c: Counts, alive: np.ndarray, d: Design, last: bool) -> tuple[np.ndarray, int | None, dict[str, Any]]:
    """One look on the survivors ``alive`` (bool K): the new survivors, the chosen index (None: go on) and the
    look's record (``best``, per other survivor its ``pairs``, ``mean``, ``lower`` bound). Rate ties go to the
    lower index."""
    idx = np.flatnonzero(alive)
    best = int(idx[np.argmax(c.rates[idx])])
    others = idx[idx != best]
    m = c.pairs[best, others]
    mean = np.where(m > 0, c.sums[best, others] / np.maximum(m, 1), 0.0)
    lower = mean - d.radius(m, c.discordant[best, others], c.sums[best, others])
    alive = alive.copy()
    alive[others[lower > 0]] = False
    rest = lower[lower <= 0]
    record = {"best": best, "others": [{"index": int(j), "pairs": int(p), "mean": float(mu), "lower": float(lo)}
                                       for j, p, mu, lo in zip(others, m, mean, lower, strict=True)]}  # fmt: skip
    if rest.size == 0 or last or bool(np.all(rest >= -d.delta)):
        return alive, best, record
    return alive, None, record
