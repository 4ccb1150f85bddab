"""The stand-in for an env family whose plug-in could not be imported (:func:`rollbench.core.registry.env_family`):
listing and errors say why, and the other families stay usable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rollbench.core.contracts import ConfigError, Env, TaskInfo
from rollbench.core.family import EnvFamily


class BrokenFamily(EnvFamily):
    """Stands in for an env family whose entry point could not be imported, so listing and errors say why."""

    def __init__(self, name: str, why: str) -> None:
        self.name, self.description, self._why = name, why, why

    def missing(self) -> str | None:
        return self._why

    def tasks(self) -> Sequence[TaskInfo]:
        return []

    def suites(self) -> Mapping[str, Sequence[str]]:
        return {}

    def task(self, name: str) -> TaskInfo:
        raise ConfigError(f"env family {self.name!r} is unavailable: {self._why}")

    def make(self, task: TaskInfo, options: object) -> Env:
        raise ConfigError(f"env family {self.name!r} is unavailable: {self._why}")
