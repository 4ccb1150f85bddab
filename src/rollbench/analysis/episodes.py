"""One episode as the analyses read it: :class:`AnalysisEpisode`, built from a run directory's graded episode
(:meth:`AnalysisEpisode.from_graded`) or from a dashboard export's episode (:meth:`AnalysisEpisode.from_export`,
the one reader of a JSON file handed over: every field it reads typed, unknown keys ignored, absent optional ones
None, ``label`` carried).
It satisfies :class:`rollbench.grading.coverage.EpisodeFacts`, so the coverage rule and the robustness study read
it as they read grade's episodes.

Errors: :meth:`AnalysisEpisode.from_export` raises :class:`rollbench.core.contracts.ConfigError` naming the episode
and the field of the wrong JSON type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.format import quoted
from rollbench.core.grade_model import GradedEpisode

_EXPORT_FIELDS: dict[str, tuple[type, ...]] = {  # an exported episode's fields the analyses read: their JSON types
    "task": (str,),
    "seed": (int, type(None)),
    "initial_state": (int, type(None)),
    "instruction": (str, type(None)),
    "variant": (str, type(None)),
    "termination_reason": (str, type(None)),
    "length": (int, type(None)),
    "trial": (int, type(None)),
    "return": (int, float, type(None)),
    "error_fault": (str, type(None)),
    "label": (str, type(None)),
}


MAX_EXPORT_INT = 2**63 - 1  # every integer of an exported episode: 0 .. this (int64, as run directories store them)
_INTEGERS = ("episode_index", "trial", "seed", "initial_state", "length")


def _out_of_range(ep: dict[str, Any]) -> str | None:
    """The first integer field of an exported episode outside 0 .. MAX_EXPORT_INT, or None."""
    return next(
        (k for k in _INTEGERS if type(ep.get(k)) is int and not 0 <= ep[k] <= MAX_EXPORT_INT),
        None,
    )


@dataclass(frozen=True)
class AnalysisEpisode:
    """The facts of one recorded episode the analyses use. ``trial`` is None when an export does not carry an
    integer one (the episode then pairs with nothing in a robustness study); ``seed``, ``initial_state``,
    ``length`` and ``termination_reason`` are None when an export left them out; ``error_fault`` is the recorded
    fault text (None when absent or not a string); ``label`` is the label an export joined to the episode, if any
    (a run directory's episodes have none)."""

    episode_index: int
    task: str
    success: bool
    trial: int | None = None
    seed: int | None = None
    initial_state: int | None = None
    instruction: str | None = None
    variant: str | None = None
    length: int | None = None
    termination_reason: str | None = None
    error_fault: str | None = None
    label: str | None = None

    @classmethod
    def from_graded(cls, e: GradedEpisode) -> AnalysisEpisode:
        """The analysis facts of grade's episode (no label)."""
        return cls(
            episode_index=e.episode_index,
            task=e.task,
            success=e.success,
            trial=e.trial,
            seed=e.seed,
            initial_state=e.initial_state,
            instruction=e.instruction,
            variant=e.variant,
            length=e.length,
            termination_reason=e.termination_reason,
            error_fault=e.error_fault,
        )

    @classmethod
    def from_export(cls, ep: object, where: str) -> AnalysisEpisode:
        """An exported episode (a JSON object): ``episode_index`` (an integer), ``task`` and ``success`` (a JSON
        ``true``/``false``, never a truth value of another type) are required; ``seed``, ``initial_state``,
        ``instruction``, ``variant``, ``termination_reason``, ``length``, ``trial``, ``return`` (a finite number),
        ``error_fault`` and ``label`` must be of their JSON type or null when present; other keys are ignored.
        Every integer (``episode_index``, ``trial``, ``seed``, ``initial_state``, ``length``) is within
        0 .. MAX_EXPORT_INT. Raises ConfigError naming ``where`` (the run in its file), the episode and the field."""
        if not isinstance(ep, dict) or not isinstance(ep.get("episode_index"), int) or "task" not in ep:
            raise ConfigError(f"{where}: an episode lacks episode_index or task")
        for key, kinds in _EXPORT_FIELDS.items():
            value = ep.get(key)
            if isinstance(value, bool) or not isinstance(value, kinds):
                expected = " or ".join(k.__name__ for k in kinds)
                raise ConfigError(
                    f"{where}: episode {ep['episode_index']} has {key} {quoted(value)} (expected {expected})"
                )
        if not isinstance(ep.get("success"), bool):  # "false", "0", [0], 0.5 would count as successes by truth
            raise ConfigError(
                f"{where}: episode {ep['episode_index']} has success {quoted(ep.get('success'))} (expected bool)"
            )
        if isinstance(ep.get("return"), float) and not math.isfinite(ep["return"]):
            raise ConfigError(f"{where}: episode {ep['episode_index']} has return {ep['return']} (expected finite)")
        if (wide := _out_of_range(ep)) is not None:  # a 401-digit length overflowed the figures (hostile round 9)
            which = "an episode" if wide == "episode_index" else f"episode {ep['episode_index']}"
            raise ConfigError(f"{where}: {which} has {wide} outside 0 .. {MAX_EXPORT_INT}")
        return cls(
            episode_index=ep["episode_index"],
            task=ep["task"],
            success=ep["success"],
            trial=ep.get("trial"),
            seed=ep.get("seed"),
            initial_state=ep.get("initial_state"),
            instruction=ep.get("instruction"),
            variant=ep.get("variant"),
            length=ep.get("length"),
            termination_reason=ep.get("termination_reason"),
            error_fault=ep.get("error_fault"),
            label=ep.get("label"),
        )
