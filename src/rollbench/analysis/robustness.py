"""Robustness studies over loaded runs: the table of :mod:`rollbench.grading.robustness` for a
:class:`~rollbench.analysis.sources.RunData`, and the ``--env`` of a new study (perturbed tasks plus their controls).
"""

from __future__ import annotations

from typing import Any

from rollbench.analysis.sources import RunData
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule
from rollbench.grading.robustness import ordered_study


def robustness_study(run: RunData, rule: CoverageRule = DEFAULT_RULE) -> dict[str, Any] | None:
    """The robustness table of ``run`` (:func:`rollbench.grading.robustness.ordered_study`: errors under the
    coverage ``rule``, with its ``trial_order``), or None. ConfigError: an edited shuffled plan, a control
    recorded under another protocol than its perturbed task."""
    return ordered_study(run.log, run.episodes, rule)


def study_env(env: str) -> tuple[str, list[str]]:
    """``--env`` of a robustness study: the perturbed tasks named by ``env`` (tasks or suites) preceded by their
    control tasks (each once, in first-use order), and the perturbed task names. ConfigError (one line) when a
    named task is not perturbed or names no control, or when nothing perturbed is named."""
    from rollbench.core.contracts import ConfigError
    from rollbench.core.registry import resolve_tasks

    tasks = resolve_tasks(env)
    plain = [t.name for t in tasks if t.perturbation is None]
    if plain:
        raise ConfigError(
            f"{', '.join(plain[:5])} {'is' if len(plain) == 1 else 'are'} not perturbed; a robustness study takes "
            "perturbed tasks or suites (e.g. libero/libero_spatial_swap) and adds their controls itself"
        )
    orphans = [t.name for t in tasks if t.perturbation is not None and t.perturbation.control is None]
    if orphans:
        raise ConfigError(
            f"{', '.join(orphans[:5])}: the benchmark names no unperturbed control for "
            f"{'it' if len(orphans) == 1 else 'them'}, so no paired study is possible; evaluate with `rollbench eval`"
        )
    controls: list[str] = []
    for t in tasks:
        c = t.perturbation.control if t.perturbation else None
        if c is not None and c not in controls:
            controls.append(c)
    perturbed = [t.name for t in tasks]
    return ",".join(controls + perturbed), perturbed
