"""Env families and policies, found through the ``rollbench.envs`` and ``rollbench.policies`` entry points.

A plug-in package registers ``[project.entry-points."rollbench.envs"] myfamily = "pkg.module:FAMILY"`` (an
:class:`EnvFamily`) or ``[project.entry-points."rollbench.policies"] my-policy = "pkg.module:factory"`` (a
:data:`PolicyFactory`); nothing in the core changes. Heavy simulator imports happen only inside ``EnvFamily.make``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Protocol

from rollbench.types import ConfigError, Env, Policy, TaskInfo


@dataclass(frozen=True)
class EnvOptions:
    """How to build an env: which cameras to render and at what size (pixels, ``(height, width)``)."""

    cameras: tuple[str, ...] = ()
    image_size: tuple[int, int] = (224, 224)


class EnvFamily(Protocol):
    """One simulator family (``metaworld``, ``robosuite``, ``scripted``...)."""

    name: str
    description: str

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


PolicyFactory = Callable[[str, Mapping[str, Any]], Policy]
"""``factory(name, options) -> Policy``; ``name`` is what the user typed (a URL for remote policies)."""


def _close_matches(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.5)
    return f" Did you mean {', '.join(close)}?" if close else ""


def unknown_name_error(kind: str, name: str, valid: Sequence[str]) -> ConfigError:
    """A ConfigError naming the valid choices (all of them if few, else a count and the closest)."""
    shown = ", ".join(valid) if len(valid) <= 60 else ", ".join(valid[:60]) + f", ... ({len(valid)} in all)"
    return ConfigError(f"unknown {kind} {name!r}.{_close_matches(name, valid)} Valid {kind}s: {shown}")


@cache
def env_families() -> dict[str, EnvFamily]:
    """Family name -> EnvFamily, from the ``rollbench.envs`` entry points (sorted by name)."""
    out: dict[str, EnvFamily] = {}
    for ep in sorted(entry_points(group="rollbench.envs"), key=lambda e: e.name):
        out[ep.name] = ep.load()
    return out


@cache
def policy_factories() -> dict[str, PolicyFactory]:
    """Policy name (or URL scheme for remote policies) -> factory, from ``rollbench.policies`` entry points."""
    return {ep.name: ep.load() for ep in sorted(entry_points(group="rollbench.policies"), key=lambda e: e.name)}


def family_of(name: str) -> EnvFamily:
    families = env_families()
    fam = name.split("/", 1)[0] if "/" in name else name.split(":", 1)[0]
    if fam not in families:
        raise unknown_name_error("env family", fam, sorted(families))
    return families[fam]


def resolve_tasks(env: str) -> list[TaskInfo]:
    """Resolve ``--env``: a task (``metaworld/reach-v3``), a suite (``metaworld/MT10``) or a comma-separated list.

    Returns the tasks in the order given (suite order for suites), without duplicates.
    Raises ConfigError naming the valid tasks and suites when a name is unknown.
    """
    names = [n.strip() for n in env.split(",") if n.strip()]
    if not names:
        raise ConfigError("--env is empty; give a task such as metaworld/pick-place-v3 (see `rollbench envs`)")
    out: list[TaskInfo] = []
    for name in names:
        fam = family_of(name)
        suite = name.split("/", 1)[1] if "/" in name else ""
        suites = fam.suites()
        if suite in suites:
            out.extend(fam.task(t) for t in suites[suite])
        else:
            out.append(fam.task(name))
    seen: set[str] = set()
    unique = [t for t in out if not (t.name in seen or seen.add(t.name))]  # type: ignore[func-returns-value]
    return unique


def make_env(task: TaskInfo, options: EnvOptions) -> Env:
    fam = family_of(task.name)
    why = fam.missing()
    if why:
        raise ConfigError(f"cannot build {task.name}: {why}")
    return fam.make(task, options)


def policy_factory(name: str) -> PolicyFactory:
    """The factory for ``name``: an exact registered name, or a URL whose scheme is registered (``ws://...``)."""
    factories = policy_factories()
    key = name.split("://", 1)[0] if "://" in name else name
    if key not in factories:
        valid = sorted(k for k in factories if k not in ("ws", "http", "https"))
        schemes = sorted(k + "://HOST:PORT" for k in factories if k in ("ws", "http", "https"))
        raise unknown_name_error("policy", name, valid + schemes)
    return factories[key]


def make_policy(name: str, options: Mapping[str, Any] | None = None) -> Policy:
    return policy_factory(name)(name, dict(options or {}))
