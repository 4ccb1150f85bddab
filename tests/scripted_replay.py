"""Test helper: the scripted family's dynamics written out by hand (the independent oracle for recorded episodes),
a planned episode and an env of the scripted family.
"""

from __future__ import annotations

import numpy as np

from rollbench.core.plan import PlannedEpisode
from rollbench.core.registry import EnvOptions
from rollbench.envs.scripted import FAMILY, STEP_SIZE, SUCCESS_RADIUS


def planned(task: str = "scripted/reach", seed: int = 0, max_steps: int = 50, rule: str = "any_step") -> PlannedEpisode:
    t = FAMILY.task(task)
    return PlannedEpisode(0, task, 0, seed, None, 0, t.instruction, max_steps, rule)


def replay(seed: int, actions: np.ndarray) -> tuple[np.ndarray, list[bool]]:
    """Oracle: the scripted dynamics written out by hand (start/goal from default_rng(seed), 0.1 m per unit)."""
    rng = np.random.default_rng(seed)
    pos, goal = rng.uniform(0.1, 0.9, size=2), rng.uniform(0.1, 0.9, size=2)
    states, succ = [], []
    for a in actions.astype(np.float32):  # these policies return float32, recorded exactly (as float64)
        states.append(np.concatenate([pos, goal]))
        pos = np.clip(pos + STEP_SIZE * np.clip(a, -1, 1), 0, 1)
        succ.append(bool(np.linalg.norm(pos - goal) < SUCCESS_RADIUS))
    return np.asarray(states, dtype=np.float32), succ


def make_env(task: str = "scripted/reach"):
    return FAMILY.make(FAMILY.task(task), EnvOptions(cameras=("top",), image_size=(32, 32)))
