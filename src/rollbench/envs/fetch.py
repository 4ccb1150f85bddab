"""The ``fetch`` family: gymnasium-robotics Fetch arm tasks (MuJoCo), ``fetch/Reach|Push|PickAndPlace|Slide``.

Each task is gymnasium-robotics' ``Fetch<Task>-v4`` (the newest version registered by gymnasium-robotics 1.4.2; the
``-v1`` ids are the mujoco-py era). Source of every constant: ``gymnasium_robotics/envs/__init__.py`` (ids,
``max_episode_steps=50``) and ``gymnasium_robotics/envs/fetch/fetch_env.py`` (observation layout, ``pos_ctrl *= 0.05``,
``distance_threshold=0.05``, ``dt = n_substeps * timestep = 20 * 0.002 = 0.04 s``).

* action: ``float32 (4,)`` in ``[-1, 1]``: end-effector displacement ``dx, dy, dz`` (times 0.05 m per step) and the
  gripper opening command (ignored by Reach, whose gripper is blocked).
* state: ``float32 (obs_dim + 6,)`` = ``observation`` ++ ``desired_goal`` (3, metres) ++ ``achieved_goal`` (3, m).
  ``observation`` (metres, m/s, radians) is ``grip_pos(3), object_pos(3), object_rel_pos(3), gripper_state(2),
  object_rot(3), object_velp(3), object_velr(3), grip_velp(3), gripper_vel(2)`` = 25 values for Push, PickAndPlace
  and Slide; Reach has no object, so ``grip_pos(3), gripper_state(2), grip_velp(3), gripper_vel(2)`` = 10 values.
  So ``state_dim`` is 16 for Reach, 31 for the others; the goal is ``state[obs_dim : obs_dim + 3]``.
* success: the env's own ``_is_success(achieved_goal, desired_goal)`` (distance < 0.05 m), which is also what it
  reports as ``info["is_success"]``. Rule ``final_step``: HER and OpenAI baselines (``baselines/her/rollout.py``:
  ``successful = np.array(successes)[-1, :]``) count an episode a success when the goal is held at its last step.
* horizon 50 steps (the envs' own ``max_episode_steps``); fps 25 (1 / dt).
* camera ``external``: the env's default free camera (``DEFAULT_CAMERA_CONFIG`` in ``fetch_env.py``), rendered
  with ``render_mode="rgb_array"`` at ``options.image_size``.
* seeding: ``env.reset(seed=seed)`` seeds the env's ``np_random``, which draws the goal and object position.
* instructions: written by rollbench from the gymnasium-robotics task descriptions (the envs have none).

Scripted policy with nonzero success: ``fetch-expert`` (``rollbench.policies.fetch_expert``) solves ``fetch/Reach``;
``random`` gets ~0% on every Fetch task (Reach occasionally succeeds by chance when the goal starts near).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import HoldAction, TaskInfo
from rollbench.core.family import MUJOCO_RENDERER, ArmLayout, ServedLayout
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily
from rollbench.envs.gym import GymnasiumEnv, configure_gl_quietly
from rollbench.envs.quiet import import_quietly

CAMERA = "external"
OBS_DIMS = {"Reach": 10, "Push": 25, "PickAndPlace": 25, "Slide": 25}  # len(observation), fetch_env._get_obs
INSTRUCTIONS = {
    "Reach": "move the gripper to the target position",
    "Push": "push the block to the target position",
    "PickAndPlace": "pick up the block and move it to the target position",
    "Slide": "slide the puck to the target position",
}
GYM_VERSION = "v4"

# all zero: the xyz delta moves the mocap by 0.05 * action (fetch_env._set_action) and the gripper action is a delta
# too (mujoco_utils.ctrl_set_action: a position actuator's target = current qpos + action), so 0 keeps both still
HOLD = HoldAction(
    (0.0,) * 4,
    source="gymnasium-robotics 1.4.2 envs/fetch/fetch_env.py _set_action, utils/mujoco_utils.py ctrl_set_action",
)

TASKS: dict[str, TaskInfo] = {
    f"fetch/{t}": TaskInfo(
        name=f"fetch/{t}",
        instruction=INSTRUCTIONS[t],
        max_steps=50,
        cameras=(CAMERA,),
        success_rule="final_step",
        action_dim=4,
        state_dim=OBS_DIMS[t] + 6,
        action_low=(-1.0,) * 4,
        action_high=(1.0,) * 4,
        fps=25,
        hold=HOLD,
        source=(
            f"gymnasium-robotics 1.4.2 Fetch{t}-{GYM_VERSION} (max_episode_steps=50, dt=0.04 s, is_success); "
            "final_step rule as in OpenAI baselines HER rollout.py; instruction written by rollbench"
        ),
    )
    for t in OBS_DIMS
}


def gym_id_of(task: TaskInfo) -> str:
    return f"Fetch{task.name.split('/', 1)[1]}-{GYM_VERSION}"


class FetchEnv(GymnasiumEnv):
    """A Fetch task; ``state = observation ++ desired_goal ++ achieved_goal`` (see the module docstring)."""

    def _state(self, obs: Any) -> np.ndarray:
        return np.concatenate([obs["observation"], obs["desired_goal"], obs["achieved_goal"]]).astype(np.float32)

    def _success_from(self, info: Mapping[str, Any]) -> bool:
        return bool(info["is_success"])  # the env computes it with _is_success on the new observation

    def success(self) -> bool:
        inner = self.env.unwrapped
        obs = inner._get_obs()
        return bool(inner._is_success(obs["achieved_goal"], obs["desired_goal"]))


class FetchFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "fetch"
    robot = "fetch"
    renderer = MUJOCO_RENDERER
    offscreen_gl = True
    sim_packages = (("gymnasium-robotics", "gymnasium-robotics"), ("mujoco", "mujoco"))
    served = ServedLayout(main_camera="external")
    arm = ArmLayout(0.05, 3, -1.0)  # gymnasium_robotics fetch_env: pos_ctrl *= 0.05; a positive command opens
    description = "gymnasium-robotics Fetch arm: Reach, Push, PickAndPlace, Slide (MuJoCo)"
    requires = ("gymnasium_robotics", "mujoco")
    install_hint = "pip install 'rollbench[fetch]'"

    def make(self, task: TaskInfo, options: EnvOptions) -> FetchEnv:
        configure_gl_quietly(strict=bool(options.cameras))
        import_quietly("gymnasium_robotics")  # without Farama's Adroit notice (rollbench.envs.quiet)
        import gymnasium
        import gymnasium_robotics

        gymnasium.register_envs(gymnasium_robotics)
        env_id = gym_id_of(task)
        h, w = options.image_size

        def factory(**kwargs: Any) -> Any:
            return gymnasium.make(env_id, **kwargs)

        return FetchEnv(task, options, env_id, factory, {"render_mode": "rgb_array", "width": w, "height": h})


FAMILY = FetchFamily(TASKS, {"all": list(TASKS)})
