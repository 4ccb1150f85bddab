"""The ``hostedgym`` family: any gymnasium env, run in the user's own interpreter through the env host
(docs/env-host.md), so its pins (gymnasium, numpy, the env's packages) never meet rollbench's.

Names: ``--env hostedgym:PYTHON:ID``, e.g. ``hostedgym:/home/me/venv/bin/python:CartPole-v1``; ``PYTHON`` is the
interpreter of a venv with gymnasium (and numpy) installed, ``ID`` a gymnasium id or gymnasium's own ``module:ID``
form (the far side imports ``module`` first). The canonical task name is ``hostedgym/PYTHON:ID``. The interpreter
is one the user typed: a name received over a wire is refused (:meth:`HostedGymFamily.registered`), and a resumed
run whose run.json names one runs it only when it is typed again or with ``--trust-run`` (:meth:`names_code`).

The far side (:mod:`rollbench.envs.hosted.far.gym_far`) probes the env once per process: a flat ``Box`` action
space with finite bounds, or ``Discrete(n, start)`` as one action dim in ``[start, start + n - 1]`` rounded to the
nearest integer; ``state`` = ``gymnasium.spaces.flatten`` of the observation, ``float32 (state_dim,)``; horizon
the env's TimeLimit, else 1000; fps ``render_fps``, else ``1 / dt``, else 10; camera ``render`` when the env
renders ``rgb_array`` (resized to the run's image size by nearest neighbour where the env takes no width/height).
Success (rule ``any_step``) is the step info's ``is_success``/``success``, as for the ``gym`` family; an env that
reports neither (CartPole, Pendulum) is never successful, and the run says so (:meth:`run_warnings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, Observation, StepResult, TaskInfo
from rollbench.core.family import EnvFamily, EnvOptions, ServedLayout
from rollbench.envs.gym import DEFAULT_MAX_STEPS, RENDER_CAMERA, resize_nearest
from rollbench.envs.hosted.remote import EnvHost, open_host, release_host, venv_versions

NAME = "hostedgym"
ADAPTER = "gym_far"
FAR_DISTS = ("gymnasium", "numpy")


def parse(name: str) -> tuple[str, str]:
    """``hostedgym:PYTHON:ID`` or ``hostedgym/PYTHON:ID`` -> ``(PYTHON, ID)``; ConfigError naming the form unless
    ``PYTHON`` is an existing file and ``ID`` is given."""
    form = f"{NAME}:PYTHON:ID, e.g. {NAME}:/path/to/venv/bin/python:CartPole-v1"
    rest = name[len(NAME) + 1 :] if name[: len(NAME) + 1] in (f"{NAME}:", f"{NAME}/") else ""
    python, _, env_id = rest.partition(":")
    if not python or not env_id:
        raise ConfigError(f"{name!r} is not a hosted gymnasium env; write {form}")
    if not Path(python).expanduser().is_file():
        raise ConfigError(f"{name!r}: interpreter {python!r} does not exist; write {form}")
    return str(Path(python).expanduser()), env_id


def _host(python: str, env_id: str) -> EnvHost:
    return open_host(f"{NAME} env host ({env_id})", python, ADAPTER, ["--env-id", env_id], {}, reuse=True)


class HostedGymEnv:
    """:class:`rollbench.core.contracts.Env` over a gymnasium env in its own interpreter; every call is one
    env-host call (an error there is the episode's ``environment`` fault)."""

    def __init__(self, task: TaskInfo, options: EnvOptions, python: str, env_id: str) -> None:
        self.task, self.image_size, self.cameras = task, options.image_size, tuple(options.cameras)
        for cam in self.cameras:
            if cam not in task.cameras:
                raise ConfigError(f"{task.name} has no camera {cam!r}; its cameras: {list(task.cameras)}")
        self.host = _host(python, env_id)
        try:
            self.host.call("make", render=bool(self.cameras), image_size=list(self.image_size))
        except EpisodeError as exc:
            release_host(self.host, reuse=False)
            raise ConfigError(f"cannot build {task.name}: {exc}") from None
        self._success, self._image = False, np.zeros((0, 0, 3), dtype=np.uint8)

    def _observe(self, reply: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Observation:
        self._success = bool(reply.get("success"))
        self._image = arrays.get("image", self._image)
        return Observation(state=np.asarray(arrays["state"], dtype=np.float32))

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        if initial_state is not None:
            raise ConfigError(f"{self.task.name} has no stored initial states (got initial_state={initial_state})")
        return self._observe(*self.host.call("reset", seed=int(seed)))

    def step(self, action: np.ndarray) -> StepResult:
        reply, arrays = self.host.call("step", {"action": np.asarray(action, dtype=np.float64)})
        obs = self._observe(reply, arrays)
        info = reply.get("info")
        return StepResult(
            obs,
            reward=float(reply.get("reward", 0.0)),
            terminated=bool(reply.get("terminated")),
            truncated=bool(reply.get("truncated")),
            success=self._success,
            info=info if isinstance(info, dict) else {},
        )

    def success(self) -> bool:
        return self._success

    def render(self, camera: str) -> np.ndarray:
        if camera not in self.cameras:
            raise ValueError(f"camera {camera!r} was not requested when {self.task.name} was built (EnvOptions)")
        if self._image.ndim != 3 or self._image.shape[2] != 3 or not self._image.size:
            raise RuntimeError(f"{self.task.name}: render returned shape {self._image.shape}, expected (H, W, 3)")
        return np.ascontiguousarray(resize_nearest(self._image, self.image_size), dtype=np.uint8)

    def close(self) -> None:
        release_host(self.host, reuse=True)


class HostedGymFamily(EnvFamily):
    inline = True  # calls go to an env host, which has deadlines of its own (EnvFamily.inline)
    name = NAME
    description = (
        "any gymnasium env in your own interpreter, through the env host: --env hostedgym:PYTHON:ID "
        "(PYTHON: a venv's python with gymnasium; ID: a gymnasium id or MODULE:ID)"
    )
    renderer = "the env's own render() (rgb_array) in the user's interpreter"
    served = ServedLayout(main_camera=RENDER_CAMERA)

    def __init__(self) -> None:
        self._tasks: dict[str, TaskInfo] = {}
        self._no_success: set[str] = set()  # probed tasks whose env reports no success key

    def missing(self) -> str | None:
        return None  # the interpreter is named per task; a missing one is refused by task()

    def tasks(self) -> Sequence[TaskInfo]:
        return list(self._tasks.values())  # open-ended: those named in this process

    def suites(self) -> Mapping[str, Sequence[str]]:
        return {}

    def registered(self, name: str) -> bool:
        raise ConfigError(
            f"{name!r} names an interpreter to run; a hosted gymnasium env is a command-line feature only, never "
            "a task received over the network"
        )

    def names_code(self, name: str) -> bool:
        return True  # every name runs the interpreter it gives

    def task(self, name: str) -> TaskInfo:
        python, env_id = parse(name)
        canonical = f"{NAME}/{python}:{env_id}"
        if canonical not in self._tasks:
            self._tasks[canonical] = self._probe(canonical, python, env_id)
        return self._tasks[canonical]

    def _probe(self, canonical: str, python: str, env_id: str) -> TaskInfo:
        host = _host(python, env_id)
        try:
            probe, _ = host.call("probe")
        except EpisodeError as exc:
            release_host(host, reuse=False)
            raise ConfigError(f"gymnasium env {env_id!r} in {python}: {exc}") from None
        release_host(host, reuse=True)  # kept for the run's first env in this process
        if probe.get("success_key") is None:
            self._no_success.add(canonical)
        action = probe["action"]
        return TaskInfo(
            name=canonical,
            instruction="",
            has_instruction=False,
            max_steps=int(probe.get("max_episode_steps") or DEFAULT_MAX_STEPS),
            cameras=(RENDER_CAMERA,) if probe.get("render") else (),
            success_rule="any_step",
            action_dim=len(action["low"]),
            state_dim=int(probe["state_dim"]),
            action_low=tuple(float(x) for x in action["low"]),
            action_high=tuple(float(x) for x in action["high"]),
            fps=int(probe["fps"]),
            source=f"gymnasium {env_id!r} probed in {python} (spaces, TimeLimit, render_fps; {action['kind']} actions)"
            f"; success from step info {probe.get('success_key') or '(none reported)'}",
        )

    def make(self, task: TaskInfo, options: EnvOptions) -> HostedGymEnv:
        python, env_id = parse(task.name)
        return HostedGymEnv(task, options, python, env_id)

    def run_warnings(self, spec: Any) -> list[str]:
        named = {
            self.task(n.strip()).name for n in spec.env.split(",") if n.strip().startswith((f"{NAME}:", f"{NAME}/"))
        }
        return [
            f"{t} reports no success signal (its step info has neither is_success nor success): every episode "
            "counts as not successful; its rewards are recorded"
            for t in sorted(named & self._no_success)
        ]

    def provenance(self) -> dict[str, Any]:
        pythons = sorted({parse(t)[0] for t in self._tasks})
        return {
            "interpreter_boundary": "env host (docs/env-host.md): a separate Python process over pipes",
            "interpreters": {p: venv_versions(p, FAR_DISTS) for p in pythons},
        }


FAMILY = HostedGymFamily()
