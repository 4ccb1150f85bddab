"""Exact operating characteristics of the sequential paired rule (:mod:`rollbench.grading.sequential`) at a look
schedule: the probability of each decision and the distribution of the pairs it takes, by dynamic programming over
the counts of B-only and A-only pairs (no simulation, no approximation).

State after ``n`` pairs: ``(kb, ka)``, the B-only and A-only pairs so far (``kb + ka <= n``), with its probability of
not having stopped. Each pair is B-only with probability ``p_b_only``, A-only with ``p_a_only``, concordant
otherwise; at a look (pairs ``look_every``, ``2 look_every``, ... and the budget) the walk stops where the decision
tables say so. Work: O(budget^3 / 3) float operations (134 pairs: milliseconds; 1,000 pairs: about a second).

The walk over discordant pairs alone (:func:`rollbench.grading.sequential.type1_error`) is the special case of looks
after every pair with every pair discordant; the tests check the two against each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScheduleOC:
    """Exact probabilities of the final decisions (floats in [0, 1], summing to 1) and ``survival``: float64 array
    ``(budget + 1,)``, ``survival[n]`` = P(no decision after the look at pair n, or n not a look and none before)."""

    b_better: float
    a_better: float
    futility: float
    budget_exhausted: float
    survival: np.ndarray

    def expected_pairs(self, round_size: int = 1) -> float:
        """Expected pairs run when pairs are run ``round_size`` at a time (the runner's rounds of workers x batch
        size, or the look interval when larger): a decision at pair ``t`` has cost ``ceil(t / round_size)`` rounds,
        at most the budget."""
        budget = self.survival.size - 1
        total = 0.0
        for start in range(0, budget, round_size):  # a round starting at `start` runs when no decision by `start`
            total += min(round_size, budget - start) * float(self.survival[start])
        return total


def decision_masks(upper: np.ndarray, futile: np.ndarray, futility: bool) -> tuple[np.ndarray, ...]:
    """Boolean ``(budget + 1, budget + 1)`` tables over ``(kb, ka)``: b_better, a_better, futility at a look (cells
    with ``kb + ka > budget`` are never reached)."""
    n = upper.size - 1
    kb, ka = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    d = np.minimum(kb + ka, n)
    hit_b = kb >= upper[d]
    hit_a = (ka >= upper[d]) & ~hit_b
    fut = (kb <= futile[d]) & (ka <= futile[d]) & ~hit_b & ~hit_a if futility else np.zeros_like(hit_b)
    return hit_b, hit_a, fut


def schedule_oc(
    upper: np.ndarray, futile: np.ndarray, p_b_only: float, p_a_only: float, look_every: int, futility: bool = True
) -> ScheduleOC:
    """The rule with decision tables ``upper`` / ``futile`` (:class:`rollbench.grading.sequential.Boundaries`, budget =
    their length - 1) at pair probabilities ``p_b_only`` / ``p_a_only``, looking every ``look_every`` pairs and at the
    budget; futility stops the walk only when ``futility``. Raises ValueError on probabilities outside [0, 1]."""
    if not (p_b_only >= 0 and p_a_only >= 0 and p_b_only + p_a_only <= 1) or look_every < 1:
        raise ValueError(f"bad pair probabilities {p_b_only}, {p_a_only} or look interval {look_every}")
    budget = upper.size - 1
    hit_b, hit_a, fut = decision_masks(upper, futile, futility)
    p_c = 1.0 - p_b_only - p_a_only
    state = np.zeros((budget + 1, budget + 1))
    state[0, 0] = 1.0
    out = np.zeros(3)
    survival = np.ones(budget + 1)
    for n in range(1, budget + 1):
        s = state[: n + 1, : n + 1]
        prev = s.copy()
        s *= p_c
        s[1:, :] += p_b_only * prev[:-1, :]
        s[:, 1:] += p_a_only * prev[:, :-1]
        if n % look_every == 0 or n == budget:
            for i, mask in enumerate((hit_b, hit_a, fut)):
                m = mask[: n + 1, : n + 1]
                out[i] += s[m].sum()
                s[m] = 0.0
        survival[n] = s.sum()
    return ScheduleOC(float(out[0]), float(out[1]), float(out[2]), float(survival[budget]), survival)
