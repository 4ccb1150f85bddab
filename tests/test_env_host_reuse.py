"""One far-side env host per worker across tasks (docs/env-host.md "Reuse"): an episode run in a host that has
already built and run other tasks' envs is bit-identical to the same episode in a freshly started host, on
LIBERO's reference stack (``libero_ref``) and on LIBERO-Plus (``liberoplus``, a camera-view instance after a
sensor-noise one, and a sensor-noise episode across two hosts); a host whose call failed is never reused.

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
    same(first, again)  # its host stays in the pool: the next test's first env takes it


@pytest.mark.skipif(REF.missing() is not None, reason=str(REF.missing()))
def test_a_host_whose_call_failed_is_stopped_and_never_reused() -> None:
    """The first env takes an idle host when there is one (the previous test's, spared a start): the claim is about
    any host whose call failed."""
    opts = EnvOptions(cameras=("agentview",), image_size=(32, 32))
    env = REF.make(REF.task("libero_ref/libero_spatial/1"), opts)
    POOL.close_all()  # nothing else idle: a host back in the pool after this can only be this env's
    os.kill(env.sim.host.pid, signal.SIGKILL)  # before the first reset: a LIBERO reset costs seconds, any call fails
    with pytest.raises(EpisodeError) as info:
        env.reset(0, 0)
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
def test_liberoplus_fog_is_bit_identical_in_two_hosts_and_a_reused_host_gives_the_fresh_hosts_camera_episode() -> None:
    """LIBERO-Plus corrupts agentview in every step with numpy's generator, seeded from the episode's seed: a fog
    episode (sensor noise) is bit-identical in a newly started host and in a host that ran a camera-view instance and
    another fog episode first; the camera-view episode in a host that ran the fog episodes is the fresh host's.
    One test for both claims: each needs two LIBERO-Plus hosts and both instances' scenes (~10 s a host here)."""
    opts = EnvOptions(cameras=CAMS, image_size=(256, 256))  # the only size the fog corruption takes
    camera = next(t.name for t in PLUS.tasks() if t.perturbation and t.perturbation.category == "camera")
    noise = PLUS.task("liberoplus/libero_spatial/1394")  # noise 37: fog, drawn from numpy's generator
    assert noise.perturbation is not None and noise.perturbation.detail == "fog"
    POOL.close_all()
    host_a, first = run(PLUS, camera, opts, 7, 0, ACTIONS[:2])  # a fresh host; back in the pool after
    reused, other = PLUS.make(noise, opts), PLUS.make(noise, opts)  # both open at once: host A and a new host
    try:
        assert reused.sim.host.pid == host_a and other.sim.host.pid != host_a
        fog = episode(other, 3, 0, ACTIONS[:2])
        episode(reused, 9, 0, ACTIONS[:2])
        same(fog, episode(reused, 3, 0, ACTIONS[:2]))
        hosts = {host_a, other.sim.host.pid}
    finally:
        reused.close()
        other.close()
    pid, again = run(PLUS, camera, opts, 7, 0, ACTIONS[:2])
    assert pid in hosts  # a host that ran the fog episodes
    same(first, again)
    POOL.close_all()
