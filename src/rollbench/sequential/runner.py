"""``rollbench sequential``: policies A and B on the same planned episodes, pair by pair, until the test decides.

Layout of ``out``: one ordinary run directory per arm and task, ``a-<task>`` and ``b-<task>`` (each of spec
``episodes = budget``, written and resumed by :func:`rollbench.api.evaluate`, so workers, batching, served policies
and Ray work as in ``rollbench eval``), and the decision log ``sequential.json`` (the parameters, then per task every
look and the decision, rewritten after every round).

Rounds: each arm runs until the first ``target`` planned episodes of the task are committed (``should_stop`` stops
starting episodes once they are finished; episodes in flight still finish and are kept), then the test is recomputed
*from disk* (:func:`rollbench.sequential.recompute.compare_sequential`, the same code ``compare --sequential`` runs),
so a pair counts only when both episodes are committed; an arm's ``sequential`` block gets decision null after its
round while it has none, and a recorded decision is rewritten only with the recomputation's, never withdrawn first (a
kill while a decided study is re-run leaves it decided). ``target`` grows by the look interval, or by the episodes in
flight at once (workers x batch size) when that is larger. The decision is that of the first deciding look in plan
order, whatever the round size, the finishing order or an interruption: a SIGKILL or Ctrl-C leaves resumable arms,
and the same command resumes them and reaches the same decision (the episodes are pure functions of task, seed,
initial state and policy). The tasks of a suite advance in turns (round robin), each stopping at its decision
while the others go on; a suite's per-task tests and its pooled test run at ``alpha / (m + 1)`` each (see
:mod:`rollbench.sequential.recompute`).

Plans: both arms share one shuffled plan (``trial_order_seed`` = the spec's seed; :func:`rollbench.core.plan.trial_order`),
so the pairs looked at are a random sample of the task's trials whenever the test stops.

Errors (issue 40): a pair with an environment or infrastructure error on either side is not counted
(:mod:`rollbench.sequential.pairs`); the rounds advance by pairs *attempted*. Infrastructure errors are re-run at their
planned seed and initial state when the arm is resumed at the start of each round (``--retry-errors``, as resume does),
at most :data:`MAX_RETRIES` times per episode: once an episode of an arm has been re-run that often and errs again, that
arm re-runs no more errors. A decision with either arm's coverage below the gate is ``insufficient_coverage``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollbench.api import evaluate, record_stop
from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import read_json
from rollbench.core.paths import check_output_path, make_dirs
from rollbench.core.plan import make_plan
from rollbench.core.runlog_model import RunLog, SequentialRecord, max_pairs
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule
from rollbench.grading.sequential import SequentialDesign, family_alphas
from rollbench.record.files import atomic_write_json, check_output_file
from rollbench.record.runlog import read_run_log
from rollbench.record.safe_files import refuse_inside_run
from rollbench.run.observer import EpisodeSummary, RunObserver
from rollbench.run.prepare import check_run_dir, check_spec
from rollbench.run.runners import Execution, execution_session
from rollbench.sequential.recompute import ARM_FIELDS, LOG_NAME, compare_sequential, design_record, rule_for

MAX_RETRIES = 2  # re-runs of one infrastructure-errored episode


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
    """One arm's spec of one task: the budget's episodes, in the order of the plan's seeded permutation."""
    return build_spec(**{**spec.model_dump(), "env": task, "episodes": budget, "trial_order_seed": spec.seed})


def _retry_mode(run_dir: Path, execution: Execution, errored: set[int]) -> Execution:
    """``execution`` for the next round of an arm: its ``retry_errors`` unless an episode of ``errored`` (its
    episode indices now holding an error that mode re-runs) was re-run :data:`MAX_RETRIES` times already."""
    log = read_run_log(run_dir) if (run_dir / "run.json").exists() else None
    counts: dict[int, int] = {}
    for r in log.replacements if log is not None else []:
        counts[r.episode_index] = counts.get(r.episode_index, 0) + 1
    if any(counts.get(e, 0) >= MAX_RETRIES for e in errored):
        return dataclasses.replace(execution, retry_errors="none")
    return execution


