"""Small run observers for tests (the public :class:`rollbench.RunObserver` with one method filled in)."""

from __future__ import annotations

from collections.abc import Callable

from rollbench.core.episode import EpisodeRecord
from rollbench.run.observer import EpisodeSummary, RunObserver, RunStart


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
