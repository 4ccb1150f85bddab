"""The early-elimination rule's guarantee, P(chosen more than delta below the best) <= alpha, by seeded simulation
(12,000 simulated training runs over four configurations at their worst case: every other checkpoint just over
delta below the best, near ties, shared and independent scenes), and its pieces against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollbench.checkpoints.eliminate import Counts, decide, design, fixed_n, look_counts
from rollbench.checkpoints.simulate import simulate
from rollbench.core.contracts import ConfigError

CONFIGS = [  # (rates, delta, alpha, shared scenes)
    ([0.5, 0.399, 0.399], 0.1, 0.05, 0.0),
    ([0.5, 0.399, 0.399, 0.399, 0.399], 0.1, 0.05, 0.8),
    ([0.6, 0.59, 0.58, 0.49], 0.1, 0.05, 0.5),  # near ties: only the last is a wrong choice
    ([0.5, 0.19, 0.19], 0.3, 0.2, 0.0),  # a large delta and alpha: few trials, the bound closest to tight
]


@pytest.mark.parametrize(("rates", "delta", "alpha", "shared"), CONFIGS)
def test_simulated_wrong_choices_stay_within_alpha(
    rates: list[float], delta: float, alpha: float, shared: float
) -> None:
    d = design(len(rates), delta, alpha)
    got = simulate(rates, d, 3000, np.random.default_rng(20261206), shared=shared)
    print(f"rates {rates} delta {delta} alpha {alpha} shared {shared}: {got['wrong']} wrong of {got['runs']} runs, "
          f"{got['trials']:.0f} trials (fixed N: {got['fixed_trials']})")  # fmt: skip
    assert got["wrong"] <= alpha * got["runs"]


def test_fixed_n_and_the_last_look_follow_hoeffding_by_hand() -> None:
    assert fixed_n(10, 0.1, 0.05) == math.ceil(2 * math.log(9 / 0.05) / 0.01) == 1039
    d = design(10, 0.1, 0.05)
    assert d.looks == (16, 32, 64, 128, 256, 512, 1024, 1594)
    n_max = math.ceil(2 * math.log(2 * 9 * 8 / 0.05) / 0.01)
    assert d.looks[-1] == n_max and d.radius(n_max, n_max, 0) <= 0.1


def test_a_look_eliminates_the_clearly_worse_and_keeps_the_close() -> None:
    d = design(3, 0.1, 0.05)
    scores = [
        {e: 1 for e in range(200)},
        {e: int(e % 10 != 0) for e in range(200)},
        {e: int(e % 2 == 0) for e in range(200)},
    ]
    counts = look_counts(scores, 200)
    assert counts.pairs[0, 1] == 200 and counts.sums[0, 1] == 20 and counts.discordant[0, 2] == 100
    alive, chosen, record = decide(counts, np.ones(3, dtype=bool), d, last=False)
    assert alive.tolist() == [True, True, False] and chosen is None and record["best"] == 0


def test_environment_errors_leave_pairs_out_of_the_counts() -> None:
    counts = look_counts([{0: 1, 1: None, 2: 1}, {0: 0, 1: 1, 2: None}], 3)
    assert isinstance(counts, Counts)
    assert counts.pairs[0, 1] == 1 and counts.sums[0, 1] == 1 and counts.rates.tolist() == [1.0, 0.5]


def test_bad_designs_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least 2 checkpoints"):
        design(1, 0.1, 0.05)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        design(3, 0.0, 0.05)


def test_the_simulation_sees_a_rule_that_breaks_the_guarantee() -> None:
    """The same simulation with a design that stops at 4 trials (its last look forces a choice): wrong choices
    far above its alpha (0.05), so the guarantee test above can fail."""
    from rollbench.checkpoints.eliminate import Design

    got = simulate([0.5, 0.19, 0.19], Design(3, 0.3, 0.05, (4,)), 3000, np.random.default_rng(1))
    print(f"a 4-trial design: {got['wrong']} wrong of {got['runs']}")
    assert got["wrong"] > 0.05 * got["runs"]  # 447 of 3000 with this seed
