"""The pairs of a sequential comparison, rebuilt from its two arms: plan checks, the shuffled trial order, errors and
the coverage gate (issue 40).

Pairs: episode k of A with episode k of B, in plan order (same task, trial, seed, initial state, instruction, horizon
and success rule, checked on both plans); a pair is *attempted* when both episodes are committed (the attempted pairs
are the longest prefix of the plan present in both arms). A pair holding an environment- or infrastructure-fault
error (or an unclassified one, recorded before faults existed) on either side is *not a pair*: it is left out of the
test and listed; a policy-fault error is the policy's behaviour and counts as that policy's failure.

This is the shared rule of :mod:`rollbench.grading.coverage` (its defaults: policy errors counted as failures, the
gate at 0.95), applied pair by pair: coverage of an arm = scored / attempted episodes over the pairs attempted up to
a decision; when either arm's is below the gate the decision is ``insufficient_coverage``, never "better" (nor
futility or budget).

Shuffled plans: when run.json's ``plan.trial_order`` is present, every planned trial of the task must be the one
:func:`rollbench.core.plan.trial_order` draws from the recorded seed and population (else the arm is refused as edited).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.format import MISSING
from rollbench.core.plan import recorded_stream
from rollbench.core.recorded_order import order_problem
from rollbench.grading.coverage import (
    DEFAULT_RULE,
    CoverageRule,
    Outcome,
    coverage_gate,
    exclusion,
    outcome_of,
    score,
    tally,
)

PLAN_FIELDS = ("trial", "seed", "initial_state", "instruction", "max_steps", "success_rule")
COVERAGE_MIN = DEFAULT_RULE.min_coverage


@dataclass
class Pairs:
    """A task's pairs: ``xa`` / ``xb`` the 0/1 outcomes of the counted pairs (plan order); ``attempted_at[i]`` the
    attempted pairs up to and including counted pair i + 1; ``excluded``: one entry per left-out pair
    (``{"episode_index", "trial", "a", "b"}``, each side's fault or None); ``faults``: per arm, errors by fault over the attempted
    pairs; ``attempted``: pairs attempted; ``order``: ``"shuffled (seed S)"`` or ``"plan order"``."""

    xa: list[int] = field(default_factory=list)
    xb: list[int] = field(default_factory=list)
    attempted_at: list[int] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    faults: dict[str, dict[str, int]] = field(default_factory=lambda: {"a": {}, "b": {}})
    attempted: int = 0
    order: str = "plan order"
    rule: CoverageRule = DEFAULT_RULE
    outcomes: dict[str, list[Outcome]] = field(default_factory=lambda: {"a": [], "b": []})

    def coverage(self, attempted: int) -> dict[str, float | None]:
        """Each arm's scored / attempted over the first ``attempted`` pairs (None when none were attempted)."""
        if attempted <= 0:
            return {"a": None, "b": None}
        return {arm: tally(o[:attempted], self.rule).coverage for arm, o in self.outcomes.items()}

    def gate(self, attempted: int) -> str | None:
        """The coverage gate's sentence over the first ``attempted`` pairs (:func:`coverage_gate`), None when it
        passes."""
        a, b = (tally(self.outcomes[arm][:attempted], self.rule) for arm in ("a", "b"))
        return coverage_gate(a, b, self.rule)


def _check_order(run: Any, task: str, planned: list[Any]) -> str:
    order = run.log.plan.trial_order
    if order is None:
        return "plan order"
    if why := order_problem(order, task, recorded_stream(run.log.plan, task), [p.trial for p in planned]):
        raise ConfigError(f"{run.source}/run.json: {why}")
    return f"shuffled (seed {order.seed})"


def _plans(a: Any, b: Any, task: str) -> list[Any]:
    plans = []
    for run in (a, b):
        eps = [e for e in run.log.plan.episodes if e.task == task]
        if not eps:
            raise ConfigError(f"{run.source} did not plan task {task}")
        plans.append(eps)
    if len(plans[0]) != len(plans[1]):
        raise ConfigError(f"arms differ: {a.source} plans {len(plans[0])} episodes, {b.source} {len(plans[1])}")
    for pa, pb in zip(*plans, strict=True):
        for f in PLAN_FIELDS:
            if getattr(pa, f) != getattr(pb, f):
                raise ConfigError(
                    f"arms are not paired: trial {pa.trial} of {task} has {f} {getattr(pa, f)!r} in {a.source}, "
                    f"{getattr(pb, f)!r} in {b.source}"
                )
    return plans[0]


def paired_outcomes(a: Any, b: Any, task: str, rule: CoverageRule = DEFAULT_RULE) -> Pairs:
    """The pairs of ``task`` in arms ``a`` and ``b`` (:class:`rollbench.sequential.recompute.RunData`).

    ConfigError when the two plans of ``task`` differ (naming the trial and field), a shuffled plan's trials are not
    its recorded permutation's, or a recorded episode is not the planned one."""
    planned = _plans(a, b, task)
    out = Pairs(rule=rule)
    orders = {_check_order(run, task, planned) for run in (a, b)}
    if len(orders) != 1:
        raise ConfigError(f"arms {a.source} and {b.source} record different trial orders for {task}")
    out.order = orders.pop()
    rows = [{e.episode_index: e for e in run.episodes if e.task == task} for run in (a, b)]
    for planned_ep in planned:
        ea, eb = (r.get(planned_ep.episode_index) for r in rows)
        if ea is None or eb is None:
            break  # a pair is attempted only when both episodes are committed
        for run, ep in ((a, ea), (b, eb)):
            if (ep.seed, ep.initial_state) != (planned_ep.seed, planned_ep.initial_state):
                raise ConfigError(f"{run.source}: episode {ep.episode_index} is not the planned one (damaged)")
        oa, ob = outcome_of(ea), outcome_of(eb)
        for arm, o in (("a", oa), ("b", ob)):
            out.outcomes[arm].append(o)
            if o.fault is not None:
                out.faults[arm][o.fault] = out.faults[arm].get(o.fault, 0) + 1
        out.attempted += 1
        sa, sb = score(oa, rule), score(ob, rule)
        if sa is None or sb is None:  # not a pair: an episode the rule leaves out on either side
            ids = {"episode_index": planned_ep.episode_index, "trial": planned_ep.trial}
            out.excluded.append({**ids, "a": exclusion(oa, rule), "b": exclusion(ob, rule)})
            continue
        out.xa.append(sa)
        out.xb.append(sb)
        out.attempted_at.append(out.attempted)
    return out


def counts_line(t: dict[str, Any]) -> str:
    """What a task's decision counts, in one line: pairs attempted up to the decision, tested and left out (and any
    recorded after it, not counted), each arm's episodes recorded and errors by fault over every attempted pair, each
    arm's coverage (scored / attempted up to the decision) against the gate applied."""
    e = t["errors"]
    attempted = e["pairs_to_decision"]
    after = t["pairs_attempted"] - attempted
    gate = "left out" if e["exclude_policy_errors"] else "counted as failures"

    def faults(arm: str) -> str:
        return ", ".join(f"{n} {f}" for f, n in sorted(e["by_fault"][arm].items()) if n) or "none"

    def cover(arm: str) -> str:
        return MISSING if e["coverage"][arm] is None else f"{e['coverage'][arm]:.1%}"

    recorded = t["episodes_recorded"]
    return (
        f"{t['task']}: {attempted} pairs attempted{' up to the decision' if t['decision'] else ''}: "
        f"{t['pairs_counted']} tested, {attempted - t['pairs_counted']} left out (an error the rule does not score "
        "on either side)"
        + (f"; {after} more attempted after it, not counted" if after else "")
        + f". Episodes recorded A {recorded['a']}, B {recorded['b']}; errored by fault (all {t['pairs_attempted']} "
        f"attempted pairs): A {faults('a')}; B {faults('b')}. Coverage (scored / attempted): A {cover('a')}, B "
        f"{cover('b')}; gate {e['coverage_min']:.0%} (policy errors {gate})"
    )
