"""The env family contract (:class:`EnvFamily`): what every family must provide, and the facts and hooks it may
declare, each with a default. Every fact rollbench needs about a family is asked of the family itself, never
looked up by its name elsewhere (``tests/test_family_facts.py`` checks that no family name is spelled outside
``rollbench.envs``).

A plug-in family subclasses :class:`EnvFamily` (``rollbench.EnvFamily``) and overrides what it needs; a family
written against the older duck-typed contract (no subclass) still loads: :func:`adopt` gives it the declared
defaults for what it does not define.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from rollbench.core.contracts import Env, TaskInfo


@dataclass(frozen=True)
class EnvOptions:
    """How to build an env: which cameras to render and at what size (pixels, ``(height, width)``); ``fast_render``
    turns reflections and shadows off where the family supports it (LIBERO)."""

    cameras: tuple[str, ...] = ()
    image_size: tuple[int, int] = (224, 224)
    fast_render: bool = False


@dataclass(frozen=True)
class ServedLayout:
    """How a family's observation is laid out for a served policy (openpi-style websocket or HTTP, see
    :mod:`rollbench.wire.obs_map`): the camera sent as the main image and the one sent as the wrist image
    (None: none), which state is sent (``state``: ``observation.state``; ``raw``: the simulator's native
    observation when numeric) and the ``(height, width)`` images are resized to with padding (None: as rendered)."""

    main_camera: str | None = None
    wrist_camera: str | None = None
    state_source: Literal["state", "raw"] = "state"
    image_size: tuple[int, int] | None = None


@dataclass(frozen=True)
class ArmLayout:
    """An end-effector action layout, for the LLM agent's arm tools (:mod:`rollbench.policies.agent.tools`).

    Attributes:
        metres_per_unit: metres the hand moves per step for an action of 1 on a position dim.
        gripper_dim: the action dim of the gripper command (None: no gripper, a planar point).
        close: the gripper value that closes it (the opposite opens).
        position_slice: ``[lo, hi)`` of the hand position (metres, world frame) in ``observation.state``; the
            action's position dims are ``0 .. hi - lo``.
        goal_slice: ``[lo, hi)`` of a goal position in ``observation.state`` shown to the agent (None: none).
    """

    metres_per_unit: float
    gripper_dim: int | None
    close: float
    position_slice: tuple[int, int] = (0, 3)
    goal_slice: tuple[int, int] | None = None


MUJOCO_RENDERER = "mujoco (OpenGL, MUJOCO_GL)"


class EnvFamily(Protocol):
    """One simulator family (``rollbench envs`` lists them), registered under the ``rollbench.envs`` entry points.

    Required: ``name``, ``description``, :meth:`missing`, :meth:`tasks`, :meth:`suites`, :meth:`task`,
    :meth:`make`. Everything below them is optional, declared here with its default.
    """

    name: str
    description: str

    # -- facts, with defaults --
    robot: str = "unknown"
    """The embodiment every task uses (the run identity's default robot)."""
    renderer: str | None = None
    """What draws its images, recorded in run.json ``provenance.renderers`` (None: not recorded)."""
    offscreen_gl: bool = False
    """Renders through an offscreen OpenGL context chosen by ``MUJOCO_GL`` (in this process or, inheriting the
    variable, in its env host): the back-end is chosen before the run and recorded in ``provenance.gl``."""
    sim_packages: tuple[tuple[str, str], ...] = ()
    """``(key in run.json provenance.versions, distribution)`` of the simulator packages this process runs."""
    served: ServedLayout = ServedLayout()
    """Its observation's layout for a served policy (:mod:`rollbench.wire.obs_map`)."""
    arm: ArmLayout | None = None
    """Its end-effector action layout for the LLM agent's arm tools (None: the agent sets raw actions)."""
    inline: bool = False
    """True only for rollbench's own families (their adapter code and a pinned simulator, or an env host whose calls
    have deadlines of their own): their envs are called inline, with no deadline. False (the default: every plug-in
    family, and ``gym``, which runs a user's module): every call into their envs (build, reset, step, render,
    success, close) runs on a helper thread and waits at most the env deadline
    (:mod:`rollbench.run.env_deadline`, ``$ROLLBENCH_ENV_TIMEOUT_S``)."""

    def missing(self) -> str | None:
        """None when the simulator is importable here, else what is missing and how to install it."""
        ...

    def tasks(self) -> Sequence[TaskInfo]:
        """Every task of the family with its metadata; must not import the simulator."""
        ...

    def suites(self) -> Mapping[str, Sequence[str]]:
        """Suite name (without family prefix) -> full task names."""
        ...

    def task(self, name: str) -> TaskInfo:
        """Full task name -> TaskInfo. Raises ConfigError listing valid names when unknown."""
        ...

    def make(self, task: TaskInfo, options: EnvOptions) -> Env:
        """Build a live env for ``task``; may raise ConfigError when the simulator is missing."""
        ...

    # -- hooks, with defaults --
    def provenance(self) -> dict[str, Any] | None:
        """Facts recorded in run.json ``provenance.<family>`` (None: nothing)."""
        return None

    def run_warnings(self, spec: Any) -> list[str]:
        """Warnings about this family's set-up for a run of ``spec`` (an EvalSpec), shown and kept in run.json."""
        return []

    def refuse_options(self, task: TaskInfo, options: EnvOptions) -> str | None:
        """Why ``task`` cannot be built with ``options`` (exit 2 before anything runs), or None."""
        return None

    def registered(self, name: str) -> bool:
        """For an open-ended family (tasks not in a table, ``gym``): True when ``name``, received over a wire, is
        a task this process may build without importing anything, else ConfigError. False (the default): a
        table family, whose names are checked against :meth:`tasks` and :meth:`suites`."""
        return False

    def names_code(self, name: str) -> bool:
        """Whether task name ``name`` makes this family import a module or run an interpreter that the name itself
        gives (``gym:MODULE:ID``, ``hostedgym:PYTHON:ID``): a resumed run whose run.json holds such a name runs it
        only when the user types it again or passes ``--trust-run``. False (the default): nothing the name gives."""
        return False

    def variants(self) -> str:
        """A sentence appended to the family's description in listings (its variants), or ``""``."""
        return ""


OPTIONAL = (
    "robot", "renderer", "offscreen_gl", "sim_packages", "served", "arm", "inline",
    "provenance", "run_warnings", "refuse_options", "registered", "names_code", "variants",
)  # fmt: skip
"""The optional members of :class:`EnvFamily` (a family that does not define one gets the default)."""


class _Adopted(EnvFamily):
    """A family that does not subclass :class:`EnvFamily`: its own members, and the defaults for the rest."""

    def __init__(self, family: Any) -> None:
        self._family = family
        self.name, self.description = family.name, family.description
        for member in OPTIONAL:
            if hasattr(family, member):
                setattr(self, member, getattr(family, member))

    def missing(self) -> str | None:
        return self._family.missing()

    def tasks(self) -> Sequence[TaskInfo]:
        return self._family.tasks()

    def suites(self) -> Mapping[str, Sequence[str]]:
        return self._family.suites()

    def task(self, name: str) -> TaskInfo:
        return self._family.task(name)

    def make(self, task: TaskInfo, options: EnvOptions) -> Env:
        return self._family.make(task, options)


def adopt(family: Any) -> EnvFamily:
    """``family`` itself when it subclasses :class:`EnvFamily`, else a wrapper that gives it the declared defaults."""
    return family if EnvFamily in type(family).__mro__ else _Adopted(family)
