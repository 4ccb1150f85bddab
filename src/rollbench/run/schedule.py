"""Which action runs at each step of an episode: the action-chunk queue, with an optional inference delay.

Without latency (``--latency none``, the default) the policy is asked on observation ``t`` and its chunk's first
action runs at step ``t``; the chunk's first ``replan_every`` actions run, then the policy is asked again (a chunk
shorter than that is run whole).

With a delay of ``d`` steps (``--latency``, :mod:`rollbench.core.latency`) a call made on observation ``t`` delivers
its chunk at step ``t + d``; the env does not wait. Steps ``t .. t + d - 1`` run the actions left in the current
chunk beyond its replan point (the actions it would have run had it not been replaced), then, once those run out,
the task's hold action (:class:`~rollbench.core.contracts.HoldAction`: e.g. a zero delta with the gripper command
unchanged). At step ``t + d`` the new chunk replaces the old one; its first ``d`` actions were planned for steps
already executed (they are stale):

* ``--stale skip`` (default, as real-time execution does): they are dropped and action ``d`` runs at step ``t + d``,
  so action ``i`` of a chunk always runs at step ``t + i``; a chunk of ``d`` actions or fewer is dropped whole (the
  robot holds and the policy is asked again at once);
* ``--stale execute``: they run late: action ``i`` runs at step ``t + d + i``.

Then ``replan_every`` actions of the new chunk run (counting only actions executed, not skipped ones) before the next
call. One call is outstanding at a time. ``d = 0`` (``steps:0``, ``fixed:0``) is exactly ``none``.

Per step the schedule reports the frame index of the observation the action was computed from, the action's index in
its chunk, and whether it was a hold action (then both are -1); see :mod:`rollbench.record.lerobot`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rollbench.core.contracts import EpisodeError, HoldAction


@dataclass(frozen=True)
class Step:
    """The action of one step and where it came from: ``obs_step`` (frame index of the observation its chunk was
    computed from) and ``chunk_index`` (its row in that chunk), both -1 for a hold action."""

    action: np.ndarray
    obs_step: int
    chunk_index: int
    hold: bool


class ChunkSchedule:
    """The action queue of one episode (see the module docstring).

    Args:
        replan_every: actions executed from each chunk before the policy is asked again (>= 1).
        delay: ``delay(measured_s) -> steps`` of a call (:func:`rollbench.core.latency.delay_rule`); None: no
            latency.
        skip_stale: drop (True) or execute late (False) a delayed chunk's first ``d`` actions.
        hold: the task's hold action; needed only when a delay leaves a step without an action.
    """

    def __init__(
        self,
        replan_every: int,
        delay: Callable[[float], int] | None = None,
        skip_stale: bool = True,
        hold: HoldAction | None = None,
    ) -> None:
        self.replan_every, self.delay, self.skip_stale, self.hold = replan_every, delay, skip_stale, hold
        self._chunk: np.ndarray | None = None  # (k, action_dim), the policy's own float dtype
        self._source = -1  # frame index of the observation the current chunk was computed from
        self._pos = 0  # next row of the current chunk to execute
        self._executed = 0  # rows of the current chunk executed so far
        self._pending: tuple[int, int, np.ndarray] | None = None  # (arrival step, source step, chunk)
        self._last: np.ndarray | None = None  # the last executed action (hold actions included)

    def arrive(self, step: int) -> None:
        """Install the outstanding chunk if it is due at ``step`` (call at the start of every step)."""
        if self._pending is not None and self._pending[0] <= step:
            due, source, chunk = self._pending
            self._pending = None
            self._install(chunk, source, due - source)

    def _install(self, chunk: np.ndarray, source: int, d: int) -> None:
        self._chunk, self._source, self._executed = chunk, source, 0
        self._pos = d if self.skip_stale else 0

    def needs_call(self) -> bool:
        """True when the policy must be asked on this step's observation: no call is outstanding and the current
        chunk reached its replan point or ran out."""
        if self._pending is not None:
            return False
        return self._chunk is None or self._executed >= self.replan_every or self._pos >= len(self._chunk)

    def calls_at(self, step: int) -> bool:
        """Whether :meth:`needs_call` will be true at ``step`` (the next step) once :meth:`arrive` has run then, as
        things stand after this step's :meth:`next`; changes nothing (the episode loop uses it to render images
        only for the observations the policy will be asked on)."""
        if self._pending is None:
            return self.needs_call()
        due, source, chunk = self._pending
        return due <= step and (due - source if self.skip_stale else 0) >= len(chunk)

    def give(self, chunk: np.ndarray, step: int, measured_s: float) -> None:
        """The chunk ``(k, action_dim)`` (the policy's float dtype, never rounded) of a call made on observation ``step`` that took ``measured_s``
        seconds of wall time: current at once without latency or with a delay of 0, else outstanding."""
        d = self.delay(measured_s) if self.delay is not None else 0
        if d <= 0:
            self._install(chunk, step, 0)
        else:
            self._pending = (step + d, step, chunk)

    def next(self, step: int, state: np.ndarray) -> Step:
        """The action to execute at ``step`` (``state``: this step's observation state, for a hold action that
        starts from it). Raises EpisodeError (environment fault) when a hold is needed and the task has none."""
        chunk = self._chunk
        may_run = self._pending is not None or self._executed < self.replan_every
        if chunk is not None and self._pos < len(chunk) and may_run:
            out = Step(chunk[self._pos], self._source, self._pos, False)
            self._pos += 1
            self._executed += 1
        else:
            if self.hold is None:
                raise EpisodeError(f"no action for step {step} and the task declares no hold action", "environment")
            out = Step(self.hold.action(self._last, state), -1, -1, True)
        self._last = out.action
        return out
