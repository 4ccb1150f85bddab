"""The ``libero`` family: LIBERO's five suites, run by the published evaluation protocol. LIBERO is optional.

Names: ``libero/<suite>`` (a suite) and ``libero/<suite>/<task_id>`` (a task), suites ``libero_spatial``,
``libero_object``, ``libero_goal``, ``libero_10`` (10 tasks each) and ``libero_90`` (90 tasks). ``task_id`` is the
index in LIBERO's benchmark order (``task_order_index=0``, i.e. the order of ``libero_suite_task_map.py``).

Sources (upstream, read, not installed here):
    * task lists: ``libero/libero/benchmark/libero_suite_task_map.py`` (Lifelong-Robot-Learning/LIBERO); the table in
      :data:`SUITE_TASKS` holds the same names in the same order.
    * instruction: LIBERO's ``task.language``, made from the task name by ``grab_language_from_filename``
      (``benchmark/__init__.py``): drop a ``<SCENE>_`` prefix, underscores to spaces; :func:`instruction_of` does that.
    * protocol, horizons and no-op action: openpi ``examples/libero/main.py``: ``env.reset()``, then
      ``env.set_init_state(initial_states[episode_idx])``, then ``num_steps_wait = 10`` steps of
      ``LIBERO_DUMMY_ACTION = [0]*6 + [-1]``, then the policy for ``max_steps`` = 220 / 280 / 300 / 520 / 400 steps
      (spatial / object / goal / 10 / 90; "longest training demo has 193 / 254 / 270 / 505 / 373 steps"); success
      is the env's ``done`` (its ``_check_success()``), so rule ``any_step``. 50 stored initial states per task.
    * state ``float32 (8,)``: ``robot0_eef_pos`` (3, m), the end-effector orientation as axis-angle (3, rad, from
      ``robot0_eef_quat`` x-y-z-w) and ``robot0_gripper_qpos`` (2), as openpi sends it and LeRobot's LIBERO
      datasets store it. Action ``float32 (7,)`` in ``[-1, 1]`` (OSC_POSE deltas + gripper, -1 open). 20 Hz.
    * cameras ``agentview`` and ``robot0_eye_in_hand``: the env's camera observations, rotated 180 degrees
      (``[::-1, ::-1]``) as openpi does "to match train preprocessing" of the LIBERO training data.

The protocol is :func:`start_episode`, a plain function over anything with LIBERO's ``ControlEnv`` surface
(``reset()``, ``set_init_state(state)``, ``step(action)``). :class:`LiberoEnv` calls it from ``reset(seed,
initial_state)``: episode ``i`` starts from stored initial state ``initial_state = i`` given by the caller (the
planner), never derived from batch size, worker or timing; the settle steps run inside ``reset`` and are not
recorded (``TaskInfo.settle_steps = 10`` records that they happened; the episode loop must not run them again).
``seed`` goes to ``env.seed(seed)`` (LIBERO seeds numpy's global generator) before the reset.

Installing LIBERO (optional, never in the shared venv): the sources read (Lifelong-Robot-Learning/LIBERO at 4f0dd18;
huggingface/lerobot-libero, whose pyproject pins ``robosuite==1.4.0``) need **robosuite 1.4**: they call
``robosuite.load_controller_config`` and subclass ``SingleArmEnv``, both gone in robosuite 1.5, which rollbench's
robosuite family needs. LIBERO also imports torch. So LIBERO runs from a separate environment (e.g.
``pip install rollbench hf-libero``, or LIBERO from source); this was not tried here. Its scene assets (meshes,
textures) may be missing from a wheel and its own download from a model hub is unavailable offline: give their
directory with
``ROLLBENCH_LIBERO_ASSETS=/path/to/libero/assets`` (the folder holding ``articulated_objects/``, ``scenes/``...).
LIBERO asks an interactive question on first import when ``$LIBERO_CONFIG_PATH/config.yaml`` (default
``~/.libero/config.yaml``) is missing: :func:`prepare_libero_config` writes that file first (under
``~/.cache/rollbench/libero`` unless ``LIBERO_CONFIG_PATH`` is set), and the import runs with stdin closed, so an
unexpected prompt fails with EOFError instead of blocking.

What was NOT tested here: anything with real LIBERO code or assets. The package is not installed (it would pull
robosuite 1.4 and a CUDA torch into the shared venv), so ``_build_libero_sim``, the config file LIBERO reads,
``get_task_init_states`` (torch.load of ``.pruned_init`` files), the ``agentview``/``eye_in_hand`` images of real
LIBERO scenes, real success checks and the horizons' adequacy were not run. What was tested
(``tests/test_env_libero.py``): the task table and instructions, ``missing()`` messages, config writing, and
:func:`start_episode` / :class:`LiberoEnv` against a robosuite 1.5 Lift scene standing in for a LIBERO scene
(its flattened MuJoCo state stored and restored as the "initial state"): the order reset -> initial state ->
10 no-op settle steps, that episode ``i`` gets initial state ``i``, and that results do not depend on how
episodes are spread over 1 or 3 env instances.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rollbench.envs.base import TableFamily
from rollbench.registry import EnvOptions
from rollbench.types import ConfigError, Observation, StepResult, TaskInfo

SETTLE_STEPS = 10  # openpi examples/libero/main.py: num_steps_wait
NOOP_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # openpi: LIBERO_DUMMY_ACTION = [0.0] * 6 + [-1.0]
INIT_STATES_PER_TASK = 50  # LIBERO's .pruned_init files; openpi num_trials_per_task = 50
HORIZONS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
CAMERAS = ("agentview", "robot0_eye_in_hand")
ASSETS_ENV = "ROLLBENCH_LIBERO_ASSETS"
ASSET_DIRS = ("articulated_objects", "scenes")  # sub-folders of LIBERO's libero/libero/assets

# Task names in the order of libero_suite_task_map.py. libero_90 is written "SCENE: suffix suffix ..." to stay short
# (each name is SCENE_suffix); the other suites hold one name per line.
_TASK_TABLE = """
[libero_spatial]
pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_from_table_center_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_cookie_box_and_place_it_on_the_plate
pick_up_the_black_bowl_in_the_top_drawer_of_the_wooden_cabinet_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_cookie_box_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_stove_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_plate_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_wooden_cabinet_and_place_it_on_the_plate
[libero_object]
pick_up_the_alphabet_soup_and_place_it_in_the_basket
pick_up_the_cream_cheese_and_place_it_in_the_basket
pick_up_the_salad_dressing_and_place_it_in_the_basket
pick_up_the_bbq_sauce_and_place_it_in_the_basket
pick_up_the_ketchup_and_place_it_in_the_basket
pick_up_the_tomato_sauce_and_place_it_in_the_basket
pick_up_the_butter_and_place_it_in_the_basket
pick_up_the_milk_and_place_it_in_the_basket
pick_up_the_chocolate_pudding_and_place_it_in_the_basket
pick_up_the_orange_juice_and_place_it_in_the_basket
[libero_goal]
open_the_middle_drawer_of_the_cabinet
put_the_bowl_on_the_stove
put_the_wine_bottle_on_top_of_the_cabinet
open_the_top_drawer_and_put_the_bowl_inside
put_the_bowl_on_top_of_the_cabinet
push_the_plate_to_the_front_of_the_stove
put_the_cream_cheese_in_the_bowl
turn_on_the_stove
put_the_bowl_on_the_plate
put_the_wine_bottle_on_the_rack
[libero_10]
LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket
LIVING_ROOM_SCENE2_put_both_the_cream_cheese_box_and_the_butter_in_the_basket
KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it
KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it
LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate
STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy
LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate
LIVING_ROOM_SCENE1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket
KITCHEN_SCENE8_put_both_moka_pots_on_the_stove
KITCHEN_SCENE6_put_the_yellow_and_white_mug_in_the_microwave_and_close_it
[libero_90]
KITCHEN_SCENE10: close_the_top_drawer_of_the_cabinet
  close_the_top_drawer_of_the_cabinet_and_put_the_black_bowl_on_top_of_it
  put_the_black_bowl_in_the_top_drawer_of_the_cabinet
  put_the_butter_at_the_back_in_the_top_drawer_of_the_cabinet_and_close_it
  put_the_butter_at_the_front_in_the_top_drawer_of_the_cabinet_and_close_it
  put_the_chocolate_pudding_in_the_top_drawer_of_the_cabinet_and_close_it
