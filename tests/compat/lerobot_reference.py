"""The reference side of the checkpoint tests: this venv's lerobot's own evaluation loop (0.6.1 or 0.4.4), step-logged.

``reference_episodes(checkpoint, env_cfg, seeds, init_states)`` evaluates a checkpoint as ``lerobot-eval`` does
(``lerobot/scripts/lerobot_eval.py`` ``eval_main``): ``PreTrainedConfig.from_pretrained`` with ``pretrained_path``
and ``device`` set, ``make_policy(cfg, env_cfg=env_cfg)``, ``make_pre_post_processors`` with eval_main's
``preprocessor_overrides``, ``make_env_pre_post_processors``, ``make_env(env_cfg, n_envs=1)``, and
``eval_policy`` under ``torch.no_grad()``. One ``eval_policy(n_episodes=1, start_seed=seed)`` call per episode,
after lerobot's ``set_seed(seed)``, *after* the policy is built: the loop of rollbench's default per-episode seeding,
which equals ``lerobot-eval``'s own for deterministic policies (ACT) but not for sampling ones, whose ``eval_main``
seeds once *before* ``make_policy``. The real command is run by ``lerobot_cli.run_lerobot_eval`` instead
(``test_lerobot_eval_exact.py``: seeding ``lerobot-eval``). For LIBERO, the
env's ``init_state_id`` is set to the episode's initial state first (lerobot's LiberoEnv advances it by itself on
every reset, including its own internal reset at termination).

LIBERO: lerobot's ``LiberoEnv`` (0.4.4 and 0.6.1 alike) runs, as users install it (``lerobot[libero]``), on
``hf-libero`` 0.1.x, which requires robosuite 1.4.0. rollbench's LIBERO is rpent-libero on robosuite 1.5.2, the
simulator this venv has too; lerobot's env code is run on it with robosuite 1.4's behaviour restored at exactly the
three points where that env meets it (:func:`as_on_robosuite_14`, each written from the 1.4 sources):

* ``robot.controller`` (1.4 robots have one; lerobot reads ``controller.ee_ori_mat`` for ``eef/mat``, which its
  ``LiberoProcessorStep`` drops unread, and sets ``controller.use_delta = True`` for ``control_mode="relative"``):
  :func:`alias_robosuite14_controller` maps these two names onto 1.5's ``robot.part_controllers["right"]``
  (``ref_ori_mat``, ``input_type``);
* ``ControlEnv.seed(seed)``, which ``LiberoEnv.reset(seed=...)`` calls before every ``env.reset()``: on 1.4 it
  reaches hf-libero's ``BDDLBaseDomain.seed``, ``np.random.seed(seed)`` (numpy's global generator, which LIBERO's
  placement samplers draw from); rpent-libero's on 1.5 only sets ``env.rng``. So lerobot-eval's scene of an
  episode is a function of that episode's env seed alone, whatever ran before (its construction reset, 0.6.1's
  lazy env creation inside the first ``reset``, 0.4.4's own reset at termination);
* robosuite 1.4's ``Robot.reset`` draws the robot's initialization noise from numpy's *global* generator
  (``np.random.randn(len(init_qpos))``, ``robosuite/robots/robot.py``; uniform noise: ``np.random.uniform(-1, 1,
  n)``) before LIBERO's placement draws, even at LIBERO's magnitude 0; 1.5 draws it from ``env.rng``.

Without the last two (lerobot's env on plain robosuite 1.5) the fixtures stand 4-6 mm elsewhere and a policy's
actions differ from step 0; ``test_lerobot_policy.py`` checks both. Nothing else of lerobot's env changes.
:class:`ActionLog` sits between ``eval_policy`` and lerobot's vector env and keeps every action the env was given
and every ``is_success`` at episode end, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from lerobot.configs.policies import PreTrainedConfig
from lerobot.envs.factory import make_env, make_env_pre_post_processors
from lerobot.policies.factory import make_policy, make_pre_post_processors
from lerobot.scripts.lerobot_eval import eval_policy
from lerobot.utils.random_utils import set_seed


class _Robosuite14Controller:
    """robosuite 1.4's ``robot.controller`` as lerobot's LiberoEnv uses it, over robosuite 1.5's arm controller."""

    def __init__(self, arm: Any) -> None:
        self._arm = arm

    @property
    def ee_ori_mat(self) -> np.ndarray:
        return np.array(self._arm.ref_ori_mat)

    @property
    def use_delta(self) -> bool:
        return bool(self._arm.input_type == "delta")

    @use_delta.setter
    def use_delta(self, value: bool) -> None:
        self._arm.input_type = "delta" if value else "absolute"


def alias_robosuite14_controller() -> None:
    """Give robosuite 1.5 robots the ``controller`` attribute lerobot's LiberoEnv reads (see above)."""
    from robosuite.robots.robot import Robot

    if not hasattr(Robot, "controller"):
        Robot.controller = property(lambda self: _Robosuite14Controller(self.part_controllers["right"]))  # type: ignore[attr-defined]


