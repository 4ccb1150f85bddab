"""The ``robosuite`` family: robosuite 1.5 single-arm manipulation with a Panda arm and the OSC_POSE controller.

Tasks (``robosuite/<Env>``): Lift, Stack, Door, PickPlaceCan, PickPlaceMilk, PickPlaceBread, PickPlaceCereal,
NutAssemblyRound, NutAssemblySquare: the single-arm tasks of robosuite's v1.0 benchmark
(``docs/algorithms/benchmarking.md``), which ran every task with OSC_POSE at 20 Hz for **500 steps per episode**;
that is our horizon (``max_steps=500``, fps 20). Wipe (needs its own wiping gripper, 6-D actions) and ToolHang
(~10x slower physics) are left out.

Construction (source: the installed robosuite 1.5.2): ``robosuite.make(<Env>, robots="Panda",
controller_configs=load_composite_controller_config(robot="Panda"))``: that loads
``controllers/config/robots/default_panda.json``, a BASIC composite controller whose right arm is OSC_POSE
(``output_max`` 0.05 m / 0.5 rad per step, ``input_ref_frame="base"``) with a GRIP gripper. ``ignore_done=True`` so
rollbench's loop owns termination; ``hard_reset=False`` so a reset re-samples the scene inside the same simulator
instead of rebuilding model, simulator and GL context (faster, and no stale renderer; robosuite's own code carries
a "black screen of death" TODO on the hard-reset path). When no camera is requested there is no renderer at all
(``has_offscreen_renderer=False``); camera observations are never put in ``obs`` (``use_camera_obs=False``).

* action: ``float32 (7,)`` in ``[-1, 1]``: OSC_POSE deltas ``dx, dy, dz`` (x 0.05 m), ``dax, day, daz`` (axis-angle,
  x 0.5 rad) in the robot base frame, then the gripper (-1 open, +1 close).
* state: ``float32`` concatenation, in this order, of ``robot0_eef_pos`` (3, m, world frame), ``robot0_eef_quat``
  (4, x-y-z-w), ``robot0_gripper_qpos`` (2, finger joint positions, m) = the 9-value proprio head, followed by the
  task's object observables listed in :data:`OBJECT_KEYS` (positions in m, quaternions x-y-z-w, ``*_to_*``
  relative vectors, hinge/handle angles in rad). Lift 19, Stack 32, Door 23, PickPlace* and NutAssembly* 23 values.
* success: the env's own ``_check_success()``, rule ``any_step`` (robomimic's rollouts also stop at the first success).
* cameras ``agentview`` and ``robot0_eye_in_hand``: ``sim.render(width, height, camera_name)`` at
  ``options.image_size``, flipped vertically (``[::-1]``) because MuJoCo's buffer is bottom-up
  (robosuite's ``macros.IMAGE_CONVENTION = "opengl"``; its ``"opencv"`` convention is the same ``[::-1]`` flip).
* seeding: robosuite 1.5 draws every random choice (placement samplers, robot init noise) from one
  ``numpy.random.Generator``, ``env.rng``, shared by reference with its samplers. The env is built with
  ``seed=0`` (so anything sampled at construction, such as Lift's cube size, is the same in every process) and each
  ``reset(seed)`` re-seeds that generator in place to ``default_rng(seed)`` before ``env.reset()``; so the scene is
  a pure function of ``seed``.
* instructions: written by rollbench from robosuite's task descriptions (robosuite tasks carry none).

Scripted/random policies: ``random`` and ``zero`` get ~0% on all of these (500 steps of random OSC deltas rarely
lift or open anything); a nonzero rate needs a scripted grasp (not provided) or a learned policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, HoldAction, Observation, StepResult, TaskInfo
from rollbench.core.family import MUJOCO_RENDERER, ArmLayout, ServedLayout
from rollbench.core.registry import EnvOptions
from rollbench.core.versions import installed_version
from rollbench.envs.base import TableFamily

CAMERAS = ("agentview", "robot0_eye_in_hand")
HORIZON = 500  # robosuite v1.0 benchmark: "500 steps per episode" (docs/algorithms/benchmarking.md)
CONTROL_FREQ = 20  # Hz, robosuite's default control_freq and the benchmark's
CONSTRUCTION_SEED = 0
PROPRIO_KEYS = (("robot0_eef_pos", 3), ("robot0_eef_quat", 4), ("robot0_gripper_qpos", 2))


def _pick_place_keys(obj: str) -> tuple[tuple[str, int], ...]:
    return ((f"{obj}_pos", 3), (f"{obj}_quat", 4), (f"{obj}_to_robot0_eef_pos", 3), (f"{obj}_to_robot0_eef_quat", 4))


OBJECT_KEYS: dict[str, tuple[tuple[str, int], ...]] = {
    "Lift": (("cube_pos", 3), ("cube_quat", 4), ("gripper_to_cube_pos", 3)),
    "Stack": (
        ("cubeA_pos", 3),
        ("cubeA_quat", 4),
        ("cubeB_pos", 3),
        ("cubeB_quat", 4),
        ("cubeA_to_cubeB", 3),
        ("gripper_to_cubeA", 3),
        ("gripper_to_cubeB", 3),
    ),
    "Door": (
        ("door_pos", 3),
        ("handle_pos", 3),
        ("hinge_qpos", 1),
        ("door_to_eef_pos", 3),
        ("handle_to_eef_pos", 3),
        ("handle_qpos", 1),
    ),
    "PickPlaceCan": _pick_place_keys("Can"),
    "PickPlaceMilk": _pick_place_keys("Milk"),
    "PickPlaceBread": _pick_place_keys("Bread"),
    "PickPlaceCereal": _pick_place_keys("Cereal"),
    "NutAssemblyRound": _pick_place_keys("RoundNut"),
    "NutAssemblySquare": _pick_place_keys("SquareNut"),
}
"""Object observables appended to the proprio head of ``state``, in order, with their sizes (robosuite 1.5.2)."""

INSTRUCTIONS = {
    "Lift": "lift the red cube",
    "Stack": "stack the red cube on top of the green cube",
    "Door": "open the door",
    "PickPlaceCan": "pick up the can and place it in its bin",
    "PickPlaceMilk": "pick up the milk carton and place it in its bin",
    "PickPlaceBread": "pick up the bread and place it in its bin",
    "PickPlaceCereal": "pick up the cereal box and place it in its bin",
    "NutAssemblyRound": "fit the round nut onto the round peg",
    "NutAssemblySquare": "fit the square nut onto the square peg",
}

# OSC_POSE with input_type "delta" (controllers/config/robots/default_panda.json): a zero 6-D delta holds the
# current pose; the gripper command is held (repeated): PandaGripper.format_action moves the fingers by 0.2 per step
# toward the side of its sign, as a held open/close command does; -1 (open) before the first action, the gripper
# value of openpi's LIBERO_DUMMY_ACTION
HOLD = HoldAction(
    (0.0,) * 6 + (-1.0,),
    keep=(6,),
    source="robosuite 1.5.2 default_panda.json (OSC_POSE, delta input), grippers/panda_gripper.py format_action; "
    "initial gripper -1 as openpi examples/libero/main.py LIBERO_DUMMY_ACTION",
)

TASKS: dict[str, TaskInfo] = {
    f"robosuite/{env}": TaskInfo(
        name=f"robosuite/{env}",
        instruction=INSTRUCTIONS[env],
        max_steps=HORIZON,
        cameras=CAMERAS,
        success_rule="any_step",
        action_dim=7,
        state_dim=sum(n for _, n in PROPRIO_KEYS) + sum(n for _, n in keys),
        action_low=(-1.0,) * 7,
        action_high=(1.0,) * 7,
        fps=CONTROL_FREQ,
        hold=HOLD,
        source=(
            "robosuite 1.5.2 env with Panda + default_panda.json (OSC_POSE); horizon 500 at 20 Hz from robosuite's "
            "v1.0 benchmark (docs/algorithms/benchmarking.md); success = env._check_success(); "
            "instruction written by rollbench"
        ),
    )
    for env, keys in OBJECT_KEYS.items()
}


def robosuite_step(
    env: Any, action: np.ndarray, observe: Callable[[Any], Observation], success: Callable[[], bool]
) -> StepResult:
    """One step of a robosuite-API env (robosuite's own, or LIBERO's on robosuite): ``env.step`` with the action as
    ``float64`` (what MuJoCo's controls are), its old-gym 4-tuple as a :class:`StepResult`. Never terminated or
    truncated by the env (``ignore_done``: rollbench's loop owns the horizon); ``success`` is the env's own check
    after the step; ``info`` keeps the env's numeric and boolean entries only."""
    obs, reward, _done, info = env.step(np.asarray(action, dtype=np.float64))
    return StepResult(
        observe(obs),
        reward=float(reward),
        terminated=False,
        truncated=False,
        success=success(),
        info={k: v for k, v in info.items() if isinstance(v, bool | int | float)},
    )


def reseed_in_place(rng: np.random.Generator, seed: int) -> None:
    """Give ``rng`` (and every holder of a reference to it) the stream of ``numpy.random.default_rng(seed)``."""
    rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state


class RobosuiteEnv:
    """One robosuite task; see the module docstring for state layout, cameras and seeding."""

    def __init__(self, task: TaskInfo, options: EnvOptions) -> None:
        for cam in options.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        from rollbench.core.gl import configure_offscreen_gl

        try:
            configure_offscreen_gl()
        except ConfigError:
            if options.cameras:
                raise
        from rollbench.envs.quiet import silence_robosuite_notices

        silence_robosuite_notices()
        import robosuite
        from robosuite.controllers import load_composite_controller_config

        self.task = task
        self.env_name = task.name.split("/", 1)[1]
        self.image_size = options.image_size
        self.cameras = tuple(options.cameras)
        self._keys = PROPRIO_KEYS + OBJECT_KEYS[self.env_name]
        self.env: Any = robosuite.make(
            self.env_name,
            robots="Panda",
            controller_configs=load_composite_controller_config(robot="Panda"),
            has_renderer=False,
            has_offscreen_renderer=bool(self.cameras),
            use_camera_obs=False,
            ignore_done=True,
            hard_reset=False,
            horizon=task.max_steps,
            control_freq=CONTROL_FREQ,
            renderer="mujoco",
            seed=CONSTRUCTION_SEED,
        )

    def _state(self, obs: Mapping[str, Any]) -> np.ndarray:
        parts = []
        for key, size in self._keys:
            v = np.asarray(obs[key], dtype=np.float32).reshape(-1)
            if v.size != size:
                raise RuntimeError(f"{self.task.name}: observable {key} has {v.size} values, expected {size}")
            parts.append(v)
        return np.concatenate(parts)

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is not None:
            raise ConfigError(f"{self.task.name} has no stored initial states (got initial_state={initial_state})")
        reseed_in_place(self.env.rng, int(seed))
        return self._observation(self.env.reset())

    def step(self, action: np.ndarray) -> StepResult:
        return robosuite_step(self.env, action, self._observation, self.success)

    def _observation(self, obs: Mapping[str, Any]) -> Observation:
        return Observation(state=self._state(obs), raw=obs)

    def success(self) -> bool:
        return bool(self.env._check_success())

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.task.cameras:
            raise ValueError(f"unknown camera {camera!r}; {self.task.name} has {self.task.cameras}")
        if camera not in self.cameras:
            raise ValueError(f"camera {camera!r} was not requested when {self.task.name} was built (EnvOptions)")
        h, w = self.image_size
        img = self.env.sim.render(width=w, height=h, camera_name=camera)
        return np.ascontiguousarray(img[::-1], dtype=np.uint8)

    def close(self) -> None:
        self.env.close()


class RobosuiteFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "robosuite"
    robot = "panda"
    renderer = MUJOCO_RENDERER
    offscreen_gl = True
    sim_packages = (("robosuite", "robosuite"), ("mujoco", "mujoco"))
    served = ServedLayout(main_camera="agentview", wrist_camera="robot0_eye_in_hand")
    arm = ArmLayout(0.05, 6, 1.0)  # OSC_POSE default output_max 0.05 m; rotation deltas held at 0; closes at +1
    description = "robosuite 1.5 single-arm manipulation (Panda, OSC_POSE): Lift, Stack, Door, PickPlace*, Nut*"
    requires = ("robosuite", "mujoco")
    install_hint = "pip install 'rollbench[robosuite]'"

    def missing(self) -> str | None:
        why = super().missing()
        if why:
            return why
        v = installed_version("robosuite") or "(none)"
        if not v.startswith("1.5"):
            return f"robosuite {v} is installed but this adapter needs 1.5.x: pip install 'rollbench[robosuite]'"
        return None

    def make(self, task: TaskInfo, options: EnvOptions) -> RobosuiteEnv:
        return RobosuiteEnv(task, options)


FAMILY = RobosuiteFamily(TASKS, {"benchmark": list(TASKS), "pick_place": [t for t in TASKS if "PickPlace" in t]})
