"""A policy that is mid-episode when the user's Ctrl-C arrives, for the tests of interruptions. Loaded by name as
``interrupting_policies:hold_once`` (rollbench's ``module:factory`` policy syntax), with ``tests/`` on PYTHONPATH.

A deliberate test double of a *policy* (the thing under evaluation), not of any rollbench part.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import make_policy


class HoldOnce:
    """The scripted expert, but at step ``options["step"]`` (default 3) of the episode whose seed is
    ``options["seed"]``, while the file ``options["marker"]`` does not exist, ``act`` creates it (the test's sign that
    an episode is in flight), sends its own process SIGINT when ``options["signal"]`` is true, and sleeps
    ``options["hold_s"]`` seconds (default 10): the signal arrives inside ``act``. (rollbench calls ``act`` in a
    helper thread, under the policy's deadline: a signal the kernel gives that thread is handled in the main thread
    when ``act`` returns, inside the same call.) Once the marker exists (a resume) it
    is the scripted expert throughout, so an interrupted and resumed run records what an uninterrupted one does."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.seed, self.step, self.marker = int(options["seed"]), int(options.get("step", 3)), str(options["marker"])
        self.signal, self.hold_s = bool(options.get("signal", False)), float(options.get("hold_s", 10.0))
        self.info = PolicyInfo(name="hold-once")
        self._seed, self._t = -1, 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed, self._t = seed, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        if self._seed == self.seed and self._t == self.step and not os.path.exists(self.marker):
            with open(self.marker, "x"):
                pass
            if self.signal:
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(self.hold_s)
        self._t += 1
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def hold_once(name: str, options: Mapping[str, Any]) -> HoldOnce:
    return HoldOnce(options)
