"""The dispatch loop shared by the local-process and Ray runners: exactly-once episode accounting.

A runner *backend* owns K worker slots (a process or an actor each, holding one
:class:`~rollbench.run.worker.EpisodeWorker`) and reports what happened as :class:`Event` s. :func:`run_pool` hands
episodes to idle slots (in plan order within a task, keeping each worker on one task while it lasts) and handles every failure the same way for both backends:

* a worker that dies inside a call into the policy or the env (a policy that calls ``os._exit`` or segfaults in
  ``act``, a simulator that aborts in ``step``; the backend reads where it was from its
  :class:`~rollbench.run.phase.PhaseBoard`, ``Event.phase``) is replaced, and the episodes of that call are recorded
  (by this process) as errors of that side, ``policy`` or ``environment``, and never re-run: a re-run would let a
  policy re-roll the episodes it was losing, and a policy's death must count against it like any other failure.
* a worker whose channel to this process was broken by code running in it (bytes written into it, or its end
  closed: ``Event.broke``, :mod:`rollbench.run.channel`) is replaced, and its episodes not yet staged end as
  ``policy`` errors, never re-run: only code under evaluation runs in a worker besides rollbench's, and rollbench's
  own envs never touch descriptors they do not own (a plug-in env that does is charged to the policy too: nothing
  in the process can tell them apart once the bytes are written).
* a worker that dies anywhere else (in rollbench's own code or waiting for work: SIGKILL from outside, a removed Ray
  node; or in another slot's call, for its episodes not in that call) is replaced by a fresh one and
  the episode is re-run from its planned seed, first in line. If the dead worker had already staged it, the staged
  copy is kept and nothing re-runs. Staging is atomic and first-wins (:func:`rollbench.record.lerobot.stage_episode`),
  so a duplicate attempt can never be recorded twice.
* an episode that kills :data:`MAX_ATTEMPTS` workers in a row is recorded (by this process) as an ``error`` episode
  saying so, and the run goes on: a deterministic simulator crash must not loop forever.
* a worker whose policy missed a call's deadline (``EpisodeSummary.policy_hung``, see
  :mod:`rollbench.run.deadline`) has recorded that episode as an error; it is handed no more episodes and, once
  its in-flight episodes are done, replaced by a fresh worker (the hung call is still running in it), counted in
  ``workers_replaced``.
* a worker that cannot start (its policy fails to build) or raises outside an episode aborts the run with
  :class:`~rollbench.core.contracts.RollbenchError`; so do :data:`MAX_START_FAILURES` consecutive deaths while starting, and
  :data:`START_TIMEOUT_S` without any live worker (e.g. a Ray cluster with no free CPU).

The run's :class:`~rollbench.run.observer.RunObserver` hears everything: ``should_stop()`` is polled at least every
:data:`POLL_S` seconds (once it returns True no new episode starts and the episodes in flight finish); worker states
(``"starting"``, ``"idle"``, ``"episode 17 (metaworld/reach-v3)"``) go to ``on_worker`` for ``run.live.json``, each
episode handed to a worker to ``on_episode_start``, each recorded one to ``on_episode_end``, step progress to
``on_steps``.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from rollbench.core.contracts import EpisodeError, Fault, InfrastructureError, RollbenchError, TaskInfo
from rollbench.core.episode import failed_episode
from rollbench.core.plan import PlannedEpisode
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import read_parquet
from rollbench.record.lerobot import EPISODES_PATH, STAGING, chunk_file, stage_episode
from rollbench.record.safe_files import read_regular_json
from rollbench.run.observer import EpisodeStart, EpisodeSummary, Running, RunObserver
from rollbench.run.phase import Phase
from rollbench.run.worker import WorkerSetup

MAX_ATTEMPTS = 3  # worker deaths on one episode before it is recorded as an error
MAX_START_FAILURES = 3  # consecutive deaths of a slot's worker before it became ready
START_TIMEOUT_S = 300.0  # longest time with no live worker at all
POLL_S = 0.5


@dataclass(frozen=True)
class Event:
    """Something a backend observed about one slot.

    kind: ``ready`` (the worker built its policy and is waiting), ``done`` (``summary`` of a staged episode),
    ``died`` (the worker is gone; ``detail`` says how), ``fatal`` (the worker raised outside an episode; ``detail``
    holds the error and traceback), ``steps`` (``running``: its episodes' steps so far, see
    :meth:`rollbench.run.worker.EpisodeWorker.stepped`). ``phase`` (``died`` only, where the backend knows it):
    which call the worker was inside when it died and for which episodes (:mod:`rollbench.run.phase`). ``broke``
    (``died`` only): code running in the worker wrote into or closed its channel to this process, so the worker was
    stopped (:mod:`rollbench.run.channel`).
    """

    kind: Literal["ready", "done", "died", "fatal", "steps"]
    slot: int
    summary: EpisodeSummary | None = None
    detail: str = ""
    running: Running | None = None
    phase: Phase | None = None
    broke: bool = False


class Backend(Protocol):
    """K slots of workers. ``start`` and ``submit`` return at once; ``wait`` blocks up to ``timeout`` seconds."""

    def start(self, slot: int) -> None:
        """Start a fresh worker in ``slot`` (replacing a dead one); it reports ``ready`` when it can take episodes."""
        ...

    def submit(self, slot: int, planned: PlannedEpisode) -> None:
        """Hand one episode to the (ready, idle) worker of ``slot``."""
        ...

    def wait(self, timeout: float) -> list[Event]:
        """Events that happened, possibly none after ``timeout`` seconds."""
        ...

    def close(self) -> None:
        """Stop every worker (finished or not); must not raise."""
        ...


class WorkerLost(InfrastructureError):
    """The worker processes running an episode kept dying (the episode is recorded as an error with this reason)."""


class WorkerDied(EpisodeError):
    """The worker process running this episode died inside a call into the policy or the env; the fault is that
    side's (see the module docstring)."""


