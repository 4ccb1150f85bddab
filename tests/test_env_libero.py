"""libero family without building a LIBERO scene: task table, install checks, config, the torch-free init-state
loader, and the order of the episode-start protocol.

The call order (reset -> stored initial state i -> 10 no-op settle steps) is checked against a robosuite 1.5 Lift
scene behind LIBERO's ControlEnv surface, which records every call (a real LIBERO scene takes much longer to build;
tests/test_env_libero_real.py runs the real scenes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.registry import EnvOptions, make_env, resolve_tasks
from rollbench.envs.libero import env as libero
from rollbench.envs.libero import pro as libero_pro
from rollbench.envs.libero import setup as libero_setup
from rollbench.envs.libero.env import (
    FAMILY,
    NOOP_ACTION,
    SUITE_TASKS,
    LiberoEnv,
    instruction_of,
    quat_to_axis_angle,
    start_episode,
)
from rollbench.envs.libero.tasks import LAN_SUITES


# task table ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_suites_horizons_and_instructions() -> None:
    assert {s: len(t) for s, t in SUITE_TASKS.items()} == {
        "libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90,
    }  # fmt: skip
    horizons = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
    for t in FAMILY.tasks():
        suite = t.name.split("/")[1]
        base = libero_pro.base_of(suite) or suite  # a LIBERO-PRO suite runs to its base suite's horizon
        assert t.max_steps == horizons[base] and t.settle_steps == 10 and t.initial_states == 50
        assert t.instruction.strip() and t.success_rule == "any_step" and t.state_dim == 8 and t.action_dim == 7
    assert len({t.instruction for t in FAMILY.tasks()}) > 100  # instructions are the tasks' own, not a template
    assert FAMILY.task("libero/libero_spatial/0").instruction == (
        "pick up the black bowl between the plate and the ramekin and place it on the plate"
    )
    assert [t.name for t in resolve_tasks("libero/libero_goal")] == [f"libero/libero_goal/{i}" for i in range(10)]
    with pytest.raises(ConfigError, match="libero/libero_spatial"):
        FAMILY.task("libero/libero_spatial/10")


def test_instruction_rule_matches_libero_grab_language_from_filename() -> None:
    assert (
        instruction_of("KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet") == "close the top drawer of the cabinet"
    )
    assert instruction_of("LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket") == (
        "put both the alphabet soup and the tomato sauce in the basket"
    )
    assert instruction_of("turn_on_the_stove") == "turn on the stove"
    assert SUITE_TASKS["libero_90"][0] == "KITCHEN_SCENE10_close_the_top_drawer_of_the_cabinet"
    assert (
        SUITE_TASKS["libero_90"][-1]
        == "STUDY_SCENE4_pick_up_the_book_on_the_right_and_place_it_under_the_cabinet_shelf"
    )


# installation checks, config, init-state loader -------------------------------------------------------------------
def test_missing_names_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(libero_setup, "libero_dir", lambda: None)
    monkeypatch.setattr(libero_setup, "assets_dir", lambda: None)
    why = FAMILY.missing()
    assert why and "rpent-libero" in why and "scene assets" in why and "scripts/install.sh" in why
    with pytest.raises(ConfigError, match="rpent-libero"):
        make_env(FAMILY.task("libero/libero_10/0"), EnvOptions())


def test_config_is_written_to_rollbench_folder_not_home(monkeypatch, tmp_path) -> None:
    pytest.importorskip("libero")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(libero_setup.HOME_ENV, str(tmp_path / "cfg"))
    monkeypatch.delenv("LIBERO_CONFIG_PATH", raising=False)
    cfg = libero_setup.use_rollbench_config()
    assert cfg == tmp_path / "cfg" / "config.yaml" and os.environ["LIBERO_CONFIG_PATH"] == str(tmp_path / "cfg")
    lines = dict(line.split(": ", 1) for line in cfg.read_text().splitlines())
    assert json.loads(lines["bddl_files"]) == str(libero_setup.libero_dir() / "bddl_files")
    assert not (tmp_path / "home").exists()


def _torch_zip(path: Path, payload: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/version", "3\n")
    return path


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("touch should-not-exist",))


def test_init_state_loader_reads_numpy_arrays_and_refuses_anything_else(tmp_path, monkeypatch) -> None:
    arr = np.arange(12, dtype=np.float64).reshape(3, 4)
    for protocol in (2, 4):
        got = libero_setup.load_init_states(_torch_zip(tmp_path / f"ok{protocol}", pickle.dumps(arr, protocol)))
        np.testing.assert_array_equal(got, arr)
        assert got.dtype == np.float64
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"refused posix\.system"):
        libero_setup.load_init_states(_torch_zip(tmp_path / "evil", pickle.dumps(_Boom(), 2)))
    assert not (tmp_path / "should-not-exist").exists()
    with pytest.raises(ConfigError, match="expected a 2-D float array"):
        libero_setup.load_init_states(_torch_zip(tmp_path / "list", pickle.dumps(np.arange(3), 2)))
    with pytest.raises(ConfigError, match="cannot read"):
        libero_setup.load_init_states(tmp_path / "absent.pruned_init")


def test_quat_to_axis_angle() -> None:
    np.testing.assert_allclose(quat_to_axis_angle(np.array([0.0, 0.0, 0.0, 1.0])), np.zeros(3))
    half = np.sqrt(0.5)  # 90 degrees about z
    np.testing.assert_allclose(quat_to_axis_angle(np.array([0.0, 0.0, half, half])), [0, 0, np.pi / 2], atol=1e-9)


# the protocol against a robosuite stand-in -----------------------------------------------------------------------
class StandIn:
    """A robosuite Lift scene behind LIBERO's ControlEnv surface; records the order of calls."""

    def __init__(self, image_size: int = 0) -> None:
        import robosuite
        from robosuite.controllers import load_composite_controller_config

        from rollbench.core.gl import configure_offscreen_gl

        configure_offscreen_gl()
        cams: dict[str, Any] = (
            {"camera_names": list(libero.CAMERAS), "camera_heights": image_size, "camera_widths": image_size}
            if image_size
            else {}
        )
        self.env = robosuite.make(
            "Lift", robots="Panda", controller_configs=load_composite_controller_config(robot="Panda"),
            has_renderer=False, has_offscreen_renderer=bool(image_size), use_camera_obs=bool(image_size),
            ignore_done=True, hard_reset=False, renderer="mujoco", seed=0, **cams,
        )  # fmt: skip
        self.calls: list[Any] = []

    def seed(self, seed: int) -> None:
        self.calls.append("seed")
        self.env.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state

    def reset(self) -> Any:
        self.calls.append("reset")
        return self.env.reset()

    def set_init_state(self, state: np.ndarray) -> Any:  # as LIBERO's regenerate_obs_from_state
        self.calls.append("set_init_state")
        self.env.sim.set_state_from_flattened(state)
        self.env.sim.forward()
        self.env._update_observables(force=True)
        return self.env._get_observations()

    def step(self, action: np.ndarray) -> Any:
        self.calls.append(("step", tuple(np.asarray(action).tolist())))
        return self.env.step(action)

    def check_success(self) -> bool:
        return bool(self.env._check_success())

    def cube_xy(self) -> np.ndarray:
        return np.array(self.env.sim.data.body_xpos[self.env.cube_body_id][:2])

    def close(self) -> None:
        self.env.close()


