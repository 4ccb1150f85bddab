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
from multiprocessing.reduction import ForkingPickler
from typing import Any

from rollbench.core.contracts import describe
from rollbench.core.plan import PlannedEpisode
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
        self.conn.send(("steps", running))

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.conn.send(("done", summary))


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
    if phase_cells is not None:
        install(phase_cells, max(1, setup.batch_size))
    try:
        worker = EpisodeWorker(setup, _ToParent(conn))
    except BaseException as exc:
        conn.send(("fatal", f"could not build the policy: {describe(exc)}\n{traceback.format_exc()}"))
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
        stopping = planned is None
        return planned

    try:
        conn.send(("ready", os.getpid()))
        try:
            worker.run_stream(next_episode)
        except BaseException as exc:
            conn.send(("fatal", f"{describe(exc)}\n{traceback.format_exc()}"))
    finally:
        worker.close()


class LocalBackend:
    """Worker slots backed by spawned processes (see the module docstring)."""

    def __init__(self, setup: WorkerSetup) -> None:
        self._setup = setup
        self._ctx = mp.get_context("spawn")
        self.procs: dict[int, BaseProcess] = {}
        self._conns: dict[int, Connection] = {}
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
        self.procs[slot], self._conns[slot] = proc, parent_end

    def submit(self, slot: int, planned: PlannedEpisode) -> None:
        with contextlib.suppress(OSError):  # if it died, wait() reports that through its sentinel
            self._conns[slot].send(planned)

    def wait(self, timeout: float) -> list[Event]:
        by_handle: dict[Any, tuple[int, str]] = {}
        for slot, conn in self._conns.items():
            by_handle[conn] = (slot, "conn")
            by_handle[self.procs[slot].sentinel] = (slot, "proc")
        events: list[Event] = []
        dead: set[int] = set()
        for handle in wait(list(by_handle), timeout):
            slot, kind = by_handle[handle]
            if kind == "conn" and slot not in dead:
                conn = self._conns[slot]
                try:
                    while conn.poll():
                        msg = _receive(conn)
                        if msg[0] == "ready":
                            events.append(Event("ready", slot))
                        elif msg[0] == "done":
                            events.append(Event("done", slot, summary=msg[1]))
                        elif msg[0] == "steps":
                            events.append(Event("steps", slot, running=msg[1]))
                        else:
                            events.append(Event("fatal", slot, detail=msg[1]))
                except EOFError:
                    dead.add(slot)
                except Exception as exc:  # a half-written message from a worker killed mid-send, or bytes a policy
                    # or env wrote into the worker's channel (a length over MAX_MESSAGE_BYTES: OSError at once)
                    self.procs[slot].kill()
                    why = f"unreadable message ({type(exc).__name__})"
                    events.append(Event("died", slot, detail=why, phase=self._boards[slot].read()))
                    dead.add(slot)
            elif kind == "proc":
                dead.add(slot)
        for slot in sorted(dead):
            proc = self.procs[slot]
            proc.join(JOIN_TIMEOUT_S)
            if not any(e.kind == "died" and e.slot == slot for e in events):
                events.append(Event("died", slot, detail=_exit_text(proc), phase=self._boards[slot].read()))
            self._stop(slot)
        return events

    def _stop(self, slot: int, timeout: float = JOIN_TIMEOUT_S) -> None:
        conn, proc = self._conns.pop(slot, None), self.procs.pop(slot, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(None)
        if proc is not None:
            proc.join(timeout)
            if proc.is_alive():
                proc.kill()
                proc.join()
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


MAX_MESSAGE_BYTES = 64 * 2**20  # a worker's messages are summaries and progress: kilobytes


def _receive(conn: Connection) -> Any:
    """One message of a worker: at most :data:`MAX_MESSAGE_BYTES` (``recv`` would wait for whatever length stray
    bytes in the channel spell, ``b"garb"``: 1.7 GB, and hang the run; hostile round 11, F10)."""
    return ForkingPickler.loads(conn.recv_bytes(MAX_MESSAGE_BYTES))


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
