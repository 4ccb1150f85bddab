"""One object for what a run tells its caller and the one question it asks: :class:`RunObserver`, with typed events.

Every layer that hears a run uses it: the runners (in-process, local worker processes, Ray actors) and the dispatch
pool report to it, ``rollbench.evaluate(observer=...)`` takes a user's, and the CLI's progress bars, the MCP
server's progress notifications, ``run.live.json`` (read by ``rollbench runs``, MCP ``get_run`` and the dashboard's
live view) and the sequential runner's early stop are each one. The base class does nothing and never stops, so an
observer overrides only what it listens to; :class:`Observers` hands every event to several.

Order of one invocation (what a user's observer receives): :meth:`RunObserver.on_run_start` once; per episode
:meth:`~RunObserver.on_episode_start` then, while it runs, :meth:`~RunObserver.on_steps` about once a second, then
:meth:`~RunObserver.on_episode_end` (in plan order per worker); :meth:`~RunObserver.on_run_end` once when the run is
graded. :meth:`~RunObserver.should_stop` is polled between episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "EpisodeProgress",
    "EpisodeStart",
    "EpisodeSummary",
    "Observers",
    "RunEnd",
    "RunObserver",
    "RunStart",
    "Running",
]


@dataclass(frozen=True)
class RunStart:
    """The run is about to execute its episodes.

    Attributes:
        run_dir: the run directory, as the caller gave it (files are written under its absolute form).
        totals: task -> episodes the plan holds.
        done: task -> episodes already recorded or staged (a resume does not run them again).
        retried: recorded episodes taken back by ``--retry-errors`` to run again (not in ``done``).
        warnings: the run's warnings, in words (the CLI prints them).
    """

    run_dir: Path
    totals: dict[str, int]
    done: dict[str, int]
    retried: int = 0
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class EpisodeStart:
    """A planned episode was handed to a worker (``worker``: its id, ``"0"`` in-process); a worker that died before
    recording it makes the episode start again on another."""

    worker: str
    episode_index: int
    task: str


@dataclass(frozen=True)
class EpisodeProgress:
    """An episode in progress: ``step`` steps done of at most ``max_steps`` (its horizon)."""

    episode_index: int
    task: str
    step: int
    max_steps: int


Running = tuple[EpisodeProgress, ...]
"""One worker's episodes in progress."""


@dataclass(frozen=True)
class EpisodeSummary:
    """An episode ended and is recorded (staged or committed): progress display only, never results (those come
    from the recorded files)."""

    episode_index: int
    task: str
    success: bool
    length: int  # steps
    termination_reason: str
    staged: bool  # False if another attempt of the same episode had already been recorded
    policy_hung: bool = False  # a policy call of this worker missed its deadline: replace the worker (runners.pool)


@dataclass(frozen=True)
class RunEnd:
    """The invocation ended and the run was graded from its files.

    Attributes:
        run_dir: the run directory, as the caller gave it (files are written under its absolute form).
        status: the status written to run.json: the graded one (``OK``, ``PARTIAL``, ``FAILED``), or
            ``INTERRUPTED`` when Ctrl-C/SIGTERM stopped it before every episode was recorded.
        episodes_recorded: episodes recorded in the run directory.
        episodes_requested: episodes the plan holds.
    """

    run_dir: Path
    status: str
    episodes_recorded: int
    episodes_requested: int


class RunObserver:
    """A run's events and its stop check (see the module docstring for their order). Every method may be called
    from a thread other than the caller's; none may raise (an exception ends the run)."""

    def on_run_start(self, start: RunStart) -> None:
        """The run is about to execute its episodes."""

    def on_episode_start(self, start: EpisodeStart) -> None:
        """A worker was handed an episode."""

    def on_steps(self, worker: str, running: Running) -> None:
        """``worker``'s running episodes advanced (at most about once a second per worker; in-process and local
        workers; Ray actors report finished episodes only)."""

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        """An episode is recorded (staged or committed); in plan order per worker, once per episode."""

    def on_run_end(self, end: RunEnd) -> None:
        """The run was graded (not called when the invocation ends with an error: that error is raised)."""

    def should_stop(self) -> bool:
        """Whether to stop starting episodes (default: never). Polled between episodes (at least every
        ``run.pool.POLL_S`` seconds with workers); once True no new episode starts and those in flight finish."""
        return False

    def on_worker(self, worker: str, state: str) -> None:
        """A worker's state changed: ``starting``, ``idle``, ``episode 17 (metaworld/reach-v3)``, ``died (...)``
        (for ``run.live.json``)."""


class Observers(RunObserver):
    """Several observers as one: every event goes to each in order; :meth:`should_stop` is True once any says so."""

    def __init__(self, *observers: RunObserver) -> None:
        self.observers = observers

    def on_run_start(self, start: RunStart) -> None:
        for o in self.observers:
            o.on_run_start(start)

    def on_episode_start(self, start: EpisodeStart) -> None:
        for o in self.observers:
            o.on_episode_start(start)

    def on_steps(self, worker: str, running: Running) -> None:
        for o in self.observers:
            o.on_steps(worker, running)

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        for o in self.observers:
            o.on_episode_end(summary)

    def on_run_end(self, end: RunEnd) -> None:
        for o in self.observers:
            o.on_run_end(end)

    def should_stop(self) -> bool:
        return any(o.should_stop() for o in self.observers)

    def on_worker(self, worker: str, state: str) -> None:
        for o in self.observers:
            o.on_worker(worker, state)
