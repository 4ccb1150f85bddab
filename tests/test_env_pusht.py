"""pusht family (gym-pusht PushT-v0) on the real simulator."""

from __future__ import annotations

import numpy as np
import pytest

from rollbench.core.registry import EnvOptions
from rollbench.envs.pusht import FAMILY

pytestmark = pytest.mark.sim
if FAMILY.missing():
    pytest.skip(FAMILY.missing() or "", allow_module_level=True)


def test_task_metadata() -> None:
    t = FAMILY.task("pusht/PushT-v0")
    assert t.max_steps == 300 and t.fps == 10 and t.success_rule == "any_step" and t.instruction.strip()
    assert t.action_low == (0.0, 0.0) and t.action_high == (512.0, 512.0)


def test_reset_step_render() -> None:
    task = FAMILY.task("pusht/PushT-v0")
    env = FAMILY.make(task, EnvOptions(cameras=("top",), image_size=(40, 56)))
    try:
        obs = env.reset(seed=0)
        assert obs.state.shape == (5,) and obs.state.dtype == np.float32
        assert env.success() is False
        res = env.step(np.array([256.0, 256.0], dtype=np.float32))
        assert res.observation.state.shape == (5,) and res.success is False and "coverage" in res.info
        img = env.render("top")
        assert img.shape == (40, 56, 3) and img.dtype == np.uint8 and img.max() > 8 and img.std() > 1
    finally:
        env.close()


def test_success_is_coverage_above_threshold() -> None:
    env = FAMILY.make(FAMILY.task("pusht/PushT-v0"), EnvOptions())
    try:
        env.reset(seed=0)
        inner = env.env.unwrapped
        goal = inner.goal_pose  # place the block exactly on the goal (angle first, then position): full coverage
        inner.block.angle = float(goal[2])
        inner.block.position = (float(goal[0]), float(goal[1]))
        inner.agent.position = (50.0, 50.0)
        assert inner._get_coverage() > 0.99
        assert env.success() is True
        assert env.step(np.array([50.0, 50.0], dtype=np.float32)).success is True
    finally:
        env.close()


def test_determinism_per_seed() -> None:
    task = FAMILY.task("pusht/PushT-v0")
    a, b = FAMILY.make(task, EnvOptions()), FAMILY.make(task, EnvOptions())
    try:
        a.reset(seed=5)
        np.testing.assert_array_equal(a.reset(seed=1).state, b.reset(seed=1).state)
        assert not np.array_equal(a.reset(seed=1).state, b.reset(seed=2).state)
    finally:
        a.close()
        b.close()
