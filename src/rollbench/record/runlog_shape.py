"""The shape every reader requires of a run log (``run.json``) before it reads anything else from it: what
:func:`rollbench.record.runlog.read_run_log` checks, one ConfigError line naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rollbench.core.contracts import ConfigError
from rollbench.core.format import error_location, quoted
from rollbench.core.runlog_model import PerturbationRecord


def check_run_log(log: Any, path: Path) -> None:
    """ConfigError unless ``log`` has the shape rollbench writes: an object with ``spec`` (object) and ``plan``
    (object with ``episodes``, a list of objects with ``episode_index``, as many as its ``episodes_requested`` when
    present, and ``tasks``, a list of objects with ``name``)."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{path} is not a rollbench run log: {why}")

    if not isinstance(log, dict):
        raise bad(f"it holds a JSON {type(log).__name__}, not an object")
    for key in ("spec", "plan"):
        if not isinstance(log.get(key), dict):
            raise bad(f"it has no {key!r} object")
    for key in ("provenance", "identity", "results"):  # readers take fields from them: an object or absent
        if log.get(key) is not None and not isinstance(log[key], dict):
            raise bad(f"its {key!r} is a JSON {type(log[key]).__name__}, not an object")
    if log["plan"].get("policy") is not None and not isinstance(log["plan"]["policy"], dict):
        raise bad(f"its plan.policy is a JSON {type(log['plan']['policy']).__name__}, not an object")
    plan = log["plan"]
    episodes, tasks = plan.get("episodes"), plan.get("tasks")
    if not isinstance(episodes, list) or not all(isinstance(e, dict) and "episode_index" in e for e in episodes):
        raise bad("its plan has no list of episodes")
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tasks):
        raise bad("its plan has no list of tasks")
    indices = [e["episode_index"] for e in episodes]
    if not all(type(i) is int and i >= 0 for i in indices):
        i = next(k for k, v in enumerate(indices) if type(v) is not int or v < 0)
        raise bad(
            f"its plan.episodes[{i}].episode_index is {quoted(indices[i], as_text=True)}, not a non-negative integer"
        )
    if len(set(indices)) != len(indices):
        raise bad("its plan.episodes repeat an episode_index")
    if "episodes_requested" in plan and plan["episodes_requested"] != len(episodes):
        shown = quoted(plan["episodes_requested"], as_text=True)
        raise bad(f"its plan.episodes_requested is {shown} but plan.episodes lists {len(episodes)}")
    for where, entries in (("plan.episodes", episodes), ("plan.tasks", tasks)):
        for i, entry in enumerate(entries):
            if entry.get("perturbation") is not None:
                _check_perturbation(entry["perturbation"], f"{where}[{i}].perturbation", bad)
    if not isinstance(log.get("executions", []), list) or not all(
        isinstance(x, dict) for x in log.get("executions", [])
    ):
        raise bad("its 'executions' is not a list of objects")


def _check_perturbation(block: Any, where: str, bad: Any) -> None:
    """ConfigError (``bad``) naming the field of a perturbation record that is not what the run log model
    (:class:`rollbench.core.runlog_model.PerturbationRecord`) allows: what a robustness study pairs and groups by."""
    try:
        record = PerturbationRecord.model_validate(block)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = error_location(err["loc"])
        if err["type"] == "missing":
            raise bad(f"its {where} has no {field}") from None
        raise bad(
            f"its {where}{'.' + field if field else ''} is {quoted(str(err.get('input')))}: {err['msg']}"
        ) from None
    if record.level is not None and not math.isfinite(record.level):
        raise bad(f"its {where}.level is {record.level}, not a finite number")


__all__ = ["check_run_log"]
