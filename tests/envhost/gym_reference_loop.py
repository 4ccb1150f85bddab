"""The oracle of tests/test_hosted_gym.py: gymnasium's own loop, run by a venv's interpreter without rollbench.

``python gym_reference_loop.py ENV_ID < episodes.json``: for each ``{"seed", "actions"}`` of the JSON list, resets
the env with ``seed`` and steps it with each action (a ``Discrete`` space gets ``int(rint(a[0]))`` clipped to its
range, the hostedgym family's documented mapping; a ``Box`` space the values in its dtype), and prints, as JSON,
per episode the flattened observations (float32, before each step) and the rewards, plus gymnasium's and numpy's
versions. Standard library, numpy and gymnasium only.
"""

from __future__ import annotations

import json
import sys

import gymnasium
import numpy as np
from gymnasium import spaces


def main() -> None:
    env = gymnasium.make(sys.argv[1])
    out = []
    for episode in json.load(sys.stdin):
        obs, _ = env.reset(seed=int(episode["seed"]))
        states, rewards = [], []
        for a in episode["actions"]:
            states.append(np.asarray(spaces.flatten(env.observation_space, obs), dtype=np.float32).tolist())
            if isinstance(env.action_space, spaces.Discrete):
                lo = int(env.action_space.start)
                action = int(np.clip(np.rint(a[0]), lo, lo + int(env.action_space.n) - 1))
            else:
                action = np.asarray(a, dtype=env.action_space.dtype)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            if terminated or truncated:
                break
        out.append({"states": states, "rewards": rewards})
    print(json.dumps({"episodes": out, "gymnasium": gymnasium.__version__, "numpy": np.__version__}))


if __name__ == "__main__":
    main()
