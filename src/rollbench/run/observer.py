"""One object for what a run tells its caller and the one question it asks: :class:`RunObserver`.

Every runner (in-process, local worker processes, Ray actors) and the dispatch pool take a single observer instead of
loose callbacks. The base class does nothing and never stops, so a caller overrides only what it listens to
(``api.evaluate``'s observer updates ``run.live.json``, commits in order and forwards progress events).
"""

from __future__ import annotations

from collections.abc import Callable

from rollbench.core.episode import EpisodeRecord
from rollbench.run.worker import EpisodeSummary, Running

Commit = Callable[[EpisodeRecord, str | None], bool]
"""Records one finished episode (with its render failure, if any); False if it was already recorded."""


class RunObserver:
    """A run's events and its stop check.

    * :meth:`on_result` — an episode was staged or committed (``summary``; progress display, never results). Called
      in this process, in plan order per worker, once per episode.
    * :meth:`should_stop` — polled between episodes (at least every ``run.pool.POLL_S`` seconds with workers); once
      True, no new episode starts and the episodes in flight finish.
    * :meth:`on_worker` — ``(worker id, state)``: ``starting``, ``idle``, ``episode 17 (metaworld/reach-v3)``,
      ``died (...)``, for ``run.live.json``.
    * :meth:`on_steps` — ``(worker id, its running episodes' steps)`` about once a second (in-process and local
      workers; Ray actors report finished episodes only).
    * :attr:`commit` — how an episode run *in this process* is recorded (the caller's
      ``DatasetWriter.commit_record``); None: stage it in the run directory, as workers elsewhere always do.
    """

    commit: Commit | None = None

    def on_result(self, summary: EpisodeSummary) -> None:
        """An episode is recorded (staged or committed)."""

    def should_stop(self) -> bool:
        """Whether to stop starting episodes (default: never)."""
        return False

    def on_worker(self, worker: str, state: str) -> None:
        """A worker's state changed."""

    def on_steps(self, worker: str, running: Running) -> None:
        """A worker's running episodes advanced (at most about once a second per worker)."""
