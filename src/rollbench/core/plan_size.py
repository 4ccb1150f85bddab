"""How many episodes a spec plans, counted before a single one is built, and the bound on it (hostile round 16, F4).

:func:`rollbench.core.plan.make_plan` plans, for each of the spec's T resolved tasks, each of its V instruction
variants on the same E trials: T x V x E episodes (:func:`planned_episodes`). A plan over
:data:`MAX_PLANNED_EPISODES` is refused from these three numbers alone, before the plan (~4 KB of memory per planned
episode until it is written) is built; ``record.runlog.check_plan_bytes`` stays the exact check of run.json's bytes
for a plan under it (long instructions or task names take more bytes per episode).
"""

from __future__ import annotations

from rollbench.core.contracts import ConfigError
from rollbench.core.spec import MAX_EPISODES_PER_TASK, EvalSpec

# Measured (docs/design.md, record/runlog.py): 294 bytes of run.json's ``plan`` per planned episode of scripted/reach
# with a one-sentence instruction (~300 with a sweep's variant name), so 200,000 planned episodes take ~60 MB, under
# the 64 MiB (67,108,864 bytes) a run may plan (record.runlog.MAX_PLAN_BYTES); 2x the 100,000 one task may plan.
MAX_PLANNED_EPISODES = 200_000


def variant_count(spec: EvalSpec) -> int:
    """V: how many instructions each task runs (:func:`rollbench.core.plan.task_variants`): the sweep's variants,
    ``original`` plus one per perturbation, or 1 without a sweep."""
    if spec.instructions is not None:
        return len(spec.instructions)
    if spec.instruction_perturb is not None:
        return 1 + len(spec.instruction_perturb)
    return 1


def planned_episodes(spec: EvalSpec, tasks: int) -> int:
    """The number of episodes :func:`rollbench.core.plan.make_plan` plans for ``spec`` over ``tasks`` resolved tasks:
    tasks x instruction variants x ``spec.episodes``."""
    return tasks * variant_count(spec) * spec.episodes


def check_plan_size(spec: EvalSpec, tasks: int) -> None:
    """ConfigError (one line naming the count, its factors and the bound) when ``spec`` over ``tasks`` resolved tasks
    plans more than :data:`MAX_PLANNED_EPISODES` episodes. Builds nothing."""
    count = planned_episodes(spec, tasks)
    if count <= MAX_PLANNED_EPISODES:
        return
    variants = variant_count(spec)
    factors = [f"{tasks:,} task{'s' * (tasks != 1)}", f"{spec.episodes:,} episode{'s' * (spec.episodes != 1)}"]
    if variants > 1 or spec.instructions is not None:
        factors.append(f"{variants:,} instruction variant{'s' * (variants != 1)}")
    raise ConfigError(
        f"the plan of {count:,} episodes ({' x '.join(factors)}) is over the {MAX_PLANNED_EPISODES:,} a run may plan "
        "(run.json records every planned episode and is read whole); split it into several runs (fewer tasks, "
        "episodes or instruction variants each)"
    )


# A shuffled task's population [first, end) of trials (run.json ``plan.trial_order.populations``): first is
# ``--first-trial`` (at most MAX_EPISODES_PER_TASK) and end - first is the task's ``--episodes`` (at most
# MAX_EPISODES_PER_TASK), or its stored initial states from first on when there are more (LIBERO: 50); the
# permutation drawn over it is materialised whole (core.plan.trial_order: 16 bytes a trial), so it is bounded as a
# plan is.
MAX_TRIAL_POPULATION = MAX_PLANNED_EPISODES


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def population_problem(value: object) -> str | None:
    """What keeps ``value`` (one task's entry of run.json ``plan.trial_order.populations``) from being a population
    rollbench plans: exactly two integers ``[first, end)`` (not bools) with ``0 <= first <=``
    :data:`~rollbench.core.spec.MAX_EPISODES_PER_TASK` and ``first <= end <= first +`` :data:`MAX_TRIAL_POPULATION`;
    None when nothing does. Pure: reads no more than the two items."""
    if isinstance(value, list) and len(value) == 2 and all(type(x) is int for x in value):
        first, end = value
        if 0 <= first <= MAX_EPISODES_PER_TASK and first <= end <= first + MAX_TRIAL_POPULATION:
            return None
    return (
        f"is {_shown(value)}: not a population [first, end) of trials (two integers, 0 <= first <= "
        f"{MAX_EPISODES_PER_TASK:,}, first <= end <= first + {MAX_TRIAL_POPULATION:,})"
    )


def population_short(first: int, end: int, planned: int) -> str | None:
    """The problem of a population ``[first, end)`` too small for the ``planned`` trials drawn from it (a planned
    trial appears once), None when it holds them."""
    if end - first >= planned:
        return None
    return f"holds {end - first} trial(s) [{first}, {end}), fewer than the {planned} planned from it"


def check_population(task: str, first: int, end: int) -> None:
    """ConfigError (one line) when a task's population ``[first, end)`` would be one run.json's model refuses
    (:func:`population_problem`): a shuffled task with more stored initial states than a plan may hold."""
    if why := population_problem([first, end]):
        raise ConfigError(f"task {task}'s trials to shuffle {why}; give fewer with --first-trial or do not shuffle")
