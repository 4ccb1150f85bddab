"""Issue 40's guarantees of the sequential test, each against an independent oracle: a suite's family-wise error
including the pooled test (20,000 seeded null sequences at m = 3 and 10, next to the old split that exceeds alpha),
exchangeable plans (effects that vary by initial state: the shuffled plan keeps alpha, plan order does not), the exact
two-count dynamic programme at a look schedule (brute-force enumeration and seeded simulation), and honest budgets
(the design's power at delta at least the fixed-N test's at every look schedule; impossible budgets refused).

The simulators here draw outcomes and pair them themselves; of the code under test they call only the decision
function (``decide_many``) with the rules the runner builds, and the plan's permutation (``trial_order``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rollbench.core.plan import trial_order
from rollbench.grading.sequential import decide_many, design, family_alphas
from rollbench.grading.sequential_oc import schedule_oc

ALPHA = 0.05
NULL_SEQUENCES = 20_000


def _family_false_positives(m: int, task_alpha: float, pooled_alpha: float, seed: int) -> int:
    """Null sequences (every pair discordant, a fair coin: the worst case) of an m-task suite in which some task's or
    the pooled test's decision is "better"; the pooled test sees each task's pairs up to its decision, in order."""
    rule = design(0.3, alpha=task_alpha)
    pooled = design(0.3, alpha=pooled_alpha, budget=m * rule.budget)
    rng = np.random.default_rng(seed)
    false = 0
    for chunk in range(NULL_SEQUENCES // 5_000):
        s = 5_000
        xb = rng.integers(0, 2, size=(s, m, rule.budget), dtype=np.int8)
        xa = (1 - xb).astype(np.int8)  # every pair discordant: B-only or A-only
        any_false = np.zeros(s, dtype=bool)
        keep = np.zeros((s, m, rule.budget), dtype=bool)
        for t in range(m):
            code, used = decide_many(rule, xa[:, t], xb[:, t])
            any_false |= (code == 1) | (code == 2)
            keep[:, t] = np.arange(rule.budget)[None, :] < used[:, None]
        # the pooled sequence: each task's counted pairs in family order; padding = concordant pairs (both fail),
        # which move no statistic, at the end
        flat_keep, flat_b = keep.reshape(s, -1), xb.reshape(s, -1)
        order = np.argsort(~flat_keep, axis=1, kind="stable")
        pb = np.take_along_axis(flat_b, order, axis=1)
        kept = np.take_along_axis(flat_keep, order, axis=1)
        pa = np.where(kept, 1 - pb, 0).astype(np.int8)
        pb = np.where(kept, pb, 0).astype(np.int8)
        code, _ = decide_many(pooled, pa, pb)
        any_false |= (code == 1) | (code == 2)
        false += int(any_false.sum())
        del chunk
    return false


@pytest.mark.slow
@pytest.mark.parametrize("m", [3, 10])
def test_a_suites_family_wise_false_positive_rate_including_the_pooled_test_is_at_most_alpha(m):
    task_alpha, pooled_alpha = family_alphas(ALPHA, m)
    assert pooled_alpha is not None and task_alpha * m + pooled_alpha == pytest.approx(ALPHA)
    false = _family_false_positives(m, task_alpha, pooled_alpha, seed=m)
    rate = false / NULL_SEQUENCES
    msg = f"m={m}: {false} of {NULL_SEQUENCES} null sequences had a false 'better' ({rate:.4f}, alpha {ALPHA})"
    assert rate <= ALPHA, msg
    print(msg)


@pytest.mark.slow
def test_the_old_split_tasks_at_alpha_over_m_and_pooled_at_alpha_exceeds_alpha():
    """The check above can fail: the split of before issue 40 is caught by the same simulation (0.071 measured)."""
    false = _family_false_positives(3, ALPHA / 3, ALPHA, seed=33)
    assert false / NULL_SEQUENCES > ALPHA + 0.01, f"{false} of {NULL_SEQUENCES}"


STATES = 134


def _state_effect_sequences(gap: float, shuffled: bool, sims: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes of ``sims`` runs over the 134 stored states: B better by ``gap`` on states 0..66, A on 67..133 (equal
    on average), independent arms; trial j uses state ``order[j]`` (the plan's permutation with seed = the run's
    index, or plan order)."""
    half = STATES // 2
    p_a = np.where(np.arange(STATES) < half, 0.5 - gap, 0.5 + gap)
    p_b = np.where(np.arange(STATES) < half, 0.5 + gap, 0.5 - gap)
    rng = np.random.default_rng(seed)
    if shuffled:
        orders = np.array([trial_order(s, "libero/some-task", 0, STATES, STATES) for s in range(sims)])
    else:
        orders = np.tile(np.arange(STATES), (sims, 1))
    u_a, u_b = rng.random((sims, STATES)), rng.random((sims, STATES))
    return (u_a < p_a[orders]).astype(np.int8), (u_b < p_b[orders]).astype(np.int8)


