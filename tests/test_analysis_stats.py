"""rollbench.grading.stats against hand counts and reference values from scipy/statsmodels."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap, multinomial
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from rollbench.grading.stats import (
    bootstrap_difference,
    fisher_exact_test,
    holm,
    mcnemar_exact,
    mcnemar_from_counts,
    mcnemar_power,
    paired_sample_size,
    wilson_interval,
)


def test_wilson_interval_reference_values_and_grade_uses_the_same_function() -> None:
    import rollbench.grading.grade

    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 3)[0] == 0.0 and wilson_interval(3, 3)[1] == 1.0  # exact, not 5.6e-17 from rounding
    assert rollbench.grading.grade.wilson_interval is wilson_interval
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(11, 10)


def test_mcnemar_exact_hand_computed_table() -> None:
    # 5 pairs where only A succeeded, 1 where only B did: P(X <= 1 | 6, 1/2) = 7/64, two-sided 14/64
    a = [1] * 5 + [0] * 1 + [1] * 10 + [0] * 4
    b = [0] * 5 + [1] * 1 + [1] * 10 + [0] * 4
    r = mcnemar_exact(a, b)
    assert (r.a_only, r.b_only, r.both, r.neither) == (5, 1, 10, 4)
    assert r.p_value == pytest.approx(14 / 64, abs=1e-12)
    assert mcnemar_exact(a, b, alternative="greater").p_value == pytest.approx(7 / 64, abs=1e-12)
    assert mcnemar_exact(a, b, alternative="less").p_value == pytest.approx(63 / 64, abs=1e-12)


@pytest.mark.parametrize("table", [(794, 150, 86, 570), (10, 5, 1, 4), (3, 0, 0, 7), (0, 12, 3, 0), (5, 9, 9, 5)])
def test_mcnemar_exact_matches_statsmodels_and_scipy(table: tuple[int, int, int, int]) -> None:
    both, a_only, b_only, neither = table
    r = mcnemar_from_counts(a_only, b_only, both=both, neither=neither)
    expected = sm_mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue
    assert r.p_value == pytest.approx(expected, rel=1e-9, abs=1e-15)
    if a_only + b_only:
        one_sided = binomtest(a_only, a_only + b_only, 0.5, alternative="greater").pvalue
        assert mcnemar_from_counts(a_only, b_only, alternative="greater").p_value == pytest.approx(one_sided)


def test_mcnemar_without_discordant_pairs_is_p_one_and_bad_input_is_refused() -> None:
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]).p_value == 1.0
    with pytest.raises(ValueError, match="equal lengths"):
        mcnemar_exact([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([2, 0], [1, 0])
    with pytest.raises(ValueError, match="valid: two-sided, greater, less"):
        mcnemar_exact([1], [0], alternative="bigger")  # type: ignore[arg-type]


def test_paired_bootstrap_is_reproducible_with_a_seed_and_agrees_with_scipy() -> None:
    rng = np.random.default_rng(7)
    a = (rng.random(60) < 0.5).astype(int)
    b = np.where(rng.random(60) < 0.8, a, 1 - a)
    b[:6] = 1
    r1 = bootstrap_difference(a, b, seed=3)
    r2 = bootstrap_difference(a, b, seed=3)
    assert r1 == r2
    assert bootstrap_difference(a, b, seed=4) != r1
    assert r1.difference == pytest.approx(b.mean() - a.mean())
    ref = bootstrap((b - a,), np.mean, method="percentile", n_resamples=10_000, rng=np.random.default_rng(0))
    assert r1.low == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert r1.high == pytest.approx(ref.confidence_interval.high, abs=0.02)


def test_paired_bootstrap_of_identical_outcomes_is_the_zero_interval() -> None:
    r = bootstrap_difference([1, 0, 1, 1], [1, 0, 1, 1], seed=0, n_resamples=200)
    assert (r.difference, r.low, r.high) == (0.0, 0.0, 0.0)
    assert bootstrap_difference([], []).difference is None


def test_stratified_bootstrap_keeps_each_stratum_whole() -> None:
    # stratum x: A always fails, B always succeeds; stratum y: both always fail -> every resample differs by 1/2
    a, b = [0, 0, 0, 0], [1, 1, 0, 0]
    r = bootstrap_difference(a, b, strata=["x", "x", "y", "y"], n_resamples=500)
    assert (r.difference, r.low, r.high) == (0.5, 0.5, 0.5)
    unstratified = bootstrap_difference(a, b, n_resamples=500)
    assert unstratified.low < 0.5 < unstratified.high


def test_unpaired_bootstrap_allows_different_lengths() -> None:
    r = bootstrap_difference([0, 0, 0], [1, 1, 1, 1, 1], paired=False, n_resamples=100)
    assert (r.difference, r.low, r.high, r.paired) == (1.0, 1.0, 1.0, False)
    with pytest.raises(ValueError, match="equal lengths"):
        bootstrap_difference([0, 0, 0], [1, 1])


def test_holm_hand_computed_and_order_preserved() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3*0.01 = 0.03, 2*0.03 = 0.06, max(0.06, 1*0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_fisher_exact_hand_computed() -> None:
    # 3/3 vs 0/3: each extreme table has probability 1 / C(6, 3) = 1/20, two-sided 2/20
    assert fisher_exact_test(3, 3, 0, 3).p_value == pytest.approx(0.1)
    assert fisher_exact_test(3, 3, 0, 3, alternative="greater").p_value == pytest.approx(0.05)
    assert fisher_exact_test(0, 0, 1, 2).p_value == 1.0


def test_paired_sample_size_follows_connor_1987_by_hand() -> None:
    # p_a = 0.6, p_b = 0.7, independent: only-A 0.18, only-B 0.28, psi = 0.46, delta = 0.1
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    n = math.ceil((z_a * math.sqrt(0.46) + z_b * math.sqrt(0.46 - 0.01)) ** 2 / 0.01)
    r = paired_sample_size(0.6, 0.7)
    assert n == 359
    assert (r.n, r.p_a_only, r.p_b_only) == (359, pytest.approx(0.18), pytest.approx(0.28))
    assert r.exact_power == pytest.approx(mcnemar_power(359, 0.18, 0.28))
    assert r.n_exact >= r.n
    assert mcnemar_power(r.n_exact, 0.18, 0.28) >= 0.8 > mcnemar_power(r.n_exact - 1, 0.18, 0.28)
    # a known discordance (correlated policies) needs fewer episodes
    assert paired_sample_size(0.6, 0.7, discordant=0.2).n < r.n
    with pytest.raises(ValueError, match="impossible"):
        paired_sample_size(0.6, 0.7, discordant=0.05)
    with pytest.raises(ValueError, match="no difference"):
        paired_sample_size(0.6, 0.6)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_mcnemar_power_equals_brute_force_enumeration(alternative: str) -> None:
    n, pa_only, pb_only = 14, 0.1, 0.35
    probs = [pa_only, pb_only, 1 - pa_only - pb_only]
    brute = 0.0
    for a_only, b_only in itertools.product(range(n + 1), repeat=2):
        if a_only + b_only > n:
            continue
        p = mcnemar_from_counts(a_only, b_only, alternative=alternative).p_value  # type: ignore[arg-type]
        if p <= 0.05:
            brute += multinomial.pmf([a_only, b_only, n - a_only - b_only], n, probs)
    assert mcnemar_power(n, pa_only, pb_only, 0.05, alternative) == pytest.approx(brute, abs=1e-12)  # type: ignore[arg-type]
