"""Gymnasium envs that answer oddly, loaded as ``gym:odd_envs:<ID>`` with ``tests/`` on PYTHONPATH (test doubles of
an env a user hands rollbench; hostile round 11): the ``scripted/reach`` point of :class:`fault_envs.Point`, but

* ``RollbenchInfoRaises-v0``: its step info is a mapping whose reading raises RuntimeError("info boom");
* ``RollbenchNanReward-v0``: its reward is NaN from step 3 on (a physics blow-up).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from fault_envs import Point


class RaisingInfo(dict):  # type: ignore[type-arg]
    """A dict (gymnasium's checker wants one) holding ``is_success``, whose reading raises."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("info boom")


class InfoRaises(Point):
    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, Any]:
        obs, reward, terminated, truncated, _info = super().step(action)
        return obs, reward, terminated, truncated, RaisingInfo(is_success=False)


class NanReward(Point):
    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, (float("nan") if self._t >= 3 else reward), terminated, truncated, info


for _id, _entry in (("RollbenchInfoRaises-v0", InfoRaises), ("RollbenchNanReward-v0", NanReward)):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_entry, max_episode_steps=6)