@contextmanager
def as_on_robosuite_14(seeding: bool = True) -> Iterator[None]:
    """While open: lerobot's LiberoEnv meets robosuite 1.4's behaviour (module docstring): the ``controller`` alias
    always; with ``seeding`` also 1.4's ``ControlEnv.seed`` (numpy's global generator seeded) and 1.4's
    init-noise draws from that generator in ``Robot.reset``. ``seeding=False`` is lerobot's env on plain robosuite
    1.5. The patched methods are put back on exit."""
    from libero.libero.envs.env_wrapper import ControlEnv
    from robosuite.robots.robot import Robot

    alias_robosuite14_controller()
    if not seeding:
        yield
        return
    seed_15, reset_15 = ControlEnv.seed, Robot.reset

    def seed_14(self: Any, seed: Any) -> None:
        seed_15(self, seed)
        np.random.seed(seed)  # hf-libero envs/bddl_base_domain.py: def seed(self, seed): np.random.seed(seed)

    def reset_14(self: Any, deterministic: bool = False, *args: Any, **kwargs: Any) -> Any:
        if not deterministic:  # robosuite 1.4.0 robots/robot.py Robot.reset: the noise's draw
            n = len(self.init_qpos)
            if self.initialization_noise["type"] == "uniform":
                np.random.uniform(-1.0, 1.0, n)
            else:
                np.random.randn(n)
        return reset_15(self, deterministic, *args, **kwargs)

    ControlEnv.seed, Robot.reset = seed_14, reset_14  # type: ignore[method-assign]
    try:
        yield
    finally:
        ControlEnv.seed, Robot.reset = seed_15, reset_15  # type: ignore[method-assign]


def use_libero_config() -> bool:
    """Point LIBERO at this venv's config (``lerobot_eval_setup.sh`` writes it beside rollbench's LIBERO assets) and
    offscreen GL; False when lerobot's LIBERO side is not installed here."""
    import os
    import sys

    config = Path(sys.executable).parents[1] / "share" / "libero"
    if not (config / "config.yaml").exists():
        return False
    os.environ["LIBERO_CONFIG_PATH"] = str(config)
    os.environ.setdefault("MUJOCO_GL", "egl")
    return True


class ActionLog(gym.vector.VectorWrapper):
    """Forwards a one-env ``SyncVectorEnv`` unchanged; ``episodes[-1]["actions"]`` holds the running episode's
    actions (``float32 (action_dim,)`` each), up to the step where the env terminated or truncated it."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self.episodes: list[dict[str, Any]] = []

    @property
    def envs(self) -> list[gym.Env]:  # read by lerobot's rollout (add_envs_task)
        return self.env.envs  # type: ignore[attr-defined,no-any-return]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.env.call(name, *args, **kwargs)

    def reset(self, **kwargs: Any) -> Any:
        self.episodes.append({"actions": [], "success": None})
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        ep = self.episodes[-1]
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if ep["success"] is None:
            ep["actions"].append(np.array(actions[0], dtype=np.float32))
            if terminated[0] or truncated[0]:
                ep["success"] = bool(info["final_info"]["is_success"][0])
        return obs, reward, terminated, truncated, info


def reference_episodes(
    checkpoint: Path, env_cfg: Any, seeds: list[int], init_states: list[int] | None = None
) -> list[dict[str, Any]]:
    """One dict per seed: ``actions`` ``float32 (T, action_dim)`` as the env received them, and ``success`` as
    ``eval_policy`` reports it (its ``per_episode`` row)."""
    cfg = PreTrainedConfig.from_pretrained(str(checkpoint))
    cfg.pretrained_path = str(checkpoint)
    cfg.device = "cpu"
    policy = make_policy(cfg=cfg, env_cfg=env_cfg)
    policy.eval()
    pre, post = make_pre_post_processors(
        policy_cfg=cfg,
        pretrained_path=cfg.pretrained_path,
        preprocessor_overrides={
            "device_processor": {"device": str(policy.config.device)},
            "rename_observations_processor": {"rename_map": {}},
        },
    )
    env_pre, env_post = make_env_pre_post_processors(env_cfg=env_cfg, policy_cfg=cfg)
    envs = make_env(env_cfg, n_envs=1)
    vec = next(iter(next(iter(envs.values())).values()))
    logged = ActionLog(vec)
    out = []
    try:
        for k, seed in enumerate(seeds):
            if init_states is not None:
                vec.envs[0].unwrapped.init_state_id = init_states[k]
            set_seed(seed)
            with torch.no_grad():
                info = eval_policy(logged, policy, env_pre, env_post, pre, post, n_episodes=1, start_seed=seed)  # type: ignore[arg-type]
            (row,) = info["per_episode"]
            assert row["seed"] == seed
            out.append({"actions": np.stack(logged.episodes[-1]["actions"]), "success": bool(row["success"])})
    finally:
        vec.close()
    return out
