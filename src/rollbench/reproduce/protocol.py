"""Protocol comparison: what a run did (read from its ``run.json`` and its grade document) against what a reference
states (:class:`rollbench.reproduce.model.Protocol`). A field the reference does not state is not compared; every
field it states and the run does differently is one named difference, never a silent match.

Compared, per suite: horizon (env steps; ``plan.tasks[].max_steps``), settle steps (``plan.tasks[].settle_steps``),
replan (``plan.replan_every``), episodes per task (``spec.episodes``), initial states (``stored-k``: the grade's
``episodes[].initial_state`` equals ``trial`` for every episode, starting at trial 0), tasks in the suite (the
grade's ``suites[s].tasks`` against the entry's ``tasks``), rendered image size (``spec.image_size``, else the task's
declared size), fast rendering (``spec.fast_render``), MuJoCo and robosuite versions (``provenance.libero`` or
``provenance.versions``). Also named, whatever the reference says, because they change the benchmark itself: action
noise, a success-rule or instruction override, instruction sweeps, ``success_hold`` > 1, and a run that is not ``OK``.
"""

from __future__ import annotations

from typing import Any

from rollbench.core.grade_model import GradeDocument
from rollbench.core.runlog_model import RunLog
from rollbench.reproduce.model import Entry, Protocol

# the simulator distributions whose versions a reference may pin (Protocol's fields of the same names)
PINNED_DISTS = ("mujoco", "robosuite")


def _diff(field: str, run: Any, ref: Any, suite: str | None = None) -> dict[str, Any]:
    return {"field": field, "suite": suite, "run": run, "reference": ref}


def _task_size(name: str) -> tuple[int, int] | None:
    try:
        from rollbench.core.registry import resolve_remote_tasks  # a recorded name never imports nor runs code

        return resolve_remote_tasks(name)[0].image_size
    except Exception:  # the family is not installed here: the size is unknown, not guessed
        return None


def run_render_size(run_log: RunLog, task: str) -> list[int] | None:
    """``[height, width]`` the run rendered for ``task``: ``spec.image_size``, else the task's declared size (looked
    up in the installed family; None when it is not installed)."""
    size = run_log.spec.image_size
    if size:
        return [int(size[0]), int(size[1])]
    own = _task_size(task)
    return None if own is None else [int(own[0]), int(own[1])]


def _versions(run_log: RunLog) -> dict[str, Any]:
    """The MuJoCo and robosuite versions the run's simulator ran: from a family's own provenance facts where it
    records them (``provenance.<family>``: LIBERO's set-up), else from ``provenance.versions``."""
    prov = run_log.provenance
    own = prov.model_extra or {}
    families = sorted({t.name.split("/", 1)[0] for t in run_log.plan.tasks})
    sections = [own[f] for f in families if isinstance(own.get(f), dict)]
    versions = prov.versions
    return {dist: next((s[dist] for s in sections if s.get(dist)), None) or versions.get(dist) for dist in PINNED_DISTS}


def _benchmark_changes(run_log: RunLog, graded: GradeDocument) -> list[dict[str, Any]]:
    spec = run_log.spec
    out = []
    if spec.action_noise:
        out.append(_diff("action_noise", spec.action_noise, 0.0))
    for key in ("success_rule", "instruction"):
        if getattr(spec, key) is not None:
            out.append(_diff(key, getattr(spec, key), "the task's own"))
    if spec.instructions or spec.instruction_perturb:
        out.append(_diff("instruction_sweep", True, False))
    if spec.success_hold != 1:
        out.append(_diff("success_hold", spec.success_hold, 1))
    if graded.status != "OK":
        out.append(_diff("status", graded.status, "OK"))
    return out


def _suite_facts(run_log: RunLog, graded: GradeDocument, suite: str) -> dict[str, Any]:
    plan = run_log.plan
    names = plan.suites.get(suite, [])
    tasks = [t for t in plan.tasks if t.name in names]
    eps = [e for e in graded.episodes if e.task in names]
    stored_k = bool(eps) and all(e.initial_state == e.trial for e in eps)
    first = min((e.trial for e in eps), default=0)
    block = graded.suites.get(suite)
    return {
        "horizon": sorted({t.max_steps for t in tasks}),
        "settle_steps": sorted({t.settle_steps for t in tasks}),
        "init_states": "stored-k"
        if stored_k and first == 0
        else (f"stored-k from trial {first}" if stored_k else None),
        "render_size": run_render_size(run_log, names[0]) if names else None,
        "tasks": None if block is None else block.tasks,
    }


def compare_protocol(
    run_log: RunLog, graded: GradeDocument, suite: str, entry: Entry, protocol: Protocol
) -> list[dict[str, Any]]:
    """The differences for one suite of one run: a list of ``{"field", "suite", "run", "reference"}`` (empty when
    everything the reference states matches). ``suite`` is the run's suite name (``libero/libero_spatial``)."""
    facts = _suite_facts(run_log, graded, suite)
    spec = run_log.spec
    out: list[dict[str, Any]] = []
    ref_h = (protocol.horizon or {}).get(entry.suite)
    if ref_h is not None and facts["horizon"] != [ref_h]:
        out.append(_diff("horizon", _one(facts["horizon"]), ref_h, suite))
    if protocol.settle_steps is not None and facts["settle_steps"] != [protocol.settle_steps]:
        out.append(_diff("settle_steps", _one(facts["settle_steps"]), protocol.settle_steps, suite))
    replan = run_log.plan.replan_every
    if protocol.replan_every is not None and replan != protocol.replan_every:
        out.append(_diff("replan_every", replan, protocol.replan_every, suite))
    if protocol.episodes_per_task is not None and spec.episodes != protocol.episodes_per_task:
        out.append(_diff("episodes_per_task", spec.episodes, protocol.episodes_per_task, suite))
    if protocol.init_states is not None and facts["init_states"] != protocol.init_states:
        out.append(_diff("init_states", facts["init_states"], protocol.init_states, suite))
    if entry.tasks is not None and facts["tasks"] != entry.tasks:
        out.append(_diff("tasks", facts["tasks"], entry.tasks, suite))
    if protocol.render_size is not None and facts["render_size"] != list(protocol.render_size):
        out.append(_diff("render_size", facts["render_size"], list(protocol.render_size), suite))
    if protocol.fast_render is not None and bool(spec.fast_render) != protocol.fast_render:
        out.append(_diff("fast_render", bool(spec.fast_render), protocol.fast_render, suite))
    versions = _versions(run_log)
    for name in PINNED_DISTS:
        want = getattr(protocol, name)
        if want is not None and versions[name] != want:
            out.append(_diff(name, versions[name], want, suite))
    return out


def run_wide_differences(run_log: RunLog, graded: GradeDocument) -> list[dict[str, Any]]:
    """Departures from the benchmark's own protocol that hold for the whole run (see the module docstring)."""
    return _benchmark_changes(run_log, graded)


def _one(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else values


def describe(d: dict[str, Any]) -> str:
    """One difference as plain text: ``horizon: run 300, reference 220``."""
    return f"{d['field']}: run {_fmt(d['run'])}, reference {_fmt(d['reference'])}"


def _fmt(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return f"{v[0]}x{v[1]}"
    return str(v)