@pytest.mark.slow
@pytest.mark.parametrize("gap", [0.1, 0.2, 0.4])
def test_a_shuffled_plan_keeps_false_positives_at_most_alpha_when_effects_vary_by_initial_state(gap):
    rule = design(0.2, budget=STATES)
    sims = NULL_SEQUENCES
    xa, xb = _state_effect_sequences(gap, shuffled=True, sims=sims, seed=int(gap * 100))
    code, _ = decide_many(rule, xa, xb)
    false = int(np.isin(code, (1, 2)).sum())
    assert false / sims <= ALPHA, f"gap {gap}: {false} of {sims} shuffled runs said 'better' (alpha {ALPHA})"
    # the same effects in plan order (trial k = state k): the rule says "B better" far more often than alpha
    xa, xb = _state_effect_sequences(gap, shuffled=False, sims=sims, seed=int(gap * 100) + 1)
    code, _ = decide_many(rule, xa, xb)
    ordered = int(np.isin(code, (1, 2)).sum())
    assert ordered / sims > 2 * ALPHA, f"gap {gap}: plan order gave only {ordered} of {sims}"


def test_the_plans_permutation_is_a_seeded_uniform_draw_without_repeats():
    a = trial_order(7, "scripted/reach-init", 0, 10, 6)
    assert a == trial_order(7, "scripted/reach-init", 0, 10, 6)  # the same in both arms and on resume
    assert len(set(a)) == 6 and set(a) <= set(range(10))
    assert trial_order(8, "scripted/reach-init", 0, 10, 6) != a or trial_order(9, "scripted/reach-init", 0, 10, 6) != a
    # uniform: each state is first equally often over seeds (10 states, 20,000 seeds: 2,000 each, SE 42)
    firsts = np.bincount([trial_order(s, "t", 0, 10, 1)[0] for s in range(20_000)], minlength=10)
    assert np.all(np.abs(firsts - 2_000) < 200), firsts


def _enumerated(upper, futile, pb, pa, look_every, futility):
    """P(b_better), P(a_better), P(futility) by enumerating every sequence of pair kinds (0 concordant, 1 B-only,
    2 A-only) over the budget."""
    budget = len(upper) - 1
    out = [0.0, 0.0, 0.0]
    for seq in itertools.product((0, 1, 2), repeat=budget):
        kb = ka = 0
        prob = float(np.prod([(1 - pb - pa, pb, pa)[x] for x in seq]))  # the whole sequence's probability
        for n, x in enumerate(seq, start=1):
            kb, ka = kb + (x == 1), ka + (x == 2)
            if n % look_every and n != budget:
                continue
            d = kb + ka
            if kb >= upper[d]:
                out[0] += prob
                break
            if ka >= upper[d]:
                out[1] += prob
                break
            if futility and kb <= futile[d] and ka <= futile[d]:
                out[2] += prob
                break
    return out


@pytest.mark.parametrize(("look_every", "futility"), [(1, True), (3, True), (4, False)])  # 3^8 sequences each
def test_the_schedule_dp_equals_enumeration_of_every_sequence(look_every, futility):
    rule = design(0.45, budget=8, alpha=0.2, futility=futility)
    up, fut = rule.bounds.upper, rule.bounds.futile
    oc = schedule_oc(up, fut, 0.35, 0.15, look_every, futility)
    want = _enumerated(up, fut, 0.35, 0.15, look_every, futility)
    assert [oc.b_better, oc.a_better, oc.futility] == pytest.approx(want, abs=1e-12)
    assert oc.b_better + oc.a_better + oc.futility + oc.budget_exhausted == pytest.approx(1.0, abs=1e-12)


@pytest.mark.slow
def test_the_schedule_dp_agrees_with_seeded_simulation_in_rounds_of_eight():
    rule = design(0.2, look_every=8)
    oc = schedule_oc(rule.bounds.upper, rule.bounds.futile, 0.35, 0.15, 8)
    assert oc.b_better == pytest.approx(rule.power, abs=1e-12)  # what the design records
    rng = np.random.default_rng(40)
    u = rng.random((NULL_SEQUENCES, rule.budget))
    xb = (u < 0.35).astype(np.int8)  # B only
    xa = (u >= 0.85).astype(np.int8)  # A only
    code, pairs = decide_many(rule, xa, xb, look_every=8)
    se = np.sqrt(oc.b_better * (1 - oc.b_better) / NULL_SEQUENCES)
    assert abs(float(np.mean(code == 1)) - oc.b_better) < 4 * se
    ran = np.minimum(np.ceil(pairs / 8) * 8, rule.budget)
    assert float(ran.mean()) == pytest.approx(oc.expected_pairs(8), rel=0.02)


@pytest.mark.parametrize("look_every", [1, 8])
@pytest.mark.slow
def test_the_designs_power_at_delta_is_at_least_the_fixed_n_tests_and_budget_one_less_is_not(look_every):
    rule = design(0.2, look_every=look_every)
    assert rule.power >= rule.power_target > 0.8  # the fixed-N test's exact power at 103 pairs is 0.8018
    assert design(0.2, look_every=look_every, budget=rule.budget - 1).power < rule.power_target
    # looks every 8 pairs need a larger budget than looks after every pair for the same power
    assert rule.budget >= design(0.2).budget


@pytest.mark.slow
def test_a_design_without_futility_has_more_power_at_the_same_budget():
    on = design(0.2)
    off = design(0.2, budget=on.budget, futility=False)
    assert off.power > on.power and off.futility_error == 0.0 and off.type1_error == on.type1_error


@pytest.mark.slow
def test_delta_002_is_refused_with_the_power_it_would_have_and_the_budget_it_needs():
    with pytest.raises(ValueError) as exc:
        design(0.02)  # the fixed-N test needs 9,906 pairs; a sequential test may plan 5,000
    msg = str(exc.value)
    assert "needs a budget of at least 9906 pairs" in msg and "its power would be 0.35" in msg, msg
    assert "\n" not in msg
