"""A shuffled plan's recorded order against its planned trials: the one check that ``robustness``,
``sequential``/``compare --sequential`` and ``checkpoints --eliminate`` make of run.json's ``plan.trial_order``
before they trust a run's trials (an edited plan would pair or count other scenes)."""

from __future__ import annotations

from collections.abc import Sequence

from rollbench.core.plan import trial_order
from rollbench.core.plan_size import population_short
from rollbench.core.runlog_model import TrialOrder


def order_problem(order: TrialOrder, task: str, stream: str, trials: Sequence[int]) -> str | None:
    """Why ``trials`` (task ``task``'s planned trials, in plan order) are not the first ones of the permutation
    ``order`` records (drawn by :func:`~rollbench.core.plan.trial_order` from its seed, ``stream`` and the task's
    population), or None: the task has no population, one smaller than its trials (edited), or the first trial
    that differs (edited). The sentence starts with ``plan.trial_order`` or ``planned trial``; callers put the
    run.json it came from before it."""
    pop = order.populations.get(task)
    if pop is None:
        return f"plan.trial_order has no population for task {task}"
    if short := population_short(pop[0], pop[1], len(trials)):  # the bounds: run.json's model (TrialOrder)
        return f"plan.trial_order.populations[{task!r}] {short} (edited)"
    want = trial_order(order.seed, stream, pop[0], pop[1], len(trials))
    for j, (got, k) in enumerate(zip(trials, want, strict=True)):
        if got != k:
            return f"planned trial {j} of {task} is {got!r}, but the recorded permutation (seed {order.seed}) gives {k} (edited)"
    return None
