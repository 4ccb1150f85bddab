"""The decision log of ``rollbench sequential`` (``sequential.json``, next to the arms): what it records and its check
against a recomputation from the arms (:func:`rollbench.sequential.recompute.compare_sequential`).

Refused (ConfigError, one line): a log that is not an object with a list of tasks, whose parameters are out of range
or differ from the arms' run.json ``sequential`` blocks, or whose looks or decisions differ from the recomputation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import read_json
from rollbench.grading.sequential import MAX_SEQUENTIAL_PAIRS
from rollbench.sequential.log_specs import log_spec_problem
from rollbench.sequential.log_specs import shown as _shown

LOG_NAME = "sequential.json"  # the decision log, in the directory holding the arms


def log_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What the decision log records and a recomputation must reproduce: per task every look and the decision."""
    return {
        "tasks": {t["task"]: {"looks": t["looks"], "decision": t.get("decision")} for t in doc["tasks"]},
        "pooled": None if doc["pooled"] is None else {k: doc["pooled"].get(k) for k in ("looks", "decision")},
    }


def _log_shape_problem(logged: dict[str, Any]) -> str | None:
    """What keeps ``logged`` (a parsed decision log) from :func:`log_view`: each task entry an object with a string
    ``task`` and a list ``looks``, ``pooled`` null or an object with a list ``looks``; None when nothing does."""
    for i, t in enumerate(logged["tasks"]):
        if not isinstance(t, dict) or not isinstance(t.get("task"), str) or not isinstance(t.get("looks"), list):
            return f"its tasks[{i}] is not an object with a string task and a list of looks"
    pooled = logged.get("pooled")
    if pooled is not None and (not isinstance(pooled, dict) or not isinstance(pooled.get("looks"), list)):
        return "its pooled entry is neither null nor an object with a list of looks"
    return None


# the decision log's parameters: their ranges (SequentialDesignRecord's; discordant: a probability or null)
_RANGES: dict[str, tuple[type, float, float, bool]] = {  # name -> (type, low, high, ends included)
    "alpha": (float, 0.0, 0.5, False),
    "beta": (float, 0.0, 0.5, False),
    "delta": (float, 0.0, 1.0, False),
    "p_a": (float, 0.0, 1.0, False),
    "discordant": (float, 0.0, 1.0, True),
    "budget": (int, 1, MAX_SEQUENTIAL_PAIRS, True),
    "look_every": (int, 1, MAX_SEQUENTIAL_PAIRS, True),
}


def _out_of_range(name: str, v: Any) -> str | None:
    kind, low, high, closed = _RANGES[name]
    if v is None and name == "discordant":
        return None
    numeric = isinstance(v, int | float) and not isinstance(v, bool) and (kind is float or type(v) is int)
    inside = numeric and (low <= v <= high if closed else low < v < high)  # NaN is inside no range
    if inside:
        return None
    bounds = f"[{low}, {high}]" if closed else f"({low}, {high})"
    return f"its parameters.{name} is {_shown(v)}, not {'an integer' if kind is int else 'a number'} in {bounds}"


def _log_parameter_problem(logged: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """What in the decision log's ``parameters`` and header is out of range or differs from the arms' run.json
    ``sequential`` blocks (``doc``, the recomputation): the family and its level, the rule, and per task the design
    (alpha, beta, delta, p_a, discordant, budget, look schedule, and the values they give); None when nothing."""
    params = logged.get("parameters")
    if not isinstance(params, dict):
        return "it has no parameters object"
    for name in _RANGES:
        if why := _out_of_range(name, params.get(name)):
            return why
    d = doc["tasks"][0]["design"]
    want = {"alpha": doc["alpha_family"], "tasks": doc["family"]}
    want |= {k: d[k] for k in ("beta", "delta", "p_a", "discordant", "budget", "look_every")}
    for name, value in want.items():
        if params.get(name) != value or type(params.get(name)) is not type(value):
            return f"its parameters.{name} is {_shown(params.get(name))} but the arms' run.json record {_shown(value)}"
    for name in ("rule", "alpha_family", "family", "correction"):
        if name in logged and logged[name] != doc[name]:
            return f"its {name} is {_shown(logged[name])} but the arms' run.json give {_shown(doc[name])}"
    designs = {t["task"]: t.get("design") for t in logged["tasks"]}
    for t in doc["tasks"]:
        got = designs.get(t["task"])
        if got is not None and got != t["design"]:
            diff = next((k for k in t["design"] if not isinstance(got, dict) or got.get(k) != t["design"][k]), "")
            return f"its design of task {t['task']} differs from the arms' run.json ({diff or 'its keys'})"
    return None


def check_log(
    doc: dict[str, Any], dirs: set[Path], specs: dict[str, tuple[dict[str, Any], dict[str, Any]]] | None = None
) -> dict[str, Any] | None:
    """Compare the decision log found next to the arms (one directory) with ``doc``: None when there is none,
    ``{"path", "agrees": True}`` when it agrees; ConfigError naming the first difference otherwise."""
    if len(dirs) != 1:
        return None
    path = next(iter(dirs)) / LOG_NAME
    if not path.is_file() or path.is_symlink():
        return None
    logged = read_json(path, "decision log")
    if not isinstance(logged, dict) or not isinstance(logged.get("tasks"), list):
        raise ConfigError(f"{path} is not a rollbench sequential decision log")
    if problem := (
        _log_shape_problem(logged)
        or _log_parameter_problem(logged, doc)
        or log_spec_problem(logged["parameters"], specs or {})  # issue 42, item 14
    ):
        raise ConfigError(f"{path} is not a rollbench sequential decision log: {problem}")
    mine = log_view(doc)
    theirs = log_view({"tasks": logged["tasks"], "pooled": logged.get("pooled")})
    items = [(f"task {t}", theirs["tasks"].get(t), want) for t, want in mine["tasks"].items()]
    items.append(("the pooled test", theirs["pooled"], mine["pooled"]))
    if absent := [t for t in mine["tasks"] if t not in theirs["tasks"]]:  # the log lists every task from its start
        raise ConfigError(f"{path} disagrees with the run directories: it lists no entry for task {absent[0]}")
    behind = False
    for what, got, want in items:
        if got is None or want is None:
            behind |= got is None and want is not None  # the log was written before this test had looks
            continue
        n = next((i for i, (x, y) in enumerate(zip(got["looks"], want["looks"], strict=False)) if x != y), None)
        if n is not None:
            raise ConfigError(f"{path} disagrees with the run directories on {what} at look {n + 1}")
        if len(got["looks"]) > len(want["looks"]) or got["decision"] not in (None, want["decision"]):
            raise ConfigError(f"{path} disagrees with the run directories on {what}: its decision or looks")
        behind |= len(got["looks"]) < len(want["looks"])
    return {"path": str(path), "agrees": True, "up_to_date": not behind}
