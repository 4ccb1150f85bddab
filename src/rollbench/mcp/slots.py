"""How the MCP server runs a rollout's work (``run_policy_rollout``, ``compare_policies_sequential``) in a worker
thread: at most ``--max-rollouts`` at once, as many calls again waiting, and a cancellation that never waits for what
cannot come.

Why (hostile round 24, F2): the work used to run in one of anyio's default worker threads (40, shared with every
synchronous tool the SDK runs: ``list_runs``, ``get_run``, ``grade_run``, ...), and a call cancelled while it waited
for one waited, in another worker thread, for a "finished" signal that only the never-started work could give. 40
such calls held every thread for good: no synchronous tool answered any client, the run names stayed taken, and
SIGTERM no longer ended the process. Here:

* rollouts run under their own :class:`anyio.CapacityLimiter` of ``--max-rollouts`` slots (default
  :data:`DEFAULT_MAX_ROLLOUTS`), so however many run, anyio's default threads stay free for the quick tools. A slot
  is held until the work's thread has ended, a cancelled one's last episode included;
* a call that finds every slot taken waits for one in arrival order (MCP clients send tool calls in parallel; a wait
  is what they expect), at most ``--max-rollouts`` of them: one more is refused at once with a tool error naming
  the option (a bounded queue, never an unbounded pile of waiting calls);
* cancellation (the client's ``notifications/cancelled``, its closed connection, its session closed) follows
  :class:`~rollbench.mcp.progress.Active`'s life: work that no thread began is dropped and the call released at
  once; running work is told to stop (between episodes) and waited for, shielded, on an ``anyio.Event`` its thread
  sets when it ends, so the wait takes no worker thread and always ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError

from rollbench.core.contracts import ConfigError
from rollbench.mcp.progress import Active

DEFAULT_MAX_ROLLOUTS = 4
MAX_ROLLOUTS = 256  # upper limit of --max-rollouts: each running rollout is a thread and a simulator in memory

T = TypeVar("T")


def check_max_rollouts(max_rollouts: int) -> None:
    """ConfigError unless ``max_rollouts`` is a whole number from 1 to :data:`MAX_ROLLOUTS`."""
    if isinstance(max_rollouts, bool) or not isinstance(max_rollouts, int) or not 1 <= max_rollouts <= MAX_ROLLOUTS:
        raise ConfigError(f"--max-rollouts must be between 1 and {MAX_ROLLOUTS}, got {max_rollouts}")


class RolloutSlots:
    """At most ``max_rollouts`` works running at once (each in its own worker thread), at most as many waiting.

    Raises:
        ConfigError: ``max_rollouts`` out of range (see :func:`check_max_rollouts`).
    """

    def __init__(self, max_rollouts: int = DEFAULT_MAX_ROLLOUTS) -> None:
        check_max_rollouts(max_rollouts)
        self.max_rollouts = max_rollouts
        self._slots: anyio.CapacityLimiter | None = None  # made in the event loop, on first use
        self._threads: anyio.CapacityLimiter | None = None  # never short: a slot is held while a thread runs

    def _limiters(self) -> tuple[anyio.CapacityLimiter, anyio.CapacityLimiter]:
        if self._slots is None or self._threads is None:
            self._slots = anyio.CapacityLimiter(self.max_rollouts)
            self._threads = anyio.CapacityLimiter(self.max_rollouts)
        return self._slots, self._threads

    def busy(self) -> str | None:
        """Why a new call would wait (every slot taken), or None when one is free."""
        slots, _ = self._limiters()
        if slots.available_tokens:
            return None
        n, waiting = self.max_rollouts, slots.statistics().tasks_waiting
        return f"{n} rollout(s) already running in this server (--max-rollouts {n}) and {waiting} waiting"

    async def run(self, active: Active, work: Callable[[], T]) -> T:
        """``work()``'s result, run in a worker thread once a slot is free (while it waits, ``active.last`` says
        so: get_run shows it). Raises ToolError at once when ``max_rollouts`` calls already wait; on cancellation,
        see the module docstring (the cancellation is re-raised once the work was dropped or has ended)."""
        slots, threads = self._limiters()
        if why := self.busy():
            if slots.statistics().tasks_waiting >= self.max_rollouts:
                raise ToolError(
                    f"{why}, the most that may wait; try again when one has finished (list_runs and get_run show them)"
                )
            active.last = f"waiting for a rollout slot: {why}"

        def in_thread() -> T | None:
            if not active.begin():
                return None  # dropped: cancelled before this thread picked it up
            try:
                return work()
            finally:
                active.end()

        try:
            async with slots:  # the slot is held until the thread has ended, a cancelled run's last episode included
                try:
                    result = await anyio.to_thread.run_sync(in_thread, abandon_on_cancel=True, limiter=threads)
                except anyio.get_cancelled_exc_class():
                    active.stop.set()
                    if not active.drop():  # a thread began it: it stops between episodes; wait, holding no thread
                        with anyio.CancelScope(shield=True):
                            await active.ended.wait()
                    raise
        except anyio.get_cancelled_exc_class():
            active.stop.set()
            active.drop()  # cancelled while waiting for a slot: nothing began (a no-op after the wait above)
            raise
        return cast(T, result)  # None only for dropped work, and dropping it re-raised the cancellation
