"""A suite's position typed as a task name (``SUITE/k``): refused naming the task at that position (one name per
task; LIBERO-Plus's category suites list instances named by their package suite)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rollbench.core.contracts import ConfigError
from rollbench.core.format import is_decimal


def refuse_suite_position(name: str, suite: str, suites: Mapping[str, Sequence[str]]) -> None:
    """ConfigError for ``SUITE/k`` when SUITE is a suite whose k-th task has another name (LIBERO-Plus's category
    suites list instances named by their package suite: ``liberoplus/libero_spatial_camera``'s first task is
    ``liberoplus/libero_spatial/608``): one name per task, and the message says which it is."""
    head, _, k = suite.rpartition("/")
    if head not in suites or not is_decimal(k):
        return
    members = list(suites[head])
    if f"{name.split('/', 1)[0]}/{suite}" in members:
        return
    where = f"its task {k} is {members[int(k)]}" if int(k) < len(members) else f"it has {len(members)} tasks"
    raise ConfigError(
        f"{name!r} is not a task name: {name.rsplit('/', 1)[0]} is a suite and {where} "
        f"(--env {name.rsplit('/', 1)[0]} runs the whole suite; `rollbench envs` lists the names)"
    )
