"""What one episode produced (:class:`EpisodeRecord`), the success rule (:func:`held_success`) and the fault of an
error (:func:`fault_of`): the facts the episode loop (:mod:`rollbench.run.episode`), the recorder
(:mod:`rollbench.record`) and grading (:mod:`rollbench.grading`) all share, so success is decided in one place.

Success: ``any_step`` is true if ``next.success`` was ever true; ``final_step`` is the last row's ``next.success``.
With ``success_hold = K > 1`` (``--success-hold``) success must hold for K consecutive steps: ``any_step`` then
needs a run of K true ``next.success`` rows (the episode stops at the K-th), ``final_step`` the last K rows true.
The episode loop stops and records by :func:`held_success`; grading recomputes success from the recorded rows with
the same function.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from rollbench.core.contracts import FAULTS, Fault, TaskInfo, describe
from rollbench.core.plan import PlannedEpisode


@dataclass
class EpisodeRecord:
    """Everything one episode produced. Arrays have one row per executed step (``length`` rows).

    Attributes:
        states: ``float32 (T, state_dim)``, observation before each action.
        actions: ``float64 (T, action_dim)``, as executed: exactly the values the policy returned.
        rewards: ``float32 (T,)``; successes, dones: ``bool (T,)`` after each action.
        latencies: ``float32 (T,)`` seconds spent in ``policy.act`` on steps that called it, NaN on steps served
            from a queued action chunk.
        frames: camera -> list of ``uint8 (H, W, 3)``, one per step (empty unless video was asked for).
        error: ``"ExceptionType: message"`` when termination_reason is ``error`` (prefixed with
            :data:`FINISH_EPISODE_ERROR` when the policy's ``finish_episode`` raised it, after the last step).
        error_fault: whose fault the error was (``policy``, ``environment``, ``infrastructure``), else None.
        render_failure: why the images the policy was given were black or frozen (then the episode is an
            ``environment`` error), else None; see :class:`rollbench.run.render_check.RenderWatch`.
        extra: ``{"artifacts": {kind: bytes}}`` when the policy has a ``finish_episode(outcome) -> {kind: bytes}``
            method (see :data:`rollbench.record.lerobot.ARTIFACT_PATHS` for the kinds, e.g. an LLM agent's
            ``transcript``); they are staged and committed atomically with the episode.
        action_sources: ``int64 (T, 3)`` per step with ``--latency`` (else None): the frame index of the
            observation the action was computed from, its index in its chunk (both -1 for a hold action), and 1 for a
            hold action else 0 (:mod:`rollbench.run.schedule`).
    """

    planned: PlannedEpisode
    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    successes: np.ndarray
    dones: np.ndarray
    latencies: np.ndarray
    frames: dict[str, list[np.ndarray]]
    success: bool
    success_at_reset: bool
    termination_reason: str
    error: str | None = None
    error_fault: Fault | None = None
    error_traceback: str | None = None
    wall_time_s: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)
    action_sources: np.ndarray | None = None
    render_failure: str | None = None

    @property
    def length(self) -> int:
        return len(self.actions)


def held_success(successes: Sequence[bool], hold: int = 1, final_step: bool = False) -> bool:
    """Whether ``successes`` (``next.success`` per step, in order) count as a success: any run of ``hold``
    consecutive true steps (``any_step``), or the last ``hold`` steps all true (``final_step``)."""
    if final_step:
        return len(successes) >= hold and all(successes[len(successes) - hold :])
    run = 0
    for s in successes:
        run = run + 1 if s else 0
        if run >= hold:
            return True
    return False


FINISH_EPISODE_ERROR = "policy.finish_episode raised "
"""The start of the recorded error of an episode whose policy's ``finish_episode`` hook raised: it is called after
the last step, so it is one of the two errors that may follow a step that ended the episode (success, the horizon);
grade names such an error that nothing recorded explains (:mod:`rollbench.grading.termination`)."""


def fault_of(exc: BaseException, default: Fault) -> Fault:
    """``exc.fault`` when it is one of :data:`rollbench.core.contracts.FAULTS`, else ``default`` (also when
    reading the attribute raises: the exception is foreign code's)."""
    try:
        fault = getattr(exc, "fault", None)
        if isinstance(fault, str) and fault in FAULTS:
            return cast(Fault, fault)
    except Exception:
        pass
    return default


def failed_episode(
    planned: PlannedEpisode, task: TaskInfo, exc: BaseException, fault: Fault = "infrastructure"
) -> EpisodeRecord:
    """The record of an episode that could not start: 0 steps, reason ``error``.

    ``fault`` (default ``infrastructure``: an env that cannot be built, a worker that keeps dying) is used unless
    ``exc`` carries its own (see :func:`fault_of`)."""
    return EpisodeRecord(
        planned=planned,
        states=np.zeros((0, task.state_dim), dtype=np.float32),
        actions=np.zeros((0, task.action_dim), dtype=np.float64),
        rewards=np.zeros(0, dtype=np.float32),
        successes=np.zeros(0, dtype=bool),
        dones=np.zeros(0, dtype=bool),
        latencies=np.zeros(0, dtype=np.float32),
        frames={},
        success=False,
        success_at_reset=False,
        termination_reason="error",
        error=describe(exc),
        error_fault=fault_of(exc, fault),
        error_traceback=traceback.format_exc(limit=8),
    )
