"""rollbench: evaluate robot policies in simulation — N independently reset episodes, recorded as a LeRobot v3
dataset and graded from disk.

The Python API (see :mod:`rollbench.api`)::

    import rollbench
    result = rollbench.evaluate(env="scripted/reach", policy="scripted-expert", episodes=5, out="runs/x")
    again = rollbench.grade("runs/x")          # the same document, recomputed from the files
    result.overall.pooled_success_rate         # a rollbench.GradeDocument; result.to_json() is grade --json's dict

The plug-in API (what a policy or env family is written against; the table is :mod:`rollbench.core.public`):

* a policy: :class:`Policy` (``info``, ``reset``, ``act``, ``close``), :class:`PolicyInfo`, :class:`Observation`,
  :class:`TaskInfo` (with a :class:`Perturbation` for a perturbed task), :class:`PolicyStop` / :class:`PolicyGiveUp`, and :func:`policy_options` for its factory;
  optional hooks :class:`ChecksTasks`, :class:`FinishesEpisodes`, :class:`Batchable` (returning a
  :class:`BatchPolicy`, whose own optional hook is :class:`SlotPolicies`);
* an env family: :class:`EnvFamily`, :class:`EnvOptions`, :class:`Env`, :class:`StepResult`, :class:`HoldAction`;
  optional hook :class:`ExpectsImages`;
* a run's observer (``rollbench.evaluate(observer=...)``): :class:`RunObserver` and its events :class:`RunStart`,
  :class:`EpisodeStart`, :class:`EpisodeProgress`, :class:`EpisodeSummary`, :class:`RunEnd`;
* what :func:`evaluate` and :func:`grade` return: :class:`GradeDocument` (its ``episodes`` :class:`GradedEpisode`;
  reading it as a dict, ``result["overall"]``, is deprecated and warns);
* errors: :class:`RollbenchError`, :class:`ConfigError` (bad input, before any episode), :class:`EpisodeError`
  (ends one episode, with its fault).

Every name is loaded on first use (PEP 562 module ``__getattr__``), so ``import rollbench`` stays light: no numpy,
simulator, DuckDB or pyarrow import. The grading code itself is :mod:`rollbench.grading.grade`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rollbench.core.public import PLUGIN_API

if TYPE_CHECKING:
    from rollbench.api import Execution, evaluate, grade
    from rollbench.core.batch import Batchable, BatchPolicy, SlotPolicies
    from rollbench.core.contracts import (
        ChecksTasks,
        ConfigError,
        Env,
        EpisodeError,
        ExpectsImages,
        FinishesEpisodes,
        HoldAction,
        Observation,
        Policy,
        PolicyGiveUp,
        PolicyInfo,
        PolicyStop,
        RollbenchError,
        StepResult,
        TaskInfo,
    )
    from rollbench.core.grade_model import GradedEpisode, GradeDocument
    from rollbench.core.perturbation import Perturbation
    from rollbench.core.registry import EnvFamily, EnvOptions, policy_options
    from rollbench.core.spec import EvalSpec
    from rollbench.run.observer import EpisodeProgress, EpisodeStart, EpisodeSummary, RunEnd, RunObserver, RunStart

_LAZY = {
    "evaluate": "rollbench.api",
    "grade": "rollbench.api",
    "Execution": "rollbench.api",
    "EvalSpec": "rollbench.core.spec",
    **PLUGIN_API,
}

__all__ = [  # the table's names, written out for type checkers and linters (tests/test_public_api.py)
    "BatchPolicy",
    "Batchable",
    "ChecksTasks",
    "ConfigError",
    "Env",
    "EnvFamily",
    "EnvOptions",
    "EpisodeError",
    "EpisodeProgress",
    "EpisodeStart",
    "EpisodeSummary",
    "EvalSpec",
    "Execution",
    "ExpectsImages",
    "FinishesEpisodes",
    "GradeDocument",
    "GradedEpisode",
    "HoldAction",
    "Observation",
    "Perturbation",
    "Policy",
    "PolicyGiveUp",
    "PolicyInfo",
    "PolicyStop",
    "RollbenchError",
    "RunEnd",
    "RunObserver",
    "RunStart",
    "SlotPolicies",
    "StepResult",
    "TaskInfo",
    "__version__",
    "evaluate",
    "grade",
    "policy_options",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "__version__":
        from importlib.metadata import version

        return version("rollbench")
    raise AttributeError(f"module 'rollbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
