"""Runners execute planned episodes through :class:`rollbench.run.worker.EpisodeWorker` and report each one.

A runner never computes metrics and never decides what an episode is: the plan fixes that before it starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from rollbench.core.plan import PlannedEpisode
from rollbench.run.execution import EXECUTORS, MAX_BATCH_SIZE, Execution
from rollbench.run.observer import RunObserver
from rollbench.run.worker import EpisodeSummary, EpisodeWorker, WorkerSetup

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


def run_in_process(setup: WorkerSetup, todo: Sequence[PlannedEpisode], observer: RunObserver) -> None:
    """Run ``todo`` in plan order in this process (``setup.batch_size`` at a time); stop starting episodes once
    ``observer.should_stop()``. Episodes are recorded by ``observer.commit`` (default: staged)."""
    observer.on_worker("0", "starting")
    worker = EpisodeWorker(setup, observer.commit)
    worker.on_steps = lambda running: observer.on_steps("0", running)
    pending = iter(todo)
    running: dict[int, str] = {}

    def next_episode(block: bool) -> PlannedEpisode | None:
        planned = None if observer.should_stop() else next(pending, None)
        if planned is not None:
            running[planned.episode_index] = f"episode {planned.episode_index} ({planned.task})"
            observer.on_worker("0", ", ".join(running.values()))
        return planned

    def done(summary: EpisodeSummary) -> None:
        running.pop(summary.episode_index, None)
        observer.on_worker("0", ", ".join(running.values()) or "idle")
        observer.on_result(summary)

    try:
        worker.run_stream(next_episode, done)
    finally:
        worker.close()


def run_episodes(
    setup: WorkerSetup, todo: Sequence[PlannedEpisode], execution: Execution, observer: RunObserver
) -> dict[str, Any]:
    """Run ``todo`` with the runner named by ``execution``, telling ``observer`` (see
    :class:`~rollbench.run.observer.RunObserver`) about each recorded episode, worker state and step progress.

    ``local`` with 1 worker runs in this process (recording with ``observer.commit``); ``local`` with K > 1 in K
    spawned worker processes (:mod:`rollbench.run.local`); ``ray`` on K Ray actors (:mod:`rollbench.run.ray_runner`).
    Workers elsewhere stage their episodes, and ``observer.on_result`` lets the caller commit them in order. Returns
    counters for the run log (worker starts and deaths, episodes re-run or lost; empty for the in-process runner).
    ``execution`` was validated when it was built (:class:`Execution`). Raises RollbenchError when workers cannot run
    at all.
    """
    if not todo:
        return {}
    if execution.executor == "local" and execution.workers == 1:
        run_in_process(setup, todo, observer)
        return {}
    if execution.executor == "local":
        from rollbench.run.local import LocalBackend
        from rollbench.run.pool import run_pool

        return run_pool(LocalBackend(setup), setup, todo, observer, slots=execution.workers)
    from rollbench.run.ray_runner import run_ray

    return run_ray(setup, list(todo), execution, observer)
