"""How many episodes a spec plans, counted before a single one is built, and the bound on it (hostile round 16, F4).

:func:`rollbench.core.plan.make_plan` plans, for each of the spec's T resolved tasks, each of its V instruction
variants on the same E trials: T x V x E episodes (:func:`planned_episodes`). A plan over
:data:`MAX_PLANNED_EPISODES` is refused from these three numbers alone, before the plan (~4 KB of memory per planned
episode until it is written) is built; ``record.runlog.check_plan_bytes`` stays the exact check of run.json's bytes
for a plan under it (long instructions or task names take more bytes per episode).
"""

from __future__ import annotations

from rollbench.core.contracts import ConfigError
from rollbench.core.spec import EvalSpec

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
