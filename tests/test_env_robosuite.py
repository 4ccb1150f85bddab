"""robosuite family (robosuite 1.5, Panda, OSC_POSE) on the real simulator."""

from __future__ import annotations

import numpy as np
import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.registry import EnvOptions
from rollbench.envs.robosuite import FAMILY, OBJECT_KEYS, PROPRIO_KEYS

pytestmark = pytest.mark.sim
if FAMILY.missing():
    pytest.skip(FAMILY.missing() or "", allow_module_level=True)

SIZE = (48, 64)  # (height, width): small and non-square so a transposed image would show


@pytest.fixture(scope="module")
def lift_cam():
    env = FAMILY.make(
        FAMILY.task("robosuite/Lift"), EnvOptions(cameras=FAMILY.task("robosuite/Lift").cameras, image_size=SIZE)
    )
    yield env
    env.close()


def _project(sim, camera: str, point: np.ndarray) -> tuple[int, int]:
    """Pinhole projection of a world point to (row, col), row 0 at the top (MuJoCo camera: x right, y up, looks -z)."""
    cam = sim.model.camera_name2id(camera)
    pos, rot = sim.data.cam_xpos[cam], sim.data.cam_xmat[cam].reshape(3, 3)
    x, y, z = rot.T @ (np.asarray(point) - pos)
    h, w = SIZE
    f = 0.5 * h / np.tan(np.deg2rad(sim.model.cam_fovy[cam]) / 2)
    return round(h / 2 - f * y / -z), round(w / 2 + f * x / -z)


def test_task_table() -> None:
    names = {t.name for t in FAMILY.tasks()}
    assert {"robosuite/Lift", "robosuite/Stack", "robosuite/Door", "robosuite/PickPlaceCan"} <= names
    for t in FAMILY.tasks():
        assert t.max_steps == 500 and t.fps == 20 and t.action_dim == 7 and t.instruction.strip()
        assert t.cameras == ("agentview", "robot0_eye_in_hand") and t.success_rule == "any_step"
    with pytest.raises(ConfigError, match="robosuite/Lift"):
        FAMILY.task("robosuite/Lfit")


def test_reset_step_success(lift_cam) -> None:
    task = lift_cam.task
    obs = lift_cam.reset(seed=0)
    assert obs.state.shape == (task.state_dim,) == (19,) and obs.state.dtype == np.float32
    assert lift_cam.success() is False
    res = lift_cam.step(np.zeros(7, dtype=np.float32))
    assert res.observation.state.shape == (19,) and res.success is False and not res.terminated
    # success is the env's own check: lift the cube by hand above the threshold and it reports success
    inner = lift_cam.env
    qpos_addr = inner.sim.model.get_joint_qpos_addr(inner.cube.joints[0])[0]
    inner.sim.data.qpos[qpos_addr + 2] += 0.2
    inner.sim.forward()
    assert lift_cam.success() is True


def test_state_layout_is_the_documented_observables(lift_cam) -> None:
    obs = lift_cam.reset(seed=1)
    raw = obs.raw
    expected = np.concatenate(
        [np.asarray(raw[k], dtype=np.float32).ravel() for k, _ in PROPRIO_KEYS + OBJECT_KEYS["Lift"]]
    )
    np.testing.assert_array_equal(obs.state, expected)
    np.testing.assert_allclose(np.sort(obs.state[9:]), np.sort(raw["object-state"]).astype(np.float32), atol=1e-6)


def test_render_right_way_up_and_matches_robosuite_opencv_convention(lift_cam) -> None:
    import robosuite
    from robosuite import macros
    from robosuite.controllers import load_composite_controller_config

    lift_cam.reset(seed=2)
    imgs = {c: lift_cam.render(c) for c in lift_cam.task.cameras}
    for img in imgs.values():
        assert img.shape == (*SIZE, 3) and img.dtype == np.uint8 and img.max() > 8 and img.std() > 5
    # the red cube projects (OpenCV convention: row 0 at the top) onto red pixels of our image
    inner = lift_cam.env
    r, c = _project(inner.sim, "agentview", inner.sim.data.body_xpos[inner.cube_body_id])
    patch = imgs["agentview"][max(r - 1, 0) : r + 2, max(c - 1, 0) : c + 2].reshape(-1, 3).astype(int)
    assert (patch[:, 0] - patch[:, 1:].max(axis=1)).max() > 40, "the cube should be red where it projects"
    # robosuite's own camera observation in its "opencv" (right way up) convention is the same picture
    saved = macros.IMAGE_CONVENTION
    macros.IMAGE_CONVENTION = "opencv"
    try:
        ref = robosuite.make(
            "Lift", robots="Panda", controller_configs=load_composite_controller_config(robot="Panda"),
            has_renderer=False, has_offscreen_renderer=True, use_camera_obs=True, camera_names="agentview",
            camera_heights=SIZE[0], camera_widths=SIZE[1], ignore_done=True, hard_reset=False, renderer="mujoco", seed=0,
        )  # fmt: skip
    finally:
        macros.IMAGE_CONVENTION = saved
    try:
        ref.reset()  # turns robosuite's visualization sites off, as our env's reset did
        ref.sim.set_state_from_flattened(inner.sim.get_state().flatten())
        ref.sim.forward()
        np.testing.assert_array_equal(ref._get_observations(force_update=True)["agentview_image"], imgs["agentview"])
    finally:
        ref.close()


def test_same_seed_same_scene_in_fresh_envs_and_no_renderer_without_cameras() -> None:
    task = FAMILY.task("robosuite/PickPlaceCan")
    a, b = FAMILY.make(task, EnvOptions()), FAMILY.make(task, EnvOptions())
    try:
        assert a.env.has_offscreen_renderer is False and a.env.sim._render_context_offscreen is None
        with pytest.raises(ValueError, match="not requested"):
            a.render("agentview")
        a.reset(seed=11)  # an earlier episode must not matter
        s_a, s_b = a.reset(seed=3).state, b.reset(seed=3).state
        np.testing.assert_array_equal(s_a, s_b)
        assert not np.allclose(s_a, b.reset(seed=4).state)
        np.testing.assert_array_equal(a.reset(seed=3).state, s_a)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("name", ["robosuite/Stack", "robosuite/Door", "robosuite/NutAssemblySquare"])
def test_other_tasks_build_and_match_their_state_dim(name: str) -> None:
    task = FAMILY.task(name)
    env = FAMILY.make(task, EnvOptions())
    try:
        obs = env.reset(seed=0)
        assert obs.state.shape == (task.state_dim,)
        assert obs.state.size - 9 == obs.raw["object-state"].size  # every object observable is in the state
        assert env.step(np.zeros(7, dtype=np.float32)).success is False
    finally:
        env.close()
