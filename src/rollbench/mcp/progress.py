"""A run the MCP server executes (:class:`Active`: its stop flag, where its worker thread is in its life, live counts
for ``get_run``) and its observer (:class:`Notifier`: the start and each finished episode as an MCP progress
notification)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context

from rollbench.run.observer import EpisodeSummary, RunObserver, RunStart

log = logging.getLogger("rollbench.mcp.server")


@dataclass
class Active:
    """A run this server is executing: its stop flag, live counts (for get_run), and where its work is in its life.

    The work goes ``waiting`` (for a rollout slot or a worker thread) -> ``running`` (its thread called
    :meth:`begin`) -> ``ended`` (:meth:`end`), or ``waiting`` -> ``dropped`` (:meth:`drop`: cancelled before any
    thread began it; a thread that picks it up later does nothing). ``ended`` (an ``anyio.Event``, so waiting for it
    takes no worker thread) is set in both last states, so whoever waits for it never waits for what cannot come.
    Create it in the event loop (``anyio.Event`` needs one)."""

    stop: threading.Event = field(default_factory=threading.Event)
    ended: anyio.Event = field(default_factory=anyio.Event)
    done: int = 0
    total: int = 0
    done_at_start: int = 0
    last: str = ""
    state: str = "waiting"
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self) -> bool:
        """In the worker thread, before the work: True to go on; False when the call was dropped (do nothing)."""
        with self._lock:
            if self.state == "dropped":
                return False
            self.state = "running"
            return True

    def end(self) -> None:
        """In the worker thread, after the work (however it ended): ``ended`` is set in the event loop."""
        with self._lock:
            self.state = "ended"
        try:
            anyio.from_thread.run_sync(self.ended.set)
        except RuntimeError:  # the event loop is gone (the process is ending): nobody is left to wait
            log.debug("run ended after its event loop closed")

    def drop(self) -> bool:
        """In the event loop, on cancellation: True (and ``ended`` set) when no thread began the work, so none ever
        will; False when it is running or ended (wait for ``ended``)."""
        with self._lock:
            if self.state != "waiting":
                return False
            self.state = "dropped"
        self.ended.set()
        return True


class Notifier(RunObserver):
    """A run's observer: each finished episode (and the start) becomes an MCP progress notification and ``last``;
    steps inside episodes are not sent (get_run's live view shows them); stops when the client cancelled."""

    def __init__(self, run_id: str, active: Active, ctx: Context | None) -> None:
        self.run_id, self.active, self.ctx = run_id, active, ctx

    def on_run_start(self, start: RunStart) -> None:
        self.active.total = sum(start.totals.values())
        self.active.done = self.active.done_at_start = sum(start.done.values())
        self._say(f"run {self.run_id}: {self.active.done} of {self.active.total} episodes already recorded")

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.active.done += 1
        how = "succeeded" if summary.success else f"ended by {summary.termination_reason}"
        self._say(
            f"episode {summary.episode_index} ({summary.task}) {how} after {summary.length} steps; "
            f"{self.active.done} of {self.active.total} episodes done"
        )

    def should_stop(self) -> bool:
        return self.active.stop.is_set()

    def _say(self, message: str) -> None:
        self.active.last = message
        if self.ctx is not None and not self.active.stop.is_set():
            try:
                anyio.from_thread.run(self.ctx.report_progress, self.active.done, self.active.total, message)
            except Exception as exc:  # progress is best effort; the run itself must go on
                log.warning("progress notification not sent: %r", exc)