KITCHEN_SCENE1: open_the_bottom_drawer_of_the_cabinet open_the_top_drawer_of_the_cabinet
  open_the_top_drawer_of_the_cabinet_and_put_the_bowl_in_it put_the_black_bowl_on_the_plate
  put_the_black_bowl_on_top_of_the_cabinet
KITCHEN_SCENE2: open_the_top_drawer_of_the_cabinet put_the_black_bowl_at_the_back_on_the_plate
  put_the_black_bowl_at_the_front_on_the_plate put_the_middle_black_bowl_on_the_plate
  put_the_middle_black_bowl_on_top_of_the_cabinet
  stack_the_black_bowl_at_the_front_on_the_black_bowl_in_the_middle
  stack_the_middle_black_bowl_on_the_back_black_bowl
KITCHEN_SCENE3: put_the_frying_pan_on_the_stove put_the_moka_pot_on_the_stove turn_on_the_stove
  turn_on_the_stove_and_put_the_frying_pan_on_it
KITCHEN_SCENE4: close_the_bottom_drawer_of_the_cabinet
  close_the_bottom_drawer_of_the_cabinet_and_open_the_top_drawer
  put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet put_the_black_bowl_on_top_of_the_cabinet
  put_the_wine_bottle_in_the_bottom_drawer_of_the_cabinet put_the_wine_bottle_on_the_wine_rack