def _initial_states(n: int) -> list[np.ndarray]:
    """n stored scenes whose cubes sit 4 cm apart along y (far beyond the placement sampler's +-3 cm)."""
    sim = StandIn()
    sim.env.reset()
    addr = sim.env.sim.model.get_joint_qpos_addr(sim.env.cube.joints[0])[0]
    states = []
    for i in range(n):
        sim.env.sim.data.qpos[addr : addr + 2] = [0.0, -0.1 + 0.04 * i]
        sim.env.sim.forward()
        states.append(sim.env.sim.get_state().flatten().copy())
    sim.close()
    return states


@pytest.fixture(scope="module")
def init_states() -> list[np.ndarray]:
    return _initial_states(6)


@pytest.mark.sim
def test_order_is_reset_then_initial_state_then_ten_noop_steps(init_states) -> None:
    sim = StandIn()
    try:
        start_episode(sim, init_states, 2)
        assert sim.calls == ["reset", "set_init_state"] + [("step", NOOP_ACTION)] * 10
        assert NOOP_ACTION == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)
        # episode 2 starts from stored state 2 (not from the scene the reset sampled)
        np.testing.assert_allclose(sim.cube_xy(), [0.0, -0.1 + 0.04 * 2], atol=0.005)
        # the stand-in is sensitive to the bug the order prevents: a reset after the state overwrites it
        sim.set_init_state(init_states[0])
        sim.reset()
        assert abs(sim.cube_xy()[1] - (-0.1)) > 0.05
        sim.calls.clear()
        start_episode(sim, init_states, 4, settle_steps=0)
        np.testing.assert_array_equal(sim.env.sim.get_state().flatten(), init_states[4])
        for bad in (6, -1, True):
            with pytest.raises(ConfigError, match="out of range"):
                start_episode(sim, init_states, bad)  # type: ignore[arg-type]
    finally:
        sim.close()