def describe(planned: PlannedEpisode) -> str:
    return f"episode {planned.episode_index} ({planned.task})"


def recorded_summary(run_dir: Path, planned: PlannedEpisode) -> EpisodeSummary | None:
    """The summary of ``planned`` if it is already staged or committed in ``run_dir``, else None."""
    e = planned.episode_index
    staged = run_dir / STAGING / f"episode-{e:06d}" / "episode.json"
    if staged.exists():
        row = EpisodeRow.from_row(read_regular_json(staged, run_dir))
    else:
        c, f = chunk_file(e)
        meta = run_dir / EPISODES_PATH.format(chunk_index=c, file_index=f)
        if not meta.exists():
            return None
        row = EpisodeRow.from_row(read_parquet(meta).to_pylist()[0])
    steps = row.length if row.steps is None else row.steps  # the committed length counts a padding frame
    return EpisodeSummary(e, planned.task, row.success, steps, row.termination_reason, False)


class _Pool:
    """:func:`run_pool`'s bookkeeping: the queue, what each slot runs, which slots are ready or alive, attempts per
    episode and the counters; it decides what to do with each :class:`Event` and which episode goes where."""

    def __init__(
        self, backend: Backend, setup: WorkerSetup, todo: Sequence[PlannedEpisode], observer: RunObserver, slots: int
    ) -> None:
        self.backend, self.run_dir, self.tasks = backend, setup.run_dir, setup.tasks
        self.observer, self.capacity = observer, setup.batch_size
        self.queue: deque[PlannedEpisode] = deque(todo)
        self.n = min(slots, len(self.queue))
        self.running: dict[int, list[PlannedEpisode]] = {}
        self.ready: set[int] = set()
        self.alive: set[int] = set()
        self.start_failures: Counter[int] = Counter()
        self.attempts: Counter[int] = Counter()
        self.last_task: dict[int, str] = {}
        self.stats = dict.fromkeys(
            ("worker_starts", "worker_deaths", "workers_replaced", "episodes_rerun", "episodes_lost"), 0
        )
        self.retiring: set[int] = set()  # workers whose policy hung: no new episodes, replaced once theirs are done

    def busy(self) -> bool:
        return any(self.running.values())

    def start(self, slot: int) -> None:
        self.backend.start(slot)
        self.alive.add(slot)
        self.running[slot] = []
        self.stats["worker_starts"] += 1
        self.observer.on_worker(str(slot), "starting")

    def retire_when_idle(self, slot: int) -> None:
        if slot in self.retiring and not self.running.get(slot):
            self.retiring.discard(slot)
            self.alive.discard(slot)  # dispatch starts a fresh worker in this slot while episodes wait
            self.stats["workers_replaced"] += 1
            self.observer.on_worker(str(slot), "replaced (a policy call missed its deadline)")

    def handle_death(self, slot: int, detail: str, phase: Phase | None = None, broke: bool = False) -> None:
        self.stats["worker_deaths"] += 1
        self.retiring.discard(slot)
        self.alive.discard(slot)
        lost = self.running.pop(slot, [])
        if slot not in self.ready:
            self.start_failures[slot] += 1
            if self.start_failures[slot] >= MAX_START_FAILURES:
                raise RollbenchError(
                    f"worker {slot} died {self.start_failures[slot]} times while starting, last: {detail}"
                )
        self.ready.discard(slot)
        self.observer.on_worker(str(slot), f"died ({detail})")
        for planned in reversed(lost):  # reversed: appendleft keeps them in plan order at the head of the queue
            self.attempts[planned.episode_index] += 1
            done = recorded_summary(self.run_dir, planned)
            if done is not None:  # it staged the episode before dying: keep that copy
                self.observer.on_episode_end(done)
            elif broke:  # code it ran broke its channel: only a policy or a plug-in env runs there
                why = f"{detail}; not re-run"
                self.observer.on_episode_end(_record_death(self.run_dir, planned, self.tasks[planned.task], why))
            elif phase is not None and phase.owner != "infrastructure" and planned.episode_index in phase.episodes:
                task = self.tasks[planned.task]
                why = f"the worker process died ({detail}) while {phase.describe()} ran; not re-run"
                self.observer.on_episode_end(_record_death(self.run_dir, planned, task, why, phase.owner))
            elif self.attempts[planned.episode_index] >= MAX_ATTEMPTS:
                self.stats["episodes_lost"] += 1
                task = self.tasks[planned.task]
                self.observer.on_episode_end(_record_lost(self.run_dir, planned, task, self.attempts, detail))
            else:
                self.stats["episodes_rerun"] += 1
                self.queue.appendleft(planned)

    def take(self, slot: int) -> PlannedEpisode:
        """Task affinity: the slot's current task first, else a task no other worker is on, else the next one.

        Building a simulator costs ~0.1 s (MetaWorld), a scripted episode ~30 ms: without affinity every worker
        would build every task's env. Results do not depend on this order (the plan fixes every episode)."""
        mine = self.last_task.get(slot)
        others = {p.task for s, ps in self.running.items() if s != slot for p in ps}
        for wanted in (lambda p: p.task == mine, lambda p: p.task not in others):
            for i, planned in enumerate(self.queue):
                if wanted(planned):
                    del self.queue[i]
                    return planned
        return self.queue.popleft()

    def dispatch(self) -> None:
        for slot in sorted(self.ready):
            while len(self.running.setdefault(slot, [])) < self.capacity and self.queue:
                planned = self.take(slot)
                self.last_task[slot] = planned.task
                self.running[slot].append(planned)
                self.backend.submit(slot, planned)
                self.observer.on_episode_start(EpisodeStart(str(slot), planned.episode_index, planned.task))
                self.observer.on_worker(str(slot), ", ".join(describe(p) for p in self.running[slot]))
        for slot in range(self.n):  # replace dead workers while episodes wait (idle ones took theirs above)
            if slot not in self.alive and self.queue:
                self.start(slot)

    def handle(self, ev: Event) -> EpisodeSummary | None:
        """Apply one event; returns the summary of a staged episode (``done``), for the caller to report."""
        if ev.kind == "ready":
            self.ready.add(ev.slot)
            self.start_failures[ev.slot] = 0
            self.observer.on_worker(str(ev.slot), "idle")
        elif ev.kind == "done":
            assert ev.summary is not None
            index = ev.summary.episode_index
            self.running[ev.slot] = [p for p in self.running.get(ev.slot, []) if p.episode_index != index]
            self.observer.on_worker(str(ev.slot), ", ".join(describe(p) for p in self.running[ev.slot]) or "idle")
            if ev.summary.policy_hung and ev.slot in self.alive:
                self.retiring.add(ev.slot)
                self.ready.discard(ev.slot)
            self.retire_when_idle(ev.slot)
            return ev.summary
        elif ev.kind == "steps":
            if ev.running is not None:
                self.observer.on_steps(str(ev.slot), ev.running)
        elif ev.kind == "died":
            self.handle_death(ev.slot, ev.detail, ev.phase, ev.broke)
        else:
            raise RollbenchError(f"worker {ev.slot} failed: {ev.detail}")
        return None


