"""A sequential paired test for "is B better than A?": a truncated two-sided SPRT on the discordant pairs, designed at
the smallest difference worth detecting, with its error rates computed exactly (no simulation, no approximation).

Data: pairs of episodes (A's and B's episode of one task, seed, initial state, instruction), in plan order. Only a
*discordant* pair (exactly one policy succeeds) carries information; ``d`` counts them and ``k`` counts those where B
alone succeeded. Whatever the success rates and the correlation between A and B, under the null hypothesis H0 "A and
B succeed equally often on every pair" each discordant pair is B-only with probability 1/2, independently.

Rule (``truncated-sprt-discordant``): Wald's sequential probability ratio test of theta = P(B only | discordant) = 1/2
against theta1 (B better) and against 1 - theta1 (A better), theta1 from the design difference ``delta`` at the
assumed success rate of A and discordance (independent policies unless ``discordant`` is given; at ``p_a = 0.5`` and
independence, theta1 = 0.5 + delta). After ``d`` discordant pairs, ``k`` of them B-only,

    llr_b = k log(2 theta1) + (d - k) log(2 (1 - theta1)),    llr_a = the same with k and d - k exchanged.

At a look: ``b_better`` when llr_b >= a, ``a_better`` when llr_a >= a, ``futility`` when both are <= b (Wald's
b = log(beta / (1 - alpha/2))), ``budget_exhausted`` at the last pair of the budget without a decision, else
``continue``. The decision is made on the integer tables of :class:`Boundaries` (``k >= upper[d]``,
``d - k >= upper[d]``, both ``<= futile[d]``), so that it is exact and reproducible.

Guarantee (what is proven, and how): the efficacy threshold ``a`` is the smallest one for which the probability,
under H0, that the discordant walk *ever* reaches either efficacy boundary within ``budget`` discordant pairs is at
most ``alpha``; that probability is computed exactly by dynamic programming over the walk (:func:`type1_error`). It
bounds the false-positive rate of every use of the rule:

* any success rates and any correlation of A and B (fewer discordant pairs than pairs can only lower it: the worst
  case is every pair discordant),
* any look schedule (every pair, every k pairs, irregular; a walk that is declared at a look crossed the boundary),
* any stop for futility, for the budget, or by the user (futility is *non-binding*: ignoring it only raises the
  probability computed).

It is not anytime-valid beyond the budget: raising the budget after looking voids it (the budget is part of the
design, recorded in run.json). With ``a >= log(2/alpha)`` it would hold for any budget too (Ville's inequality on
each likelihood ratio, a martingale under H0); calibrating to the budget lowers ``a`` and is what makes the test
stop early. The futility error (declaring futility although theta = theta1) and the power at the design are also
computed exactly (:func:`operating_characteristics`).

Sources: A. Wald (1945), "Sequential tests of statistical hypotheses", Ann. Math. Statist. 16:117-186; C. Jennison
and B. W. Turnbull (2000), *Group Sequential Methods with Applications to Clinical Trials*, ch. 1-4 (truncated tests,
non-binding futility, exact crossing probabilities by recursive integration, here an exact sum); D. Snyder et al.
(RSS 2025), "Is your imitation learning policy better than mine?" (optimal stopping for policy comparison).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from pydantic import ConfigDict

from rollbench.core.records import JsonRecord
from rollbench.core.runlog_model import MAX_SCHEDULED_PAIRS as MAX_SCHEDULED_PAIRS
from rollbench.core.runlog_model import MAX_SEQUENTIAL_PAIRS as MAX_SEQUENTIAL_PAIRS
from rollbench.core.runlog_model import SequentialDesignRecord, max_pairs
from rollbench.grading.power import mcnemar_power, paired_sample_size

RULE = "truncated-sprt-discordant"
DECISIONS = ("continue", "b_better", "a_better", "futility", "budget_exhausted", "insufficient_coverage")
FINAL = DECISIONS[1:]  # insufficient_coverage: set by the coverage gate (rollbench.sequential.pairs), not the rule
_CODE = {name: i for i, name in enumerate(DECISIONS)}


@dataclass(frozen=True)
class Boundaries:
    """Integer decision tables indexed by ``d`` = discordant pairs so far (shape ``(budget + 1,)``, int64).

    ``upper[d]``: B better when ``k >= upper[d]`` (A better when ``d - k >= upper[d]``); ``d + 1`` = not reachable.
    ``futile[d]``: futility when ``k <= futile[d]`` and ``d - k <= futile[d]``; negative = not reachable."""

    upper: np.ndarray
    futile: np.ndarray


def _llr_steps(theta1: float) -> tuple[float, float]:
    """(log(2 theta1), log(2 (1 - theta1))): the llr_b increments of a B-only and of an A-only pair."""
    return math.log(2 * theta1), math.log(2 * (1 - theta1))


def boundaries_for(theta1: float, a: float, b: float, budget: int, futility: bool = True) -> Boundaries:
    """The integer tables of :class:`Boundaries` for thresholds ``a`` (efficacy, > 0) and ``b`` (futility, < 0; no
    futility boundary at all when ``futility`` is False)."""
    up, down = _llr_steps(theta1)
    d = np.arange(budget + 1, dtype=np.float64)
    # llr_b(d, k) = k (up - down) + d down is increasing in k; a relative 1e-12 keeps ties on the crossing side
    upper = np.ceil((a - d * down) / (up - down) - 1e-12).astype(np.int64)
    upper = np.clip(upper, 0, np.arange(budget + 1) + 1)
    futile = np.floor((b - d * down) / (up - down) + 1e-12).astype(np.int64)
    futile = np.minimum(futile, np.arange(budget + 1)) if futility else np.full(budget + 1, -1, dtype=np.int64)
    return Boundaries(upper, futile)


def _walk(bounds: Boundaries, theta: float, n_disc: int, binding_futility: bool) -> np.ndarray:
    """Exact first-passage probabilities of the discordant walk (each discordant pair B-only with probability
    ``theta``) over ``d = 1 .. n_disc``: float64 array ``(n_disc + 1, 3)`` of P(stop at d as b_better, a_better,
    futility). Futility absorbs only when ``binding_futility``."""
    out = np.zeros((n_disc + 1, 3))
    prob = np.zeros(n_disc + 2)
    prob[0] = 1.0  # P(k = index, not stopped) after d discordant pairs
    for d in range(1, n_disc + 1):
        prob[1 : d + 1] = prob[1 : d + 1] * (1 - theta) + prob[0:d] * theta
        prob[0] *= 1 - theta
        ks = np.arange(d + 1)
        live = prob[: d + 1]
        hit_b = ks >= bounds.upper[d]
        hit_a = (d - ks) >= bounds.upper[d]
        out[d, 0] = live[hit_b].sum()
        out[d, 1] = live[hit_a & ~hit_b].sum()
        stop = hit_a | hit_b
        if binding_futility:
            fut = (ks <= bounds.futile[d]) & ((d - ks) <= bounds.futile[d]) & ~stop
            out[d, 2] = live[fut].sum()
            stop |= fut
        live[stop] = 0.0
    return out


def type1_error(bounds: Boundaries, budget: int) -> float:
    """Exact P(the walk ever reaches an efficacy boundary within ``budget`` discordant pairs | theta = 1/2),
    futility ignored: the bound on the false-positive rate stated in the module docstring (a float in [0, 1])."""
    return float(_walk(bounds, 0.5, budget, binding_futility=False)[:, :2].sum())


class SequentialDesign(SequentialDesignRecord):
    """The rule: a design's parameters and exact operating characteristics (the fields of
    :class:`rollbench.core.runlog_model.SequentialDesignRecord`, declared there once, which is how run.json records
    it) and the decisions they give. ``futility`` and ``power_target`` are always set on a rule (only a design
    recorded before issue 40 lacks them): ``futility`` says whether the rule stops for futility (non-binding either
    way: the type-I bound ignores it); ``power_target`` is the power wanted (``1 - beta`` or the fixed-N test's at
    ``fixed_n``, the higher), which a budget the user chose may not reach. Frozen (rules are cached and shared)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    futility: bool = True
    power_target: float = 0.0

    @cached_property
    def bounds(self) -> Boundaries:
        return boundaries_for(self.theta1, self.efficacy_llr, self.futility_llr, self.budget, self.futility)

    def llr(self, d: int, k: int) -> tuple[float, float]:
        """(llr_b, llr_a) after ``d`` discordant pairs of which ``k`` B-only (floats, natural log)."""
        up, down = _llr_steps(self.theta1)
        return k * up + (d - k) * down, (d - k) * up + k * down

    def decide(self, pairs: int, d: int, k: int) -> str:
        """The decision at a look after ``pairs`` pairs with ``d`` discordant, ``k`` B-only (one of DECISIONS)."""
        if k >= self.bounds.upper[d]:
            return "b_better"
        if d - k >= self.bounds.upper[d]:
            return "a_better"
        if k <= self.bounds.futile[d] and d - k <= self.bounds.futile[d]:
            return "futility"
        return "budget_exhausted" if pairs >= self.budget else "continue"


