"""Real LIBERO scenes (rpent-libero on robosuite 1.5.2 / MuJoCo 3.3.0, the assets packages): build, init states,
settle, success, worker counts, and what a served policy receives.

Kept small for CI: task 0 of each suite, no cameras except where images are the point (then 224 x 224, the size
the policy receives), few steps. A LIBERO scene takes ~10-60 s to build and a reset ~2-8 s here (LIBERO resets
hard: it rebuilds the MuJoCo model), so the libero_spatial task-0 env is built once for the module.

The policy server in the last test is a test double of the *policy* (an openpi-protocol websocket server on
loopback that records what it receives and answers with no-op chunks); everything else is real.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from rollbench.api import Execution, evaluate
from rollbench.core.registry import EnvOptions
from rollbench.envs.libero import setup as libero_setup
from rollbench.envs.libero.env import FAMILY, NOOP_ACTION, LiberoEnv, start_episode
from rollbench.envs.libero.tasks import bddl_language

pytestmark = [
    pytest.mark.sim,
    pytest.mark.slow,
    pytest.mark.skipif(libero_setup.missing() is not None, reason=f"LIBERO not installed: {libero_setup.missing()}"),
]
SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
SPATIAL0 = "libero/libero_spatial/0"


@pytest.fixture(scope="module")
def spatial_env() -> Iterator[LiberoEnv]:
    env = FAMILY.make(FAMILY.task(SPATIAL0), EnvOptions())
    yield env
    env.close()


@pytest.mark.parametrize("suite", SUITES)
def test_task0_of_each_suite_builds_takes_init_state_0_settles_and_steps(suite: str, spatial_env: LiberoEnv) -> None:
    task = FAMILY.task(f"libero/{suite}/0")
    env = spatial_env if task.name == SPATIAL0 else FAMILY.make(task, EnvOptions())
    try:
        assert env.init_states.shape[0] == 50 and env.init_states.dtype == np.float64
        start_episode(env.sim, env.init_states, 0, settle_steps=0)
        np.testing.assert_array_equal(env.sim.get_sim_state(), env.init_states[0])  # after set, before settling
        obs = env.reset(seed=0, initial_state=0)  # reset, init state 0, 10 no-op settle steps
        settled = env.sim.get_sim_state()
        assert settled.shape == env.init_states[0].shape and not np.array_equal(settled, env.init_states[0])
        assert obs.state.shape == (8,) and obs.state.dtype == np.float64 and np.isfinite(obs.state).all()
        # no camera asked for: no offscreen renderer, no image rendered
        assert env.sim.env.has_offscreen_renderer is False and not any(k.endswith("_image") for k in obs.raw)
        res = env.step(np.array([0.5, 0, 0, 0, 0, 0, -1], dtype=np.float32))
        assert res.observation.state[0] != obs.state[0]  # the arm moved along x
        assert res.success is False and env.success() is False
        assert env.language  # the BDDL's own language line, as the built env reports it
    finally:
        if env is not spatial_env:
            env.close()


def test_moving_the_bowl_onto_the_plate_through_the_simulator_is_a_success(spatial_env: LiberoEnv) -> None:
    env = spatial_env
    env.reset(seed=0, initial_state=0)
    assert env.success() is False
    inner = env.sim.env  # robosuite env under LIBERO's ControlEnv
    sim = inner.sim
    joint = inner.objects_dict["akita_black_bowl_1"].joints[0]  # the goal: (On akita_black_bowl_1 plate_1)
    qpos, qvel = sim.model.get_joint_qpos_addr(joint), sim.model.get_joint_qvel_addr(joint)
    plate = np.array(sim.data.body_xpos[inner.obj_body_id["plate_1"]])
    sim.data.qpos[qpos[0] : qpos[0] + 3] = plate + np.array([0.0, 0.0, 0.05])
    sim.data.qvel[qvel[0] : qvel[1]] = 0.0
    sim.forward()
    successes = [env.step(np.asarray(NOOP_ACTION, dtype=np.float32)).success for _ in range(20)]
    assert any(successes) and env.success() is True
    np.testing.assert_allclose(sim.data.qpos[qpos[0] : qpos[0] + 2], plate[:2], atol=0.02)


@pytest.fixture(scope="module")
def first_states(spatial_env: LiberoEnv) -> list[np.ndarray]:
    """The state after reset + init state k + settle, k = 0, 1, 2, in this process, as recorded (float32): computed
    once for both worker counts (each LIBERO reset rebuilds the scene, seconds of CPU)."""
    return [spatial_env.reset(seed=k, initial_state=k).state.astype(np.float32) for k in range(3)]


@pytest.mark.parametrize("workers", [1, 2])
def test_episode_k_starts_from_init_state_k_with_1_and_2_workers(
    workers: int, first_states: list[np.ndarray], tmp_path: Path
) -> None:
    """The first recorded state of episode k equals the state after reset + init state k + settle in this process
    (the init states differ in the arm's joints, so the state tells which one was used). Two workers for three
    episodes: a worker runs at least two of them (one after another episode's reset); a third
    worker would only add another scene build (~10 s here) on this 2-core machine."""
    result = evaluate(
        env=SPATIAL0,
        policy="zero",
        episodes=3,
        max_steps=1,
        out=tmp_path / "run",
        execution=Execution(workers=workers),
    )
    assert result.status == "OK", result.reasons
    table = pq.read_table(tmp_path / "run" / "data").to_pydict()
    first = {
        e: np.asarray(s, dtype=np.float32)
        for e, s, f in zip(*(table[k] for k in ("episode_index", "observation.state", "frame_index")), strict=True)
        if f == 0
    }
    expected = first_states
    for k in range(3):
        np.testing.assert_array_equal(first[k], expected[k])
    assert not np.array_equal(expected[0], expected[1])
    assert [e.initial_state for e in result.episodes] == [0, 1, 2]


class _OpenpiLikeServer:
    """An openpi-protocol websocket server on loopback (msgpack-numpy frames, empty metadata as openpi's
    ``serve_policy.py`` sends for LIBERO) that records each observation and returns no-op chunks of 10 actions."""

    def __init__(self) -> None:
        from openpi_client import msgpack_numpy
        from websockets.sync.server import serve

        self.received: list[dict[str, Any]] = []
        packer = msgpack_numpy.Packer()

        def handler(ws: Any) -> None:
            ws.send(packer.pack({}))
            for frame in ws:
                obs = msgpack_numpy.unpackb(frame)
                self.received.append(obs)
                ws.send(packer.pack({"actions": np.tile(np.asarray(NOOP_ACTION, dtype=np.float32), (10, 1))}))

        self.server = serve(handler, "127.0.0.1", 0)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)


def test_an_openpi_server_receives_the_perturbed_instruction_both_images_and_the_8d_state(tmp_path: Path) -> None:
    """LIBERO-PRO libero_spatial_lan task 0 (the base scene with a paraphrased instruction): with no options the
    server gets what openpi's LIBERO client sends, the paraphrase as the prompt, and chunks are replanned every 5."""
    server = _OpenpiLikeServer()
    try:
        result = evaluate(
            env="libero/libero_spatial_lan/0",
            policy=f"ws://127.0.0.1:{server.port}",
            episodes=1,
            max_steps=7,
            video=True,
            out=tmp_path / "run",
        )
    finally:
        server.close()
    assert result.status == "OK", result.reasons
    lan_bddl = libero_setup.liberopro_dir() / "bddl_files" / "libero_spatial_lan"
    paraphrase = bddl_language(next(lan_bddl.glob("pick_up_the_black_bowl_between_*.bddl")))
    assert paraphrase == "lift the black bowl between the plate and ramekin and set it on the plate"
    assert len(server.received) == 2  # 7 steps, 5 actions of each chunk executed
    for obs in server.received:
        assert set(obs) == {"observation/image", "observation/wrist_image", "observation/state", "prompt"}
        assert obs["prompt"] == paraphrase
        for key in ("observation/image", "observation/wrist_image"):
            assert obs[key].shape == (224, 224, 3) and obs[key].dtype == np.uint8
        assert obs["observation/state"].shape == (8,) and obs["observation/state"].dtype == np.float64
    run_dir = tmp_path / "run"
    import json

    log = json.loads((run_dir / "run.json").read_text())
    assert log["plan"]["replan_every"] == 5
    assert log["plan"]["episodes"][0]["instruction"] == paraphrase
    assert log["provenance"]["libero"]["libero_package"] == {"name": "rpent-libero", "version": "0.2.0"}
    assert log["provenance"]["libero"]["mujoco"] == "3.3.0" and log["warnings"] == []
    videos = sorted(p.parent.parent.name for p in run_dir.glob("videos/*/chunk-000/file-000.mp4"))
    assert videos == ["observation.images.agentview"]  # the reference client's video: agentview only