@pytest.mark.sim
def test_episode_i_gets_state_i_whatever_the_number_of_workers(init_states) -> None:
    task = FAMILY.task("libero/libero_spatial/0")
    opts = EnvOptions()

    cube_y: dict[int, float] = {}

    def run(worker_envs: list[LiberoEnv], episodes: list[int]) -> dict[int, np.ndarray]:
        out = {}
        for k, ep in enumerate(episodes):  # round-robin over workers, as a pool would
            env = worker_envs[k % len(worker_envs)]
            obs = env.reset(seed=1000 + ep, initial_state=ep)
            cube_y[ep] = float(env.sim.cube_xy()[1])
            env.step(np.zeros(7, dtype=np.float32))
            out[ep] = np.concatenate([obs.state, env.sim.env.sim.get_state().flatten()])
        return out

    one = [LiberoEnv(task, opts, StandIn(), init_states)]
    three = [LiberoEnv(task, opts, StandIn(), init_states) for _ in range(3)]
    try:
        serial = run(one, list(range(6)))
        spread = run(three, [5, 3, 1, 0, 4, 2])  # other order, other workers
        for ep in range(6):
            np.testing.assert_array_equal(serial[ep], spread[ep])
        assert np.all(np.diff([cube_y[ep] for ep in range(6)]) > 0.03)  # episode i sat on stored state i
        assert one[0].sim.calls[:3] == ["seed", "reset", "set_init_state"]
        with pytest.raises(ConfigError, match="stored initial state"):
            one[0].reset(seed=0)
    finally:
        for env in one + three:
            env.close()


@pytest.mark.sim
def test_libero_env_state_render_and_success(init_states) -> None:
    task = FAMILY.task("libero/libero_object/3")
    env = LiberoEnv(task, EnvOptions(cameras=libero.CAMERAS, image_size=(32, 32)), StandIn(image_size=32), init_states)
    try:
        obs = env.reset(seed=0, initial_state=1)
        assert obs.state.shape == (8,) and obs.state.dtype == np.float64
        np.testing.assert_allclose(obs.state[:3], obs.raw["robot0_eef_pos"], rtol=1e-6)
        res = env.step(np.zeros(7, dtype=np.float32))
        assert res.success is False and env.success() is False
        img = env.render("agentview")
        assert img.shape == (32, 32, 3) and img.dtype == np.uint8 and img.max() > 8
        np.testing.assert_array_equal(img, res.observation.raw["agentview_image"][::-1, ::-1])
    finally:
        env.close()