def _design_split(delta: float, p_a: float, discordant: float | None) -> tuple[float, float]:
    """(theta1, psi) at the design: P(B only | discordant) and P(discordant)."""
    p_b = p_a + delta
    if not (0 < delta < 1 and 0 < p_a < 1 and 0 < p_b < 1):
        raise ValueError(f"need 0 < delta < 1 and 0 < p_a < p_a + delta < 1, got delta={delta}, p_a={p_a}")
    if discordant is None:
        a_only, b_only = p_a * (1 - p_b), p_b * (1 - p_a)
    elif delta <= discordant <= min(p_a + p_b, 2 - p_a - p_b):
        a_only, b_only = (discordant - delta) / 2, (discordant + delta) / 2
    else:
        raise ValueError(f"discordant={discordant} is impossible for p_a={p_a}, delta={delta}")
    psi = a_only + b_only
    return b_only / psi, psi


def family_alphas(alpha: float, m: int) -> tuple[float, float | None]:
    """(each task's level, the pooled test's level or None) of a family of ``m`` tasks at family-wise ``alpha``:
    Bonferroni over the m task tests and the pooled one, ``alpha / (m + 1)`` each (one task: ``alpha``, no pooled
    test). Any false "better" among the m + 1 tests has probability at most alpha, whatever their dependence."""
    return (alpha, None) if m <= 1 else (alpha / (m + 1), alpha / (m + 1))


