"""A policy test double for ``tests/test_reproduce.py``: a run with a chosen number of successes.

``reproduce_policies:fail_on`` is the scripted expert, except that on the ``(task, seed)`` pairs listed in
``options["fail"]`` (task name -> list of seeds) it sends the zero action, so those episodes fail (the scripted point
never reaches its goal without moving). Loaded by name with ``tests/`` on PYTHONPATH.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import make_policy


class FailOn:
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.fail = {task: {int(s) for s in seeds} for task, seeds in dict(options.get("fail", {})).items()}
        self.info = PolicyInfo(name="fail-on")
        self.idle = False

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.idle = seed in self.fail.get(task.name, set())
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        action = self.inner.act(observation, instruction)
        return np.zeros_like(action) if self.idle else action

    def close(self) -> None:
        pass


def fail_on(name: str, options: Mapping[str, Any]) -> FailOn:
    return FailOn(options)