def design_for(m: int, config: SequentialConfig) -> SequentialDesign:
    """Each task's rule of a family of ``m`` tasks designed as ``config`` says (its level from :func:`family_alphas`);
    ConfigError, one line, when the design is impossible or (without ``config.budget``) cannot reach the wanted power
    within the most pairs allowed."""
    c = config
    task_alpha, pooled_alpha = family_alphas(c.alpha, m)
    try:
        rule = rule_for(c.delta, c.p_a, task_alpha, c.beta, c.budget, c.discordant, c.look_every, c.futility)
        if pooled_alpha is not None:
            pooled = min(m * rule.budget, max_pairs(c.look_every))
            rule_for(c.delta, c.p_a, pooled_alpha, c.beta, pooled, c.discordant, c.look_every, c.futility)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return rule


def power_warning(rule: SequentialDesign) -> str | None:
    """The warning for a design whose (user-chosen) budget does not reach the wanted power, else None."""
    if rule.power >= rule.power_target:
        return None
    return (
        f"budget {rule.budget} pairs gives power {rule.power:.3f} at delta {rule.delta:g}, below the wanted "
        f"{rule.power_target:.3f} (the fixed-N McNemar test needs {rule.fixed_n} pairs for it)"
    )


def _parameters(tasks: list[str], spec_a: EvalSpec, spec_b: EvalSpec, settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": tasks,
        "spec_a": spec_a.model_dump(mode="json"),
        "spec_b": spec_b.model_dump(mode="json"),
        **settings,
    }


def _check_resume(out: Path, parameters: dict[str, Any]) -> None:
    """ConfigError unless ``out`` is absent, empty, a comparison with these ``parameters``, or one killed before its
    first log: only this comparison's arm directories (``a-TASK``, ``b-TASK``: each arm's own writer then checks
    that what it holds is this arm's run, hostile round 17, b F1)."""
    path = out / LOG_NAME
    if not path.exists():
        arms = {arm_dir(out, arm, t).name for t in parameters["tasks"] for arm in ("a", "b")}
        if out.exists() and any(e.name not in arms or not e.is_dir(follow_symlinks=False) for e in os.scandir(out)):
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
    from rollbench.record.committed import committed_lengths

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
    committed = _committed(run_dir)  # read once: it reads every committed episode's file
    if log is not None and log.status not in ("RUNNING", "INTERRUPTED") and committed >= target:
        return
    evaluate(
        spec,
        out=run_dir,
        execution=execution,
        observer=_UntilTarget(set(range(committed)), target, cancelled),
        host_label=labels["host_label"],
        robot=labels["robot"],
    )


class SequentialObserver(RunObserver):
    """A sequential comparison's events, typed as :class:`RunObserver`'s: :meth:`on_warning` (the power warning,
    before anything runs and after every refusal), :meth:`on_look` (each new look of a task, in order), and
    :meth:`should_stop` (polled as in :func:`rollbench.api.evaluate`: once True no new episode starts). The arms'
    episode events are not forwarded (each arm is its own run). None may raise."""

    def on_warning(self, text: str) -> None:
        """A warning about the design (a ``budget`` below the wanted power: :func:`power_warning`)."""

    def on_look(self, task: str, look: dict[str, Any]) -> None:
        """A new look of ``task``: one entry of ``sequential.json``'s ``tasks[].looks`` (pairs, discordant counts,
        log-likelihood ratios, decision)."""


class _UntilTarget(RunObserver):
    """An arm's observer: stops starting episodes once the first ``target`` planned ones are finished (or the
    comparison is cancelled)."""

    def __init__(self, finished: set[int], target: int, cancelled: Callable[[], bool]) -> None:
        self.finished, self.target, self.cancelled = finished, target, cancelled

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.finished.add(summary.episode_index)

    def should_stop(self) -> bool:
        return self.cancelled() or all(i in self.finished for i in range(self.target))


def _recorded_decision(run_dir: Path) -> str | None:
    """The decision ``run_dir``'s run.json records (None: none, or no run.json yet)."""
    log = read_run_log(run_dir) if (run_dir / "run.json").exists() else None
    return log.sequential.decision if log is not None and log.sequential is not None else None


