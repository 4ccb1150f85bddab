"""``fetch-expert``: a proportional controller that drives the Fetch gripper to the goal (solves ``fetch/Reach``).

Reads ``observation.state`` of ``fetch/Reach`` (layout in :mod:`rollbench.envs.fetch`): gripper position
``state[0:3]`` and desired goal ``state[10:13]``, metres. Action ``float32 (1, 4)``:
``clip(gain * (goal - grip) / 0.05, -1, 1)`` for ``dx, dy, dz`` (the env moves the gripper target 0.05 m per unit
action, ``fetch_env.py``: ``pos_ctrl *= 0.05``) and 0 for the (blocked) gripper. ``gain`` (option, default 1.0) is
dimensionless. With gain 1 the gripper target lands on the goal in a few steps, well inside the 50-step horizon, and
stays there, so the ``final_step`` success rule is met. Other Fetch tasks are refused (they need grasping).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import policy_options

POS_STEP = 0.05  # metres per unit action (gymnasium-robotics fetch_env.py)
GRIP = slice(0, 3)  # grip_pos in fetch/Reach state
GOAL = slice(10, 13)  # desired_goal in fetch/Reach state (after the 10-value observation)


class FetchReachExpert:
    """See the module docstring."""

    def __init__(self, name: str = "fetch-expert", gain: float = 1.0) -> None:
        if not np.isfinite(gain) or gain <= 0:
            raise ConfigError(f"fetch-expert gain must be a finite number > 0, got {gain}")
        self.gain = float(gain)
        self.info = PolicyInfo(name=name, provenance={"gain": self.gain}, tasks=("fetch/Reach",), bounded=True)

    def reset(self, task: TaskInfo, seed: int) -> None:
        if task.name != "fetch/Reach":
            raise ConfigError(f"fetch-expert only drives fetch/Reach, not {task.name}")

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        s = np.asarray(observation.state, dtype=np.float64)
        delta = self.gain * (s[GOAL] - s[GRIP]) / POS_STEP
        action = np.zeros(4, dtype=np.float32)
        action[:3] = np.clip(delta, -1.0, 1.0)
        return action[None, :]

    def close(self) -> None:
        pass


@policy_options(gain=(int, float))
def make_fetch_expert(name: str, options: Mapping[str, Any]) -> FetchReachExpert:
    """Proportional controller toward the goal for fetch/Reach (option ``gain``, default 1.0); state only."""
    return FetchReachExpert(name, gain=float(options.get("gain", 1.0)))
