"""A run the MCP server executes (:class:`Active`: its stop and completion flags, live counts for ``get_run``) and
its observer (:class:`Notifier`: the start and each finished episode as an MCP progress notification)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import anyio.from_thread
from mcp.server.mcpserver import Context

from rollbench.run.observer import EpisodeSummary, RunObserver, RunStart

log = logging.getLogger("rollbench.mcp.server")


@dataclass
class Active:
    """A run this server is executing: its stop flag, completion flag and live counts (for get_run)."""

    stop: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    total: int = 0
    done_at_start: int = 0
    last: str = ""


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
