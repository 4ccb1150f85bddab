"""``metaworld-expert``: MetaWorld's own hand-written scripted policies for ``metaworld/*`` tasks.

Source: ``metaworld.policies`` (metaworld 3.1.1), the ``Sawyer*V3Policy`` classes, looked up by env name in
``metaworld.policies.ENV_POLICY_MAP``. They are stateless functions of the observation: each parses the
``float64 (39,)`` goal-observable MetaWorld observation (hand xyz, gripper, object poses, goal xyz) and returns
``float32 (4,)``: end-effector ``dx, dy, dz`` and gripper effort.

Actions are returned as a chunk ``float32 (1, 4)``, clipped to the task bounds ``[-1, 1]``. The upstream policies
sometimes exceed 1 (proportional gains); MetaWorld clips the xyz part itself and the gripper actuators have
``ctrlrange [-1, 1]``, so clipping here changes nothing in the simulation and keeps recorded actions in bounds.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import policy_options
from rollbench.envs.metaworld import FAMILY as METAWORLD

NAME = "metaworld-expert"


def _metaworld_version() -> str:
    try:
        return version(dict(METAWORLD.sim_packages)[METAWORLD.name])  # the family's own package
    except PackageNotFoundError:
        return "not installed"


def _policy_map() -> dict[str, Any]:
    """``env name -> Sawyer*V3Policy class`` from the installed metaworld."""
    from rollbench.core.gl import configure_offscreen_gl

    # Importing metaworld imports mujoco, which fixes its OpenGL back-end at import time; choose the offscreen
    # one first so an env built later in this process can still render. No GL at all only matters to rendering.
    with contextlib.suppress(ConfigError):
        configure_offscreen_gl()
    try:
        from metaworld.policies import ENV_POLICY_MAP
    except ImportError as exc:
        raise ConfigError(f"{NAME} needs MetaWorld: pip install 'rollbench[metaworld]' ({exc})") from exc
    # Upstream warns once that some gains push actions past [-1, 1]; act() clips them, so the warning is moot.
    warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high", category=UserWarning)
    return dict(ENV_POLICY_MAP)


class MetaWorldExpert:
    """Runs the upstream scripted expert of the current task.

    ``reset(task, seed)`` picks the policy class for ``task`` (``seed`` is unused: the experts are deterministic);
    ``act(observation, instruction)`` returns ``float32 (1, 4)`` from ``observation.raw`` (MetaWorld's own
    ``float64`` observation) or, when ``raw`` is absent (e.g. a recorded or remote observation), from
    ``observation.state``. The instruction is ignored.
    """

    def __init__(self, name: str = NAME) -> None:
        self.info = PolicyInfo(
            name=name,
            chunk_size=1,
            bounded=True,
            tasks=(f"{METAWORLD.name}/*",),
            provenance={"source": "metaworld.policies (Sawyer*V3Policy)", METAWORLD.name: _metaworld_version()},
        )
        self._policy: Any = None
        self._task = ""

    def reset(self, task: TaskInfo, seed: int) -> None:
        if task.family != METAWORLD.name:
            raise ConfigError(f"{NAME} only drives {METAWORLD.name}/* tasks, not {task.name}")
        env_name = task.name.split("/", 1)[1]
        policies = _policy_map()
        if env_name not in policies:
            have = ", ".join(f"{METAWORLD.name}/{n}" for n in sorted(policies))
            raise ConfigError(f"{NAME} has no expert for {task.name}; tasks with one: {have}")
        self._policy = policies[env_name]()
        self._task = task.name

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        if self._policy is None:
            raise RuntimeError(f"{NAME}: call reset(task, seed) before act()")
        source = observation.raw if observation.raw is not None else observation.state
        obs = np.asarray(source, dtype=np.float64).reshape(-1)
        if obs.shape != (39,):
            raise ValueError(f"{NAME} ({self._task}): expected a (39,) MetaWorld observation, got {obs.shape}")
        action = np.asarray(self._policy.get_action(obs), dtype=np.float32)
        return np.clip(action, -1.0, 1.0).reshape(1, 4)

    def close(self) -> None:
        self._policy = None


@policy_options()
def make_metaworld_expert(name: str, options: Mapping[str, Any]) -> MetaWorldExpert:
    """MetaWorld's own scripted expert for each of its 50 v3 tasks (metaworld.policies); state only."""
    return MetaWorldExpert(name)