KITCHEN_SCENE5: close_the_top_drawer_of_the_cabinet put_the_black_bowl_in_the_top_drawer_of_the_cabinet
  put_the_black_bowl_on_the_plate put_the_black_bowl_on_top_of_the_cabinet
  put_the_ketchup_in_the_top_drawer_of_the_cabinet
KITCHEN_SCENE6: close_the_microwave put_the_yellow_and_white_mug_to_the_front_of_the_white_mug
KITCHEN_SCENE7: open_the_microwave put_the_white_bowl_on_the_plate
  put_the_white_bowl_to_the_right_of_the_plate
KITCHEN_SCENE8: put_the_right_moka_pot_on_the_stove turn_off_the_stove
KITCHEN_SCENE9: put_the_frying_pan_on_the_cabinet_shelf put_the_frying_pan_on_top_of_the_cabinet
  put_the_frying_pan_under_the_cabinet_shelf put_the_white_bowl_on_top_of_the_cabinet turn_on_the_stove
  turn_on_the_stove_and_put_the_frying_pan_on_it
LIVING_ROOM_SCENE1: pick_up_the_alphabet_soup_and_put_it_in_the_basket
  pick_up_the_cream_cheese_box_and_put_it_in_the_basket pick_up_the_ketchup_and_put_it_in_the_basket
  pick_up_the_tomato_sauce_and_put_it_in_the_basket
LIVING_ROOM_SCENE2: pick_up_the_alphabet_soup_and_put_it_in_the_basket
  pick_up_the_butter_and_put_it_in_the_basket pick_up_the_milk_and_put_it_in_the_basket
  pick_up_the_orange_juice_and_put_it_in_the_basket pick_up_the_tomato_sauce_and_put_it_in_the_basket
LIVING_ROOM_SCENE3: pick_up_the_alphabet_soup_and_put_it_in_the_tray
  pick_up_the_butter_and_put_it_in_the_tray pick_up_the_cream_cheese_and_put_it_in_the_tray
  pick_up_the_ketchup_and_put_it_in_the_tray pick_up_the_tomato_sauce_and_put_it_in_the_tray
LIVING_ROOM_SCENE4: pick_up_the_black_bowl_on_the_left_and_put_it_in_the_tray
  pick_up_the_chocolate_pudding_and_put_it_in_the_tray pick_up_the_salad_dressing_and_put_it_in_the_tray
  stack_the_left_bowl_on_the_right_bowl_and_place_them_in_the_tray
  stack_the_right_bowl_on_the_left_bowl_and_place_them_in_the_tray
LIVING_ROOM_SCENE5: put_the_red_mug_on_the_left_plate put_the_red_mug_on_the_right_plate
  put_the_white_mug_on_the_left_plate put_the_yellow_and_white_mug_on_the_right_plate
LIVING_ROOM_SCENE6: put_the_chocolate_pudding_to_the_left_of_the_plate
  put_the_chocolate_pudding_to_the_right_of_the_plate put_the_red_mug_on_the_plate
  put_the_white_mug_on_the_plate
