"""Policies used by the tests to provoke specific behaviours. They are loaded by name as
``fault_policies:<factory>`` (rollbench's ``module:factory`` policy syntax), with ``tests/`` on PYTHONPATH.

These are deliberate test doubles of a *policy* (the thing under evaluation), not of any rollbench part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.registry import make_policy
from rollbench.types import Observation, PolicyInfo, TaskInfo


class NanOnSeed:
    """Delegates to ``options["inner"]`` but returns a NaN action at step ``options["step"]`` (default 3) of the
    episode whose seed is ``options["bad_seed"]``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy(options.get("inner", "scripted-expert"), {})
        self.bad_seed = int(options["bad_seed"])
        self.bad_step = int(options.get("step", 3))
        self.info = PolicyInfo(name="nan-on-seed")
        self._seed = -1
        self._t = 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed, self._t = seed, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        a = np.atleast_2d(self.inner.act(observation, instruction)).astype(np.float32)
        if self._seed == self.bad_seed and self._t == self.bad_step:
            a[:] = np.nan
        self._t += 1
        return a

    def close(self) -> None:
        self.inner.close()


def nan_on_seed(name: str, options: Mapping[str, Any]) -> NanOnSeed:
    return NanOnSeed(options)


class Overshoot:
    """For ``scripted/reach-final``: walks straight through the goal and keeps going in the same direction, so
    success is reached mid-episode and lost before the horizon."""

    def __init__(self) -> None:
        self.info = PolicyInfo(name="overshoot")
        self._dir = np.zeros(2, dtype=np.float32)

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._dir = np.zeros(2, dtype=np.float32)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        s = observation.state
        if not self._dir.any():
            d = s[2:4] - s[0:2]
            self._dir = (d / np.abs(d).max() * 0.3).astype(np.float32)  # small steps: lands within 5 cm of goal
        return self._dir[None, :]

    def close(self) -> None:
        pass


def overshoot(name: str, options: Mapping[str, Any]) -> Overshoot:
    return Overshoot()


class Slow:
    """The scripted expert, sleeping ``options["sleep_s"]`` seconds (default 0.02) in every call."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        import time

        self._sleep, self._time = float(options.get("sleep_s", 0.02)), time
        self.inner = make_policy("scripted-expert", {})
        self.info = PolicyInfo(name="slow")

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self._time.sleep(self._sleep)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def slow(name: str, options: Mapping[str, Any]) -> Slow:
    return Slow(options)


class ShortBatch:
    """The scripted expert, natively batched, whose batched form answers one observation too few whenever it is
    asked for more than one (a policy server that drops a request). Single calls are answered correctly."""

    def __init__(self) -> None:
        self.info = PolicyInfo(name="short-batch")
        self.inner = make_policy("scripted-expert", {})

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def batched(self, size: int) -> ShortBatch:
        return self

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act_batch(self, slots: Any, observations: Any, instructions: Any) -> list[Any]:
        answers = [self.inner.act(o, i) for o, i in zip(observations, instructions, strict=True)]
        return answers[:-1] if len(answers) > 1 else answers

    def close(self) -> None:
        pass


def short_batch(name: str, options: Mapping[str, Any]) -> ShortBatch:
    return ShortBatch()