def run_pool(
    backend: Backend, setup: WorkerSetup, todo: Sequence[PlannedEpisode], observer: RunObserver, *, slots: int
) -> dict[str, int]:
    """Run ``todo`` on ``slots`` workers of ``backend``, each built from ``setup``, telling ``observer`` (see the
    module docstring); always closes the backend.

    Each worker is handed up to ``setup.batch_size`` episodes at once (``--batch-size``), and a worker that dies
    gives all of its in-flight episodes back to the queue.

    Returns counters for the run log: ``worker_starts``, ``worker_deaths``, ``workers_replaced`` (a policy call
    missed its deadline), ``episodes_rerun`` (re-dispatched
    after a death), ``episodes_lost`` (recorded as errors after :data:`MAX_ATTEMPTS` deaths).
    Raises RollbenchError when workers cannot be started or fail outside an episode.
    """
    pool = _Pool(backend, setup, todo, observer, slots)
    should_stop = observer.should_stop
    no_live_since = time.monotonic()
    try:
        for slot in range(pool.n):
            pool.start(slot)
        while True:
            stopping = should_stop()
            if not stopping:
                pool.dispatch()
            if not pool.busy() and (stopping or not pool.queue):
                return pool.stats
            if pool.ready:
                no_live_since = time.monotonic()
            elif time.monotonic() - no_live_since > START_TIMEOUT_S:
                raise RollbenchError(
                    f"no worker became ready within {START_TIMEOUT_S:.0f} s (are there free CPUs for "
                    f"{pool.n} workers? for Ray: `ray status`)"
                )
            # events in order: a death reports what it lost at once, staged episodes after the next dispatch
            finished = [summary for ev in backend.wait(POLL_S) if (summary := pool.handle(ev)) is not None]
            if finished and not should_stop():
                pool.dispatch()  # keep workers busy while this process commits what they staged
            for summary in finished:
                observer.on_episode_end(summary)
    finally:
        backend.close()


