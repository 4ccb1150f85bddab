"""One helper thread that runs calls in order while the caller waits for each reply at most a deadline.

The policy deadline (:mod:`rollbench.run.deadline`), the in-process env deadline (:mod:`rollbench.run.env_deadline`)
and the ``gym`` family's check of a new env (:mod:`rollbench.envs.gym`) each run the calls into code that is not
rollbench's own on one of these. A call past its deadline is left running: the thread is a daemon, so a call that
never returns never keeps the process from exiting, and its owner never hands it another call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from rollbench.core.contracts import EpisodeError


class MissedDeadline(EpisodeError):
    """A call into code that is not rollbench's own did not return within its deadline (the message names the call
    and the deadline): ``PolicyTimeout`` (:mod:`rollbench.run.deadline`), ``EnvTimeout``
    (:mod:`rollbench.run.env_deadline`)."""


class CallThread:
    """One daemon thread named ``name`` running calls in order; :meth:`call` waits for each reply with a timeout."""

    def __init__(self, name: str) -> None:
        # two C-implemented queues: ~30 us of thread hand-off per call; an Event per call measured twice that
        self.calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self.replies: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (call := self.calls.get()) is not None:
            fn, args = call
            try:
                self.replies.put((True, fn(*args)))
            except BaseException as exc:  # handed to the waiting caller, raised there
                self.replies.put((False, exc))

    def call(self, timeout_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the helper thread: its value, or what it raised; ``queue.Empty`` past ``timeout_s``
        seconds (the call is then still running)."""
        self.calls.put((fn, args))
        ok, value = self.replies.get(timeout=timeout_s)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        """End the thread once the call it is running (if any) returns."""
        self.calls.put(None)