def design(
    delta: float,
    *,
    p_a: float = 0.5,
    alpha: float = 0.05,
    beta: float = 0.2,
    budget: int | None = None,
    discordant: float | None = None,
    look_every: int = 1,
    futility: bool = True,
) -> SequentialDesign:
    """The rule designed to detect ``rate(B) - rate(A) = ±delta`` (see the module docstring).

    ``budget`` (pairs) defaults to the smallest one at which the rule's exact power at ``delta``, at this look
    schedule (``look_every``) and futility choice, reaches the wanted power: ``1 - beta``, or the fixed-N exact
    McNemar test's power at its size ``fixed_n`` (:func:`rollbench.grading.power.paired_sample_size`) when that is
    higher, so the rule never has less power at the design than the test it replaces. ``futility`` False: the rule
    never stops for futility (its power is then higher; the type-I error bound is the same, futility being
    non-binding). The efficacy threshold is calibrated by bisection on the exact type-I error at the budget.

    Raises ValueError on impossible parameters, a budget outside 1..max_pairs(look_every) (MAX_SEQUENTIAL_PAIRS =
    5,000 pairs looking after every pair, MAX_SCHEDULED_PAIRS = 1,000 looking every few) or below ``look_every``,
    and, without ``budget``, when no budget up to that bound reaches the wanted power (the message names the power
    at that budget and the budget needed; the search starts at ``look_every``). With ``budget`` given the design is
    returned whatever its power (``power_target`` says what was wanted: callers warn). Work: O(budget^2) per
    threshold tried (about 6 s at 5,000 pairs), plus O(budget^3) for ``look_every`` > 1 (about 4 s at 1,000 pairs;
    both measured on a loaded 2-core machine): the bounds keep a design, and a reader recomputing a recorded one,
    to seconds.
    """
    if not 0 < alpha < 0.5 or not 0 < beta < 0.5:
        raise ValueError(f"need 0 < alpha < 0.5 and 0 < beta < 0.5, got alpha={alpha}, beta={beta}")
    cap = max_pairs(look_every)
    if not 1 <= look_every <= min(budget or cap, cap):
        raise ValueError(f"look_every must be between 1 and the budget ({budget or cap} pairs), got {look_every}")
    theta1, psi = _design_split(delta, p_a, discordant)
    sizing = paired_sample_size(p_a, p_a + delta, alpha=alpha, power=1 - beta, discordant=discordant)
    fixed_n = sizing.n_exact
    target = max(1 - beta, mcnemar_power(fixed_n, sizing.p_a_only, sizing.p_b_only, alpha))
    common = _DesignInputs(delta, p_a, discordant, alpha, beta, theta1, psi, fixed_n, look_every, futility, target)
    if budget is not None:
        if not 1 <= budget <= cap:
            raise ValueError(f"budget must be between 1 and {cap} pairs{_looking(look_every)}, got {budget}")
        return _calibrated(budget, common)
    lo = max(min(fixed_n, cap), look_every)  # power rises with budget; the budget is at least one look interval
    hi = max(min(2 * fixed_n, cap), lo)
    best = _calibrated(hi, common)
    if best.power < target and hi < cap:
        lo, hi = hi, cap
        best = _calibrated(hi, common)
    if best.power < target:
        raise ValueError(
            f"delta {delta:g} needs a budget of at least {max(fixed_n, cap + 1)} pairs for power {target:.3f}, above "
            f"the {cap} a sequential test may plan{_looking(look_every)}: at {cap} pairs its power would be "
            f"{best.power:.3f}; give --budget to run with that power, or a larger --delta"
        )
    while lo < hi:
        mid = (lo + hi) // 2
        cand = _calibrated(mid, common)
        if cand.power >= target:
            hi, best = mid, cand
        else:
            lo = mid + 1
    return best


