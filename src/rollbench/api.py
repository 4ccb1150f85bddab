"""The Python API every surface shares (CLI, MCP server, tests): :func:`evaluate` and :func:`grade`.

``evaluate`` = plan → execute → record → grade. It returns what :func:`rollbench.grading.grade.grade` computes from the
run directory, never in-process counters.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.core.identity import run_identity
from rollbench.core.interrupts import is_user_interrupt, user_signals
from rollbench.core.latency import check_latency
from rollbench.core.paths import check_output_path, make_dirs
from rollbench.core.plan import Plan, PlannedEpisode, image_size_for, make_plan, plan_log, video_cameras_for
from rollbench.core.registry import env_families, family_of
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.core.types import ConfigError, PolicyInfo, TaskInfo
from rollbench.grading.grade import grade as grade_run_dir
from rollbench.record.background import BackgroundCommitter
from rollbench.record.files import check_no_escaping_links
from rollbench.record.lerobot import dataset_features
from rollbench.record.on_disk import check_state_files, committed_lengths
from rollbench.record.retry import record_outcomes, retry_errored
from rollbench.record.runlog import (
    LiveSnapshot,
    RunLock,
    provenance,
    read_run_log,
    utc_now,
    write_run_log,
)
from rollbench.record.writer import DatasetWriter
from rollbench.run.observer import RunObserver
from rollbench.run.runners import Execution, run_episodes
from rollbench.run.worker import EpisodeSummary, Running, WorkerSetup

ProgressCallback = Callable[[dict[str, Any]], None]
"""Receives events: ``{"event": "start", "run_dir", "totals": {task: n}, "done": {task: n}, "retried": n,
"warnings": [str]}`` once (``done``: episodes already recorded or staged, which a resume does not re-run;
``retried``: recorded episodes taken back by ``--retry-errors`` to run again, not in ``done``), then
``{"event": "episode", "task", "episode_index", "success", "length", "termination_reason"}`` per finished episode,
and about once a second while episodes run ``{"event": "steps", "worker", "running": [{"episode_index", "task",
"step", "max_steps"}]}`` (that worker's episodes in progress; in-process and local workers)."""


def default_run_dir(spec: EvalSpec, root: Path = Path("runs")) -> Path:
    """``runs/<task>-<policy>-<UTC timestamp>`` with unsafe characters replaced."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{spec.env}-{spec.policy}")[:80].strip("_")
    return root / f"{name}-{stamp}"


def _probe_policy(spec: EvalSpec, tasks: Sequence[TaskInfo] = ()) -> PolicyInfo:
    """Build the policy once before any episode: unknown names and unreachable servers fail here, clearly, and so do
    tasks refused by the optional hook ``check_tasks(tasks, image_size_of)`` (a LeRobot checkpoint's features)."""
    from rollbench.run.worker import build_policy

    policy = build_policy(spec)
    info = policy.info
    try:
        if (check := getattr(policy, "check_tasks", None)) is not None and tasks:
            check(list(tasks), lambda t: image_size_for(spec, t, info.image_sizes))
    finally:
        try:
            policy.close()
        except BaseException as exc:
            if is_user_interrupt(exc):
                raise
            raise ConfigError(f"policy {spec.policy!r}: its close() raised {type(exc).__name__}: {exc}") from None
    return info


def check_run_dir(run_dir: Path) -> None:
    """ConfigError (nothing touched) unless ``run_dir`` is absent or a directory rollbench may open: no link in it
    leads outside it, and its committed episodes are intact (see ``record.writer.committed_lengths``)."""
    check_output_path(run_dir, "--out", directory=True)  # the path can be a directory: nothing else to check
    if not run_dir.exists():
        return
    check_state_files(run_dir)
    check_no_escaping_links(run_dir)
    if (run_dir / "run.json").exists():
        committed_lengths(run_dir)


def prepare_run(
    spec: EvalSpec, run_dir: Path, host_label: str | None = None, robot: str | None = None
) -> tuple[Plan, dict[str, Any]]:
    """Validate everything that can be validated before motion; return the plan and the run log to write.

    ``host_label`` and ``robot`` set the run's identity (defaults: see :func:`rollbench.core.identity.run_identity`); a
    resumed run keeps the identity it recorded, and asking for another one is a ConfigError."""
    check_run_dir(run_dir)
    plan = make_plan(spec)
    identity = run_identity(run_dir, [t.family for t in plan.tasks], host_label, robot).to_dict()
    for t in plan.tasks:
        why = family_of(t.name).missing()
        if why:
            raise ConfigError(f"cannot evaluate {t.name}: {why}")
    info = _probe_policy(spec, plan.tasks)
    cannot = [t.name for t in plan.tasks if not info.drives(t.name)]
    if cannot:
        raise ConfigError(
            f"policy {spec.policy} cannot drive {', '.join(cannot)}: it drives {', '.join(info.tasks)} only"
        )
    # the spec's, else the server's advertised one, else the tasks' reference client's (LIBERO: openpi's 5), else 1
    task_replan = {t.replan_every for t in plan.tasks}
    replan_every = spec.replan_every or info.replan_every or (task_replan.pop() if len(task_replan) == 1 else None) or 1
    existing = read_run_log(run_dir)
    if existing is not None and existing.get("spec_identity") != spec.identity():
        old, new = existing.get("spec", {}), spec.model_dump(mode="json")
        diff = ", ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} here" for k in new if old.get(k) != new.get(k))
        raise ConfigError(
            f"{run_dir} already holds a run of a different spec ({diff or 'identity ' + str(existing.get('spec_identity'))}); "
            "choose another --out, or resume it with the same options (rollbench eval --resume RUN_DIR)"
        )
    if existing is None and run_dir.exists() and any(run_dir.iterdir()):
        raise ConfigError(f"{run_dir} exists and is not a rollbench run directory; choose another --out")
    warnings = []
    if spec.success_rule:
        for t in plan.tasks:
            if t.success_rule != spec.success_rule:
                warnings.append(
                    f"success rule of {t.name} overridden: declared {t.success_rule}, graded with {spec.success_rule}"
                )
    warnings.extend(check_latency(spec.latency, spec.stale, plan.tasks, info))
    if spec.replan_every and info.chunk_size_known and spec.replan_every > info.chunk_size:
        warnings.append(
            f"--replan-every {spec.replan_every} is larger than the action chunk of policy {spec.policy} "
            f"({info.chunk_size} action{'s' if info.chunk_size > 1 else ''}): each chunk is executed whole and the "
            f"policy is asked again every {info.chunk_size} step{'s' if info.chunk_size > 1 else ''}, not every "
            f"{spec.replan_every}"
        )
    prov = provenance({t.family for t in plan.tasks})
    for fam_name in sorted({t.family for t in plan.tasks}):
        fam: Any = env_families().get(fam_name)
        if hasattr(fam, "provenance"):  # optional family hooks: facts for run.json, and warnings about them
            prov[fam_name] = fam.provenance()
        if hasattr(fam, "run_warnings"):
            warnings.extend(fam.run_warnings(spec))
    if existing is not None and isinstance(existing.get("identity"), dict):
        asked = {"host": host_label, "robot": robot}
        clash = [
            f"{k} {existing['identity'].get(k)!r} there, {v!r} asked"
            for k, v in asked.items()
            if v and v != existing["identity"].get(k)
        ]
        if clash:
            raise ConfigError(
                f"{run_dir} was recorded with identity {existing['identity']} ({'; '.join(clash)}); drop --host-label/--robot to resume it"
            )
    elif existing is not None:
        existing["identity"] = identity
    log = existing or {
        "rollbench_run_log": 1,
        "run_id": run_dir.name,
        "identity": identity,
        "spec": spec.model_dump(mode="json"),
        "spec_identity": spec.identity(),
        "plan": plan_log(spec, plan, info, replan_every),
        "provenance": prov,
        "warnings": warnings,
        "status": "RUNNING",
    }
    return plan, log


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
    Raises ConfigError (before anything is written) on bad input; episode failures end up in the result.
    """
    spec = spec or build_spec(**fields)
    execution = execution or Execution()
    run_dir = Path(out) if out is not None else default_run_dir(spec)
    plan, log = prepare_run(spec, run_dir, host_label, robot)
    created = not run_dir.exists()
    make_dirs(run_dir, "--out")
    try:
        with RunLock(run_dir):
            return _execute(spec, plan, log, run_dir, execution, progress, should_stop)
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
    spec: EvalSpec,
    plan: Plan,
    log: dict[str, Any],
    run_dir: Path,
    execution: Execution,
    progress: ProgressCallback | None,
    should_stop: Callable[[], bool] | None,
) -> dict[str, Any]:
    """Run the episodes ``run_dir`` still lacks, commit them, grade, and keep run.json honest throughout: RUNNING
    while this invocation runs, INTERRUPTED (resumable, with the reason) if it ends any other way than graded."""
    log["status"] = "RUNNING"
    log.setdefault("executions", []).append(
        {
            "started": utc_now(),
            "workers": execution.workers,
            "executor": execution.executor,
            "batch_size": execution.batch_size,
        }
    )
    write_run_log(run_dir, log)
    try:
        with user_signals():  # Ctrl-C raises UserInterrupt: a policy's own KeyboardInterrupt is not taken for it
            writer, todo, live = _open_run(spec, plan, log, run_dir, execution, progress)
            committer = BackgroundCommitter(writer)
            setup = WorkerSetup(
                spec,
                run_dir.resolve(),
                {t.name: t for t in plan.tasks},
                log["plan"]["replan_every"],
                log["plan"]["policy"]["needs_images"],
                execution.batch_size,
                log["plan"]["policy"].get("image_sizes") or {},
            )
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
            log["executions"][-1].update(counters)
            return _finish(run_dir, writer, log, live)
    except BaseException as exc:
        # never leave run.json saying RUNNING when nothing runs: the directory stays resumable, say why it stopped
        if log.get("status") == "RUNNING":  # (an interruption already finished the log as INTERRUPTED)
            log["status"] = "INTERRUPTED"
            log["executions"][-1].update(finished=utc_now(), error=f"{type(exc).__name__}: {exc}")
            write_run_log(run_dir, log)
        raise


def _open_run(
    spec: EvalSpec,
    plan: Plan,
    log: dict[str, Any],
    run_dir: Path,
    execution: Execution,
    progress: ProgressCallback | None,
) -> tuple[DatasetWriter, list[PlannedEpisode], LiveSnapshot]:
    """Open the writer (committing what a previous invocation staged), take back the errored episodes to retry, and
    announce the start: the writer, the episodes still to run (plan order) and the live snapshot."""
    writer = _open_writer(spec, plan, log["plan"]["policy"], run_dir)
    writer.promote_ready()
    retried = retry_errored(run_dir, writer, log, execution.retry_errors)
    already = set(range(writer.committed)) | set(writer.staged())
    todo: list[PlannedEpisode] = [e for e in plan.episodes if e.episode_index not in already]
    live = LiveSnapshot(run_dir, {t.name: sum(1 for e in plan.episodes if e.task == t.name) for t in plan.tasks})
    for e in plan.episodes:
        if e.episode_index in already:
            live.done[e.task] += 1
    live.done_at_start = len(already)
    live.write(force=True)
    _announce_start(progress, run_dir, live, len(retried), log.get("warnings", []))
    return writer, todo, live


def _open_writer(spec: EvalSpec, plan: Plan, policy: dict[str, Any], run_dir: Path) -> DatasetWriter:
    """The dataset writer of the run (its features from the first task, images at the size the run renders);
    ConfigError when the tasks would record different cameras. ``policy`` is run.json's ``plan.policy``."""
    first, needs_images = plan.tasks[0], policy["needs_images"]
    cams = video_cameras_for(spec, first, needs_images)
    for t in plan.tasks[1:]:
        if video_cameras_for(spec, t, needs_images) != cams:
            raise ConfigError("tasks of one run must record the same cameras; pass --cameras explicitly")
    return DatasetWriter(
        run_dir,
        dataset_features(
            first, cams, image_size_for(spec, first, policy.get("image_sizes")), delay_columns=spec.latency != "none"
        ),
        first.fps,
        plan.instructions,
        robot_type=first.family,
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
    run_dir: Path, writer: DatasetWriter, log: dict[str, Any], live: LiveSnapshot, status: str | None = None
) -> dict[str, Any]:
    """Commit what is staged, grade the directory, write run.json (``status``: the graded one unless given)."""
    writer.promote_ready()
    writer.write_stats()
    writer.write_videos_index()
    writer.remove_empty_staging()
    # this invocation's times first, so that the graded timing (from run.json) includes it
    log["executions"][-1]["finished"] = utc_now()
    log["executions"][-1]["elapsed_s"] = round(time.monotonic() - live.started, 3)
    if status:
        log["executions"][-1]["interrupted"] = True
    write_run_log(run_dir, log)
    result = grade_run_dir(run_dir)
    record_outcomes(log, result["episodes"])
    # an interruption that lost nothing (every episode already recorded) leaves the graded status
    log["status"] = status if status and result["status"] != "OK" else result["status"]
    log["results"] = result
    write_run_log(run_dir, log)
    live.remove()
    return result


def grade(run_dir: str | Path, *, check_videos: bool = True) -> dict[str, Any]:
    """Recompute a run's results from its directory (see :func:`rollbench.grading.grade.grade`)."""
    return grade_run_dir(Path(run_dir), check_videos=check_videos)
