"""``rollbench sequential``: policies A and B on the same planned episodes, pair by pair, until the test decides.

Layout of ``out``: one ordinary run directory per arm and task, ``a-<task>`` and ``b-<task>`` (each of spec
``episodes = budget``, written and resumed by :func:`rollbench.api.evaluate`, so workers, batching, served policies
and Ray work as in ``rollbench eval``), and the decision log ``sequential.json`` (the parameters, then per task every
look and the decision, rewritten after every round).

Rounds: each arm runs until the first ``target`` planned episodes of the task are committed (``should_stop`` stops
starting episodes once they are finished; episodes in flight still finish and are kept), then the test is recomputed
*from disk* (:func:`rollbench.sequential.recompute.compare_sequential`, the same code ``compare --sequential`` runs),
so a pair counts only when both episodes are committed. ``target`` grows by the look interval, or by the episodes in
flight at once (workers x batch size) when that is larger. The decision is that of the first deciding look in plan
order, whatever the round size, the finishing order or an interruption: a SIGKILL or Ctrl-C leaves resumable arms,
and the same command resumes them and reaches the same decision (the episodes are pure functions of task, seed,
initial state and policy). The tasks of a suite advance in turns (round robin), each stopping at its decision
while the others go on; a suite's per-task tests run at ``alpha / m`` (Bonferroni) and its pooled test at ``alpha`` (see :mod:`rollbench.sequential.recompute`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollbench.api import evaluate, prepare_run
from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import read_json
from rollbench.core.paths import check_output_path, make_dirs
from rollbench.core.plan import make_plan
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.sequential import MAX_SEQUENTIAL_PAIRS
from rollbench.record.files import atomic_write_json
from rollbench.record.runlog import RunLock, read_run_log, write_run_log
from rollbench.record.safe_files import refuse_inside_run
from rollbench.run.runners import Execution, execution_session
from rollbench.sequential.recompute import ARM_FIELDS, LOG_NAME, compare_sequential, design_record, rule_for

OnLook = Callable[[dict[str, Any]], None]


def arm_dir(out: Path, arm: str, task: str) -> Path:
    return out / f"{arm}-{re.sub(r'[^A-Za-z0-9._-]+', '_', task)}"


def check_arms(spec_a: EvalSpec, spec_b: EvalSpec) -> list[str]:
    """The tasks both arms run (suite order); ConfigError when the specs differ in a field that pairs episodes."""
    da, db = spec_a.model_dump(), spec_b.model_dump()
    differ = [k for k in da if k not in ARM_FIELDS and k != "episodes" and da[k] != db[k]]
    if differ:
        raise ConfigError(f"A and B must run the same episodes: they differ in {', '.join(differ)}")
    return [t.name for t in make_plan(build_spec(**{**da, "episodes": 1})).tasks]


def _arm_spec(spec: EvalSpec, task: str, budget: int) -> EvalSpec:
    return build_spec(**{**spec.model_dump(), "env": task, "episodes": budget})


def _parameters(tasks: list[str], spec_a: EvalSpec, spec_b: EvalSpec, settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": tasks,
        "spec_a": spec_a.model_dump(mode="json"),
        "spec_b": spec_b.model_dump(mode="json"),
        **settings,
    }


def _check_resume(out: Path, parameters: dict[str, Any]) -> None:
    path = out / LOG_NAME
    if not path.exists():
        if out.exists() and any(out.iterdir()):
            raise ConfigError(f"{out} exists and holds no {LOG_NAME}; choose another --out")
        return
    old = read_json(path, "decision log")
    if not isinstance(old, dict) or old.get("parameters") != parameters:
        old_p: dict[str, Any] = {}
        if isinstance(old, dict) and isinstance(old.get("parameters"), dict):
            old_p = old["parameters"]
        diff = [k for k in parameters if old_p.get(k) != parameters[k]]
        raise ConfigError(
            f"{out} holds a sequential comparison with other parameters ({', '.join(diff) or 'unreadable'}); "
            "choose another --out, or resume it with the same options"
        )


def _committed(run_dir: Path) -> int:
    """Committed episodes of an arm (they are the plan's first ones: the writer commits in plan order)."""
    from rollbench.record.on_disk import committed_lengths

    return len(committed_lengths(run_dir)) if (run_dir / "run.json").exists() else 0


def _advance(
    spec: EvalSpec,
    run_dir: Path,
    target: int,
    execution: Execution,
    labels: dict[str, str | None],
    cancelled: Callable[[], bool],
) -> None:
    """Run the arm until its first ``target`` planned episodes are finished (resuming it if it was interrupted)."""
    log = read_run_log(run_dir) if run_dir.exists() else None
    if log is not None and log.get("status") not in ("RUNNING", "INTERRUPTED") and _committed(run_dir) >= target:
        return
    finished = set(range(_committed(run_dir)))

    def progress(event: dict[str, Any]) -> None:
        if event.get("event") == "episode":
            finished.add(int(event["episode_index"]))

    def should_stop() -> bool:
        return cancelled() or all(i in finished for i in range(target))

    evaluate(spec, out=run_dir, execution=execution, progress=progress, should_stop=should_stop, **labels)


def _record(run_dir: Path, block: dict[str, Any]) -> None:
    """Set run.json's ``sequential`` block (under the run's lock: no evaluate writes it meanwhile)."""
    with RunLock(run_dir):
        log = read_run_log(run_dir)
        if log is not None and log.get("sequential") != block:
            log["sequential"] = block
            write_run_log(run_dir, log)


def run_sequential(
    spec_a: EvalSpec,
    spec_b: EvalSpec,
    out: Path,
    *,
    delta: float,
    alpha: float = 0.05,
    beta: float = 0.2,
    p_a: float = 0.5,
    discordant: float | None = None,
    budget: int | None = None,
    look_every: int = 1,
    execution: Execution | None = None,
    on_look: OnLook | None = None,
    should_stop: Callable[[], bool] | None = None,
    host_label: str | None = None,
    robot: str | None = None,
) -> dict[str, Any]:
    """Run the comparison into ``out`` (see the module docstring) and return :func:`compare_sequential`'s document,
    which is also written to ``out/sequential.json``. ``on_look`` receives ``{"task", "look"}`` for each new look.
    ``should_stop`` is polled as in :func:`rollbench.api.evaluate`: once True no new episode starts, and the document
    returned is the comparison as it stands (resumable: the same call goes on).

    Raises ConfigError before anything runs on bad input (specs that do not pair, impossible design, ``out`` holding
    something else or a comparison with other parameters); ValueError from the design is turned into ConfigError."""
    execution = execution or Execution()
    if look_every < 1:
        raise ConfigError(f"--look-every must be >= 1, got {look_every}")
    tasks = check_arms(spec_a, spec_b)
    m = len(tasks)
    try:
        rule = rule_for(delta, p_a, alpha / m, beta, budget, discordant)
        if m > 1:
            rule_for(delta, p_a, alpha, beta, min(m * rule.budget, MAX_SEQUENTIAL_PAIRS), discordant)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if look_every > rule.budget:  # issue 42, item 15: refused before anything runs, not by its own log after
        raise ConfigError(f"--look-every must be between 1 and the budget ({rule.budget} pairs), got {look_every}")
    settings = {"alpha": alpha, "beta": beta, "delta": delta, "p_a": p_a, "discordant": discordant}
    parameters = _parameters(tasks, spec_a, spec_b, {**settings, "budget": rule.budget, "look_every": look_every})
    check_output_path(out, "--out", directory=True)
    refuse_inside_run(out)  # issue 42, item 8
    _check_resume(out, parameters)
    for spec in (spec_a, spec_b):  # unknown names, unreachable servers, undrivable tasks: before anything is written
        prepare_run(spec, out / f".preflight-{uuid.uuid4().hex}", host_label, robot)
    with execution_session(execution):  # Ray connected (or refused) before out is made
        make_dirs(out, "--out")
        labels = {"host_label": host_label, "robot": robot}
        step = max(look_every, execution.workers * execution.batch_size)
        cancelled = should_stop or (lambda: False)
        seen: dict[str, int] = {}
        dirs = {t: {arm: arm_dir(out, arm, t) for arm in ("a", "b")} for t in tasks}
        specs = {t: {"a": _arm_spec(spec_a, t, rule.budget), "b": _arm_spec(spec_b, t, rule.budget)} for t in tasks}
        base = {"rule": "truncated-sprt-discordant", "family": tasks, "alpha_family": alpha}
        blocks = {t: {**base, "task": t, "design": design_record(rule, look_every)} for t in tasks}
        counted = dict.fromkeys(tasks, 0)
        undecided, so_far = list(tasks), [d for t in tasks for d in dirs[t].values()]
        while undecided and not cancelled():  # round robin: every undecided task advances, then the test is recomputed
            for task in undecided:
                target = min(rule.budget, counted[task] + step)
                for arm, other in (("a", "b"), ("b", "a")):
                    _advance(specs[task][arm], dirs[task][arm], target, execution, labels, cancelled)
                    block = {**blocks[task], "arm": arm, "partner": dirs[task][other].name, "decision": None}
                    _record(dirs[task][arm], block)
            doc = compare_sequential([d for d in so_far if d.exists()])
            for row in doc["tasks"]:
                task = row["task"]
                for look in row["looks"][seen.get(task, 0) :]:
                    if on_look:
                        on_look({"task": task, "look": look})
                seen[task] = len(row["looks"])
                counted[task] = row["pairs_counted"]
                if row["decision"] is not None and task in undecided:
                    undecided.remove(task)  # a decided task spends no more episodes
                    for arm, other in (("a", "b"), ("b", "a")):
                        decided = {"decision": row["decision"], "stopped_at": row["stopped_at"]}
                        _record(
                            dirs[task][arm], {**blocks[task], "arm": arm, "partner": dirs[task][other].name, **decided}
                        )
            _write_log(out, parameters, doc)
        doc = compare_sequential([d for d in so_far if d.exists()])
        _write_log(out, parameters, doc)
        return {**doc, "parameters": parameters, "out": str(out)}


def _write_log(out: Path, parameters: dict[str, Any], doc: dict[str, Any]) -> None:
    atomic_write_json(out / LOG_NAME, {"rollbench_sequential_log": 1, "parameters": parameters, **doc})
