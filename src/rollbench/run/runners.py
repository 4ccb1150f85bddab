"""Runners execute planned episodes through :class:`rollbench.run.worker.EpisodeWorker` and report each one.

A runner never computes metrics and never decides what an episode is: the plan fixes that before it starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from rollbench.core.plan import PlannedEpisode
from rollbench.run.execution import EXECUTORS, MAX_BATCH_SIZE, Execution
from rollbench.run.observer import EpisodeStart, EpisodeSummary, Running, RunObserver
from rollbench.run.worker import EpisodeWorker, Recorder, WorkerSetup

__all__ = ["EXECUTORS", "MAX_BATCH_SIZE", "Execution", "execution_session", "run_episodes", "run_in_process"]


@contextlib.contextmanager
def execution_session(execution: Execution) -> Iterator[None]:
    """What ``execution`` holds for a whole run or study, opened before anything is written: for ``ray`` the
    connection to the cluster (or the private instance), checked to hold a worker
    (:func:`rollbench.run.ray_session.ray_session`; ConfigError when it cannot); nothing for ``local``. Every run
    inside the ``with`` block uses it."""
    if execution.executor != "ray":
        yield
        return
    from rollbench.run.ray_session import ray_session

    with ray_session(execution):
        yield


class _InProcess(RunObserver):
    """The in-process worker's events passed on to the run's observer, with worker ``0``'s state (the episodes it
    runs) told to ``on_worker`` as the pool tells it for its workers."""

    def __init__(self, observer: RunObserver) -> None:
        self.observer = observer
        self.running: dict[int, str] = {}

    def on_episode_start(self, start: EpisodeStart) -> None:
        self.running[start.episode_index] = f"episode {start.episode_index} ({start.task})"
        self.observer.on_worker("0", ", ".join(self.running.values()))
        self.observer.on_episode_start(start)

    def on_steps(self, worker: str, running: Running) -> None:
        self.observer.on_steps(worker, running)

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.running.pop(summary.episode_index, None)
        self.observer.on_worker("0", ", ".join(self.running.values()) or "idle")
        self.observer.on_episode_end(summary)


def run_in_process(
    setup: WorkerSetup, todo: Sequence[PlannedEpisode], observer: RunObserver, recorder: Recorder | None = None
) -> None:
    """Run ``todo`` in plan order in this process (``setup.batch_size`` at a time); stop starting episodes once
    ``observer.should_stop()``. Episodes are recorded by ``recorder`` (default: staged)."""
    observer.on_worker("0", "starting")
    worker = EpisodeWorker(setup, _InProcess(observer), recorder=recorder)
    pending = iter(todo)
    try:
        worker.run_stream(lambda block: None if observer.should_stop() else next(pending, None))
    finally:
        worker.close()


def run_episodes(
    setup: WorkerSetup,
    todo: Sequence[PlannedEpisode],
    execution: Execution,
    observer: RunObserver,
    recorder: Recorder | None = None,
) -> dict[str, Any]:
    """Run ``todo`` with the runner named by ``execution``, telling ``observer`` (see
    :class:`~rollbench.run.observer.RunObserver`) about each episode's start, steps and end, and worker states.

    ``local`` with 1 worker runs in this process (recording with ``recorder``, default: staged); ``local`` with K > 1 in K
    spawned worker processes (:mod:`rollbench.run.local`); ``ray`` on K Ray actors (:mod:`rollbench.run.ray_runner`).
    Workers elsewhere stage their episodes, and ``observer.on_episode_end`` lets the caller commit them in order. Returns
    counters for the run log (worker starts and deaths, episodes re-run or lost; empty for the in-process runner).
    ``execution`` was validated when it was built (:class:`Execution`). Raises RollbenchError when workers cannot run
    at all.
    """
    if not todo:
        return {}
    if execution.executor == "local" and execution.workers == 1:
        run_in_process(setup, todo, observer, recorder)
        return {}
    if execution.executor == "local":
        from rollbench.run.local import LocalBackend
        from rollbench.run.pool import run_pool

        return run_pool(LocalBackend(setup), setup, todo, observer, slots=execution.workers)
    from rollbench.run.ray_runner import run_ray

    return run_ray(setup, list(todo), execution, observer)
