"""What ``list_envs`` returns to a model: short by default, detail on request.

The full table (every family's every task with horizon, cameras, success rule and instruction) is about 79,000
characters, all of which would land in a model's context. So:

* no arguments: one row per family: name, one-line description, installed (and why not), task count, suite names;
* ``family="metaworld"``: that family's tasks, one line each (name and instruction), and its suites with their
  task counts;
* ``detail=True``: the full rows (:class:`rollbench.mcp.results.EnvFamilyRow`) of the family asked for (all
  families when none is named).

An unknown family is a tool error naming the valid ones. Rows come from :func:`rollbench.core.registry.list_envs`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rollbench.core.contracts import ConfigError

MAX_DESCRIPTION = 160  # characters of a family's description shown in the short form


class FamilySummary(BaseModel):
    family: str
    description: str
    installed: bool
    missing: str | None
    tasks: int
    suites: list[str]


class TaskLine(BaseModel):
    name: str
    instruction: str | None


class FamilyTasks(BaseModel):
    family: str
    description: str
    installed: bool
    missing: str | None
    suites: dict[str, int]
    tasks: list[TaskLine]


def _one_line(text: str) -> str:
    first = text.split(". ")[0].strip().rstrip(".")
    return first if len(first) <= MAX_DESCRIPTION else first[: MAX_DESCRIPTION - 1] + "…"


def env_listing(rows: list[dict[str, Any]], family: str | None, detail: bool) -> list[dict[str, Any]]:
    """The ``list_envs`` answer for ``family`` (None: every family) at the asked level of detail (see the module
    docstring); raises ConfigError for an unknown family, naming the valid ones."""
    if family is not None:
        chosen = [r for r in rows if r["family"] == family]
        if not chosen:
            raise ConfigError(f"unknown env family {family!r}; valid families: {', '.join(r['family'] for r in rows)}")
        rows = chosen
    if detail:
        return rows
    if family is None:
        return [
            FamilySummary(
                family=r["family"],
                description=_one_line(r["description"]),
                installed=r["installed"],
                missing=r["missing"],
                tasks=len(r["tasks"]),
                suites=sorted(f"{r['family']}/{s}" for s in r["suites"]),
            ).model_dump()
            for r in rows
        ]
    (r,) = rows
    return [
        FamilyTasks(
            family=r["family"],
            description=_one_line(r["description"]),
            installed=r["installed"],
            missing=r["missing"],
            suites={f"{r['family']}/{s}": len(v) for s, v in r["suites"].items()},
            tasks=[TaskLine(name=t["name"], instruction=t["instruction"]) for t in r["tasks"]],
        ).model_dump()
    ]
