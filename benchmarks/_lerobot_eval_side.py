"""lerobot's side of ``bench_lerobot_eval.py``: the PushT controller through lerobot 0.4.4's own evaluation loop.

Run with ``.venv-lerobot/bin/python`` (``scripts/lerobot_eval_setup.sh``), never from rollbench's venv. Prints one
JSON document on stdout (everything else goes to stderr)::

    python benchmarks/_lerobot_eval_side.py --episodes 20 --seed 0 --batch-size 1

What runs is lerobot's code, unchanged: ``lerobot.envs.factory.make_env`` with lerobot's ``PushtEnv`` config
(``gym_pusht/PushT-v0``, ``episode_length=300``, a ``SyncVectorEnv`` of ``--batch-size`` envs with gymnasium's
``SAME_STEP`` autoreset), the env pre/post-processors of ``make_env_pre_post_processors`` (identity for PushT), and
``lerobot.scripts.lerobot_eval.eval_policy`` with ``start_seed=--seed`` (episode ``i`` of the run starts from seed
``seed + i``, as rollbench's trial ``i``). The policy is :class:`PushTControllerPolicy`, a minimal
``PreTrainedPolicy`` around ``_pusht_controller.act`` with identity pre/post-processors (no normalization, no weights).

Observation: lerobot's PushT config offers pixels or ``environment_state_agent_pos`` (agent position and the T's 8
keypoints), not the block pose the controller takes. ``obs_type="environment_state_agent_pos"`` is used (no
rendering, as on rollbench's side); the policy takes the agent position from lerobot's ``observation.state`` and
reads the block pose from its vector-env slot's simulator, after checking that the keypoints lerobot observed are
exactly the ones gym-pusht computes from that pose (so it is the state the observation was made from). The
controller then sees the same ``float32 (5,)`` state as on rollbench's side.

Output fields:

* ``per_episode``: ``eval_policy``'s own rows (``episode_ix``, ``seed``, ``success``, ``sum_reward``,
  ``max_reward``): what lerobot reports.
* ``env_episodes``: the same episodes as the envs played them, logged step by step by :class:`StepLog` (a vector
  wrapper between ``eval_policy`` and lerobot's vector env): ``seed``, ``success`` (gym-pusht's ``is_success`` at the
  episode's last step), ``length`` (steps up to and including the first ``terminated or truncated``), ``return``,
  ``max_reward``, ``next_step_reward`` (the slot's reward at the step after the episode ended, the first step of
  its auto-reset episode; null when the rollout ended with it), and ``actions`` (``float32`` ``(length, 2)`` as lists).
* ``timing``: seconds: ``import_s`` (process start to lerobot imported), ``make_env_s``, ``eval_s`` (the
  ``eval_policy`` call), ``lerobot_eval_s`` (``eval_policy``'s own ``aggregated.eval_s``), ``total_s``.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the hub; make sure nothing reaches it

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from gym_pusht.envs.pusht import PushTEnv as GymPushT  # noqa: E402
from lerobot.configs.policies import PreTrainedConfig  # noqa: E402
from lerobot.envs.configs import PushtEnv  # noqa: E402
from lerobot.envs.factory import make_env, make_env_pre_post_processors  # noqa: E402
from lerobot.policies.pretrained import PreTrainedPolicy  # noqa: E402
from lerobot.processor import PolicyProcessorPipeline  # noqa: E402
from lerobot.processor.converters import policy_action_to_transition, transition_to_policy_action  # noqa: E402
from lerobot.scripts.lerobot_eval import eval_policy  # noqa: E402
from lerobot.utils.constants import OBS_ENV_STATE, OBS_STATE  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _pusht_controller  # noqa: E402

T_IMPORTED = time.perf_counter()


@PreTrainedConfig.register_subclass("rollbench_pusht_controller")
@dataclass
class PushTControllerConfig(PreTrainedConfig):
    """Config of :class:`PushTControllerPolicy`: nothing to configure, no optimizer, no features to validate."""

    @property
    def observation_delta_indices(self) -> None:
        return None

    @property
    def action_delta_indices(self) -> None:
        return None

    @property
    def reward_delta_indices(self) -> None:
        return None

    def get_optimizer_preset(self) -> Any:
        raise NotImplementedError("a scripted controller is not trained")

    def get_scheduler_preset(self) -> None:
        return None

    def validate_features(self) -> None:
        pass


class PushTControllerPolicy(PreTrainedPolicy):
    """``_pusht_controller.act`` as a lerobot policy; ``select_action`` returns ``float32 (B, 2)`` agent targets.

    ``vector_env`` is the ``SyncVectorEnv`` the policy drives (slot ``i`` of the batch is ``vector_env.envs[i]``).
    Every action is also appended to :attr:`actions` (``float32 (B, 2)`` per call) for the step-by-step comparison.
    """

    config_class = PushTControllerConfig
    name = "rollbench_pusht_controller"

    def __init__(self, config: PushTControllerConfig, vector_env: gym.vector.SyncVectorEnv) -> None:
        super().__init__(config)
        self._slots = [e.unwrapped for e in vector_env.envs]
        self.actions: list[np.ndarray] = []

    def get_optim_params(self) -> dict[str, Any]:
        return {}

    def reset(self) -> None:
        pass  # the controller keeps no state

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict | None]:
        raise NotImplementedError("a scripted controller has no training loss")

    def predict_action_chunk(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> torch.Tensor:
        return self.select_action(batch)[:, None, :]

    def select_action(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> torch.Tensor:
        agent = batch[OBS_STATE].numpy()  # float32 (B, 2): lerobot's agent_pos
        keypoints = batch[OBS_ENV_STATE].numpy()  # float32 (B, 16)
        out = np.empty((len(self._slots), 2), dtype=np.float32)
        for i, sim in enumerate(self._slots):
            seen = GymPushT.get_keypoints(sim._block_shapes).flatten().astype(np.float32)
            if not np.array_equal(seen, keypoints[i]) or not np.array_equal(
                np.asarray(sim.agent.position, dtype=np.float32), agent[i]
            ):
                raise RuntimeError(f"slot {i}: the simulator is not in the state lerobot observed")
            pose = [sim.block.position[0], sim.block.position[1], sim.block.angle % (2 * np.pi)]
            state = np.concatenate([agent[i], np.asarray(pose, dtype=np.float64).astype(np.float32)])
            out[i] = _pusht_controller.act(state)
        self.actions.append(out.copy())
        return torch.from_numpy(out)


class StepLog(gym.vector.VectorWrapper):
    """Forwards a ``SyncVectorEnv`` unchanged and logs every step: ``rewards``, ``terminated``, ``truncated`` and
    ``success`` (gym-pusht's ``is_success`` of the slots whose episode ended at that step), ``(B,)`` per step."""

    def __init__(self, env: gym.vector.SyncVectorEnv) -> None:
        super().__init__(env)
        self.steps: list[dict[str, np.ndarray]] = []

    @property
    def envs(self) -> list[gym.Env]:  # read by lerobot's rollout (add_envs_task, check_env_attributes_and_types)
        return self.env.envs  # type: ignore[attr-defined,no-any-return]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return self.env.call(name, *args, **kwargs)  # type: ignore[attr-defined,no-any-return]

    def reset(self, **kwargs: Any) -> Any:
        self.steps.append({"reset": np.ones(self.num_envs, dtype=bool)})
        return self.env.reset(**kwargs)

    def step(self, actions: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        success = np.zeros(self.num_envs, dtype=bool)
        if "final_info" in info:
            ended = info["_final_info"]
            success[ended] = np.asarray(info["final_info"]["is_success"], dtype=bool)[ended]
        self.steps.append(
            {
                "reward": np.asarray(reward, dtype=np.float64),
                "terminated": terminated,
                "truncated": truncated,
                "success": success,
            }
        )
        return obs, reward, terminated, truncated, info


def first_episodes(log: list[dict[str, np.ndarray]], actions: list[np.ndarray], seeds: list[int]) -> list[dict]:
    """Each rollout's seeded episodes (the first episode of every slot after each ``reset``), from the step log."""
    episodes = []
    starts = [k for k, row in enumerate(log) if "reset" in row] + [len(log)]
    n_call = 0
    for r in range(len(starts) - 1):
        rows = log[starts[r] + 1 : starts[r + 1]]
        calls = actions[n_call : n_call + len(rows)]
        n_call += len(rows)
        for i in range(len(rows[0]["reward"])):
            end = next(t for t, row in enumerate(rows) if row["terminated"][i] or row["truncated"][i])
            rewards = [float(row["reward"][i]) for row in rows[: end + 1]]
            after = float(rows[end + 1]["reward"][i]) if end + 1 < len(rows) else None
            episodes.append(
                {
                    "seed": seeds[len(episodes)],
                    "success": bool(rows[end]["success"][i]),
                    "length": end + 1,
                    "return": float(np.sum(rewards)),
                    "max_reward": float(np.max(rewards)),
                    "next_step_reward": after,
                    "actions": [c[i].tolist() for c in calls[: end + 1]],
                }
            )
    return episodes


def evaluate(episodes: int, seed: int, batch_size: int, actions: bool = True) -> dict[str, Any]:
    """Run lerobot's ``eval_policy`` as described in the module docstring; returns the document ``main`` prints."""
    t0 = time.perf_counter()
    env_cfg = PushtEnv(obs_type="environment_state_agent_pos")
    vec = make_env(env_cfg, n_envs=batch_size)["pusht"][0]
    logged = StepLog(vec)
    policy = PushTControllerPolicy(PushTControllerConfig(device="cpu"), vec)
    env_pre, env_post = make_env_pre_post_processors(env_cfg, policy.config)
    pre = PolicyProcessorPipeline(steps=[])
    post = PolicyProcessorPipeline(
        steps=[], to_transition=policy_action_to_transition, to_output=transition_to_policy_action
    )
    t1 = time.perf_counter()
    with torch.no_grad():
        info = eval_policy(
            env=logged,  # type: ignore[arg-type]
            policy=policy,
            env_preprocessor=env_pre,
            env_postprocessor=env_post,
            preprocessor=pre,
            postprocessor=post,
            n_episodes=episodes,
            start_seed=seed,
        )
    t2 = time.perf_counter()
    vec.close()

    n_slots = -(-episodes // batch_size) * batch_size
    played = first_episodes(logged.steps, policy.actions, list(range(seed, seed + n_slots)))[:episodes]
    if not actions:
        for e in played:
            del e["actions"]
    return {
        "lerobot_version": __import__("lerobot").__version__,
        "per_episode": info["per_episode"],
        "env_episodes": played,
        "timing": {
            "import_s": T_IMPORTED - T_START,
            "make_env_s": t1 - t0,
            "eval_s": t2 - t1,
            "lerobot_eval_s": info["aggregated"]["eval_s"],
            "total_s": time.perf_counter() - T_START,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=1, help="envs in lerobot's SyncVectorEnv")
    parser.add_argument("--no-actions", action="store_true", help="leave the per-step actions out of the output")
    args = parser.parse_args()
    json.dump(evaluate(args.episodes, args.seed, args.batch_size, actions=not args.no_actions), sys.stdout)


if __name__ == "__main__":
    main()
