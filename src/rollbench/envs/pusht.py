"""The ``pusht`` family: ``pusht/PushT-v0``, gym-pusht's 2-D pushing task (pymunk physics, no GL needed).

Source of every constant: gym-pusht 0.1.8 ``gym_pusht/__init__.py`` (id ``gym_pusht/PushT-v0``,
``max_episode_steps=300``) and ``gym_pusht/envs/pusht.py`` (spaces, ``success_threshold = 0.95``,
``metadata["render_fps"] = 10``); lerobot's ``PushtEnv`` config (``lerobot/envs/configs.py``: ``episode_length=300``,
``fps=10``) uses the same horizon; the instruction is the task string of the ``lerobot/pusht`` dataset.

* action: ``float32 (2,)``, the target position of the circular agent in pixels of the 512 x 512 workspace, bounds
  ``[0, 512]`` (a PD controller moves the agent toward it during the step).
* state: ``float32 (5,)`` = gym-pusht's ``obs_type="state"`` observation ``[agent_x, agent_y, block_x, block_y,
  block_angle]`` (pixels, pixels, radians in ``[0, 2 pi)``).
* success: the env's own coverage test, ``coverage > success_threshold`` (0.95: the block covers more than 95% of
  the goal zone), which gym-pusht also reports as ``info["is_success"]`` and uses to terminate. Rule ``any_step``.
* horizon 300 steps, fps 10.
* camera ``top``: the env's pixel observation (``_render(visualize=False)``, as ``obs_type="pixels"`` returns it and
  as lerobot's pusht datasets were recorded) at ``options.image_size``; unlike ``env.render()`` it draws no red
  cross at the last action. Images are made at the requested size by gym-pusht itself (``cv2.resize``).
* seeding: ``env.reset(seed=seed)`` seeds the env's ``np_random``, which draws agent and block poses.

Scripted policy with nonzero success: none here; ``random`` gets ~0% (PushT needs a learned policy such as
lerobot's diffusion policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import HoldAction, TaskInfo
from rollbench.core.family import ServedLayout
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily
from rollbench.envs.gym import GymnasiumEnv

CAMERA = "top"
GYM_ID = "gym_pusht/PushT-v0"

# the action is an absolute target for the agent's PD controller (gym-pusht pusht.py step: the agent is driven toward
# the action), so holding means keeping the last target; before the first action, the agent's own position
# (state[0:2], the same pixel units as the action)
HOLD = HoldAction(
    (0.0, 0.0),
    keep=(0, 1),
    from_state=((0, 0), (1, 1)),
    source="gym-pusht 0.1.8 envs/pusht.py step (PD control toward the action target)",
)

TASKS: dict[str, TaskInfo] = {
    "pusht/PushT-v0": TaskInfo(
        name="pusht/PushT-v0",
        instruction="Push the T-shaped block onto the T-shaped target.",
        max_steps=300,
        cameras=(CAMERA,),
        success_rule="any_step",
        action_dim=2,
        state_dim=5,
        action_low=(0.0, 0.0),
        action_high=(512.0, 512.0),
        fps=10,
        hold=HOLD,
        source=(
            "gym-pusht 0.1.8 (max_episode_steps=300, success_threshold=0.95, render_fps=10); lerobot PushtEnv "
            "episode_length=300; instruction from the lerobot/pusht dataset"
        ),
    )
}


class PushTEnv(GymnasiumEnv):
    """``pusht/PushT-v0``; see the module docstring."""

    def _success_from(self, info: Mapping[str, Any]) -> bool:
        return bool(info["is_success"])

    def success(self) -> bool:
        inner = self.env.unwrapped
        return bool(inner._get_coverage() > inner.success_threshold)

    def _render_rgb(self) -> np.ndarray:
        return np.asarray(self.env.unwrapped._render(visualize=False))


class PushTFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "pusht"
    robot = "pusht"
    renderer = "pygame (software, no OpenGL)"
    sim_packages = (("gym-pusht", "gym-pusht"), ("pymunk", "pymunk"), ("pygame", "pygame"))  # physics, renderer
    served = ServedLayout(main_camera="top")
    description = "gym-pusht: push a T-shaped block onto a target (2-D, pymunk)"
    requires = ("gym_pusht",)
    install_hint = "pip install 'rollbench[pusht]'"

    def make(self, task: TaskInfo, options: EnvOptions) -> PushTEnv:
        import gym_pusht
        import gymnasium

        gymnasium.register_envs(gym_pusht)
        h, w = options.image_size

        def factory(**kwargs: Any) -> Any:
            return gymnasium.make(
                GYM_ID,
                obs_type="state",
                render_mode="rgb_array",
                observation_width=w,
                observation_height=h,
                visualization_width=w,
                visualization_height=h,
            )

        return PushTEnv(task, options, GYM_ID, factory)


FAMILY = PushTFamily(TASKS, {"all": list(TASKS)})