def _record_lost(
    run_dir: Path, planned: PlannedEpisode, task: TaskInfo, attempts: Counter[int], detail: str
) -> EpisodeSummary:
    try:
        raise WorkerLost(
            f"the worker running this episode died {attempts[planned.episode_index]} times (last: {detail}); "
            "not retried again"
        )
    except WorkerLost as exc:
        return _stage_error(run_dir, planned, task, exc)


def _record_death(
    run_dir: Path, planned: PlannedEpisode, task: TaskInfo, why: str, owner: Fault = "policy"
) -> EpisodeSummary:
    """Record ``planned`` as an error of ``owner``, the side whose code killed or broke its worker (never re-run)."""
    try:  # raised for failed_episode's traceback, as WorkerLost is
        raise WorkerDied(why, owner)
    except WorkerDied as exc:
        return _stage_error(run_dir, planned, task, exc)


def _stage_error(run_dir: Path, planned: PlannedEpisode, task: TaskInfo, exc: BaseException) -> EpisodeSummary:
    rec = failed_episode(planned, task, exc)
    staged = stage_episode(run_dir, rec, task.fps)
    if not staged:  # a late copy won the race after all
        done = recorded_summary(run_dir, planned)
        if done is not None:
            return done
    return EpisodeSummary(planned.episode_index, planned.task, False, 0, "error", staged)
