"""MetaWorld v3 (``metaworld==3.1.1``): the 50 Sawyer manipulation tasks as ``metaworld/<env-name>``.

Task table (static: listing tasks imports neither metaworld nor mujoco):

* names: the keys of ``metaworld.env_dict.ALL_V3_ENVIRONMENTS``, e.g. ``metaworld/pick-place-v3``.
* instruction: hand-written from the task descriptions in the MetaWorld paper (Yu et al. 2019, appendix table).
* horizon: ``max_steps = 500``, MetaWorld's own ``SawyerXYZEnv.max_path_length`` (the benchmark horizon).
* success: ``any_step`` on MetaWorld's ``info["success"]`` (each task's ``evaluate_state``).
* action: ``float32 (4,)`` in ``[-1, 1]``: end-effector ``dx, dy, dz`` (x 1 cm per unit per step, clipped by
  MetaWorld) and gripper effort (+1 closes). state: the ``float64 (39,)`` MetaWorld observation as ``float32``:
  hand xyz, gripper opening, two object pos+quat slots, the same 18 values of the previous step, goal xyz.
* fps: 80, MetaWorld's ``metadata["render_fps"]``; it equals ``1 / env.dt`` (timestep 2.5 ms x frame_skip 5).
* cameras: the seven cameras of MetaWorld's ``xyz_base.xml``; ``corner``, ``corner2``, ``corner3`` and
  ``corner4`` are mounted with their image "up" pointing at the floor, so their frames are rotated by 180 degrees
  here (a rotation, not a mirror flip, so left/right stay true); the others are returned as rendered.

Goal visibility: the goal position is observable (``obs[36:39]``), as in MetaWorld's MT benchmarks and its
``*-goal-observable`` classes; the scripted experts (``metaworld.policies``) need it.

Seeding (the reason this adapter does not just call ``env.reset(seed=...)``): ``SawyerXYZEnv.reset`` ignores
its ``seed`` argument, and by default draws object/goal positions (the "rand_vec") from numpy's *global*
generator (``seeded_rand_vec=False``), or returns one frozen vector forever (``_freeze_rand_vec=True``). This
adapter sets ``_freeze_rand_vec=False, seeded_rand_vec=True`` so the draws come from the env's own ``np_random``,
and before every reset replaces ``np_random`` with ``numpy.random.default_rng(seed)``. The scene is then a pure
function of ``seed`` (same in any process, whatever ran before in this env), numpy's global generator is never
read nor written, and the rejection-sampling loops some tasks run (object and goal at least 10-25 cm apart) keep
drawing fresh vectors instead of spinning forever on a frozen one.

First observation: six tasks' ``reset`` returns object positions from before their final move (9 to 20 cm
off; window-close reports success at reset on every seed). The first observation, the success check at reset and
the first rendered frame are computed on a forwarded copy of the reset state instead, so they describe the real
scene; the simulation itself stays bit-identical to MetaWorld's (see ``MetaWorldEnv._settled_reset_view``).

Horizon and truncation: MetaWorld truncates at ``max_path_length`` (500) and raises on any later step. This
adapter sets ``max_path_length`` to a value never reached, so rollbench's ``max_steps`` is the one horizon and an
unsolved episode always ends as ``max_steps``, never as an ambiguous ``truncated`` on the same step. A horizon
above 500 works, but success rates are then not comparable with published MetaWorld numbers.

Rendering: one ``mujoco.Renderer`` per env, created on the first ``render`` call (never when no camera is asked
for), with shadows and reflections off (about 4x faster at 224 px).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, HoldAction, Observation, StepResult, TaskInfo
from rollbench.core.family import MUJOCO_RENDERER, ArmLayout, ServedLayout
from rollbench.core.gl import configure_offscreen_gl
from rollbench.core.registry import EnvOptions, unknown_name_error
from rollbench.envs.base import TableFamily

HORIZON = 500  # metaworld.sawyer_xyz_env.SawyerXYZEnv.max_path_length
FPS = 80  # SawyerXYZEnv.metadata["render_fps"] == 1 / env.dt
CAMERAS: tuple[str, ...] = (
    "corner",
    "corner2",
    "corner3",
    "corner4",
    "topview",
    "behindGripper",
    "gripperPOV",
)
ROTATED_CAMERAS = frozenset({"corner", "corner2", "corner3", "corner4"})  # mounted upside down upstream
INSTALL_HINT = "MetaWorld is not installed: pip install 'rollbench[metaworld]'"
_NEVER = 2**62  # max_path_length that MetaWorld's own truncation never reaches

# env name -> instruction, in metaworld.env_dict.ALL_V3_ENVIRONMENTS order.
INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "pick up the nut and place it onto the peg",
    "basketball-v3": "pick up the basketball and dunk it into the basket",
    "bin-picking-v3": "pick up the puck from one bin and place it into the other bin",
    "box-close-v3": "pick up the box lid and close the box with it",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "reach over the wall and press the button from the top",
    "button-press-v3": "press the button",
    "button-press-wall-v3": "reach past the wall and press the button",
    "coffee-button-v3": "push the button on the coffee machine",
    "coffee-pull-v3": "pull the mug out from under the coffee machine to the goal",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "turn the dial",
    "disassemble-v3": "pick the nut up and off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock",
    "hand-insert-v3": "insert the gripper into the hole",
    "drawer-close-v3": "push the drawer closed",
    "drawer-open-v3": "pull the drawer open",
    "faucet-open-v3": "turn the faucet handle counter-clockwise to open it",
    "faucet-close-v3": "turn the faucet handle clockwise to close it",
    "hammer-v3": "pick up the hammer and hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck, lift it over the wall and place it at the goal",
    "pick-out-of-hole-v3": "pick the puck up out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate sideways into the cabinet",
    "plate-slide-back-v3": "slide the plate back out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate sideways back out of the cabinet",
    "peg-insert-side-v3": "pick up the peg and insert it sideways into the hole",
    "peg-unplug-side-v3": "unplug the peg sideways from the box",
    "soccer-v3": "push the ball into the goal",
    "stick-push-v3": "pick up the stick and push the thermos to the goal with it",
    "stick-pull-v3": "pick up the stick and pull the thermos to the goal with it",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck around the wall to the goal",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal with the gripper",
    "reach-wall-v3": "reach over the wall to the goal with the gripper",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

# Official benchmark lists, copied from metaworld.env_dict (MT10_V3, MT25_V3, ML10_V3, ML45_V3); the tests
# compare them with the installed package.
_MT10 = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)
_MT25 = (
    *_MT10,
    "coffee-pull-v3",
    "pick-out-of-hole-v3",
    "disassemble-v3",
    "pick-place-wall-v3",
    "basketball-v3",
    "stick-pull-v3",
    "button-press-wall-v3",
    "faucet-open-v3",
    "door-lock-v3",
    "lever-pull-v3",
    "sweep-into-v3",
    "faucet-close-v3",
    "coffee-button-v3",
    "button-press-topdown-wall-v3",
    "dial-turn-v3",
)
_ML10_TRAIN = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "sweep-v3",
    "basketball-v3",
)
_ML10_TEST = ("drawer-open-v3", "door-close-v3", "shelf-place-v3", "sweep-into-v3", "lever-pull-v3")
_ML45_TEST = ("bin-picking-v3", "box-close-v3", "hand-insert-v3", "door-lock-v3", "door-unlock-v3")


def _full(names: Sequence[str]) -> list[str]:
    return [f"metaworld/{n}" for n in names]


SUITES: dict[str, list[str]] = {
    "MT10": _full(_MT10),
    "MT25": _full(_MT25),
    "MT50": _full(list(INSTRUCTIONS)),
    "ML10-train": _full(_ML10_TRAIN),
    "ML10-test": _full(_ML10_TEST),
    "ML45-train": _full([n for n in INSTRUCTIONS if n not in _ML45_TEST]),
    "ML45-test": _full(_ML45_TEST),
}

# zero xyz delta (SawyerXYZEnv.set_xyz_action: mocap_pos += action[:3] * action_scale) with the gripper command
# unchanged (step: do_simulation([a[-1], -a[-1]]) drives the fingers' position actuators to that command); before the
# first action the gripper command is -1 (open), what _reset_hand applies: do_simulation([-1, 1])
HOLD = HoldAction(
    (0.0, 0.0, 0.0, -1.0),
    keep=(3,),
    source="metaworld 3.1.1 sawyer_xyz_env.py: set_xyz_action (delta), step (gripper ctrl), _reset_hand (-1: open)",
)

TASKS: dict[str, TaskInfo] = {
    f"metaworld/{env_name}": TaskInfo(
        name=f"metaworld/{env_name}",
        instruction=instruction,
        max_steps=HORIZON,
        cameras=CAMERAS,
        success_rule="any_step",
        action_dim=4,
        state_dim=39,
        action_low=(-1.0,) * 4,
        action_high=(1.0,) * 4,
        fps=FPS,
        hold=HOLD,
        source="metaworld 3.1.1 (env_dict.ALL_V3_ENVIRONMENTS; horizon SawyerXYZEnv.max_path_length; "
        "success info['success']); instruction from the MetaWorld paper's task descriptions",
    )
    for env_name, instruction in INSTRUCTIONS.items()
}


class MetaWorldEnv:
    """One MetaWorld v3 task behind rollbench's ``Env`` protocol (see the module docstring for the contract).

    ``observation.raw`` is MetaWorld's ``float64 (39,)`` observation (what ``metaworld.policies`` expect);
    ``observation.state`` is the same as ``float32``. ``StepResult.info`` is MetaWorld's info dict.
    """

    def __init__(self, task: TaskInfo, options: EnvOptions) -> None:
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS

        self.task = task
        self.image_size = options.image_size
        env_name = task.name.split("/", 1)[1]
        env = ALL_V3_ENVIRONMENTS[env_name]()
        env._partially_observable = False  # the goal is part of the observation (MT setting)
        # The observation space was built (and cached) for the goal-hidden default; rebuild it, since step()
        # clips observations to it and would otherwise zero the goal.
        env.__dict__.pop("sawyer_observation_space", None)
        env.observation_space = env.sawyer_observation_space
        env._set_task_called = True  # no Task object: the scene comes from the seeded rand_vec instead
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True
        env.max_path_length = _NEVER
        self._env: Any = env
        self._renderer: Any = None
        self._view: Any = None  # forwarded copy of the reset state, rendered until the first step
        self._view_data: Any = None  # (model, MjData, state buffer) that holds that copy, reused across resets
        self._last_success = False
        self._ready = False

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is not None:
            raise ConfigError(f"{self.task.name} has no stored initial states; scenes come from the seed only")
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"{self.task.name}: seed must be an integer >= 0, got {seed!r}")
        self._env.np_random = np.random.default_rng(int(seed))
        self._env.reset()
        obs, self._last_success = self._settled_reset_view()
        self._ready = True
        return self._observation(obs)

    def step(self, action: np.ndarray) -> StepResult:
        if not self._ready:
            raise RuntimeError(f"{self.task.name}: call reset() before step()")
        a = np.asarray(action, dtype=np.float32).reshape(-1)
        if a.shape != (4,) or not np.all(np.isfinite(a)):
            raise ValueError(f"{self.task.name}: action must be 4 finite numbers, got {np.asarray(action)!r}")
        obs, reward, terminated, truncated, info = self._env.step(a)
        self._view = None
        self._last_success = bool(info["success"])
        return StepResult(
            observation=self._observation(obs),
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            success=self._last_success,
            info=info,
        )

    def success(self) -> bool:
        """MetaWorld's success check for the current state (from the last step, or computed at reset)."""
        return self._last_success

    def render(self, camera: str) -> np.ndarray:
        """``uint8 (H, W, 3)`` RGB at ``options.image_size`` from one of ``task.cameras``, right way up."""
        if camera not in CAMERAS:
            raise ValueError(f"unknown camera {camera!r}; {self.task.name} has {', '.join(CAMERAS)}")
        if self._renderer is None:
            self._renderer = self._make_renderer()
        data = self._env.data if self._view is None else self._view
        self._renderer.update_scene(data, camera=camera)
        img = self._renderer.render()
        if camera in ROTATED_CAMERAS:
            img = img[::-1, ::-1]
        return np.ascontiguousarray(img, dtype=np.uint8)

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._env.close()

    def _make_renderer(self) -> Any:
        import mujoco

        h, w = self.image_size
        vis = self._env.model.vis.global_
        vis.offwidth, vis.offheight = max(int(vis.offwidth), w), max(int(vis.offheight), h)
        renderer = mujoco.Renderer(self._env.model, height=h, width=w)
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        return renderer

    def _settled_reset_view(self) -> tuple[np.ndarray, bool]:
        """The first observation and success, computed on a forwarded copy of the reset state.

        Upstream bug: several tasks' ``reset_model`` move bodies or joints *after* the last physics update and
        return positions computed before the move (dial-turn, drawer-open, faucet-open, lever-pull, window-open
        and window-close are off by 9-20 cm; window-close even reports success at reset, on every seed). The
        fix runs ``mj_forward`` on a *copy* of the MuJoCo data, so the observation, the success check and the
        first rendered frame describe the true scene while the live simulation stays bit-identical to what
        MetaWorld alone would run (an extra ``mj_forward`` on the live data perturbs contacts at round-off level,
        which grows to millimetres within 40 steps). The copy is MuJoCo's full integration state
        (``mj_getState``/``mj_setState`` with ``mjSTATE_INTEGRATION``: time, qpos, qvel, act, warm start, controls,
        applied forces, equality flags, mocap, user data, plugin state) put into one ``MjData`` kept for the env's
        life; forwarding it gives the same arrays as forwarding ``copy.copy(data)``, without allocating a new
        ``MjData`` per reset (the copy: 0.002 vs 0.31 ms, ``benchmarks/bench_micro.py``). Both frame-stack halves of the observation are the
        current frame, as upstream; ``_prev_obs`` is set to it so the next step's stack is right too.

        ``evaluate_state`` is called as ``step`` calls it (clipped observation) but with its side effects undone:
        some reward functions cache values on their first call after a reset (bin-picking's
        ``_target_to_obj_init``, v1 rewards' ``pickCompleted``), and they must see the first real step as upstream.
        """
        import mujoco

        env = self._env
        live = env.data
        whole = mujoco.mjtState.mjSTATE_INTEGRATION
        if self._view_data is None or self._view_data[0] is not env.model:
            state = np.empty(mujoco.mj_stateSize(env.model, whole), dtype=np.float64)
            self._view_data = (env.model, mujoco.MjData(env.model), state)
        _, view, state = self._view_data
        mujoco.mj_getState(env.model, live, state, whole)
        mujoco.mj_setState(env.model, view, state, whole)
        mujoco.mj_forward(env.model, view)
        saved = dict(env.__dict__)
        try:
            env.data = view
            current = env._get_curr_obs_combined_no_goal()
            obs = np.hstack((current, current, env._get_pos_goal())).astype(np.float64)
            space = env.sawyer_observation_space
            _, info = env.evaluate_state(np.clip(obs, space.low, space.high), np.zeros(4, dtype=np.float32))
        finally:
            env.__dict__.clear()
            env.__dict__.update(saved)
        assert env.data is live
        env._prev_obs = current.copy()
        self._view = view
        return obs, bool(info["success"])

    @staticmethod
    def _observation(obs: np.ndarray) -> Observation:
        return Observation(state=np.asarray(obs, dtype=np.float32), raw=obs)


class MetaWorldFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "metaworld"
    robot = "sawyer"
    renderer = MUJOCO_RENDERER
    offscreen_gl = True
    sim_packages = (("metaworld", "metaworld"), ("mujoco", "mujoco"))
    # served: the float64 (39,) observation its scripted experts read (a float32 round trip changes their actions)
    served = ServedLayout(main_camera="corner", wrist_camera="gripperPOV", state_source="raw")
    arm = ArmLayout(0.01, 3, 1.0)  # metaworld.sawyer_xyz_env: action_scale 1/100; gripper closes at +1
    description = "MetaWorld v3: 50 Sawyer manipulation tasks (MuJoCo), suites MT10/MT25/MT50, ML10/ML45 splits"
    requires = ("metaworld", "mujoco")
    install_hint = "pip install 'rollbench[metaworld]'"

    def make(self, task: TaskInfo, options: EnvOptions) -> MetaWorldEnv:
        configure_offscreen_gl()  # before metaworld imports mujoco, which fixes its GL back-end at import
        if task.name not in TASKS:
            raise unknown_name_error("task", task.name, list(TASKS))
        bad = [c for c in options.cameras if c not in CAMERAS]
        if bad:
            raise ConfigError(f"{task.name} has no camera {', '.join(bad)}; its cameras: {', '.join(CAMERAS)}")
        if self.missing():
            raise ConfigError(f"cannot build {task.name}: {INSTALL_HINT}")
        return MetaWorldEnv(task, options)


FAMILY = MetaWorldFamily(TASKS, SUITES)
