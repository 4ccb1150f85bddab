"""The Python API every surface shares (CLI, MCP server, tests): :func:`evaluate` and :func:`grade`.

``evaluate`` = plan → execute → record → grade. It returns what :func:`rollbench.grading.grade.grade` computes from the
run directory, never in-process counters.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.grade_model import GradeDocument
from rollbench.core.identity import sanitize_segment
from rollbench.core.interrupts import user_signals
from rollbench.core.paths import make_dirs
from rollbench.core.plan import PlannedEpisode, ResolvedRun
from rollbench.core.runlog_model import RunLog, RunStatus
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.grade import grade as grade_run_dir
from rollbench.record.background import BackgroundCommitter
from rollbench.record.committed import Committed
from rollbench.record.lerobot import run_features
from rollbench.record.retry import record_outcomes, retry_errored
from rollbench.record.runlog import (
    LiveSnapshot,
    RunLock,
    abandon_execution,
    begin_execution,
    end_execution,
    note_counters,
    read_run_log,
    record_results,
    write_run_log,
)
from rollbench.record.writer import DatasetWriter
from rollbench.run.in_memory import bound, policy_name, refuse_execution
from rollbench.run.observer import EpisodeSummary, Observers, RunEnd, Running, RunObserver, RunStart
from rollbench.run.prepare import check_committed, check_run_dir, prepare_run
from rollbench.run.probed import release as release_probe
from rollbench.run.ray_options import RayOptions as RayOptions  # public: Execution(ray=RayOptions(...))
from rollbench.run.runners import Execution, execution_session, run_episodes
from rollbench.run.worker import WorkerSetup

__all__ = [
    "Execution",
    "ProgressCallback",
    "RunObserver",
    "check_run_dir",
    "default_run_dir",
    "evaluate",
    "grade",
    "prepare_run",
    "record_stop",
]

ProgressCallback = Callable[[dict[str, Any]], None]
"""Deprecated (pass a :class:`~rollbench.run.observer.RunObserver` as ``observer=``): receives the observer's events as
dicts: ``{"event": "start", "run_dir", "totals": {task: n}, "done": {task: n}, "retried": n, "warnings": [str]}``
once, ``{"event": "episode", "task", "episode_index", "success", "length", "termination_reason", "staged",
"policy_hung"}`` per finished episode, and ``{"event": "steps", "worker", "running": [{"episode_index", "task",
"step", "max_steps"}]}`` about once a second while episodes run."""


def default_run_dir(spec: EvalSpec, root: Path = Path("runs")) -> Path:
    """``runs/<task>-<policy>-<UTC timestamp>``, the name made a valid identity segment (at most 80 characters
    before the stamp; :func:`~rollbench.core.identity.sanitize_segment`): ``scripted-reach-zero-20261201T200000Z``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return root / f"{sanitize_segment(f'{spec.env}-{spec.policy}', 'run', limit=80)}-{stamp}"


