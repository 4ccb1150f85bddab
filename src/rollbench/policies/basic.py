"""Simulator-agnostic policies: ``random``, ``zero``, ``scripted-expert``, and the Gaussian action-noise wrapper."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from rollbench.core.bounds import MAX_CHUNK_SIZE
from rollbench.core.contracts import ConfigError, FinishesEpisodes, Observation, Policy, PolicyInfo, TaskInfo
from rollbench.core.registry import policy_options
from rollbench.envs.scripted import FAMILY as SCRIPTED

RANDOM_POLICY_TAG = 0x52414E44  # "RAND": entropy tag that separates the random policy's stream from the env's


class RandomPolicy:
    """Uniform actions within the task's bounds, chunk ``(1, A)``.

    The generator is ``numpy.random.default_rng([seed, RANDOM_POLICY_TAG])`` per episode: a ``SeedSequence`` with
    its own entropy, so the policy's draws are independent of the env's, which gymnasium (and the scripted family)
    draw from ``default_rng(seed)`` for the same seed; with that same stream the first actions would be functions of
    the initial scene.
    """

    def __init__(self, name: str = "random") -> None:
        self.info = PolicyInfo(name=name, bounded=True)
        self._rng = np.random.default_rng(0)
        self._low = self._high = np.zeros(1)

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._rng = np.random.default_rng([seed, RANDOM_POLICY_TAG])
        self._low = np.asarray(task.action_low, dtype=np.float64)
        self._high = np.asarray(task.action_high, dtype=np.float64)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self._rng.uniform(self._low, self._high)[None, :].astype(np.float32)

    def close(self) -> None:
        pass


class ZeroPolicy:
    """All-zero actions, chunk ``(1, action_dim)``."""

    def __init__(self, name: str = "zero") -> None:
        self.info = PolicyInfo(name=name, bounded=True)
        self._dim = 1

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._dim = task.action_dim

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return np.zeros((1, self._dim), dtype=np.float32)

    def close(self) -> None:
        pass


class ScriptedExpert:
    """Expert for the ``scripted`` family: steps straight at the goal (state ``[x, y, gx, gy]``, metres).

    Returns chunks of ``chunk_size`` identical actions; ``(chunk_size, 2)``.
    """

    def __init__(self, name: str = "scripted-expert", chunk_size: int = 1) -> None:
        if not 1 <= chunk_size <= MAX_CHUNK_SIZE:  # an option a handed-over run.json may carry: bounded memory
            raise ConfigError(f"policy {name}: chunk_size must be between 1 and {MAX_CHUNK_SIZE}, got {chunk_size}")
        self.info = PolicyInfo(name=name, chunk_size=chunk_size, tasks=("scripted/*",), bounded=True)

    def reset(self, task: TaskInfo, seed: int) -> None:
        if task.family != SCRIPTED.name:
            raise ConfigError(f"scripted-expert only drives scripted/* tasks, not {task.name}")

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        s = observation.state
        delta = (s[2:4] - s[0:2]) / 0.1  # scripted.STEP_SIZE
        a = np.clip(delta, -1.0, 1.0).astype(np.float32)
        return np.repeat(a[None, :], self.info.chunk_size, axis=0)

    def close(self) -> None:
        pass


class ActionNoise:
    """Adds ``N(0, scale^2)`` noise to every action of the wrapped policy, then clips to the task bounds.

    The noise generator is ``numpy.random.default_rng([seed, 0x4E4F4953])`` per episode, so noisy runs are
    reproducible and independent of the inner policy's randomness. ``scale`` is in action units.
    """

    def __init__(self, inner: Policy, scale: float) -> None:
        if not np.isfinite(scale) or scale < 0:
            raise ConfigError(f"--action-noise must be a finite number >= 0, got {scale}")
        self.inner = inner
        self.scale = float(scale)
        self.info = replace(inner.info, provenance={**inner.info.provenance, "action_noise": self.scale})
        self._rng = np.random.default_rng(0)
        self._low = self._high = np.zeros(1)

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._rng = np.random.default_rng([seed, 0x4E4F4953])
        self._low = np.asarray(task.action_low, dtype=np.float32)
        self._high = np.asarray(task.action_high, dtype=np.float32)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        chunk = np.atleast_2d(np.asarray(self.inner.act(observation, instruction), dtype=np.float32))
        noisy = chunk + self._rng.normal(0.0, self.scale, size=chunk.shape).astype(np.float32)
        return np.clip(noisy, self._low, self._high)

    def finish_episode(self, outcome: Mapping[str, Any]) -> Mapping[str, bytes]:
        """The inner policy's episode artifacts (see :func:`rollbench.run.episode.rollout`), if it has any."""
        return self.inner.finish_episode(outcome) if isinstance(self.inner, FinishesEpisodes) else {}

    def close(self) -> None:
        self.inner.close()


@policy_options()
def make_random(name: str, options: Mapping[str, Any]) -> RandomPolicy:
    """Uniform random actions within the task's bounds, seeded per episode."""
    return RandomPolicy(name)


@policy_options()
def make_zero(name: str, options: Mapping[str, Any]) -> ZeroPolicy:
    """All-zero actions (a do-nothing baseline)."""
    return ZeroPolicy(name)


@policy_options(chunk_size=int)
def make_scripted_expert(name: str, options: Mapping[str, Any]) -> ScriptedExpert:
    """Scripted expert for the scripted/* tasks (steps straight at the goal)."""
    return ScriptedExpert(name, chunk_size=int(options.get("chunk_size", 1)))
