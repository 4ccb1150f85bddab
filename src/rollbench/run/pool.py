"""The dispatch loop shared by the local-process and Ray runners: exactly-once episode accounting.

A runner *backend* owns K worker slots (a process or an actor each, holding one
:class:`~rollbench.run.worker.EpisodeWorker`) and reports what happened as :class:`Event` s. :func:`run_pool` hands
episodes to idle slots (in plan order within a task, keeping each worker on one task while it lasts) and handles every failure the same way for both backends:

* a worker that dies (SIGKILL, segfault, removed Ray node) while running an episode is replaced by a fresh one and
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
  :class:`~rollbench.core.types.RollbenchError`; so do :data:`MAX_START_FAILURES` consecutive deaths while starting, and
  :data:`START_TIMEOUT_S` without any live worker (e.g. a Ray cluster with no free CPU).

``should_stop()`` is polled at least every :data:`POLL_S` seconds: once it returns True no new episode starts and the
episodes in flight finish. Worker states (``"starting"``, ``"idle"``, ``"episode 17 (metaworld/reach-v3)"``) go to
``on_worker`` for ``run.live.json``.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from rollbench.core.episode import failed_episode
from rollbench.core.plan import PlannedEpisode
from rollbench.core.types import InfrastructureError, RollbenchError, TaskInfo
from rollbench.record.files import read_parquet
from rollbench.record.lerobot import EPISODES_PATH, STAGING, chunk_file, stage_episode
from rollbench.record.safe_files import read_regular_json
from rollbench.run.worker import EpisodeSummary

MAX_ATTEMPTS = 3  # worker deaths on one episode before it is recorded as an error
MAX_START_FAILURES = 3  # consecutive deaths of a slot's worker before it became ready
START_TIMEOUT_S = 300.0  # longest time with no live worker at all
POLL_S = 0.5

OnResult = Callable[[EpisodeSummary], None]
OnWorker = Callable[[str, str], None]
ShouldStop = Callable[[], bool]


@dataclass(frozen=True)
class Event:
    """Something a backend observed about one slot.

    kind: ``ready`` (the worker built its policy and is waiting), ``done`` (``summary`` of a staged episode),
    ``died`` (the worker is gone; ``detail`` says how), ``fatal`` (the worker raised outside an episode; ``detail``
    holds the error and traceback).
    """

    kind: Literal["ready", "done", "died", "fatal"]
    slot: int
    summary: EpisodeSummary | None = None
    detail: str = ""


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


def describe(planned: PlannedEpisode) -> str:
    return f"episode {planned.episode_index} ({planned.task})"


def recorded_summary(run_dir: Path, planned: PlannedEpisode) -> EpisodeSummary | None:
    """The summary of ``planned`` if it is already staged or committed in ``run_dir``, else None."""
    e = planned.episode_index
    staged = run_dir / STAGING / f"episode-{e:06d}" / "episode.json"
    if staged.exists():
        row = read_regular_json(staged, run_dir)
    else:
        c, f = chunk_file(e)
        meta = run_dir / EPISODES_PATH.format(chunk_index=c, file_index=f)
        if not meta.exists():
            return None
        row = read_parquet(meta).to_pylist()[0]
    steps = row.get("rollbench/steps")  # the committed "length" counts an episode's padding frame
    return EpisodeSummary(
        e,
        planned.task,
        bool(row["rollbench/success"]),
        int(row["length"] if steps is None else steps),
        row["rollbench/termination_reason"],
        False,
    )


def run_pool(
    backend: Backend,
    slots: int,
    todo: Sequence[PlannedEpisode],
    run_dir: Path,
    tasks: dict[str, TaskInfo],
    on_result: OnResult,
    should_stop: ShouldStop,
    on_worker: OnWorker,
    capacity: int = 1,
) -> dict[str, int]:
    """Run ``todo`` on ``slots`` workers of ``backend`` (see the module docstring); always closes the backend.

    ``capacity`` is how many episodes one worker runs at once (``--batch-size``): each worker is handed up to that
    many, and a worker that dies gives all of its in-flight episodes back to the queue.

    Returns counters for the run log: ``worker_starts``, ``worker_deaths``, ``workers_replaced`` (a policy call
    missed its deadline), ``episodes_rerun`` (re-dispatched
    after a death), ``episodes_lost`` (recorded as errors after :data:`MAX_ATTEMPTS` deaths).
    Raises RollbenchError when workers cannot be started or fail outside an episode.
    """
    queue: deque[PlannedEpisode] = deque(todo)
    n = min(slots, len(queue))
    running: dict[int, list[PlannedEpisode]] = {}
    ready: set[int] = set()
    alive: set[int] = set()
    start_failures: Counter[int] = Counter()
    attempts: Counter[int] = Counter()
    last_task: dict[int, str] = {}
    stats = {"worker_starts": 0, "worker_deaths": 0, "workers_replaced": 0, "episodes_rerun": 0, "episodes_lost": 0}
    retiring: set[int] = set()  # workers whose policy hung: no new episodes, replaced once theirs are done
    no_live_since = time.monotonic()

    def start(slot: int) -> None:
        backend.start(slot)
        alive.add(slot)
        running[slot] = []
        stats["worker_starts"] += 1
        on_worker(str(slot), "starting")

    def retire_when_idle(slot: int) -> None:
        if slot in retiring and not running.get(slot):
            retiring.discard(slot)
            alive.discard(slot)  # dispatch starts a fresh worker in this slot while episodes wait
            stats["workers_replaced"] += 1
            on_worker(str(slot), "replaced (a policy call missed its deadline)")

    def handle_death(slot: int, detail: str) -> None:
        stats["worker_deaths"] += 1
        retiring.discard(slot)
        alive.discard(slot)
        lost = running.pop(slot, [])
        if slot not in ready:
            start_failures[slot] += 1
            if start_failures[slot] >= MAX_START_FAILURES:
                raise RollbenchError(f"worker {slot} died {start_failures[slot]} times while starting, last: {detail}")
        ready.discard(slot)
        on_worker(str(slot), f"died ({detail})")
        for planned in reversed(lost):  # reversed: appendleft keeps them in plan order at the head of the queue
            attempts[planned.episode_index] += 1
            done = recorded_summary(run_dir, planned)
            if done is not None:  # it staged the episode before dying: keep that copy
                on_result(done)
            elif attempts[planned.episode_index] >= MAX_ATTEMPTS:
                stats["episodes_lost"] += 1
                on_result(_record_lost(run_dir, planned, tasks[planned.task], attempts, detail))
            else:
                stats["episodes_rerun"] += 1
                queue.appendleft(planned)

    def take(slot: int) -> PlannedEpisode:
        """Task affinity: the slot's current task first, else a task no other worker is on, else the next one.

        Building a simulator costs ~0.1 s (MetaWorld), a scripted episode ~30 ms: without affinity every worker
        would build every task's env. Results do not depend on this order (the plan fixes every episode)."""
        mine = last_task.get(slot)
        others = {p.task for s, ps in running.items() if s != slot for p in ps}
        for wanted in (lambda p: p.task == mine, lambda p: p.task not in others):
            for i, planned in enumerate(queue):
                if wanted(planned):
                    del queue[i]
                    return planned
        return queue.popleft()

    def dispatch() -> None:
        for slot in sorted(ready):
            while len(running.setdefault(slot, [])) < capacity and queue:
                planned = take(slot)
                last_task[slot] = planned.task
                running[slot].append(planned)
                backend.submit(slot, planned)
                on_worker(str(slot), ", ".join(describe(p) for p in running[slot]))
        for slot in range(n):  # replace dead workers while episodes wait (idle ones took theirs above)
            if slot not in alive and queue:
                start(slot)

    try:
        for slot in range(n):
            start(slot)
        while True:
            stopping = should_stop()
            if not stopping:
                dispatch()
            busy = [s for s, ps in running.items() if ps]
            if not busy and (stopping or not queue):
                return stats
            if ready:
                no_live_since = time.monotonic()
            elif time.monotonic() - no_live_since > START_TIMEOUT_S:
                raise RollbenchError(
                    f"no worker became ready within {START_TIMEOUT_S:.0f} s (are there free CPUs for "
                    f"{n} workers? for Ray: `ray status`)"
                )
            finished: list[EpisodeSummary] = []
            for ev in backend.wait(POLL_S):
                if ev.kind == "ready":
                    ready.add(ev.slot)
                    start_failures[ev.slot] = 0
                    on_worker(str(ev.slot), "idle")
                elif ev.kind == "done":
                    assert ev.summary is not None
                    running[ev.slot] = [
                        p for p in running.get(ev.slot, []) if p.episode_index != ev.summary.episode_index
                    ]
                    on_worker(str(ev.slot), ", ".join(describe(p) for p in running[ev.slot]) or "idle")
                    if ev.summary.policy_hung and ev.slot in alive:
                        retiring.add(ev.slot)
                        ready.discard(ev.slot)
                    retire_when_idle(ev.slot)
                    finished.append(ev.summary)
                elif ev.kind == "died":
                    handle_death(ev.slot, ev.detail)
                else:
                    raise RollbenchError(f"worker {ev.slot} failed: {ev.detail}")
            if finished and not should_stop():
                dispatch()  # keep workers busy while this process commits what they staged
            for summary in finished:
                on_result(summary)
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
        rec = failed_episode(planned, task, exc)
    staged = stage_episode(run_dir, rec, task.fps)
    if not staged:  # a late copy won the race after all
        done = recorded_summary(run_dir, planned)
        if done is not None:
            return done
    return EpisodeSummary(planned.episode_index, planned.task, False, 0, "error", staged)