def _looking(look_every: int) -> str:
    return f" looking every {look_every} pairs" if look_every > 1 else ""


@dataclass(frozen=True)
class _DesignInputs:
    """What :func:`design` fixes before it tries budgets: the user's parameters, the design's ``theta1`` and ``psi``
    (:func:`_design_split`), the fixed-N test's ``fixed_n`` and the power wanted (``target``)."""

    delta: float
    p_a: float
    discordant: float | None
    alpha: float
    beta: float
    theta1: float
    psi: float
    fixed_n: int
    look_every: int
    futility: bool
    target: float


def _calibrated(budget: int, c: _DesignInputs) -> SequentialDesign:
    """The design at ``budget``: the smallest efficacy threshold whose exact type-I error is <= alpha (bisection)."""
    b = math.log(c.beta / (1 - c.alpha / 2))
    lo, hi = 0.0, math.log(2 / c.alpha)  # at hi, Ville's inequality alone gives type-I error <= alpha
    for _ in range(30):
        mid = (lo + hi) / 2
        if type1_error(boundaries_for(c.theta1, mid, b, budget), budget) <= c.alpha:
            hi = mid
        else:
            lo = mid
    bounds = boundaries_for(c.theta1, hi, b, budget, c.futility)
    err = type1_error(bounds, budget)
    fut_err, power = operating_characteristics(bounds, c.theta1, c.psi, budget, c.look_every)
    return SequentialDesign(
        alpha=c.alpha, beta=c.beta, delta=c.delta, p_a=c.p_a, discordant=c.discordant, budget=budget,
        look_every=c.look_every, theta1=c.theta1, efficacy_llr=hi, futility_llr=b, type1_error=err,
        futility_error=fut_err, power=power, fixed_n=c.fixed_n, futility=c.futility, power_target=c.target,
    )  # fmt: skip


