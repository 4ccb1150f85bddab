"""Small run observers for tests (the public :class:`rollbench.RunObserver` with one method filled in)."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable

from rollbench.core.episode import EpisodeRecord
from rollbench.run.observer import EpisodeStart, EpisodeSummary, RunObserver, RunStart


class OnEpisodeEnd(RunObserver):
    """Calls ``fn(summary)`` for every recorded episode; stops starting episodes once ``stop()`` (default: never)."""

    def __init__(self, fn: Callable[[EpisodeSummary], object], stop: Callable[[], bool] = lambda: False) -> None:
        self.fn, self.stop = fn, stop

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.fn(summary)

    def should_stop(self) -> bool:
        return self.stop()


class Starts(RunObserver):
    """Keeps every run start (``starts``)."""

    def __init__(self) -> None:
        self.starts: list[RunStart] = []

    def on_run_start(self, start: RunStart) -> None:
        self.starts.append(start)


class KeepRecords:
    """A worker recorder that keeps each episode record in memory (``records``) instead of writing it."""

    def __init__(self) -> None:
        self.records: list[EpisodeRecord] = []

    def commit(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        self.records.append(rec)
        return True


class KillWaitingWorker(RunObserver):
    """For ``--workers`` runs in this process: stops (SIGSTOP) a worker that reports ``idle``, i.e. waits for work in
    rollbench's own code, before the pool hands it an episode, then SIGKILLs it as soon as it was handed one: a death
    outside any policy or env call, with an episode in flight, at a deterministic point. Kills ``times`` workers, each
    on the same episode (the first one killed, ``killed[0]``; a stopped worker handed another one is let go on)."""

    def __init__(self, times: int = 1) -> None:
        self.times = times
        self.idle: str | None = None
        self.stopped: multiprocessing.process.BaseProcess | None = None
        self.killed: list[int] = []

    def on_worker(self, worker: str, state: str) -> None:
        if state == "idle" and self.idle is None and len(self.killed) < self.times:
            self.idle = worker

    def should_stop(self) -> bool:
        if self.idle is not None and self.stopped is None:
            name = f"rollbench-worker-{self.idle}"
            procs = [p for p in multiprocessing.active_children() if p.name == name and p.pid is not None]
            if not procs:
                self.idle = None
                return False
            self.stopped = procs[0]
            os.kill(int(self.stopped.pid or 0), signal.SIGSTOP)
        return False

    def on_episode_start(self, start: EpisodeStart) -> None:
        if self.stopped is None or start.worker != self.idle:
            return
        pid = int(self.stopped.pid or 0)
        if not self.killed or start.episode_index == self.killed[0]:
            os.kill(pid, signal.SIGKILL)
            self.killed.append(start.episode_index)
        else:
            os.kill(pid, signal.SIGCONT)
        self.idle, self.stopped = None, None