def evaluate(
    spec: EvalSpec | None = None,
    *,
    out: str | Path | None = None,
    execution: Execution | None = None,
    observer: RunObserver | None = None,
    host_label: str | None = None,
    robot: str | None = None,
    progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    policy: Any = None,
    checkpoint_id: str | None = None,
    **fields: Any,
) -> GradeDocument:
    """Run ``spec`` (or ``EvalSpec(**fields)``) into ``out`` and return the graded result: the grade document
    (:class:`~rollbench.core.grade_model.GradeDocument`, see :func:`rollbench.grading.grade.grade`; ``.to_json()``
    is the ``grade --json`` dict). Reading it as a dict (``result["overall"]``) still works, deprecated (one
    DeprecationWarning per use naming the attribute).

    ``policy`` is a policy name (a spec field), or a :class:`rollbench.Policy` object of this process (a training
    loop's model): it runs here, batched only through its own ``batched(size)``, never pickled; the spec (and
    run.json) names it ``in-memory:module.QualName[@checkpoint_id]`` and its provenance holds ``in_memory``
    (``class``, ``checkpoint_id``); see :mod:`rollbench.run.in_memory`. Resuming such a run takes the object again.
    ConfigError (one line, why) for workers > 1 or the Ray executor with an object, batch_size > 1 without
    ``batched``, and a ``checkpoint_id`` without an object.

    Re-running into an existing run directory of the same spec resumes it: missing episodes run, and errored ones
    selected by ``execution.retry_errors`` (default: infrastructure faults) are re-run and replaced.
    ``observer`` (a :class:`~rollbench.run.observer.RunObserver`) hears the run start, each episode's start, steps and
    end, and the run end; its ``should_stop()`` is polled between episodes: once True no new episode starts, the
    episodes already finished are committed, and the (resumable) run is graded as it stands. Without an observer
    the run's warnings go to stderr. ``progress`` (dict events, :data:`ProgressCallback`) and ``should_stop`` are
    deprecated forms of ``observer`` (DeprecationWarning) and still work.
    ``host_label``/``robot`` set the run's identity ``host/robot/name`` recorded in run.json (see prepare_run).
    Raises ConfigError (before anything is written) on bad input, including a Ray cluster that cannot be reached or
    cannot hold a worker (:func:`~rollbench.run.runners.execution_session`); episode failures end up in the result.
    """
    observer = _with_deprecated(observer, progress, should_stop)
    execution = execution or Execution()
    if policy is not None and not isinstance(policy, str):
        name = policy_name(policy, checkpoint_id)
        refuse_execution(name, policy, execution.workers, execution.executor, execution.batch_size)
        spec = spec.model_copy(update={"policy": name}) if spec is not None else build_spec(policy=name, **fields)
        with bound(name, policy):
            return evaluate(
                spec,
                out=out,
                execution=execution,
                observer=observer,
                host_label=host_label,
                robot=robot,
            )
    if checkpoint_id is not None:
        raise ConfigError("checkpoint_id= names an in-memory policy object: give it with policy=<the object>")
    if policy is not None:
        fields["policy"] = policy
    spec = spec or build_spec(**fields)
    given = Path(out) if out is not None else default_run_dir(spec)
    run_dir = given.absolute()  # a policy's os.chdir cannot move where the run is written (hostile round 10, F5)
    run, log = prepare_run(spec, run_dir, host_label, robot, execution, keep_policy=True)
    try:
        with execution_session(execution):  # Ray connected (or refused) before anything is written
            created, locked = make_dirs(run_dir, "--out"), False
            try:
                with RunLock(run_dir):
                    locked = True
                    committed = check_committed(run_dir, run)  # under the lock: no writer commits meanwhile
                    return _execute(run, log, (run_dir, given, committed), execution, observer)
            except ConfigError:
                # only a directory this call made, and only after holding its lock: two `eval --out X` started at
                # once both saw no X; the one refused the lock used to delete the other's run (hostile round 22)
                if created and locked and not (run_dir / "run.json").exists():
                    shutil.rmtree(run_dir, ignore_errors=True)
                raise
    finally:
        release_probe()  # the probed policy, when the run never took it (nothing to run, or refused)


def _with_deprecated(
    observer: RunObserver | None, progress: ProgressCallback | None, should_stop: Callable[[], bool] | None
) -> RunObserver | None:
    """The caller's observer with the deprecated ``progress``/``should_stop`` arguments joined to it (warning)."""
    if progress is None and should_stop is None:
        return observer
    given = " and ".join(n for n, v in (("progress=", progress), ("should_stop=", should_stop)) if v is not None)
    warnings.warn(
        f"rollbench.evaluate({given}) is deprecated: pass observer=, a rollbench.RunObserver",
        DeprecationWarning,
        stacklevel=3,
    )
    old = _ProgressEvents(progress, should_stop)
    return old if observer is None else Observers(observer, old)


class _ProgressEvents(RunObserver):
    """The deprecated ``progress``/``should_stop`` arguments as an observer: typed events back into the old dicts."""

    def __init__(self, progress: ProgressCallback | None, should_stop: Callable[[], bool] | None) -> None:
        self.progress, self.stop = progress or (lambda event: None), should_stop or (lambda: False)

    def on_run_start(self, start: RunStart) -> None:
        self.progress({"event": "start", **asdict(start), "run_dir": str(start.run_dir), "warnings": [*start.warnings]})

    def on_steps(self, worker: str, running: Running) -> None:
        self.progress({"event": "steps", "worker": worker, "running": [asdict(e) for e in running]})

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.progress({"event": "episode", **asdict(summary)})

    def should_stop(self) -> bool:
        return self.stop()


