"""Runners execute planned episodes through :class:`rollbench.run.worker.EpisodeWorker` and report each one.

A runner never computes metrics and never decides what an episode is: the plan fixes that before it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rollbench.core.episode import EpisodeRecord
from rollbench.core.plan import PlannedEpisode
from rollbench.core.types import ConfigError
from rollbench.record.retry import check_mode
from rollbench.run.ray_options import RayOptions
from rollbench.run.worker import EpisodeSummary, EpisodeWorker, Running, WorkerSetup

OnResult = Callable[[EpisodeSummary], None]
OnWorker = Callable[[str, str], None]
OnSteps = Callable[[str, Running], None]  # (worker id, its running episodes' steps), see EpisodeWorker.on_steps
ShouldStop = Callable[[], bool]
Commit = Callable[[EpisodeRecord, str | None], bool]
EXECUTORS = ("local", "ray")


MAX_BATCH_SIZE = 256  # episodes (and simulators) one worker keeps in lockstep


@dataclass(frozen=True)
class Execution:
    """How to run (not part of the run's identity): worker count, executor, and episodes per worker in lockstep
    (``batch_size``, see :mod:`rollbench.run.lockstep`). None of these changes what an episode records.
    ``retry_errors`` says which errored episodes a resume re-runs: ``infra``, ``all`` or ``none`` (see
    :mod:`rollbench.record.retry`). ``ray``: resources, placement and policy place of Ray actors
    (:class:`~rollbench.run.ray_options.RayOptions`; only with ``executor="ray"``)."""

    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    batch_size: int = 1
    retry_errors: str = "infra"
    ray: RayOptions = field(default_factory=RayOptions)

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {self.workers}")
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ConfigError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}, got {self.batch_size}")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"unknown executor {self.executor!r}; valid executors: {', '.join(EXECUTORS)}")
        if self.ray_address and self.executor != "ray":
            raise ConfigError("--ray-address only applies to --executor ray")
        if self.ray != RayOptions() and self.executor != "ray":
            raise ConfigError("--ray-cpus/--ray-gpus/--ray-resources/--ray-placement only apply to --executor ray")
        check_mode(self.retry_errors)


def run_in_process(
    setup: WorkerSetup,
    todo: Sequence[PlannedEpisode],
    on_result: OnResult,
    should_stop: ShouldStop,
    on_worker: OnWorker | None = None,
    commit: Commit | None = None,
    on_steps: OnSteps | None = None,
) -> None:
    """Run ``todo`` in plan order in this process (``setup.batch_size`` at a time); stop starting episodes once
    ``should_stop()``.

    ``commit`` records each episode (the caller's ``DatasetWriter.commit_record``); default: stage it."""
    state = on_worker or (lambda worker, what: None)
    state("0", "starting")
    worker = EpisodeWorker(setup, commit)
    if on_steps is not None:
        worker.on_steps = lambda running: on_steps("0", running)
    pending = iter(todo)
    running: dict[int, str] = {}

    def next_episode(block: bool) -> PlannedEpisode | None:
        planned = None if should_stop() else next(pending, None)
        if planned is not None:
            running[planned.episode_index] = f"episode {planned.episode_index} ({planned.task})"
            state("0", ", ".join(running.values()))
        return planned

    def done(summary: EpisodeSummary) -> None:
        running.pop(summary.episode_index, None)
        state("0", ", ".join(running.values()) or "idle")
        on_result(summary)

    try:
        worker.run_stream(next_episode, done)
    finally:
        worker.close()


def run_episodes(
    setup: WorkerSetup,
    todo: Sequence[PlannedEpisode],
    execution: Execution,
    on_result: OnResult,
    should_stop: ShouldStop,
    on_worker: OnWorker | None = None,
    commit: Commit | None = None,
    on_steps: OnSteps | None = None,
) -> dict[str, Any]:
    """Run ``todo`` with the runner named by ``execution`` and report each staged episode to ``on_result``.

    ``local`` with 1 worker runs in this process; ``local`` with K > 1 in K spawned worker processes
    (:mod:`rollbench.run.local`); ``ray`` on K Ray actors (:mod:`rollbench.run.ray_runner`). ``on_worker``
    receives ``(worker id, state)`` for the live snapshot, ``on_steps`` ``(worker id, running episodes' steps)``
    about once a second (in-process and local workers; Ray actors report episodes only). ``commit`` records episodes run in this process
    (workers elsewhere stage theirs, and ``on_result`` lets the caller commit them in order). Returns counters for
    the run log (worker starts and deaths, episodes re-run or lost; empty for the in-process runner). ``execution``
    was validated when it was built (:class:`Execution`). Raises RollbenchError when workers cannot run at all.
    """
    state: OnWorker = on_worker or (lambda worker, what: None)
    if not todo:
        return {}
    if execution.executor == "local" and execution.workers == 1:
        run_in_process(setup, todo, on_result, should_stop, state, commit, on_steps)
        return {}
    if execution.executor == "local":
        from rollbench.run.local import LocalBackend
        from rollbench.run.pool import run_pool

        backend = LocalBackend(setup)
        return run_pool(
            backend,
            execution.workers,
            todo,
            setup.run_dir,
            setup.tasks,
            on_result,
            should_stop,
            state,
            setup.batch_size,
            on_steps,
        )
    from rollbench.run.ray_runner import run_ray

    return run_ray(setup, list(todo), execution, on_result, should_stop, state)
