"""gym family: gym:<id> over any registered gymnasium env that reports success."""

from __future__ import annotations

import numpy as np
import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.registry import EnvOptions, resolve_tasks
from rollbench.envs.gym import FAMILY, gym_id, resize_nearest


def test_names() -> None:
    assert gym_id("gym:FetchReach-v4") == "FetchReach-v4"
    assert gym_id("gym/gym_pusht/PushT-v0") == "gym_pusht/PushT-v0"
    with pytest.raises(ConfigError):
        gym_id("gym:")


def test_resize_nearest() -> None:
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    out = resize_nearest(img, (8, 3))
    assert out.shape == (8, 3, 3) and out[0, 0, 0] == img[0, 0, 0]


def test_env_without_success_key_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"Pendulum-v1.*neither 'is_success' nor 'success'.*reported"):
        FAMILY.task("gym:Pendulum-v1")


def test_non_box_actions_and_unknown_ids_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="flat Box"):
        FAMILY.task("gym:CartPole-v1")
    with pytest.raises(ConfigError, match="unknown gymnasium env id"):
        FAMILY.task("gym:NoSuchEnv-v0")


@pytest.mark.sim
def test_fetch_reach_through_gym_family() -> None:
    task = FAMILY.task("gym:FetchReach-v4")
    assert task.name == "gym/FetchReach-v4" and task.has_instruction is False and task.instruction == ""
    assert task.max_steps == 50 and task.action_dim == 4 and task.state_dim == 16 and task.cameras == ("render",)
    assert FAMILY.task("gym/FetchReach-v4") is task and task in FAMILY.tasks()
    assert resolve_tasks("gym:FetchReach-v4") == [task]
    env = FAMILY.make(task, EnvOptions(cameras=("render",), image_size=(32, 40)))
    try:
        s1 = env.reset(seed=4).state
        assert s1.shape == (16,) and s1.dtype == np.float32 and env.success() is False
        res = env.step(np.zeros(4, dtype=np.float32))
        assert isinstance(res.success, bool) and "is_success" in res.info
        img = env.render("render")
        assert img.shape == (32, 40, 3) and img.dtype == np.uint8 and img.max() > 8
        np.testing.assert_array_equal(env.reset(seed=4).state, s1)
        assert not np.array_equal(env.reset(seed=5).state, s1)
    finally:
        env.close()


@pytest.mark.sim
def test_pusht_through_gym_family_resizes_frames() -> None:
    task = FAMILY.task("gym:gym_pusht/PushT-v0")
    assert task.max_steps == 300 and task.action_dim == 2
    env = FAMILY.make(task, EnvOptions(cameras=("render",), image_size=(30, 20)))
    try:
        env.reset(seed=0)
        assert env.render("render").shape == (30, 20, 3)
    finally:
        env.close()
