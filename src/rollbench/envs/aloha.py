"""The ``aloha`` family: ALOHA sim (gym-aloha 0.1.5), bimanual ViperX arms, as lerobot evaluates ACT on it.

Tasks ``aloha/AlohaTransferCube-v0`` and ``aloha/AlohaInsertion-v0`` (gym ids ``gym_aloha/...``). Source of every
constant: gym-aloha 0.1.5 ``gym_aloha/env.py`` (spaces, ``is_success = reward == 4``, the env's 4-stage reward,
``metadata["render_fps"] = 50``, 480 x 640 ``top`` camera) and lerobot 0.4.4's ``AlohaEnv`` config
(``lerobot/envs/configs.py``: ``episode_length=400``, ``fps=50``, ``obs_type="pixels_agent_pos"``); ACT's paper
evaluates these tasks over 400 steps as well.

* action: ``float32 (14,)``, joint position targets of both arms and grippers (gym-aloha's ``Box(-1, 1)`` as
  declared; the env does not clip, and trained policies output radians beyond it);
* state: ``float32 (14,)`` = gym-aloha's ``agent_pos`` (both arms' joint positions and normalised grippers);
* success: gym-aloha's ``is_success`` (the reward reached its maximum, 4), which also terminates the episode, as
  lerobot-eval counts it: rule ``any_step``; horizon 400, fps 50;
* camera ``top`` at the run's image size (gym-aloha renders its observation at ``observation_height/width``,
  default 480 x 640); instruction: none (lerobot-eval passes an empty task for ALOHA);
* seeding: ``reset(seed=seed)`` seeds the task's random state and draws the cube or peg/socket poses from the seed.

gym-aloha renders the ``top`` image on every reset and step whatever the run records (its ``obs_type="state"`` is
not implemented), so an ALOHA step costs a 480 x 640 render even for a state-only policy.

Install: ``pip install 'rollbench[aloha]'`` (gym-aloha 0.1.5 and dm-control 1.0.28: gym-aloha wants dm-control < 1.1,
and 1.0.28 is the newest dm-control whose MuJoCo requirement, >= 3.2.7, admits rollbench's MuJoCo 3.3.0; 1.0.30 wants
>= 3.3.2, 1.0.31 >= 3.3.3, 1.0.34 >= 3.3.6, and there is no 1.0.29).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import TaskInfo
from rollbench.core.family import MUJOCO_RENDERER
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily
from rollbench.envs.gym import GymnasiumEnv

CAMERA = "top"
HORIZON = 400  # lerobot AlohaEnv.episode_length (gym-aloha registers 300; lerobot-eval passes 400)
FPS = 50  # gym-aloha metadata["render_fps"]; lerobot AlohaEnv.fps
IMAGE_SIZE = (480, 640)  # gym-aloha observation_height, observation_width (lerobot's AlohaEnv config: the same)


def _task(gym_name: str, what: str) -> TaskInfo:
    return TaskInfo(
        name=f"aloha/{gym_name}",
        instruction="",
        has_instruction=False,
        max_steps=HORIZON,
        cameras=(CAMERA,),
        success_rule="any_step",
        action_dim=14,
        state_dim=14,
        action_low=(-1.0,) * 14,
        action_high=(1.0,) * 14,
        fps=FPS,
        image_size=IMAGE_SIZE,
        source=(
            f"gym-aloha 0.1.5 gym_aloha/{gym_name} ({what}; is_success = reward == 4, render_fps 50); horizon 400 "
            "from lerobot 0.4.4 AlohaEnv.episode_length"
        ),
    )


TASKS: dict[str, TaskInfo] = {
    t.name: t
    for t in (
        _task("AlohaTransferCube-v0", "the right arm picks up the cube and hands it to the left arm"),
        _task("AlohaInsertion-v0", "the arms pick up the socket and the peg and insert the peg in mid-air"),
    )
}


class AlohaEnv(GymnasiumEnv):
    """An ALOHA sim task; see the module docstring."""

    def _state(self, obs: Any) -> np.ndarray:
        return np.asarray(obs["agent_pos"], dtype=np.float32)

    def _success_from(self, info: Mapping[str, Any]) -> bool:
        return bool(info["is_success"])

    def _render_rgb(self) -> np.ndarray:
        return np.asarray(self._last_obs["pixels"][CAMERA])  # rendered by the env with this observation


class AlohaFamily(TableFamily):
    inline = True  # rollbench's own adapter: called inline, no env deadline (EnvFamily.inline)
    name = "aloha"
    robot = "aloha"
    renderer = MUJOCO_RENDERER
    offscreen_gl = True
    sim_packages = (("gym-aloha", "gym-aloha"), ("dm-control", "dm-control"), ("mujoco", "mujoco"))
    description = "gym-aloha: ALOHA sim bimanual transfer-cube and insertion (MuJoCo, dm-control)"
    requires = ("gym_aloha", "dm_control")
    install_hint = "pip install 'rollbench[aloha]'"

    def make(self, task: TaskInfo, options: EnvOptions) -> AlohaEnv:
        import gym_aloha
        import gymnasium

        from rollbench.core.gl import configure_offscreen_gl

        configure_offscreen_gl()
        gymnasium.register_envs(gym_aloha)
        gym_id = "gym_aloha/" + task.name.split("/", 1)[1]
        h, w = options.image_size

        def factory(**kwargs: Any) -> Any:
            return gymnasium.make(
                gym_id,
                obs_type="pixels_agent_pos",
                max_episode_steps=HORIZON,
                observation_height=h,
                observation_width=w,
                visualization_height=h,
                visualization_width=w,
            )

        return AlohaEnv(task, options, gym_id, factory, {})


FAMILY = AlohaFamily(TASKS, {"all": list(TASKS)})