class _Recording(RunObserver):
    """The invocation's own observer: commits what workers staged in plan order and keeps ``run.live.json``
    current (which ``rollbench runs``, MCP ``get_run`` and the dashboard's live view read)."""

    def __init__(self, live: LiveSnapshot, committer: BackgroundCommitter) -> None:
        self.live, self.committer = live, committer

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.committer.promote_ready()
        self.live.episode_done(summary.task, summary.success, summary.episode_index)
        self.live.write()

    def on_worker(self, worker: str, state: str) -> None:
        self.live.workers[worker] = state
        self.live.write()

    def on_steps(self, worker: str, running: Running) -> None:
        self.live.steps(worker, [asdict(e) for e in running])


def _execute(
    run: ResolvedRun,
    log: RunLog,
    where: tuple[Path, Path, Committed | None],
    execution: Execution,
    observer: RunObserver | None,
) -> GradeDocument:
    """Run the episodes the run directory still lacks, commit them, grade, and keep run.json honest throughout:
    RUNNING while this invocation runs, INTERRUPTED (resumable, with the reason) if it ends any other way than graded.
    ``where``: the directory as an absolute path (every file is written there) and as the caller gave it (shown),
    and its committed episodes' lengths as :func:`~rollbench.run.prepare.check_committed` read them."""
    run_dir = where[0]
    begin_execution(run_dir, log, execution.workers, execution.executor, execution.batch_size)
    try:
        with user_signals():  # Ctrl-C raises UserInterrupt: a policy's own KeyboardInterrupt is not taken for it
            writer, todo, live, idle = _open_run(run, log, where, execution, observer)
            committer = BackgroundCommitter(writer)
            setup = WorkerSetup(run, run_dir.resolve(), execution.batch_size)
            everyone = Observers(_Recording(live, committer), *([observer] if observer else []))
            try:
                counters = run_episodes(setup, todo, execution, everyone, committer)
            except KeyboardInterrupt:
                # keep what finished, say so on disk, and leave the directory resumable
                committer.close()
                _finish(run_dir, writer, log, live, everyone, status="INTERRUPTED")
                raise
            except BaseException:
                with contextlib.suppress(Exception):
                    committer.close()  # what finished is written before the error propagates
                raise
            committer.close()
            note_counters(log, counters)
            return _finish(run_dir, writer, log, live, everyone, idle=idle)
    except BaseException as exc:
        # never leave run.json saying RUNNING when nothing runs: the directory stays resumable, say why it stopped
        abandon_execution(run_dir, log, exc)  # (an interruption already finished the log as INTERRUPTED)
        raise


def _open_run(
    run: ResolvedRun,
    log: RunLog,
    where: tuple[Path, Path, Committed | None],
    execution: Execution,
    observer: RunObserver | None,
) -> tuple[DatasetWriter, list[PlannedEpisode], LiveSnapshot, bool]:
    """Open the writer (committing what a previous invocation staged), take back the errored episodes to retry, and
    announce the start: the writer, the episodes still to run (plan order), the live snapshot, and whether this
    invocation has nothing to do (a finished run resumed again: it is not recorded as an execution)."""
    (run_dir, shown, committed), plan = where, run.plan
    writer = _open_writer(run, run_dir, committed)
    promoted = writer.promote_ready()
    retried = retry_errored(run_dir, writer, log, execution.retry_errors)
    already = set(range(writer.committed)) | set(writer.staged())
    todo: list[PlannedEpisode] = [e for e in plan.episodes if e.episode_index not in already]
    live = LiveSnapshot(run_dir, {t.name: sum(1 for e in plan.episodes if e.task == t.name) for t in plan.tasks})
    for e in plan.episodes:
        if e.episode_index in already:
            live.done[e.task] += 1
    live.done_at_start = len(already)
    live.write(force=True)
    start = RunStart(shown, dict(live.totals), dict(live.done), len(retried), tuple(log.warnings))
    if observer is not None:  # the CLI's progress display prints the warnings (rollbench.cli.display)
        observer.on_run_start(start)
    else:
        for w in start.warnings:
            print(f"warning: {w}", file=sys.stderr)
    return writer, todo, live, not (todo or promoted or retried)


