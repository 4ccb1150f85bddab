"""The batched-policy contract (:class:`BatchPolicy`): what the lockstep driver (:mod:`rollbench.run.lockstep`),
the policy deadline, the remote batch clients and the policy server all speak."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from rollbench.core.types import Observation, PolicyInfo, TaskInfo

Answer = np.ndarray | BaseException  # an action chunk, or the exception that ends that slot's episode


@runtime_checkable
class BatchPolicy(Protocol):
    """A policy serving B slots at once. Slot ``i``'s state (queued actions, hidden state) belongs to slot ``i``.

    ``act_batch`` returns one answer per requested slot, in order: a chunk ``float32 (k, action_dim)``, or an
    exception (PolicyStop ends that episode as ``policy_stop``, any other as ``error``). Raising instead ends every
    requested slot's episode as ``error``.
    """

    info: PolicyInfo

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None: ...

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[Answer]: ...

    def close(self) -> None: ...
