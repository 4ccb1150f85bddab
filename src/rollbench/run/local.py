"""``--workers K``: K local worker processes started with the ``spawn`` method.

Each worker process builds its own :class:`~rollbench.run.worker.EpisodeWorker` (policy, env and GL context are created
inside the worker, never inherited from the parent) once, then runs the episodes handed to it over a pipe, staging
each one directly into the run directory. The parent process only dispatches (in plan order), promotes staged
episodes in order (``on_episode_end``) and replaces dead workers; the exactly-once rules live in
:mod:`rollbench.run.pool`.

Each worker process notes every call into the policy or the env in its :class:`~rollbench.run.phase.PhaseBoard`
(shared memory made here); a death is reported with where the worker was (``Event.phase``), which decides whose
fault the lost episodes are (:mod:`rollbench.run.pool`).

Workers ignore SIGINT (the parent decides when to stop) and exit on their own within about a second if the parent
process dies, so a killed run leaves no orphan simulators behind.

Code under evaluation shares the worker process with its channel to the parent. The parent reads that channel
without ever blocking and reaps workers within a bound (:mod:`rollbench.run.channel`); a worker whose channel holds
bytes no message can be, whose exit pipe holds bytes, or whose own end of the channel failed (closed by code running
in it: it exits with :data:`~rollbench.run.channel.CHANNEL_LOST_EXIT`, printing nothing) is a worker *broken by the
code it ran*: killed, reported as ``died`` with ``Event.broke``, and replaced like any dead worker
(:mod:`rollbench.run.pool`). A worker also closes its inherited descriptor of multiprocessing's resource tracker,
which it never uses (its board and channel come from the parent): junk written there made the tracker print
tracebacks on the user's terminal.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, NoReturn

from rollbench.core.contracts import describe
from rollbench.core.plan import PlannedEpisode
from rollbench.run.channel import CHANNEL_LOST_EXIT, Corrupt, Inbox, pipe_has_bytes, reap
from rollbench.run.observer import EpisodeSummary, Running, RunObserver
from rollbench.run.phase import PhaseBoard, install
from rollbench.run.pool import Event
from rollbench.run.worker import EpisodeWorker, WorkerSetup

JOIN_TIMEOUT_S = 10.0
CLOSE_GRACE_S = 5.0


def _exit_with_parent(parent: int) -> None:
    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="rollbench-parent-watch", daemon=True).start()


class _ToParent(RunObserver):
    """A worker process's observer: each episode's steps and end go to the parent over the pipe (the parent's pool
    tells the run's observer, with this worker's slot as its id)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def on_steps(self, worker: str, running: Running) -> None:
        _send(self.conn, ("steps", running))

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        _send(self.conn, ("done", summary))


def _send(conn: Connection, message: tuple[str, Any]) -> None:
    """Send ``message`` to the parent; a channel that fails here was closed by code running in this process: end
    it at once, printing nothing (the parent reports the exit status, see the module docstring)."""
    try:
        conn.send(message)
    except (OSError, ValueError):
        _channel_lost()


def _channel_lost() -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(CHANNEL_LOST_EXIT)


def _drop_resource_tracker() -> None:
    """Close the resource tracker's descriptor this process inherited (see the module docstring); code that needs
    a tracker later gets its own, started on first use."""
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    fd = getattr(tracker, "_fd", None)
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(AttributeError):
            tracker._fd = None  # type: ignore[union-attr]