def _open_writer(run: ResolvedRun, run_dir: Path, committed: Committed | None) -> DatasetWriter:
    """The dataset writer of the run, of the features it records (:func:`~rollbench.record.lerobot.run_features`);
    ``committed``: the episodes it holds (lengths, statistics), as checked under the run lock held since (None: read
    them)."""
    first = run.tasks[run.plan.tasks[0].name]
    return DatasetWriter(
        run_dir,
        run_features(run),
        first.task.fps,
        run.plan.instructions,
        robot_type=first.task.family,
        artifact_kinds=_artifact_kinds(run.spec),
        plan=run.plan.episodes,
        committed=committed,
    )


def _artifact_kinds(spec: EvalSpec) -> tuple[str, ...]:
    """The episode artifacts the spec's policy writes: an agent policy its transcript, and its wire capture when
    asked (a policy of another kind that writes one is known from its committed rows, see DatasetWriter)."""
    if not spec.policy.startswith("agent:"):
        return ()
    return ("transcript", "wire_capture") if spec.policy_options.get("wire_capture") else ("transcript",)


def _finish(
    run_dir: Path,
    writer: DatasetWriter,
    log: RunLog,
    live: LiveSnapshot,
    observer: RunObserver,
    status: RunStatus | None = None,
    idle: bool = False,
) -> GradeDocument:
    """Commit what is staged, grade the directory, write run.json (``status``: the graded one unless given) and
    tell the observer the run ended. An ``idle`` invocation (nothing staged, run or retried) leaves no entry in
    ``executions`` (issue 42, item 18)."""
    writer.promote_ready()
    writer.write_stats()
    writer.write_videos_index()
    writer.remove_empty_staging()
    if idle:  # written before grading: the entry begun for it would count as an invocation that left no record
        log.executions = log.executions[:-1]
        write_run_log(run_dir, log)
    else:
        end_execution(run_dir, log, time.monotonic() - live.started, interrupted=bool(status))
    result = grade_run_dir(run_dir)
    record_outcomes(log, result.episodes)
    # an interruption that lost nothing (every episode already recorded) leaves the graded status
    final = status if status and result.status != "OK" else result.status
    record_results(run_dir, log, result, final)
    live.remove()
    observer.on_run_end(RunEnd(run_dir, final, result.episodes_recorded, result.episodes_requested))
    return result


def grade(run_dir: str | Path, *, check_videos: bool = True) -> GradeDocument:
    """Recompute a run's results from its directory: the grade document
    (:class:`~rollbench.core.grade_model.GradeDocument`; see :func:`rollbench.grading.grade.grade` for its blocks,
    units and errors; ``.to_json()`` is the ``grade --json`` dict). Reading it as a dict is deprecated (warns)."""
    return grade_run_dir(Path(run_dir), check_videos=check_videos)


def record_stop(run_dir: Path, change: Callable[[RunLog], bool]) -> None:
    """Let ``change`` set the block of ``run_dir/run.json`` that says a rule stopped the run (``sequential``,
    ``elimination``: :mod:`rollbench.grading.stopped`; it returns whether it changed anything) and, when it did,
    regrade the directory and store the result as ``results`` with its status, all under the run's lock: grade's
    status depends on that block, and ``grade --json`` must equal the ``results`` stored (docs/runs.md). A run
    still RUNNING keeps that status, and one INTERRUPTED keeps it unless the regrade is OK (as :func:`evaluate`
    leaves it). Nothing happens without a run.json.
    Raises ConfigError when another process holds the run's lock."""
    with RunLock(run_dir):
        log = read_run_log(run_dir)
        if log is None or not change(log):
            return
        write_run_log(run_dir, log)  # graded from disk: the block must be there first
        result = grade_run_dir(run_dir)
        keep = log.status == "RUNNING" or (log.status == "INTERRUPTED" and result.status != "OK")
        record_results(run_dir, log, result, log.status if keep else result.status)
