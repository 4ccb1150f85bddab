"""A tiny deterministic env family for fast tests and for checking a pipeline end to end without a simulator.

``scripted/reach``: a point in the unit square moves by ``0.1 * clip(action, -1, 1)`` metres per step toward a goal.
State ``float32 (4,)`` = ``[x, y, goal_x, goal_y]`` (metres). Success: distance to goal < 0.05 m. Reward: minus the
distance after the step. Start and goal are drawn from ``numpy.random.default_rng(seed)``, so the scene is a pure
function of the seed. Horizon 50 steps, 10 fps, cameras ``top`` (a drawn top view).

``scripted/reach-final``: the same dynamics, judged with the ``final_step`` success rule.

``scripted/reach-init``: the same dynamics, but scenes come from :data:`INITIAL_STATES`, a stored table of 10
``(start, goal)`` pairs, like LIBERO's stored initial states: episode k starts from state k, whatever its seed; it
exists to exercise initial-state indexing (plan → workers → env) without LIBERO.

``scripted/faulty``: the same dynamics, but ``reset`` raises ``RuntimeError`` when ``seed % 3 == 2``; it exists to
exercise the "an env error ends that episode, not the run" path.

``scripted/clock``: the same dynamics, but the state is ``[t, 0, 0, 0]`` with ``t`` the steps executed since reset
(the observation's ``frame_index``) and success is never reported, so every episode runs its whole horizon; it
exists to check which observation each executed action was computed from (``--latency``, tests/test_latency.py).
"""

from __future__ import annotations

import numpy as np

from rollbench.core.contracts import HoldAction, Observation, StepResult, TaskInfo
from rollbench.core.family import ArmLayout, ServedLayout
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily

STEP_SIZE = 0.1  # metres per unit action per step
SUCCESS_RADIUS = 0.05  # metres

# a zero velocity leaves the point where it is (``step``: pos += STEP_SIZE * action)
HOLD = HoldAction((0.0, 0.0), source="rollbench.envs.scripted: a zero action moves the point by 0 m")

_COMMON = dict(
    max_steps=50,
    cameras=("top",),
    action_dim=2,
    state_dim=4,
    action_low=(-1.0, -1.0),
    action_high=(1.0, 1.0),
    fps=10,
    source="rollbench.envs.scripted (this module)",
    hold=HOLD,
)

# the stored initial states of scripted/reach-init: (start x, start y, goal x, goal y), metres
INITIAL_STATES: tuple[tuple[float, ...], ...] = tuple(
    tuple(float(v) for v in row) for row in np.random.default_rng(20261129).uniform(0.1, 0.9, size=(10, 4))
)

TASKS: dict[str, TaskInfo] = {
    t.name: t
    for t in (
        TaskInfo(
            name="scripted/reach",
            instruction="move the point to the goal",
            success_rule="any_step",
            **_COMMON,  # type: ignore[arg-type]
        ),
        TaskInfo(
            name="scripted/reach-final",
            instruction="move the point to the goal and stay there",
            success_rule="final_step",
            **_COMMON,  # type: ignore[arg-type]
        ),
        TaskInfo(
            name="scripted/reach-init",
            instruction="move the point to the goal",
            success_rule="any_step",
            initial_states=len(INITIAL_STATES),
            **_COMMON,  # type: ignore[arg-type]
        ),
        TaskInfo(
            name="scripted/clock",
            instruction="move the point (the state is the step count)",
            success_rule="any_step",
            **_COMMON,  # type: ignore[arg-type]
        ),
        TaskInfo(
            name="scripted/faulty",
            instruction="move the point to the goal",
            success_rule="any_step",
            **_COMMON,  # type: ignore[arg-type]
        ),
    )
}


class ScriptedEnv:
    """See the module docstring. ``render`` draws the point (white) and goal (green) on a black square."""

    def __init__(self, task: TaskInfo, options: EnvOptions) -> None:
        self.task = task
        self.image_size = options.image_size
        self.pos = np.zeros(2)
        self.goal = np.zeros(2)
        self.clock = task.name == "scripted/clock"
        self.t = 0

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if self.task.name == "scripted/faulty" and seed % 3 == 2:
            raise RuntimeError(f"scripted/faulty: reset fails on purpose for seed {seed} (seed % 3 == 2)")
        self.t = 0
        if self.task.initial_states:
            if initial_state is None or not 0 <= initial_state < len(INITIAL_STATES):
                raise ValueError(
                    f"{self.task.name} needs an initial state 0..{len(INITIAL_STATES) - 1}, got {initial_state}"
                )
            row = np.asarray(INITIAL_STATES[initial_state])
            self.pos, self.goal = row[:2].copy(), row[2:].copy()
            return self._obs()
        rng = np.random.default_rng(seed)
        self.pos = rng.uniform(0.1, 0.9, size=2)
        self.goal = rng.uniform(0.1, 0.9, size=2)
        return self._obs()

    def _obs(self) -> Observation:
        if self.clock:
            return Observation(state=np.array([self.t, 0.0, 0.0, 0.0], dtype=np.float32))
        return Observation(state=np.concatenate([self.pos, self.goal]).astype(np.float32))

    def step(self, action: np.ndarray) -> StepResult:
        self.pos = np.clip(self.pos + STEP_SIZE * np.clip(action, -1.0, 1.0), 0.0, 1.0)
        self.t += 1
        dist = float(np.linalg.norm(self.pos - self.goal))
        return StepResult(self._obs(), reward=-dist, terminated=False, truncated=False, success=self.success())

    def success(self) -> bool:
        if self.clock:
            return False
        return bool(np.linalg.norm(self.pos - self.goal) < SUCCESS_RADIUS)

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.task.cameras:
            raise ValueError(f"unknown camera {camera!r}; {self.task.name} has {self.task.cameras}")
        h, w = self.image_size
        img = np.zeros((h, w, 3), dtype=np.uint8)
        for p, color in ((self.goal, (0, 200, 0)), (self.pos, (255, 255, 255))):
            r, c = int(p[1] * (h - 1)), int(p[0] * (w - 1))
            img[max(r - 2, 0) : r + 3, max(c - 2, 0) : c + 3] = color
        return img

    def close(self) -> None:
        pass


class ScriptedFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "scripted"
    robot = "point"
    renderer = "none"
    served = ServedLayout(main_camera="top")
    arm = ArmLayout(STEP_SIZE, None, 0.0, (0, 2), goal_slice=(2, 4))  # a point moved by STEP_SIZE m per unit; goal
    description = (
        "tiny deterministic point-reaching env (no simulator; for tests and pipeline checks);"
        " scripted/faulty fails at reset when seed % 3 == 2 (an injected failure, not in scripted/all)"
    )

    def make(self, task: TaskInfo, options: EnvOptions) -> ScriptedEnv:
        return ScriptedEnv(task, options)


FAMILY = ScriptedFamily(TASKS, {"all": ["scripted/reach", "scripted/reach-final"]})