STUDY_SCENE1: pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
  pick_up_the_yellow_and_white_mug_and_place_it_to_the_right_of_the_caddy
STUDY_SCENE2: pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
STUDY_SCENE3: pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
  pick_up_the_red_mug_and_place_it_to_the_right_of_the_caddy
  pick_up_the_white_mug_and_place_it_to_the_right_of_the_caddy
STUDY_SCENE4: pick_up_the_book_in_the_middle_and_place_it_on_the_cabinet_shelf
  pick_up_the_book_on_the_left_and_place_it_on_top_of_the_shelf
  pick_up_the_book_on_the_right_and_place_it_on_the_cabinet_shelf
  pick_up_the_book_on_the_right_and_place_it_under_the_cabinet_shelf
"""


def _parse_table(text: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    suite, scene = "", ""
    for tok in text.split():
        if tok.startswith("["):
            suite, scene = tok.strip("[]"), ""
            out[suite] = []
        elif tok.endswith(":"):
            scene = tok[:-1]
        else:
            out[suite].append(f"{scene}_{tok}" if scene else tok)
    return {k: tuple(v) for k, v in out.items()}


SUITE_TASKS: dict[str, tuple[str, ...]] = _parse_table(_TASK_TABLE)
"""Suite -> task names (LIBERO's bddl file stems), in LIBERO's benchmark order; task_id is the index."""


def instruction_of(task_file_stem: str) -> str:
    """LIBERO's ``task.language`` for a task name (its ``grab_language_from_filename`` rule)."""
    x = task_file_stem
    if x[0].isupper():  # LIBERO-100 names carry a SCENE prefix: "KITCHEN_SCENE10_close_the_..."
        i = x.find("SCENE")
        x = x[i + (8 if "SCENE10" in x else 7) :]
    return " ".join(x.split("_"))


def _task_info(suite: str, task_id: int) -> TaskInfo:
    stem = SUITE_TASKS[suite][task_id]
    return TaskInfo(
        name=f"libero/{suite}/{task_id}",
        instruction=instruction_of(stem),
        max_steps=HORIZONS[suite],
        cameras=CAMERAS,
        success_rule="any_step",
        action_dim=7,
        state_dim=8,
        action_low=(-1.0,) * 7,
        action_high=(1.0,) * 7,
        fps=20,
        settle_steps=SETTLE_STEPS,
        initial_states=INIT_STATES_PER_TASK,
        source=(
            f"LIBERO {suite} task {task_id} ({stem}.bddl, libero_suite_task_map.py); horizon, 10 settle steps "
            "and no-op action from openpi examples/libero/main.py"
        ),
    )


TASKS: dict[str, TaskInfo] = {
    t.name: t for suite, names in SUITE_TASKS.items() for t in (_task_info(suite, i) for i in range(len(names)))
}


# the protocol --------------------------------------------------------------------------------------------------
class ProtocolSim(Protocol):
    """What :func:`start_episode` needs: the surface of LIBERO's ``ControlEnv`` (``envs/env_wrapper.py``)."""

    def reset(self) -> Any: ...

    def set_init_state(self, init_state: Any) -> Any: ...

    def step(self, action: Any) -> Any: ...


def start_episode(
    sim: ProtocolSim,
    init_states: Sequence[Any],
    index: int,
    settle_steps: int = SETTLE_STEPS,
    noop: Sequence[float] = NOOP_ACTION,
) -> Any:
    """LIBERO's episode start: ``reset()``, then ``set_init_state(init_states[index])``, then ``settle_steps`` steps
    of the no-op action; returns the last raw observation (the one the policy sees first).

    ``index`` is the episode's stored-initial-state index chosen by the caller; an index outside
    ``[0, len(init_states))`` is a ConfigError (never wrapped around).
    """
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or not 0 <= int(index) < len(init_states):
        raise ConfigError(f"initial state index {index!r} is out of range: this task has {len(init_states)} states")
    sim.reset()  # first: a reset after set_init_state would overwrite the stored state
    obs = sim.set_init_state(init_states[int(index)])
    action = np.asarray(noop, dtype=np.float64)
    for _ in range(settle_steps):
        obs = sim.step(action.copy())[0]
    return obs


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """x-y-z-w quaternion -> axis-angle ``(3,)`` in radians (robosuite ``transform_utils.quat2axisangle``)."""
    q = np.asarray(quat, dtype=np.float64)
    w = min(max(float(q[3]), -1.0), 1.0)
    den = math.sqrt(1.0 - w * w)
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return q[:3] * 2.0 * math.acos(w) / den


class LiberoEnv:
    """A LIBERO task behind the Env protocol, over an injected ``sim`` (LIBERO ``OffScreenRenderEnv`` in ``make``).

    ``reset(seed, initial_state)`` seeds the sim (if it has ``seed``), then runs :func:`start_episode` with
    ``index = initial_state``; ``initial_state`` is required.
    """

    def __init__(self, task: TaskInfo, options: EnvOptions, sim: Any, init_states: Sequence[Any]) -> None:
        for cam in options.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        self.task, self.sim, self.init_states = task, sim, init_states
        self.cameras = tuple(options.cameras)
        self._obs: Any = None

    def _observation(self, obs: Mapping[str, Any]) -> Observation:
        state = np.concatenate(
            [obs["robot0_eef_pos"], quat_to_axis_angle(obs["robot0_eef_quat"]), obs["robot0_gripper_qpos"]]
        ).astype(np.float32)
        self._obs = obs
        return Observation(state=state, raw=obs)

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is None:
            raise ConfigError(f"{self.task.name}: LIBERO episodes start from a stored initial state; none was given")
        if hasattr(self.sim, "seed"):
            self.sim.seed(int(seed))
        return self._observation(start_episode(self.sim, self.init_states, initial_state, self.task.settle_steps))

    def step(self, action: np.ndarray) -> StepResult:
        obs, reward, _done, info = self.sim.step(np.asarray(action, dtype=np.float64))
        return StepResult(
            self._observation(obs),
            reward=float(reward),
            terminated=False,
            truncated=False,
            success=self.success(),
            info={k: v for k, v in info.items() if isinstance(v, bool | int | float)},
        )

    def success(self) -> bool:
        return bool(self.sim.check_success())

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.cameras:
            raise ValueError(f"camera {camera!r} was not requested when {self.task.name} was built (EnvOptions)")
        img = np.asarray(self._obs[f"{camera}_image"])
        return np.ascontiguousarray(img[::-1, ::-1], dtype=np.uint8)  # rotate 180 degrees, as openpi does

    def close(self) -> None:
        self.sim.close()


# installation, config and the real LIBERO sim ----------------------------------------------------------------
def _package_dir() -> Path | None:
    """Folder of the installed ``libero.libero`` package, found without executing it (its import may prompt)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("libero.libero")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_config(path: Path) -> dict[str, str]:
    """The ``key: value`` lines of LIBERO's config.yaml (flat, as LIBERO writes it)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if ":" in line and not line.lstrip().startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip().strip("'\"")
    return out