def operating_characteristics(
    bounds: Boundaries, theta1: float, psi: float, budget: int, look_every: int = 1
) -> tuple[float, float]:
    """(futility error, power), exact: the futility error is P(futility | theta1) with every pair discordant (its
    supremum over the discordance: more discordant pairs only add chances); the power is P(b_better | theta1) when
    each of ``budget`` pairs is discordant with probability ``psi``, looking every ``look_every`` pairs (futility as
    the tables say: binding when they have one). Looks after every pair: the walk over discordant pairs mixed over
    their binomial count; else the two-count walk of :mod:`rollbench.grading.sequential_oc`."""
    from scipy.stats import binom

    walk = _walk(bounds, theta1, budget, binding_futility=True)
    fut_err = float(walk[:, 2].sum())
    if look_every > 1:
        from rollbench.grading.sequential_oc import schedule_oc

        return fut_err, schedule_oc(bounds.upper, bounds.futile, psi * theta1, psi * (1 - theta1), look_every).b_better
    reached_b = np.cumsum(walk[:, 0])  # P(b_better by the d-th discordant pair)
    power = float(np.sum(binom.pmf(np.arange(budget + 1), budget, psi) * reached_b))
    return fut_err, power


@dataclass(frozen=True)
class Look(JsonRecord):
    """The test after ``pairs`` pairs: ``discordant`` of them, ``b_only`` + ``a_only`` = ``discordant``; the two
    log-likelihood ratios; the decision (one of DECISIONS)."""

    pairs: int
    discordant: int
    b_only: int
    a_only: int
    llr_b: float
    llr_a: float
    decision: str


def run_looks(rule: SequentialDesign, xa: Any, xb: Any, look_every: int = 1) -> list[Look]:
    """Every look of the rule on paired 0/1 outcomes ``xa``, ``xb`` (plan order, equal length), up to and including
    the first decision; looks after pairs ``look_every``, ``2 look_every``, ... and at the budget. Pairs beyond the
    budget are ignored. Raises ValueError on unequal lengths or values other than 0/1."""
    a, b = np.asarray(xa, dtype=np.int64), np.asarray(xb, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1 or not np.isin(a, (0, 1)).all() or not np.isin(b, (0, 1)).all():
        raise ValueError("run_looks needs two equal-length 1-D sequences of 0/1 outcomes")
    if look_every < 1:
        raise ValueError(f"look_every must be >= 1, got {look_every}")
    looks: list[Look] = []
    d = k = 0
    for n in range(1, min(a.size, rule.budget) + 1):
        d += int(a[n - 1] != b[n - 1])
        k += int(b[n - 1] > a[n - 1])
        if n % look_every and n != rule.budget:
            continue
        llr_b, llr_a = rule.llr(d, k)
        looks.append(Look(n, d, k, d - k, llr_b, llr_a, rule.decide(n, d, k)))
        if looks[-1].decision != "continue":
            break
    return looks


def decide_many(
    rule: SequentialDesign, xa: np.ndarray, xb: np.ndarray, look_every: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """The rule on many sequences at once: ``xa``, ``xb`` int 0/1 arrays ``(S, budget)``. Returns ``(decision, pairs)``
    int64 arrays ``(S,)``: the index into DECISIONS of each sequence's final decision and the pairs used. Same
    decisions as :func:`run_looks` (tested), for simulations."""
    s, n = xa.shape
    if n != rule.budget or xb.shape != xa.shape:
        raise ValueError(f"decide_many needs arrays of shape (S, {rule.budget})")
    d = np.cumsum(xa != xb, axis=1)
    k = np.cumsum(xb > xa, axis=1)
    up, fut = rule.bounds.upper[d], rule.bounds.futile[d]
    code = np.zeros((s, n), dtype=np.int64)
    code[(d - k <= fut) & (k <= fut)] = _CODE["futility"]
    code[d - k >= up] = _CODE["a_better"]
    code[k >= up] = _CODE["b_better"]
    looked = np.zeros(n, dtype=bool)
    looked[look_every - 1 :: look_every] = True
    looked[n - 1] = True  # the budget is always a look
    code[:, ~looked] = 0
    code[:, n - 1] = np.where(code[:, n - 1] == 0, _CODE["budget_exhausted"], code[:, n - 1])
    first = np.argmax(code > 0, axis=1)
    return code[np.arange(s), first], first + 1
