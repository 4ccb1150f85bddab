"""``--executor ray [--ray-address ADDR]``: one Ray actor per worker, each holding one EpisodeWorker (one simulator).

Without ``--ray-address`` a private local Ray instance is started for the run (``ray.init(address="local",
num_cpus=workers)``, no dashboard) and shut down afterwards; with it, the run joins that cluster (``ray start
--head`` prints the address). Actors are spread over the cluster's nodes (``SPREAD``), one CPU each.

Requirements on a real cluster: every node runs the same Python environment with rollbench installed (actors import
it by name), and the run directory is on a filesystem shared by the driver and every node at the same path (actors
stage episodes directly into it; the driver commits them). On one machine both hold trivially.

Failures: an actor that dies (its node removed, its process killed) is replaced by a new actor and its episode re-run
from the planned seed; staging is first-wins, so no episode is recorded twice. Ray's own task and actor retries are
off (``max_restarts=0, max_task_retries=0``) so there is exactly one retry policy, :mod:`rollbench.run.pool`.
``ray`` is imported only inside this module's functions, so ``import rollbench`` never pays for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
import traceback
from concurrent.futures import Future
from typing import Any

from rollbench.core.plan import PlannedEpisode
from rollbench.core.types import ConfigError
from rollbench.run.execution import Execution
from rollbench.run.observer import RunObserver
from rollbench.run.pool import Event, run_pool
from rollbench.run.worker import EpisodeSummary, EpisodeWorker, WorkerSetup

FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM")  # offscreen GL choice of the driver, given to actors on a cluster


class EpisodeActor:
    """The body of a Ray actor: one EpisodeWorker built in the actor's own process.

    A policy that fails to build is reported by :meth:`ready` (a run-level error), not by killing the actor, so it is
    not mistaken for a lost node. With ``batch_size`` B > 1 the actor is a threaded Ray actor: :meth:`run` calls (up
    to B at once) hand their episode to one stepping thread that runs them in lockstep (:mod:`rollbench.run.lockstep`)
    and each call returns when its own episode is committed.
    """

    def __init__(self, setup: WorkerSetup) -> None:
        self.error: str | None = None
        self.worker: EpisodeWorker | None = None
        self._inbox: queue.Queue[PlannedEpisode | None] = queue.Queue()
        self._waiting: dict[int, Future[EpisodeSummary]] = {}
        self._lock = threading.Lock()
        self._stepper: threading.Thread | None = None
        try:
            self.worker = EpisodeWorker(setup)
        except Exception as exc:
            self.error = f"could not build the policy: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            return
        if setup.batch_size > 1:
            self._stepper = threading.Thread(target=self._step_loop, name="rollbench-lockstep", daemon=True)
            self._stepper.start()

    def ready(self) -> tuple[str | None, int, str]:
        """``(error or None, pid, node IP)``."""
        import ray

        return self.error, os.getpid(), ray.util.get_node_ip_address()

    def run(self, planned: PlannedEpisode) -> EpisodeSummary:
        assert self.worker is not None
        if self._stepper is None:
            return self.worker.run(planned)
        future: Future[EpisodeSummary] = Future()
        with self._lock:
            self._waiting[planned.episode_index] = future
        self._inbox.put(planned)
        return future.result()

    def _step_loop(self) -> None:
        assert self.worker is not None

        def next_episode(block: bool) -> PlannedEpisode | None:
            try:
                return self._inbox.get(block=block)
            except queue.Empty:
                return None

        def done(summary: EpisodeSummary) -> None:
            with self._lock:
                future = self._waiting.pop(summary.episode_index)
            future.set_result(summary)

        try:
            while True:  # run_stream returns when every slot is idle and the inbox said stop
                self.worker.run_stream(next_episode, done)
                if self._inbox.empty():
                    return
        except BaseException as exc:  # reported to every waiting call (a run-level failure)
            with self._lock:
                waiting, self._waiting = list(self._waiting.values()), {}
            for future in waiting:
                future.set_exception(exc)

    def close(self) -> None:
        if self._stepper is not None:
            self._inbox.put(None)
            self._stepper.join(timeout=30)
        if self.worker is not None:
            self.worker.close()


class RayBackend:
    """Worker slots backed by Ray actors (see the module docstring)."""

    def __init__(self, setup: WorkerSetup, forward_env: bool = True) -> None:
        import ray

        self._ray = ray
        env_vars = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        options: dict[str, Any] = {"scheduling_strategy": "SPREAD"}
        if env_vars and forward_env:
            options["runtime_env"] = {"env_vars": env_vars}
        if setup.batch_size > 1:  # a threaded actor: B concurrent run() calls feed one lockstep loop
            options["max_concurrency"] = setup.batch_size + 1
        self._cls = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(EpisodeActor).options(**options)
        self._setup = setup
        self.actors: dict[int, Any] = {}
        self.where: dict[int, str] = {}
        self._pending: dict[Any, tuple[int, str]] = {}

    def start(self, slot: int) -> None:
        self._kill(slot)
        actor = self._cls.remote(self._setup)
        self.actors[slot] = actor
        self.where[slot] = "not yet placed"
        self._pending[actor.ready.remote()] = (slot, "ready")  # type: ignore[attr-defined]

    def submit(self, slot: int, planned: PlannedEpisode) -> None:
        self._pending[self.actors[slot].run.remote(planned)] = (slot, "run")

    def wait(self, timeout: float) -> list[Event]:
        ray = self._ray
        if not self._pending:
            time.sleep(timeout)
            return []
        done, rest = ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        if done and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            done += more
        events: list[Event] = []
        for ref in done:
            if ref not in self._pending:  # dropped with its dead actor
                continue
            slot, kind = self._pending.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # raised by our code inside a live actor
                events.append(Event("fatal", slot, detail=str(exc)))
            except ray.exceptions.RayError as exc:  # the actor (or its node) is gone
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                events.append(Event("died", slot, detail=f"actor {self.where[slot]} lost: {first}"))
                self._kill(slot)
            else:
                if kind == "run":
                    events.append(Event("done", slot, summary=value))
                elif value[0] is not None:
                    events.append(Event("fatal", slot, detail=value[0]))
                else:
                    self.where[slot] = f"pid {value[1]} on {value[2]}"
                    events.append(Event("ready", slot))
        return events

    def _kill(self, slot: int) -> None:
        for ref in [r for r, (s, _) in self._pending.items() if s == slot]:
            del self._pending[ref]
        actor = self.actors.pop(slot, None)
        if actor is not None:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)

    def close(self) -> None:
        for slot in list(self.actors):
            self._kill(slot)


def run_ray(
    setup: WorkerSetup, todo: list[PlannedEpisode], execution: Execution, observer: RunObserver
) -> dict[str, int]:
    """Run ``todo`` on ``execution.workers`` Ray actors, telling ``observer`` (see :mod:`rollbench.run.pool`);
    connects to ``execution.ray_address`` or starts a private local Ray instance.

    If this process is already connected to Ray (``ray.is_initialized()``), that connection is used and kept.
    Raises ConfigError when Ray is not installed or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'rollbench[ray]'") from None
    workers, address = execution.workers, execution.ray_address
    owned = not ray.is_initialized()
    if owned:
        try:
            if address:
                ray.init(address=address, logging_level=logging.WARNING)
            else:
                ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level=logging.WARNING)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(f"cannot start or reach Ray at {address or 'a new local instance'}: {exc}") from None
    try:
        # a private instance inherits this process's environment; a cluster gets the GL choice via runtime_env
        backend = RayBackend(setup, forward_env=not owned or bool(address))
        return run_pool(backend, setup, todo, observer, slots=workers)
    finally:
        if owned:
            ray.shutdown()