def _record(run_dir: Path, block: dict[str, Any]) -> None:
    """Set run.json's ``sequential`` block and, when it changed, the arm's regraded ``results`` and status (a
    decision makes the episodes after it not needed: grade's status changes), under the run's lock: no evaluate
    writes it meanwhile (:func:`rollbench.api.record_stop`)."""
    record = SequentialRecord.model_validate(block)

    def change(log: RunLog) -> bool:
        changed, log.sequential = log.sequential != record, record
        return changed

    record_stop(run_dir, change)


@dataclass(frozen=True)
class SequentialConfig:
    """How a sequential comparison runs: the design (``delta``, the B - A difference in success rate it is powered
    for, a fraction; ``alpha`` two-sided, family-wise over a suite's tasks; ``beta``; ``p_a`` A's assumed success rate;
    ``discordant`` the assumed P(exactly one succeeds), None = independent; ``budget`` the most pairs per task, None =
    the design's; ``look_every`` pairs between looks; ``futility`` False: never stop for futility), the ``coverage``
    rule its pairs are counted under (``--min-coverage``, ``--exclude-policy-errors``), the ``execution``
    of every arm (None: one local worker) and the runs' identity labels (``host_label``, ``robot``; see
    :func:`rollbench.api.evaluate`)."""

    delta: float
    alpha: float = 0.05
    beta: float = 0.2
    p_a: float = 0.5
    discordant: float | None = None
    budget: int | None = None
    look_every: int = 1
    futility: bool = True
    coverage: CoverageRule = DEFAULT_RULE
    execution: Execution | None = None
    host_label: str | None = None
    robot: str | None = None


def _checked(
    spec_a: EvalSpec, spec_b: EvalSpec, out: Path, config: SequentialConfig, observer: SequentialObserver
) -> tuple[list[str], SequentialDesign, dict[str, Any]]:
    """Every check of :func:`run_sequential` before anything is written: ``(tasks, design, parameters)``.
    ConfigError names the first refusal; the power warning goes to ``observer`` only after every refusal."""
    delta, alpha, beta, p_a, discordant = config.delta, config.alpha, config.beta, config.p_a, config.discordant
    look_every, host_label, robot = config.look_every, config.host_label, config.robot
    if look_every < 1 or look_every > (config.budget or max_pairs(look_every)):
        raise ConfigError(
            f"--look-every must be between 1 and the budget ({config.budget or max_pairs(look_every)} pairs), "
            f"got {look_every}"
        )
    tasks = check_arms(spec_a, spec_b)
    rule = design_for(len(tasks), config)
    if look_every > rule.budget:  # issue 42, item 15: refused before anything runs, not by its own log after
        raise ConfigError(f"--look-every must be between 1 and the budget ({rule.budget} pairs), got {look_every}")
    futility = config.futility
    settings = {
        "alpha": alpha,
        "beta": beta,
        "delta": delta,
        "p_a": p_a,
        "discordant": discordant,
        "futility": futility,
        # the rule's options when not its defaults (a comparison started before they existed resumes as it was)
        **({"coverage_rule": config.coverage.to_dict()} if config.coverage != DEFAULT_RULE else {}),
    }
    parameters = _parameters(tasks, spec_a, spec_b, {**settings, "budget": rule.budget, "look_every": look_every})
    refuse_inside_run(out)  # issue 42, item 8; first: a path inside a run is named as such, whatever it is
    check_output_path(out, "--out", directory=True)
    check_output_file(
        out / LOG_NAME, "--out", own="sequential"
    )  # the decision log: never a link, FIFO or hard-linked file
    _check_resume(out, parameters)
    for spec in (spec_a, spec_b):  # unknown names, unreachable servers, undrivable tasks: before anything is written
        check_spec(spec, host_label, robot)
    for t in tasks:  # each arm's directory: absent, or a run rollbench may continue (not inside another run)
        for arm in ("a", "b"):
            check_run_dir(arm_dir(out, arm, t))
    if warning := power_warning(rule):  # after every refusal: a refusal stays one line (issue 42)
        observer.on_warning(warning)
    return tasks, rule, parameters


