"""The ``aloha`` family against gym-aloha itself: the same seed gives the scene gym-aloha gives, rollbench's state
is gym-aloha's ``agent_pos`` and its ``top`` camera is gym-aloha's pixel observation."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gym_aloha", reason="pip install 'rollbench[aloha]'")
pytest.importorskip("dm_control", reason="pip install 'rollbench[aloha]'")

from rollbench.core.registry import EnvOptions, make_env, resolve_tasks

pytestmark = pytest.mark.sim


def gym_aloha_reset(task: str, seed: int) -> dict:
    import gym_aloha
    import gymnasium

    gymnasium.register_envs(gym_aloha)
    env = gymnasium.make(f"gym_aloha/{task}", obs_type="pixels_agent_pos")
    try:
        return env.reset(seed=seed)[0]
    finally:
        env.close()


@pytest.mark.parametrize("task", ["AlohaTransferCube-v0", "AlohaInsertion-v0"])
def test_reset_is_gym_alohas_scene_for_the_seed(task: str) -> None:
    (info,) = resolve_tasks(f"aloha/{task}")
    assert (info.max_steps, info.fps, info.action_dim, info.state_dim, info.image_size) == (400, 50, 14, 14, (480, 640))
    env = make_env(info, EnvOptions(cameras=("top",), image_size=(480, 640)))
    try:
        obs = env.reset(seed=3)
        expected = gym_aloha_reset(task, 3)
        np.testing.assert_array_equal(obs.state, expected["agent_pos"].astype(np.float32))
        np.testing.assert_array_equal(env.render("top"), expected["pixels"]["top"])
        assert not env.success()
        other = env.reset(seed=4)
        assert not np.array_equal(env.render("top"), expected["pixels"]["top"])  # the seed moves the objects
        assert other.state.shape == (14,)
    finally:
        env.close()
