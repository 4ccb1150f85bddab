"""Plug-in policies written against the public API only (``import rollbench``, never ``rollbench.core``), as a user's
own module would be: used by ``tests/test_public_api.py`` as ``module:factory`` policies."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import rollbench


class Still:
    """Zero actions from ``act``; the optional hooks are added by the subclasses below."""

    def __init__(self) -> None:
        self.info = rollbench.PolicyInfo(name="still")
        self.dim = 0

    def reset(self, task: rollbench.TaskInfo, seed: int) -> None:
        self.dim = task.action_dim

    def act(self, observation: rollbench.Observation, instruction: str) -> np.ndarray:
        return np.zeros((1, self.dim), np.float32)

    def close(self) -> None:
        pass


class Refuses(Still):
    """Refuses every run in its ``check_tasks`` hook."""

    def check_tasks(
        self, tasks: Sequence[rollbench.TaskInfo], image_size_of: Callable[[rollbench.TaskInfo], tuple[int, int]]
    ) -> None:
        raise rollbench.ConfigError(f"refuses {', '.join(t.name for t in tasks)} at {image_size_of(tasks[0])}")


class HalfBatch:
    """A BatchPolicy answering 0.5 in every action dimension (``act`` of :class:`Batched` answers 0)."""

    def __init__(self) -> None:
        self.info = rollbench.PolicyInfo(name="batched")
        self.dims: dict[int, int] = {}

    def reset_slot(self, slot: int, task: rollbench.TaskInfo, seed: int) -> None:
        self.dims[slot] = task.action_dim

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[rollbench.Observation], instructions: Sequence[str]
    ) -> list[np.ndarray | BaseException]:
        return [np.full((1, self.dims[s]), 0.5, np.float32) for s in slots]

    def close(self) -> None:
        pass


class Batched(Still):
    """Has the ``batched`` hook: with ``--batch-size`` >= 2 its :class:`HalfBatch` answers."""

    def batched(self, size: int) -> HalfBatch:
        return HalfBatch()


@rollbench.policy_options(note=str)
def make_refuses(name: str, options: Mapping[str, Any]) -> Refuses:
    return Refuses()


@rollbench.policy_options()
def make_still(name: str, options: Mapping[str, Any]) -> Still:
    return Still()


@rollbench.policy_options()
def make_batched(name: str, options: Mapping[str, Any]) -> Batched:
    return Batched()
