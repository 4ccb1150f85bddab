"""The shape every reader requires of a run log (``run.json``) before it reads anything else from it: what
:func:`rollbench.record.runlog.read_run_log` checks, one ConfigError line naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rollbench.core.contracts import ConfigError
from rollbench.core.format import described, error_location, error_message, quoted
from rollbench.core.runlog_model import PerturbationRecord, RunLog


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
    _check_controls(episodes, bad)
    if not isinstance(log.get("executions", []), list) or not all(
        isinstance(x, dict) for x in log.get("executions", [])
    ):
        raise bad("its 'executions' is not a list of objects")


def plan_problems(log: RunLog) -> list[str]:
    """What makes a well-shaped run log one that cannot be what rollbench recorded, each a violation in plain
    words (``grade`` lists them, ``runs`` marks the run damaged, ``summarize``/``report`` refuse the run or, with
    ``--allow-damaged``, mark it): a recorded identity whose host or robot is not an identity segment
    (:func:`rollbench.core.identity.check_segment`: ``vm/../x``, ``..``, ``a b``), a plan that names no task, and
    planned episodes of a task the plan does not list (the first named, with how many). Empty for a sound log."""
    return identity_problems(log) + _task_problems(log)


def identity_problems(log: RunLog) -> list[str]:
    """A violation for each recorded identity segment (``identity.host``, ``identity.robot``) that is not an
    identity segment; empty when the run records none (its identity is then derived, always valid)."""
    if log.identity is None:
        return []
    from rollbench.core.identity import check_segment

    problems = []
    for what in ("host", "robot"):
        value = getattr(log.identity, what)
        try:
            if value:  # empty: derived (RunIdentity.from_run_log)
                check_segment(value, what)
        except ConfigError:
            problems.append(
                f"run.json's identity.{what} {quoted(value)} is not an identity segment (letters, digits, '.', '_', "
                "'-', not starting with '.', '_' or '-', at most 200 characters)"
            )
    return problems


def _task_problems(log: RunLog) -> list[str]:
    if not log.plan.tasks:
        return ["run.json's plan names no task (plan.tasks is empty): its episodes cannot be attributed to a task"]
    listed = {t.name for t in log.plan.tasks}
    strays = [(i, e.task) for i, e in enumerate(log.plan.episodes) if e.task not in listed]
    if not strays:
        return []
    i, task = strays[0]
    more = f" (and {len(strays) - 1} more episodes)" if len(strays) > 1 else ""
    return [f"run.json's plan.episodes[{i}] names task {quoted(task)}, which plan.tasks does not list{more}"]


def _check_controls(episodes: list[dict[str, Any]], bad: Any) -> None:
    """ConfigError (``bad``) for a perturbed episode whose ``control`` cannot be its matched control: its own task,
    a task that is itself perturbed (two tasks naming each other count every pair twice), a task of another
    family, or one whose episode of the same trial is planned with another seed or horizon (an
    unrelated task). Issue 42, item 14."""
    # an episode whose task or trial is of another type is left to the run log model, which names the field
    typed = [(i, e) for i, e in enumerate(episodes) if isinstance(e.get("task"), str) and type(e.get("trial")) is int]
    perturbed = {e["task"] for _, e in typed if isinstance(e.get("perturbation"), dict)}
    by_trial = {(e["task"], e["trial"]): e for _, e in typed}
    for i, e in typed:
        control = e["perturbation"].get("control") if isinstance(e.get("perturbation"), dict) else None
        if not isinstance(control, str):
            continue
        where, task = f"its plan.episodes[{i}].perturbation.control {control[:80]!r}", str(e.get("task"))
        if control == task:
            raise bad(f"{where} is the perturbed task itself; a control is the unperturbed task")
        if control in perturbed:
            raise bad(f"{where} is itself a perturbed task; a control is unperturbed")
        if control.split("/", 1)[0] != task.split("/", 1)[0]:
            raise bad(f"{where} is a task of another family than {task[:80]!r}; it is not its control")
        twin = by_trial.get((control, e.get("trial")))
        if twin is not None and any(twin.get(k) != e.get(k) for k in ("seed", "max_steps")):
            raise bad(f"{where}: its trial {e.get('trial')} is planned with another seed or horizon; not its control")


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
            f"its {where}{'.' + field if field else ''} is {described(str(err.get('input')))}: {error_message(err)}"
        ) from None
    if record.level is not None and not math.isfinite(record.level):
        raise bad(f"its {where}.level is {record.level}, not a finite number")


__all__ = ["check_run_log", "identity_problems", "plan_problems"]
