"""Optional base class for env families whose tasks are a fixed table (every family but ``gym``)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from typing import ClassVar

from rollbench.core.contracts import TaskInfo
from rollbench.core.family import EnvFamily
from rollbench.core.registry import unknown_name_error


class TableFamily(EnvFamily):
    """Implements ``missing``, ``tasks``, ``suites`` and ``task`` of :class:`rollbench.core.registry.EnvFamily` from data;
    subclasses set the class attributes and write ``make``.

    Attributes:
        requires: importable module names the simulator needs (checked with ``find_spec``: nothing is imported).
        install_hint: what to run when one is missing, e.g. ``pip install 'rollbench[fetch]'``.
    """

    requires: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""

    def __init__(self, tasks: Mapping[str, TaskInfo], suites: Mapping[str, Sequence[str]]) -> None:
        self._tasks = dict(tasks)
        self._suites = {k: list(v) for k, v in suites.items()}

    def missing(self) -> str | None:
        absent = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if absent:
            return f"{', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed: {self.install_hint}"
        return None

    def tasks(self) -> Sequence[TaskInfo]:
        return list(self._tasks.values())

    def suites(self) -> Mapping[str, Sequence[str]]:
        return self._suites

    def task(self, name: str) -> TaskInfo:
        if name not in self._tasks:
            suites = [f"{self.name}/{s}" for s in self._suites]
            raise unknown_name_error(
                "task or suite", name, [*suites, *self._tasks], "tasks and suites", f"`rollbench envs {self.name}`"
            )
        return self._tasks[name]
