"""The Python API every surface shares (CLI, MCP server, tests): :func:`evaluate` and :func:`grade`.

``evaluate`` = plan → execute → record → grade. It returns what :func:`rollbench.grading.grade.grade` computes from the
run directory, never in-process counters.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.identity import sanitize_segment
from rollbench.core.interrupts import user_signals
from rollbench.core.paths import make_dirs
from rollbench.core.plan import PlannedEpisode, ResolvedRun
from rollbench.core.runlog_model import RunLog, RunStatus
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.grade import grade as grade_run_dir
from rollbench.record.background import BackgroundCommitter
from rollbench.record.lerobot import dataset_features
from rollbench.record.retry import record_outcomes, retry_errored
from rollbench.record.runlog import (
    LiveSnapshot,
    RunLock,
    abandon_execution,
    begin_execution,
    end_execution,
    note_counters,
    record_results,
)
from rollbench.record.writer import DatasetWriter
from rollbench.run.observer import RunObserver
from rollbench.run.prepare import check_run_dir, prepare_run
from rollbench.run.ray_options import RayOptions as RayOptions  # public: Execution(ray=RayOptions(...))
from rollbench.run.runners import Execution, execution_session, run_episodes
from rollbench.run.worker import EpisodeSummary, Running, WorkerSetup

__all__ = ["Execution", "ProgressCallback", "check_run_dir", "default_run_dir", "evaluate", "grade", "prepare_run"]

ProgressCallback = Callable[[dict[str, Any]], None]
"""Receives events: ``{"event": "start", "run_dir", "totals": {task: n}, "done": {task: n}, "retried": n,
"warnings": [str]}`` once (``done``: episodes already recorded or staged, which a resume does not re-run;
``retried``: recorded episodes taken back by ``--retry-errors`` to run again, not in ``done``), then
``{"event": "episode", "task", "episode_index", "success", "length", "termination_reason"}`` per finished episode,
and about once a second while episodes run ``{"event": "steps", "worker", "running": [{"episode_index", "task",
"step", "max_steps"}]}`` (that worker's episodes in progress; in-process and local workers)."""


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
    progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    host_label: str | None = None,
    robot: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """Run ``spec`` (or ``EvalSpec(**fields)``) into ``out`` and return the graded result (see
    :func:`rollbench.grading.grade.grade`).

    Re-running into an existing run directory of the same spec resumes it: missing episodes run, and errored ones
    selected by ``execution.retry_errors`` (default: infrastructure faults) are re-run and replaced.
    ``should_stop`` is polled between episodes; when it returns True no new episode starts, the episodes already
    finished are committed, and the (resumable) run is graded as it stands.
    ``host_label``/``robot`` set the run's identity ``host/robot/name`` recorded in run.json (see prepare_run).
    Raises ConfigError (before anything is written) on bad input, including a Ray cluster that cannot be reached or
    cannot hold a worker (:func:`~rollbench.run.runners.execution_session`); episode failures end up in the result.
    """
    spec = spec or build_spec(**fields)
    execution = execution or Execution()
    run_dir = Path(out) if out is not None else default_run_dir(spec)
    run, log = prepare_run(spec, run_dir, host_label, robot, execution)
    with execution_session(execution):  # Ray connected (or refused) before anything is written
        created = not run_dir.exists()
        make_dirs(run_dir, "--out")
        try:
            with RunLock(run_dir):
                return _execute(run, log, run_dir, execution, progress, should_stop)
        except ConfigError:
            if created and not (run_dir / "run.json").exists():
                shutil.rmtree(run_dir, ignore_errors=True)
            raise


class _RunEvents(RunObserver):
    """The observer of one invocation: commits what workers staged in plan order, keeps ``run.live.json`` current,
    forwards ``episode`` and ``steps`` events to ``progress`` and asks ``should_stop``."""

    def __init__(
        self,
        live: LiveSnapshot,
        committer: BackgroundCommitter,
        progress: ProgressCallback | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.live, self.committer, self.progress = live, committer, progress
        self.stop = should_stop or (lambda: False)
        self.commit = committer.commit

    def on_result(self, summary: EpisodeSummary) -> None:
        self.committer.promote_ready()
        self.live.episode_done(summary.task, summary.success, summary.episode_index)
        self.live.write()
        if self.progress:
            self.progress({"event": "episode", **summary.__dict__})

    def should_stop(self) -> bool:
        return self.stop()

    def on_worker(self, worker: str, state: str) -> None:
        self.live.workers[worker] = state
        self.live.write()

    def on_steps(self, worker: str, running: Running) -> None:
        self.live.steps(worker, running)
        if self.progress:
            self.progress({"event": "steps", "worker": worker, "running": running})


def _execute(
    run: ResolvedRun,
    log: RunLog,
    run_dir: Path,
    execution: Execution,
    progress: ProgressCallback | None,
    should_stop: Callable[[], bool] | None,
) -> dict[str, Any]:
    """Run the episodes ``run_dir`` still lacks, commit them, grade, and keep run.json honest throughout: RUNNING
    while this invocation runs, INTERRUPTED (resumable, with the reason) if it ends any other way than graded."""
    begin_execution(run_dir, log, execution.workers, execution.executor, execution.batch_size)
    try:
        with user_signals():  # Ctrl-C raises UserInterrupt: a policy's own KeyboardInterrupt is not taken for it
            writer, todo, live, idle = _open_run(run, log, run_dir, execution, progress)
            committer = BackgroundCommitter(writer)
            setup = WorkerSetup(run, run_dir.resolve(), execution.batch_size)
            try:
                counters = run_episodes(setup, todo, execution, _RunEvents(live, committer, progress, should_stop))
            except KeyboardInterrupt:
                # keep what finished, say so on disk, and leave the directory resumable
                committer.close()
                _finish(run_dir, writer, log, live, status="INTERRUPTED")
                raise
            except BaseException:
                with contextlib.suppress(Exception):
                    committer.close()  # what finished is written before the error propagates
                raise
            committer.close()
            note_counters(log, counters)
            return _finish(run_dir, writer, log, live, idle=idle)
    except BaseException as exc:
        # never leave run.json saying RUNNING when nothing runs: the directory stays resumable, say why it stopped
        abandon_execution(run_dir, log, exc)  # (an interruption already finished the log as INTERRUPTED)
        raise


def _open_run(
    run: ResolvedRun,
    log: RunLog,
    run_dir: Path,
    execution: Execution,
    progress: ProgressCallback | None,
) -> tuple[DatasetWriter, list[PlannedEpisode], LiveSnapshot, bool]:
    """Open the writer (committing what a previous invocation staged), take back the errored episodes to retry, and
    announce the start: the writer, the episodes still to run (plan order), the live snapshot, and whether this
    invocation has nothing to do (a finished run resumed again: it is not recorded as an execution)."""
    writer, plan = _open_writer(run, run_dir), run.plan
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
    _announce_start(progress, run_dir, live, len(retried), log.warnings)
    return writer, todo, live, not (todo or promoted or retried)


def _open_writer(run: ResolvedRun, run_dir: Path) -> DatasetWriter:
    """The dataset writer of the run: its features from the first task (every task records the same cameras, see
    :func:`rollbench.core.plan.resolve_run`), images at the size the run renders."""
    first = run.tasks[run.plan.tasks[0].name]
    return DatasetWriter(
        run_dir,
        dataset_features(first.task, first.video_cameras, first.image_size, delay_columns=run.spec.latency != "none"),
        first.task.fps,
        run.plan.instructions,
        robot_type=first.task.family,
        planned=len(run.plan.episodes),
    )


def _announce_start(
    progress: ProgressCallback | None, run_dir: Path, live: LiveSnapshot, retried: int, warnings: list[str]
) -> None:
    """The ``start`` event (see :data:`ProgressCallback`), or without a progress callback the warnings on stderr."""
    if progress:  # the progress display prints the warnings (rollbench.cli.display.ProgressDisplay)
        progress(
            {
                "event": "start",
                "run_dir": str(run_dir),
                "totals": dict(live.totals),
                "done": dict(live.done),
                "retried": retried,  # errored episodes taken back to run again (--retry-errors)
                "warnings": list(warnings),
            }
        )
    else:
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)


def _finish(
    run_dir: Path,
    writer: DatasetWriter,
    log: RunLog,
    live: LiveSnapshot,
    status: RunStatus | None = None,
    idle: bool = False,
) -> dict[str, Any]:
    """Commit what is staged, grade the directory, write run.json (``status``: the graded one unless given). An
    ``idle`` invocation (nothing staged, run or retried) leaves no entry in ``executions`` (issue 42, item 18)."""
    writer.promote_ready()
    writer.write_stats()
    writer.write_videos_index()
    writer.remove_empty_staging()
    if idle:
        log.executions = log.executions[:-1]
    else:
        end_execution(run_dir, log, time.monotonic() - live.started, interrupted=bool(status))
    result = grade_run_dir(run_dir)
    record_outcomes(log, result["episodes"])
    # an interruption that lost nothing (every episode already recorded) leaves the graded status
    record_results(run_dir, log, result, status if status and result["status"] != "OK" else result["status"])
    live.remove()
    return result


def grade(run_dir: str | Path, *, check_videos: bool = True) -> dict[str, Any]:
    """Recompute a run's results from its directory (see :func:`rollbench.grading.grade.grade`)."""
    return grade_run_dir(Path(run_dir), check_videos=check_videos)