def prepare_libero_config(pkg: Path) -> Path:
    """Make sure LIBERO finds a config file (so its import never asks for one) and return the file.

    An explicit ``LIBERO_CONFIG_PATH`` or an existing ``~/.libero/config.yaml`` is used as it is, unless
    ``ROLLBENCH_LIBERO_ASSETS`` is set; otherwise rollbench writes ``~/.cache/rollbench/libero/config.yaml`` with the
    package's own paths (assets from ``ROLLBENCH_LIBERO_ASSETS`` if set) and points ``LIBERO_CONFIG_PATH`` there.
    """
    assets = os.environ.get(ASSETS_ENV)
    for cfg_dir in (os.environ.get("LIBERO_CONFIG_PATH"), str(Path.home() / ".libero")):
        if cfg_dir and not assets and (Path(cfg_dir) / "config.yaml").is_file():
            os.environ["LIBERO_CONFIG_PATH"] = cfg_dir
            return Path(cfg_dir) / "config.yaml"
    cfg_dir = str(Path.home() / ".cache" / "rollbench" / "libero")
    paths = {
        "benchmark_root": pkg,
        "bddl_files": pkg / "bddl_files",
        "init_states": pkg / "init_files",
        "datasets": pkg.parent / "datasets",
        "assets": Path(assets) if assets else pkg / "assets",
    }
    Path(cfg_dir).mkdir(parents=True, exist_ok=True)
    cfg = Path(cfg_dir) / "config.yaml"
    cfg.write_text("".join(f"{k}: {json.dumps(str(v))}\n" for k, v in paths.items()))  # JSON strings are YAML
    os.environ["LIBERO_CONFIG_PATH"] = cfg_dir
    return cfg