def run_sequential(
    spec_a: EvalSpec,
    spec_b: EvalSpec,
    out: Path,
    config: SequentialConfig,
    observer: SequentialObserver | None = None,
) -> dict[str, Any]:
    """Run the comparison of ``config`` into ``out`` (see the module docstring) and return :func:`compare_sequential`'s
    document, which is also written to ``out/sequential.json``. ``observer`` (:class:`SequentialObserver`) gets the
    power warning before anything runs, each new look, and is asked :meth:`~SequentialObserver.should_stop`: once
    True no new episode starts, and the document returned is the comparison as it stands (resumable: the same call
    goes on).

    Raises ConfigError before anything runs on bad input (specs that do not pair, impossible design, ``out`` holding
    something else or a comparison with other parameters); ValueError from the design is turned into ConfigError."""
    execution = config.execution or Execution()
    look_every, host_label, robot = config.look_every, config.host_label, config.robot
    observer = observer or SequentialObserver()
    tasks, rule, parameters = _checked(spec_a, spec_b, out, config, observer)
    with execution_session(execution):  # Ray connected (or refused) before out is made
        make_dirs(out, "--out")
        labels = {"host_label": host_label, "robot": robot}
        step = max(look_every, execution.workers * execution.batch_size)
        cancelled = observer.should_stop
        seen: dict[str, int] = {}
        dirs = {t: {arm: arm_dir(out, arm, t) for arm in ("a", "b")} for t in tasks}
        specs = {t: {"a": _arm_spec(spec_a, t, rule.budget), "b": _arm_spec(spec_b, t, rule.budget)} for t in tasks}
        base = {
            "rule": "truncated-sprt-discordant", "family": tasks, "alpha_family": config.alpha,
            "coverage_rule": config.coverage.to_dict(),
        }  # fmt: skip
        blocks = {t: {**base, "task": t, "design": design_record(rule, look_every)} for t in tasks}
        counted = dict.fromkeys(tasks, 0)
        errored: dict[str, dict[str, set[int]]] = {t: {"a": set(), "b": set()} for t in tasks}
        undecided, so_far = list(tasks), [d for t in tasks for d in dirs[t].values()]
        while undecided and not cancelled():  # round robin: every undecided task advances, then the test is recomputed
            for task in undecided:
                target = min(rule.budget, counted[task] + step)
                for arm, other in (("a", "b"), ("b", "a")):
                    if _recorded_decision(dirs[task][arm]) is not None:
                        continue  # decided: no episode more, and only the recomputation below rewrites its block
                    run = _retry_mode(dirs[task][arm], execution, errored[task][arm])
                    _advance(specs[task][arm], dirs[task][arm], target, run, labels, cancelled)
                    block = {**blocks[task], "arm": arm, "partner": dirs[task][other].name, "decision": None}
                    _record(dirs[task][arm], block)
            doc = compare_sequential([d for d in so_far if d.exists()], config.coverage, resuming=True)
            for row in doc["tasks"]:
                task = row["task"]
                for look in row["looks"][seen.get(task, 0) :]:
                    observer.on_look(task, look)
                seen[task] = len(row["looks"])
                counted[task] = row["pairs_attempted"]
                errored[task] = _errored(row, execution.retry_errors)
                if row["decision"] is not None and task in undecided:
                    undecided.remove(task)  # a decided task spends no more episodes
                    for arm, other in (("a", "b"), ("b", "a")):
                        decided = {"decision": row["decision"], "stopped_at": row["stopped_at"]}
                        _record(
                            dirs[task][arm], {**blocks[task], "arm": arm, "partner": dirs[task][other].name, **decided}
                        )
            _write_log(out, parameters, doc)
        doc = compare_sequential([d for d in so_far if d.exists()], config.coverage, resuming=True)
        _write_log(out, parameters, doc)
        return {**doc, "parameters": parameters, "out": str(out)}


def _errored(row: dict[str, Any], mode: str) -> dict[str, set[int]]:
    """Per arm, the episode indices of the task's left-out pairs whose error on that side ``mode`` re-runs."""
    out: dict[str, set[int]] = {"a": set(), "b": set()}
    for pair in row["errors"]["pairs_left_out"]:
        for arm in ("a", "b"):
            if pair[arm] == "infrastructure" or (mode == "all" and pair[arm] is not None):
                out[arm].add(int(pair["episode_index"]))
    return out


def _write_log(out: Path, parameters: dict[str, Any], doc: dict[str, Any]) -> None:
    atomic_write_json(out / LOG_NAME, {"rollbench_sequential_log": 1, "parameters": parameters, **doc})
