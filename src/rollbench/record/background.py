"""One background thread for every write into a run directory, so the next episode simulates while the last one
is written (parquet files, videos, fsyncs).

:class:`BackgroundCommitter` wraps a :class:`~rollbench.record.writer.DatasetWriter`: ``commit`` and
``promote_ready`` enqueue the operation and return; the thread performs them in the order they were enqueued, which
is what the writer's ordered-commit rules expect. The queue is bounded (:data:`QUEUE_SIZE` operations), so a slow
disk slows the episodes down instead of piling recorded frames up in memory. An error on the thread is raised from
the next ``commit``/``promote_ready`` and from ``close``.

Bound: :meth:`BackgroundCommitter.settle` waits until everything queued is written, and the in-process runner calls
it before every call into a policy that is not rollbench's own (``PolicyInfo.bounded``; via
:class:`~rollbench.run.deadline.Deadline`). So an episode is committed (durably: the writer's commit point) before
the policy is called again, for the next episode's reset or another slot's act: a policy that ends the process
(``os._exit``, a segfault) cannot lose an episode that had already ended. The write overlaps only the env's work
(the next episode's env reset and first render) and rollbench's built-in policies. A crash elsewhere (the simulator,
a SIGKILL) loses at most the episodes still queued: they were never committed, so a resume runs them again, exactly
as if the crash had happened before they finished.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from rollbench.core.episode import EpisodeRecord
from rollbench.record.writer import DatasetWriter

QUEUE_SIZE = 4


class BackgroundCommitter:
    """Serialises every :class:`DatasetWriter` operation of a run onto one thread (see the module docstring)."""

    def __init__(self, writer: DatasetWriter) -> None:
        self.writer = writer
        self._ops: queue.Queue[Callable[[], Any] | None] = queue.Queue(QUEUE_SIZE)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="rollbench-commit", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            op = self._ops.get()
            try:
                if op is None:
                    return
                if self._error is None:
                    try:
                        op()
                    except BaseException as exc:  # kept, and raised in the thread that runs the episodes
                        self._error = exc
            finally:
                self._ops.task_done()

    def _put(self, op: Callable[[], Any]) -> None:
        if self._error is not None:
            raise self._error
        self._ops.put(op)

    def commit(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        """Queue ``rec`` for :meth:`DatasetWriter.commit_record`. Returns True: only episodes not yet recorded are
        run in this process, so the answer (used for progress display only) cannot be known to be False yet."""
        self._put(lambda: self.writer.commit_record(rec, render_failure))
        return True

    def promote_ready(self) -> None:
        """Queue :meth:`DatasetWriter.promote_ready` (episodes staged by worker processes, committed in order)."""
        self._put(self.writer.promote_ready)

    def settle(self) -> None:
        """Wait until every operation queued so far is done (at once when none is). Never raises: an error on the
        thread is raised from the next ``commit``/``promote_ready`` and from ``close``, in rollbench's own code
        rather than here, inside a policy call."""
        if self._ops.unfinished_tasks and self._thread.is_alive():
            self._ops.join()

    def close(self) -> None:
        """Wait until everything queued is written; raise the thread's error if there was one."""
        if self._thread.is_alive():
            self._ops.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error