def _missing_assets(assets: Path) -> str | None:
    absent = [d for d in ASSET_DIRS if not (assets / d).is_dir()]
    has_mesh = any(next(assets.rglob(f"*.{ext}"), None) for ext in ("msh", "obj", "stl")) if not absent else False
    if absent or not has_mesh:
        what = f"no {', '.join(absent)} folder" if absent else "no mesh files (*.msh, *.obj, *.stl)"
        return (
            f"LIBERO's scene assets are missing: {assets} has {what}. The package does not ship them and its "
            f"download from a model hub is not available here; put LIBERO's libero/libero/assets folder on disk "
            f"and set {ASSETS_ENV}=/path/to/assets"
        )
    return None


def libero_missing() -> str | None:
    """None when LIBERO can run here, else everything that is missing and how to provide it."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    pkg = _package_dir()
    if pkg is None:
        return (
            "the LIBERO package is not installed. It needs robosuite 1.4 (rollbench's robosuite family needs 1.5) "
            "and torch, so install it in a separate environment (e.g. pip install rollbench hf-libero, "
            f"or LIBERO from source), then set {ASSETS_ENV} to its scene assets folder"
        )
    problems = []
    try:
        rs = version("robosuite")
        if not rs.startswith("1.4"):
            problems.append(f"LIBERO needs robosuite 1.4.x but {rs} is installed")
    except PackageNotFoundError:
        problems.append("robosuite (1.4.x) is not installed")
    if importlib.util.find_spec("torch") is None:
        problems.append("torch is not installed (LIBERO loads its initial states with torch.load)")
    cfg = _read_config(prepare_libero_config(pkg))
    for key in ("bddl_files", "init_states"):
        if not Path(cfg.get(key, "")).is_dir():
            problems.append(f"LIBERO's {key} folder {cfg.get(key)!r} does not exist")
    why = _missing_assets(Path(cfg.get("assets", "")))
    if why:
        problems.append(why)
    return "; ".join(problems) or None


@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    """Run with an empty stdin: an ``input()`` prompt raises EOFError at once instead of waiting forever."""
    saved = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


def _build_libero_sim(task: TaskInfo, options: EnvOptions) -> tuple[Any, Sequence[Any]]:
    """The real LIBERO ``OffScreenRenderEnv`` and the task's stored initial states. NOT run in rollbench's tests."""
    pkg = _package_dir()
    if pkg is None:
        raise ConfigError(libero_missing() or "LIBERO is not installed")
    prepare_libero_config(pkg)
    from rollbench.envs.gl import configure_offscreen_gl

    configure_offscreen_gl()
    _, suite, task_id = task.name.split("/")
    with _no_stdin():
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs import OffScreenRenderEnv
    bench = benchmark.get_benchmark_dict()[suite]()
    upstream = bench.get_task(int(task_id))
    if upstream.name != SUITE_TASKS[suite][int(task_id)]:
        raise ConfigError(f"{task.name}: installed LIBERO orders this suite differently ({upstream.name})")
    h, w = options.image_size
    sim = OffScreenRenderEnv(
        bddl_file_name=str(Path(get_libero_path("bddl_files")) / upstream.problem_folder / upstream.bddl_file),
        camera_heights=h,
        camera_widths=w,
        use_camera_obs=bool(options.cameras),
    )
    return sim, list(bench.get_task_init_states(int(task_id)))


class LiberoFamily(TableFamily):
    name = "libero"
    robot = "panda"
    description = "LIBERO suites (spatial, object, goal, 10, 90) with stored initial states; optional, needs assets"

    def missing(self) -> str | None:
        return libero_missing()

    def make(self, task: TaskInfo, options: EnvOptions) -> LiberoEnv:
        sim, init_states = _build_libero_sim(task, options)
        return LiberoEnv(task, options, sim, init_states)


FAMILY = LiberoFamily(
    TASKS, {suite: [f"libero/{suite}/{i}" for i in range(len(n))] for suite, n in SUITE_TASKS.items()}
)
