"""A chunked test policy whose actions say where they came from (``--latency`` tests, tests/test_latency.py).

Row ``i`` of the chunk computed on an observation whose state starts with ``s`` is ``[s + 1, i + 1, 0, ...]``
(``float32 (chunk_size, action_dim)``): on ``scripted/clock``, whose state is ``[t, 0, 0, 0]`` with ``t`` the
observation's frame index, an executed action ``[t + 1, i + 1]`` was computed on observation ``t`` and was row ``i``
of its chunk; the scripted family's hold action ``[0, 0]`` can never be mistaken for one. A pure function of the
observation, so the same whether called in-process or served (``rollbench serve-policy --policy
rollbench.testing.stamped:make_stamp_policy``).

Not registered as a policy: name it by its import path, ``rollbench.testing.stamped:make_stamp_policy``, with
``--policy-options '{"chunk_size": K}'`` (default 8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.bounds import MAX_CHUNK_SIZE
from rollbench.core.contracts import ConfigError, Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import policy_options


class StampPolicy:
    """See the module docstring."""

    def __init__(self, name: str, chunk_size: int) -> None:
        self.info = PolicyInfo(name=name, chunk_size=chunk_size, bounded=True)
        self.chunk_size = chunk_size
        self._dim = 2

    def reset(self, task: TaskInfo, seed: int) -> None:
        if task.action_dim < 2:
            raise ConfigError(f"the stamp policy needs at least 2 action dims; {task.name} has {task.action_dim}")
        self._dim = task.action_dim

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        chunk = np.zeros((self.chunk_size, self._dim), dtype=np.float32)
        chunk[:, 0] = np.float32(observation.state[0]) + 1
        chunk[:, 1] = np.arange(1, self.chunk_size + 1, dtype=np.float32)
        return chunk

    def close(self) -> None:
        pass


@policy_options(chunk_size=int)
def make_stamp_policy(name: str, options: Mapping[str, Any]) -> StampPolicy:
    """``chunk_size``: rows per chunk, 1 .. MAX_CHUNK_SIZE (1000; default 8)."""
    k = int(options.get("chunk_size", 8))
    if not 1 <= k <= MAX_CHUNK_SIZE:
        raise ConfigError(f"policy {name}: chunk_size must be 1 .. {MAX_CHUNK_SIZE}, got {k}")
    return StampPolicy(name, k)