@pytest.mark.slow
def test_task_table_equals_the_installed_libero_task_map_and_lan_instructions_are_the_bddl_paraphrases() -> None:
    pkg = libero_setup.libero_dir()
    if pkg is None:
        pytest.skip("rpent-libero is not installed")
    spec = importlib.util.spec_from_file_location("task_map", pkg / "benchmark" / "libero_suite_task_map.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a plain dict literal; the package's benchmark/__init__ would import torch
    assert {k: tuple(v) for k, v in module.libero_task_map.items()} == SUITE_TASKS
    pro = libero_setup.liberopro_dir()
    assert pro is not None
    lan = FAMILY.task("libero/libero_spatial_lan/0")
    assert lan.instruction == "lift the black bowl between the plate and ramekin and set it on the plate"
    assert lan.max_steps == 220 and lan.initial_states == 50
    for suite, base in LAN_SUITES.items():  # the *_lan scenes are the base scenes: BDDL equal but for the language
        for stem in SUITE_TASKS[base]:
            strip = [
                ln
                for ln in (pro / "bddl_files" / suite / f"{stem}.bddl").read_text().splitlines()
                if ":language" not in ln
            ]
            base_lines = (pkg / "bddl_files" / base / f"{stem}.bddl").read_text().splitlines()
            assert strip == [ln for ln in base_lines if ":language" not in ln], (suite, stem)
    assert [t.name for t in resolve_tasks("libero/libero_goal_lan")] == [
        f"libero/libero_goal_lan/{i}" for i in range(10)
    ]


def test_held_success_needs_k_consecutive_steps() -> None:
    from rollbench.core.episode import held_success

    seq = [False, True, True, False, True, True, True, False]
    assert held_success(seq, 1) and held_success(seq, 3) and not held_success(seq, 4)
    assert not held_success(seq, 1, final_step=True)
    assert held_success([*seq[:-1]], 3, final_step=True) and not held_success([*seq[:-1]], 4, final_step=True)


def test_more_episodes_than_stored_init_states_is_refused() -> None:
    from rollbench.core.plan import make_plan
    from rollbench.core.spec import build_spec

    plan = make_plan(build_spec(env="libero/libero_spatial/0", policy="zero", episodes=50))
    assert [e.initial_state for e in plan.episodes] == list(range(50))
    with pytest.raises(ConfigError, match="50 stored initial states"):
        make_plan(build_spec(env="libero/libero_spatial/0", policy="zero", episodes=51))


def test_a_mujoco_other_than_the_reference_is_warned_about(monkeypatch) -> None:
    from rollbench.core.spec import build_spec

    spec = build_spec(env="libero/libero_spatial/0", policy="zero", episodes=1)
    real = libero_setup.provenance()
    monkeypatch.setattr(libero_setup, "provenance", lambda: {**real, "mujoco": "3.3.0"})
    assert FAMILY.run_warnings(spec) == []
    monkeypatch.setattr(libero_setup, "provenance", lambda: {**real, "mujoco": "3.5.0"})
    (warning,) = FAMILY.run_warnings(spec)
    assert "MuJoCo 3.5.0 differs from 3.3.0" in warning and "libero_spatial init state" in warning
    fast = build_spec(env="libero/libero_spatial/0", policy="zero", episodes=1, fast_render=True)
    assert any("reflections and shadows are off" in w for w in FAMILY.run_warnings(fast))


def test_the_assets_link_is_made_by_rollbench_with_libero_own_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg, assets = libero_setup.libero_dir(), libero_setup.assets_dir()
    if pkg is None or assets is None:
        pytest.skip("rpent-libero or the assets packages are not installed")
    # a package folder of its own, as on a fresh install (rpent-libero ships no assets folder): the installed one's
    # link is never removed here, since other processes (CI runs the LeRobot lines beside this) read scenes through it
    fresh = tmp_path / "site-packages" / "libero" / "libero"
    fresh.mkdir(parents=True)
    monkeypatch.setattr(libero_setup, "libero_dir", lambda: fresh)
    target = fresh / "assets"
    assert not target.exists()
    assert libero_setup.link_assets() == assets
    assert target.is_symlink() and target.resolve() == assets.resolve() and (target / "scenes").is_dir()
    assert libero_setup.link_assets() == assets  # idempotent


def test_on_the_ground_panda_base_is_null_mount_after_the_patch_and_only_that_property_changes() -> None:
    if libero_setup.missing():
        pytest.skip("LIBERO is not installed")
    libero_setup.use_rollbench_config()
    from libero.libero.envs.robots.mounted_panda import MountedPanda
    from libero.libero.envs.robots.on_the_ground_panda import OnTheGroundPanda

    assert libero_setup.patch_on_the_ground_panda() is True
    robot = object.__new__(OnTheGroundPanda)
    assert robot.default_base == "NullMount"
    assert robot.default_gripper == {"right": "PandaGripper"}
    assert object.__new__(MountedPanda).default_base == "RethinkMount"  # other robots untouched
    assert libero_setup.patch_on_the_ground_panda() is True  # idempotent


@pytest.mark.slow
def test_rollbench_envs_libero_shows_it_installed_with_every_task_instruction() -> None:
    from conftest import run_cli

    r = run_cli("envs", "libero", "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    if not row["installed"]:
        pytest.skip(f"LIBERO is not installed: {row['missing']}")
    tasks = {t["name"]: t["instruction"] for t in row["tasks"]}
    assert len([n for n in tasks if n.split("/")[1] in SUITE_TASKS]) == 130
    for suite, names in SUITE_TASKS.items():
        for i, stem in enumerate(names):
            assert tasks[f"libero/{suite}/{i}"] == instruction_of(stem)
    assert tasks["libero/libero_10_lan/0"] and tasks["libero/libero_10_lan/0"] != tasks["libero/libero_10/0"]
    assert "LIBERO-PRO suites run in-process: libero_10_lan, libero_10_swap" in row["description"]
    assert "refused libero_spatial_task task(s) all (rpent-liberopro's initial states" in row["description"]
    assert "refused libero_10_with_milk task(s) 3,4 (" in row["description"]
    assert "run through the env host by LIBERO-PRO's own code" in row["description"]
    assert "libero_ref/libero_10_object, libero_ref/libero_10_task" in row["description"]
    text = run_cli("envs", "libero", env={"COLUMNS": "300"}).stdout  # wide enough that no instruction wraps
    assert "pick up the black bowl between the plate and the ramekin and place it on the plate" in " ".join(
        text.split()
    )


@pytest.mark.parametrize("family", ["libero", "libero_ref", "liberoplus"])
def test_libero_default_obs_map_is_openpis_for_ws_and_keeps_camera_names_for_http(family: str) -> None:
    from rollbench.core.registry import served_layout
    from rollbench.wire.obs_map import default_obs_map

    ws = default_obs_map(served_layout(family), "ws")
    assert dict(ws.images) == {"agentview": "observation/image", "robot0_eye_in_hand": "observation/wrist_image"}
    assert (ws.state_key, ws.prompt_key, ws.state_source, ws.image_size) == (
        "observation/state", "prompt", "state", (224, 224),
    )  # fmt: skip
    http = default_obs_map(served_layout(family), "http")
    assert dict(http.images) == {"agentview": "agentview", "robot0_eye_in_hand": "robot0_eye_in_hand"}
    assert http.image_size == (224, 224)
    task = FAMILY.task("libero/libero_90/3")
    assert task.policy_cameras == libero.CAMERAS and task.replan_every == 5 and task.image_size == (256, 256)
    img = np.zeros((256, 256, 3), dtype=np.uint8)
    from rollbench.core.contracts import Observation

    sent = ws.images_of(Observation(state=np.zeros(8, np.float32), images={"agentview": img}))
    assert sent["observation/image"].shape == (224, 224, 3) and sent["observation/image"].dtype == np.uint8
