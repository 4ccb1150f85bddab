"""The sequential paired test (grading/sequential.py): its exact error computations against brute-force enumeration
in exact (Fraction) arithmetic, its decision tables against the likelihood ratio computed exactly, its looks against
hand counts, and its false-positive rate by seeded simulation (10,000 sequences per setting) at several success
rates, correlations and look schedules, next to a fixed-N McNemar test looked at after every batch, which exceeds
alpha (the failure the rule prevents)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom

from rollbench.grading.sequential import (
    DECISIONS,
    MAX_SEQUENTIAL_PAIRS,
    boundaries_for,
    decide_many,
    design,
    operating_characteristics,
    run_looks,
    type1_error,
)

ALPHA = 0.05
RULE = design(0.2)  # the default design at delta = 0.2 (pure; computed once)
SEQUENCES = 10_000
MC_SE = math.sqrt(ALPHA * (1 - ALPHA) / SEQUENCES)  # 0.0022


def _paths(bounds, n_disc, binding):
    """Every discordant sequence of length ``n_disc`` (1 = B-only) with its first stop, by enumeration."""
    for seq in itertools.product((0, 1), repeat=n_disc):
        d = k = 0
        stop = None
        for x in seq:
            d, k = d + 1, k + x
            if k >= bounds.upper[d]:
                stop = "b"
            elif d - k >= bounds.upper[d]:
                stop = "a"
            elif binding and k <= bounds.futile[d] and d - k <= bounds.futile[d]:
                stop = "f"
            if stop:
                break
        yield seq, stop


def _prob(seq, theta):
    k = sum(seq)
    return theta**k * (1 - theta) ** (len(seq) - k)


def test_type1_error_equals_exact_enumeration_in_fractions():
    bounds = boundaries_for(0.7, 1.2, -0.9, 12)  # low thresholds, so that the small walk crosses often
    exact = sum((_prob(s, Fraction(1, 2)) for s, stop in _paths(bounds, 12, False) if stop in ("a", "b")), Fraction(0))
    assert exact > Fraction(1, 10)  # the case is not trivial
    assert type1_error(bounds, 12) == pytest.approx(float(exact), abs=1e-14)


def test_futility_error_and_power_equal_exact_enumeration_in_fractions():
    theta1, psi, n = Fraction(7, 10), Fraction(2, 5), 8
    bounds = boundaries_for(float(theta1), 1.2, -0.9, n)
    fut = sum((_prob(s, theta1) for s, stop in _paths(bounds, n, True) if stop == "f"), Fraction(0))
    # power: enumerate every pair as concordant (c), B-only (1) or A-only (0) with exact probabilities
    power = Fraction(0)
    for pairs in itertools.product(("c", 1, 0), repeat=n):
        p = Fraction(1)
        disc = [x for x in pairs if x != "c"]
        for x in pairs:
            p *= (1 - psi) if x == "c" else psi * (theta1 if x == 1 else 1 - theta1)
        stop = None
        d = k = 0
        for x in disc:
            d, k = d + 1, k + x
            if k >= bounds.upper[d]:
                stop = "b"
            elif d - k >= bounds.upper[d] or (k <= bounds.futile[d] and d - k <= bounds.futile[d]):
                stop = "other"
            if stop:
                break
        power += p if stop == "b" else 0
    got_fut, got_power = operating_characteristics(bounds, float(theta1), float(psi), n)
    assert got_fut == pytest.approx(float(fut), abs=1e-14)
    assert got_power == pytest.approx(float(power), abs=1e-13)


def test_decision_tables_match_the_likelihood_ratio_in_exact_arithmetic():
    rule = RULE
    theta1 = Fraction(rule.theta1)  # the float's exact value
    big_a, small_b = Fraction(math.exp(rule.efficacy_llr)), Fraction(math.exp(rule.futility_llr))
    for d in range(0, 60):
        for k in range(d + 1):
            lr_b = (2 * theta1) ** k * (2 * (1 - theta1)) ** (d - k)
            lr_a = (2 * theta1) ** (d - k) * (2 * (1 - theta1)) ** k
            assert (k >= rule.bounds.upper[d]) == (lr_b >= big_a), (d, k)
            assert (k <= rule.bounds.futile[d]) == (lr_b <= small_b), (d, k)
            assert (d - k <= rule.bounds.futile[d]) == (lr_a <= small_b), (d, k)
            llr_b, llr_a = rule.llr(d, k)
            assert llr_b == pytest.approx(math.log(lr_b), abs=1e-9)
            assert llr_a == pytest.approx(math.log(lr_a), abs=1e-9)


def _fixed_n_power(n, a_only, b_only, alpha=ALPHA):
    """Exact power of the two-sided exact McNemar test with n pairs, by direct summation (the oracle)."""
    total = 0.0
    for d in range(1, n + 1):
        ks = np.arange(d + 1)
        tail = np.minimum(binom.cdf(ks, d, 0.5), binom.sf(ks - 1, d, 0.5))  # P(as extreme) on k's side
        reject = np.minimum(2 * tail, 1.0) <= alpha
        total += binom.pmf(d, n, a_only + b_only) * float(binom.pmf(ks, d, b_only / (a_only + b_only))[reject].sum())
    return total


def test_default_design_has_its_stated_exact_errors_and_at_least_the_fixed_n_power():
    rule = RULE
    assert rule.theta1 == pytest.approx(0.7)  # p_a = 0.5, independent: 0.5 + delta
    assert rule.fixed_n == 103  # exact McNemar, 80% power at 0.5 -> 0.7 (compare --power)
    fixed_power = _fixed_n_power(103, 0.5 * 0.3, 0.7 * 0.5)
    assert fixed_power == pytest.approx(rule.power_target, abs=1e-9)  # 0.8018 > 1 - beta
    assert rule.type1_error <= ALPHA
    assert rule.power >= fixed_power
    assert rule.efficacy_llr < math.log(2 / ALPHA)  # calibrated to the budget: below Ville's threshold
    assert rule.fixed_n <= rule.budget <= 2 * rule.fixed_n
    # the budget is the smallest with that power: one pair fewer falls short
    assert design(0.2, budget=rule.budget - 1).power < fixed_power


def test_looks_follow_hand_counts_and_stop_at_the_first_decision():
    rule = RULE
    xa = [1, 0, 1, 1, 0, 0, 1, 0] + [0] * 30
    xb = [1, 1, 0, 1, 0, 1, 1, 1] + [1] * 30
    looks = run_looks(rule, xa, xb)
    # by hand: pair 1 concordant; 2 B-only; 3 A-only; 4, 5 concordant; 6 B-only; 7 concordant; 8 B-only
    assert [(lk.pairs, lk.discordant, lk.b_only, lk.a_only) for lk in looks[:8]] == [
        (1, 0, 0, 0), (2, 1, 1, 0), (3, 2, 1, 1), (4, 2, 1, 1), (5, 2, 1, 1), (6, 3, 2, 1), (7, 3, 2, 1), (8, 4, 3, 1),
    ]  # fmt: skip
    last = looks[-1]
    # llr_b = k log 1.4 + (d - k) log 0.6 first reaches a = rule.efficacy_llr at:
    want = next(n for n in range(9, 40) if (n - 8 + 3) * math.log(1.4) + math.log(0.6) >= rule.efficacy_llr - 1e-12)
    assert (last.pairs, last.decision) == (want, "b_better")
    assert all(lk.decision == "continue" for lk in looks[:-1])
    every5 = run_looks(rule, xa, xb, look_every=5)
    assert [lk.pairs for lk in every5] == list(range(5, 5 * math.ceil(want / 5) + 1, 5))


def test_budget_exhausted_when_no_boundary_is_reached():
    rule = design(0.2, budget=6)
    looks = run_looks(rule, [1, 0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 0, 1, 0])
    assert [lk.decision for lk in looks] == ["continue"] * 5 + ["budget_exhausted"]


@pytest.mark.parametrize("look_every", [1, 7])
def test_vectorised_decisions_equal_the_look_by_look_ones(look_every):
    rule = RULE
    rng = np.random.default_rng(7)
    xa = (rng.random((300, rule.budget)) < 0.5).astype(np.int8)
    xb = (rng.random((300, rule.budget)) < rng.uniform(0.3, 0.9, (300, 1))).astype(np.int8)
    code, pairs = decide_many(rule, xa, xb, look_every)
    for i in range(300):
        last = run_looks(rule, xa[i], xb[i], look_every)[-1]
        assert (DECISIONS[code[i]], pairs[i]) == (last.decision, last.pairs)


def _null_pairs(rng, p, rho, n):
    """SEQUENCES x n pairs with both success rates ``p`` and correlation ``rho`` between A and B on a pair."""
    both = p * p + rho * p * (1 - p)
    one = p - both  # P(A only) = P(B only)
    u = rng.random((SEQUENCES, n))
    xa = ((u < both) | ((u >= both) & (u < both + one))).astype(np.int8)
    xb = ((u < both) | ((u >= both + one) & (u < both + 2 * one))).astype(np.int8)
    return xa, xb


def _looked_mcnemar_rejects(xa, xb, looks):
    """The fixed-N exact McNemar test (two-sided, level ALPHA) looked at after every batch: rejects at any look."""
    d = np.cumsum(xa != xb, axis=1)[:, np.array(looks) - 1]
    k = np.cumsum(xb > xa, axis=1)[:, np.array(looks) - 1]
    p = np.minimum(1.0, 2 * binom.cdf(np.minimum(k, d - k), d, 0.5))
    return (p <= ALPHA).any(axis=1)


@pytest.mark.parametrize("look_every", [1, 10])
@pytest.mark.parametrize(("p", "rho"), [(0.1, 0.0), (0.5, 0.0), (0.5, 0.6), (0.85, 0.3), (0.5, -0.5)])
def test_false_positive_rate_is_at_most_alpha_by_simulation(p, rho, look_every):
    rule = RULE
    rng = np.random.default_rng([32, int(p * 100), int(rho * 100) + 100, look_every])
    xa, xb = _null_pairs(rng, p, rho, rule.budget)
    code, _ = decide_many(rule, xa, xb, look_every)
    fpr = float(np.isin(code, (1, 2)).mean())
    assert fpr <= ALPHA + 2.58 * MC_SE  # <= alpha within Monte-Carlo error (one-sided 99.5%)
    assert fpr <= rule.type1_error + 2.58 * MC_SE
    # the same data, a fixed-N McNemar test at N = 103 looked at after every batch of 10: false positives > alpha
    if (p, rho, look_every) == (0.5, 0.0, 10):
        rejects = _looked_mcnemar_rejects(xa, xb, [*range(10, rule.fixed_n + 1, 10), rule.fixed_n])
        assert rejects.mean() > ALPHA + 10 * MC_SE  # about 0.12


@pytest.mark.slow
def test_split_alpha_for_a_suite_keeps_each_task_at_its_share():
    rule = design(0.2, alpha=ALPHA / 4)  # Bonferroni over 4 tasks
    assert rule.type1_error <= ALPHA / 4
    rng = np.random.default_rng(4)
    xa, xb = _null_pairs(rng, 0.5, 0.0, rule.budget)
    code, _ = decide_many(rule, xa, xb)
    se = math.sqrt(ALPHA / 4 * (1 - ALPHA / 4) / SEQUENCES)
    assert float(np.isin(code, (1, 2)).mean()) <= ALPHA / 4 + 2.58 * se


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta": 0.0}, "0 < delta < 1"),
        ({"delta": 0.6, "p_a": 0.5}, "got delta=0.6, p_a=0.5"),
        ({"delta": 0.2, "alpha": 0.7}, "0 < alpha < 0.5"),
        ({"delta": 0.2, "budget": MAX_SEQUENTIAL_PAIRS + 1}, "budget must be between 1 and 5000"),
        ({"delta": 0.2, "discordant": 0.1}, "impossible"),
    ],
)
def test_impossible_designs_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        design(**kwargs)