def worker_main(conn: Connection, parent: int, setup: WorkerSetup, phase_cells: Any = None) -> None:
    """Entry point of a worker process: build one EpisodeWorker, then run episodes until told to stop.

    Messages sent: ``("ready", pid)``, ``("done", EpisodeSummary)``, ``("fatal", text)``, ``("steps", running)``
    (progress inside episodes, about once a second). Received: a
    PlannedEpisode, or None to stop. With ``setup.batch_size`` B the parent keeps up to B episodes handed over;
    they run in lockstep (:mod:`rollbench.run.lockstep`). ``phase_cells``: the parent's
    :class:`~rollbench.run.phase.PhaseBoard` for this process, where every policy and env call is noted.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _exit_with_parent(parent)
    _drop_resource_tracker()
    if phase_cells is not None:
        install(phase_cells, max(1, setup.batch_size))
    try:
        worker = EpisodeWorker(setup, _ToParent(conn))
    except BaseException as exc:
        _send(conn, ("fatal", f"could not build the policy: {describe(exc)}\n{traceback.format_exc()}"))
        return
    stopping = False

    def next_episode(block: bool) -> PlannedEpisode | None:
        """The next episode the parent handed over: wait for one only when every slot is idle."""
        nonlocal stopping
        if stopping or (not block and not conn.poll()):
            return None
        try:
            planned: PlannedEpisode | None = conn.recv()
        except EOFError:
            planned = None
        except (OSError, ValueError):
            _channel_lost()
        stopping = planned is None
        return planned

    try:
        _send(conn, ("ready", os.getpid()))
        try:
            worker.run_stream(next_episode)
        except BaseException as exc:
            _send(conn, ("fatal", f"{describe(exc)}\n{traceback.format_exc()}"))
    finally:
        worker.close()


class LocalBackend:
    """Worker slots backed by spawned processes (see the module docstring)."""

    def __init__(self, setup: WorkerSetup) -> None:
        self._setup = setup
        self._ctx = mp.get_context("spawn")
        self.procs: dict[int, BaseProcess] = {}
        self._conns: dict[int, Connection] = {}
        self._inboxes: dict[int, Inbox] = {}
        self._boards: dict[int, PhaseBoard] = {}

    def start(self, slot: int) -> None:
        self._stop(slot)
        parent_end, child_end = self._ctx.Pipe()
        board = self._boards[slot] = PhaseBoard(self._ctx, max(1, self._setup.batch_size))
        proc = self._ctx.Process(
            target=worker_main,
            args=(child_end, os.getpid(), self._setup, board.cells),
            name=f"rollbench-worker-{slot}",
            daemon=True,
        )
        with _parent_main_hidden(), _sigint_ignored():
            proc.start()
        child_end.close()
        self.procs[slot], self._conns[slot], self._inboxes[slot] = proc, parent_end, Inbox(parent_end)

    def submit(self, slot: int, planned: PlannedEpisode) -> None:
        with contextlib.suppress(OSError):  # if it died, wait() reports that through its sentinel
            self._conns[slot].send(planned)

    def wait(self, timeout: float) -> list[Event]:
        by_handle: dict[Any, tuple[int, str]] = {}
        for slot, conn in self._conns.items():
            by_handle[conn] = (slot, "conn")
            by_handle[self.procs[slot].sentinel] = (slot, "proc")
        events: list[Event] = []
        ended: set[int] = set()  # its channel or exit pipe reached its end: the process is ending
        broken: dict[int, str] = {}  # what code running in it did to its channel
        for handle in wait(list(by_handle), timeout):
            slot, kind = by_handle[handle]
            if slot in broken:
                continue
            try:
                if kind == "conn":
                    if self._drain(slot, events):
                        ended.add(slot)
                elif pipe_has_bytes(self.procs[slot].sentinel):
                    raise Corrupt("bytes in its exit pipe")
                else:
                    ended.add(slot)
            except Corrupt as exc:
                broken[slot] = str(exc)
        for slot, inbox in self._inboxes.items():
            if inbox.stalled() and slot not in broken:
                broken[slot] = "an incomplete message that stayed incomplete"
        for slot in sorted(ended | set(broken)):
            if slot not in broken:
                try:  # what it sent before its end
                    self._drain(slot, events)
                except Corrupt as exc:
                    broken[slot] = str(exc)
            events.append(self._died(slot, broken.get(slot)))
        return events

    def _drain(self, slot: int, events: list[Event]) -> bool:
        """Add the messages now in ``slot``'s channel to ``events``; whether it reached its end. Never blocks."""
        conn, inbox = self._conns[slot], self._inboxes[slot]
        while True:
            try:
                if not conn.poll(0):
                    return False
            except (OSError, ValueError):
                return True
            messages, at_end = inbox.read()
            events.extend(_event(slot, msg) for msg in messages)
            if at_end:
                return True

    def _died(self, slot: int, broken: str | None) -> Event:
        """Reap the worker of ``slot`` (at once when its channel is ``broken``) and report its death."""
        proc = self.procs[slot]
        reap(proc, 0.0 if broken else JOIN_TIMEOUT_S)
        phase = self._boards[slot].read()
        self._stop(slot)
        if broken is not None:
            why = f"code running in the worker wrote into its channel to rollbench: {broken}; the worker was killed"
            return Event("died", slot, detail=why, phase=phase, broke=True)
        if proc.exitcode == CHANNEL_LOST_EXIT and phase.owner == "infrastructure":  # not an os._exit(4) in a call
            why = f"code running in worker process {proc.pid} closed its channel to rollbench"
            return Event("died", slot, detail=why, phase=phase, broke=True)
        return Event("died", slot, detail=_exit_text(proc), phase=phase)

    def _stop(self, slot: int, timeout: float = JOIN_TIMEOUT_S) -> None:
        conn, proc = self._conns.pop(slot, None), self.procs.pop(slot, None)
        self._inboxes.pop(slot, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(None)
        if proc is not None:
            reap(proc, timeout)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Ask every worker to stop, give them :data:`CLOSE_GRACE_S` in all, then kill the rest (an episode cut
        short this way was never staged, so it is simply run again on resume)."""
        for conn in self._conns.values():
            with contextlib.suppress(OSError):
                conn.send(None)
        deadline = time.monotonic() + CLOSE_GRACE_S
        for slot in list(self.procs):
            self._stop(slot, max(0.0, deadline - time.monotonic()))


def _event(slot: int, message: tuple[str, Any]) -> Event:
    kind, value = message
    if kind == "ready":
        return Event("ready", slot)
    if kind == "done":
        return Event("done", slot, summary=value)
    if kind == "steps":
        return Event("steps", slot, running=value)
    return Event("fatal", slot, detail=str(value))


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while a worker is spawned (main thread only: elsewhere Python cannot set handlers): the child
    inherits an ignored SIGINT across exec, so a Ctrl-C (sent to the whole process group) that arrives while it
    imports cannot raise KeyboardInterrupt there (it printed a traceback per worker; hostile round 10, F13); then
    :func:`worker_main` ignores it for good. A signal mask is not inherited by multiprocessing's spawn. The cost: a
    Ctrl-C in the milliseconds of a worker's start is not seen (press it again); measured in BENCHMARKS.md."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def _parent_main_hidden() -> Iterator[None]:
    """Start children without re-running the parent's ``__main__`` (spawn's default, to find pickled ``__main__``
    objects). Workers need nothing from it: their entry point and arguments live in rollbench modules. Without this,
    a script that calls ``evaluate(..., Execution(workers=2))`` without an ``if __name__ == "__main__":`` guard would
    start a second evaluation inside every worker."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _exit_text(proc: BaseProcess) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"process {proc.pid} killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"process {proc.pid} killed by signal {-code}"
    return f"process {proc.pid} exited with code {code}"
