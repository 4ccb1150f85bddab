"""One far-side env host per worker across tasks (docs/env-host.md "Reuse"): an episode run in a host that has
already built and run other tasks' envs is bit-identical to the same episode in a freshly started host, on
LIBERO's reference stack (``libero_ref``) and on LIBERO-Plus (``liberoplus``, a camera-view instance after a
sensor-noise one); a host whose call failed is never reused.

Needs ``bash scripts/libero_ref_setup.sh`` (and ``bash scripts/liberoplus_setup.sh`` for its test); real LIBERO on
both sides of the boundary, no doubles."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np
import pytest

from rollbench.core.contracts import EpisodeError
from rollbench.core.registry import EnvOptions
from rollbench.envs.hosted.remote import POOL
from rollbench.envs.libero.plus import FAMILY as PLUS
from rollbench.envs.libero.ref import FAMILY as REF

pytestmark = [pytest.mark.venv, pytest.mark.sim, pytest.mark.slow]
CAMS = ("agentview", "robot0_eye_in_hand")
ACTIONS = np.array([[0.2, -0.1, 0.3, 0.0, 0.0, 0.1, -1.0], [0.0, 0.4, -0.2, 0.1, 0.0, 0.0, 1.0]] * 2, np.float32)


def episode(env: Any, seed: int, state: int, actions: np.ndarray) -> list[np.ndarray]:
    """States after reset and every step, and both cameras' images after reset and after every step."""
    cams = list(env.cameras)
    env.expect_images(cams)
    out = [env.reset(seed, state).state, *(env.render(c) for c in cams)]
    for a in actions:
        out.append(env.step(a).observation.state)
        out.extend(env.render(c) for c in cams)
    return out


def run(family: Any, name: str, options: EnvOptions, seed: int, state: int, actions: np.ndarray) -> tuple[int, list]:
    """Build ``name``'s env, run one episode, close the env (its host goes back to the pool); ``(host pid, out)``."""
    env = family.make(family.task(name), options)
    try:
        return env.sim.host.pid, episode(env, seed, state, actions)
    finally:
        env.close()


def same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def fresh(family: Any, name: str, options: EnvOptions, seed: int, state: int, actions: np.ndarray) -> list:
    """The episode in a newly started host (the pool emptied first, the host stopped after)."""
    POOL.close_all()
    _pid, out = run(family, name, options, seed, state, actions)
    POOL.close_all()
    return out


@pytest.mark.skipif(REF.missing() is not None, reason=str(REF.missing()))
def test_a_reused_libero_ref_host_gives_the_fresh_hosts_episode_bit_for_bit_across_tasks() -> None:
    opts = EnvOptions(cameras=CAMS, image_size=(64, 64))
    first = fresh(REF, "libero_ref/libero_goal/2", opts, 3, 1, ACTIONS)
    pid, _ = run(REF, "libero_ref/libero_spatial/0", opts, 5, 2, ACTIONS[::-1] * 0.5)  # another task first
    pid2, _ = run(REF, "libero_ref/libero_10/4", EnvOptions(cameras=("agentview",), image_size=(32, 32)), 1, 0, ACTIONS)
    pid3, again = run(REF, "libero_ref/libero_goal/2", opts, 3, 1, ACTIONS)
    assert pid == pid2 == pid3  # one far-side process for all three envs
    same(first, again)
    POOL.close_all()


@pytest.mark.skipif(REF.missing() is not None, reason=str(REF.missing()))
def test_a_host_whose_call_failed_is_stopped_and_never_reused() -> None:
    POOL.close_all()
    opts = EnvOptions(cameras=("agentview",), image_size=(32, 32))
    env = REF.make(REF.task("libero_ref/libero_spatial/1"), opts)
    env.reset(0, 0)
    os.kill(env.sim.host.pid, signal.SIGKILL)
    with pytest.raises(EpisodeError) as info:
        env.step(ACTIONS[0])
    assert info.value.fault == "environment"
    dead = env.sim.host.pid
    env.close()
    assert len(POOL) == 0
    env = REF.make(REF.task("libero_ref/libero_spatial/1"), opts)
    try:
        assert env.sim.host.pid != dead and env.sim.host.uses == 1
    finally:
        env.close()
    assert len(POOL) == 1
    POOL.close_all()


@pytest.mark.skipif(PLUS.missing() is not None, reason=str(PLUS.missing()))
def test_a_reused_liberoplus_host_gives_the_fresh_hosts_episode_after_a_sensor_noise_instance() -> None:
    opts = EnvOptions(cameras=CAMS, image_size=(256, 256))
    camera = next(t.name for t in PLUS.tasks() if t.perturbation and t.perturbation.category == "camera")
    noise = next(t.name for t in PLUS.tasks() if t.perturbation and t.perturbation.category == "noise")
    first = fresh(PLUS, camera, opts, 7, 0, ACTIONS[:2])
    pid, _ = run(PLUS, noise, opts, 9, 0, ACTIONS[:2])
    pid2, again = run(PLUS, camera, opts, 7, 0, ACTIONS[:2])
    assert pid == pid2
    same(first, again)
    POOL.close_all()
