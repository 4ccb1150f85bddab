"""The batched-policy contract (:class:`BatchPolicy`): what the lockstep driver (:mod:`rollbench.run.lockstep`),
the policy deadline, the remote batch clients and the policy server all speak; and the optional hooks that go with
it (:class:`Batchable` on a Policy, :class:`SlotPolicies` on a BatchPolicy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from rollbench.core.contracts import Observation, Policy, PolicyInfo, TaskInfo

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


@runtime_checkable
class Batchable(Protocol):
    """Optional :class:`~rollbench.core.contracts.Policy` hook: ``batched(size)`` returns a :class:`BatchPolicy`
    serving ``size`` slots at once (``eval --batch-size``, ``serve-policy --max-batch``), or None when it cannot
    batch now (a remote client whose server takes no batch requests); without it, or on None, rollbench keeps one
    policy instance per slot."""

    def batched(self, size: int) -> BatchPolicy | None: ...


@runtime_checkable
class SlotPolicies(Protocol):
    """Optional :class:`BatchPolicy` hook: ``slot_policy(slot)`` is the single policy instance serving ``slot``
    (whose :class:`~rollbench.core.contracts.FinishesEpisodes` hook gives that slot's episode artifacts), or None
    when there is none (a native batched policy; a policy abandoned after a missed deadline)."""

    def slot_policy(self, slot: int) -> Policy | None: ...
