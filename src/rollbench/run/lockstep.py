"""Batched stepping: B episodes in lockstep, one batched policy call per step (``eval --batch-size B``).

Why: a VLA on a GPU answers 8-64 observations in about the time of one. Where public evaluators batch with vector
envs they miscount (autoreset adding successes, episodes taken from the wrong slot, initial states that depend on
which env finished first, more trajectories than asked for). Here nothing of the kind can happen:

* every slot holds its own env and its own :class:`~rollbench.run.episode.EpisodeRun`; the episode's seed, initial
  state and instruction come from its :class:`~rollbench.core.plan.PlannedEpisode` alone, never from the slot;
* no autoreset: a slot whose episode ended takes the next planned episode and resets it explicitly;
* the rules of an episode (termination reasons, success, errors) live in ``EpisodeRun`` only, and every batch size,
  ``B = 1`` included, runs through this driver; so per-episode results equal ``--batch-size 1``'s for any policy whose
  per-slot answers do not depend on the other slots (tested for B = 1, 3, 8).

Policies: a policy may offer a native batched form through a method ``batched(size) -> BatchPolicy | None``
(``ws://``/``http://`` clients do when their server accepts batch requests, :mod:`rollbench.policies.remote.base`;
None means "not now"); otherwise :class:`PolicyLoop` keeps one policy instance per slot and calls them one by one
(concurrently in threads when the policy says its calls wait on I/O, ``PolicyInfo.io_bound``, e.g. a policy server).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from rollbench.core.batch import Answer, Batchable, BatchPolicy, SlotPolicies
from rollbench.core.contracts import EpisodeError, Observation, Policy, PolicyStop, TaskInfo
from rollbench.core.episode import EpisodeRecord
from rollbench.core.interrupts import contained
from rollbench.core.plan import PlannedEpisode
from rollbench.run.episode import EpisodeRun
from rollbench.run.phase import inside, inside_slots


class PolicyLoop:
    """The default :class:`BatchPolicy`: one instance of a single-observation policy per slot, called in turn
    (in a thread pool when ``info.io_bound``, so that requests to a policy server overlap)."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        if not policies:
            raise ValueError("PolicyLoop needs at least one policy")
        self.policies = list(policies)
        self.info = policies[0].info
        self._pool = (
            ThreadPoolExecutor(len(policies), thread_name_prefix="rollbench-slot")
            if len(policies) > 1 and getattr(self.info, "io_bound", False)
            else None
        )

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        self.policies[slot].reset(task, seed)

    def _one(self, slot: int, obs: Observation, instruction: str) -> Answer:
        with contained() as call:  # PolicyStop included: it is an answer for this slot only
            return np.asarray(self.policies[slot].act(obs, instruction))
        assert call.error is not None
        return call.error

    def _alone(self, slot: int, obs: Observation, instruction: str) -> Answer:
        """:meth:`_one`, called one slot at a time: a worker that dies in it is charged to that slot's episode
        alone (:mod:`rollbench.run.phase`), as with ``--batch-size 1``."""
        with inside_slots("policy.act", (slot,)):
            return self._one(slot, obs, instruction)

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[Answer]:
        if self._pool is None or len(slots) == 1:
            return [self._alone(s, o, i) for s, o, i in zip(slots, observations, instructions, strict=True)]
        return list(self._pool.map(self._one, slots, observations, instructions))

    def slot_policy(self, slot: int) -> Policy:
        """Slot ``slot``'s own policy instance (its episode artifacts, e.g. an agent's transcript)."""
        return self.policies[slot]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for p in self.policies:
            p.close()


def as_batch_policy(first: Policy, build: Callable[[], Policy], size: int) -> BatchPolicy:
    """``first``'s native batched form if it has one (``first.batched(size)``, which may return None when it cannot
    batch now, e.g. a remote client whose server takes no batches), else a :class:`PolicyLoop` over ``first`` and
    ``size - 1`` more instances from ``build``."""
    policy = first.batched(size) if isinstance(first, Batchable) else None
    if policy is not None:
        return policy
    return PolicyLoop([first, *(build() for _ in range(size - 1))])


NextEpisode = Callable[[bool], PlannedEpisode | None]


class Slots(Protocol):
    """What the lockstep loop drives (an :class:`~rollbench.run.worker.EpisodeWorker`)."""

    def start(self, slot: int, planned: PlannedEpisode) -> EpisodeRun | EpisodeRecord:
        """Build or reuse the slot's env and return a begun :class:`~rollbench.run.episode.EpisodeRun` (policy slot
        reset included), or a finished record when the episode could not start (env build failure)."""
        ...

    def finish(self, slot: int, rec: EpisodeRecord) -> object:
        """Record an episode that ended, before the slot takes another."""
        ...

    def stepped(self, runs: list[EpisodeRun]) -> None:
        """After every lockstep step, with the episodes still running (progress inside episodes)."""
        ...


def run_lockstep(size: int, next_episode: NextEpisode, worker: Slots, policy: BatchPolicy) -> None:
    """Run planned episodes ``size`` at a time in lockstep until ``next_episode`` has no more.

    Args:
        size: slots (B >= 1).
        next_episode: ``next_episode(block)`` returns the next planned episode, or None; with ``block=False`` None
            means "none right now", with ``block=True`` (every slot idle) it means "no more: stop".
        worker: starts each episode in a slot, records each as soon as it ends and hears every step
            (:class:`Slots`).
        policy: answers every slot that needs a new action chunk, once per step.
    """
    slots: list[EpisodeRun | None] = [None] * size
    while True:
        for i in range(size):
            while slots[i] is None:
                planned = next_episode(not any(s is not None for s in slots))
                if planned is None:
                    break
                run = worker.start(i, planned)
                if isinstance(run, EpisodeRecord):
                    worker.finish(i, run)
                elif run.done:
                    worker.finish(i, run.finish(_slot_policy(policy, i)))
                else:
                    slots[i] = run
        active = [i for i in range(size) if slots[i] is not None]
        if not active:
            return
        runs = {i: r for i in active if (r := slots[i]) is not None}
        asks = [i for i in active if runs[i].prepare()]
        if asks:
            _ask(policy, [(i, runs[i]) for i in asks])
        for i in active:
            runs[i].advance()
            if runs[i].done:
                slots[i] = None
                worker.finish(i, runs[i].finish(_slot_policy(policy, i)))
        worker.stepped([r for r in slots if r is not None])


def _slot_policy(policy: BatchPolicy, slot: int) -> Policy | None:
    """The slot's own policy instance (for its episode artifacts, e.g. an agent's transcript), from the batch
    policy's optional ``slot_policy(slot)`` (a :class:`PolicyLoop`'s, passed on by wrappers such as
    :class:`~rollbench.run.deadline.Deadline`); a native batched policy has none, so its episodes carry no
    artifacts."""
    return policy.slot_policy(slot) if isinstance(policy, SlotPolicies) else None


def _ask(policy: BatchPolicy, asks: list[tuple[int, EpisodeRun]]) -> None:
    """One batched policy call for every slot that needs a chunk; each answer goes to its own episode."""
    t0 = time.perf_counter()
    with contained() as call, inside("policy.act", [r.planned.episode_index for _, r in asks]):
        answers = policy.act_batch(
            [i for i, _ in asks],
            [r.obs for _, r in asks],  # type: ignore[misc]
            [r.instruction for _, r in asks],
        )
        if len(answers) != len(asks):
            raise EpisodeError(
                f"the policy returned {len(answers)} answers for a batch of {len(asks)} observations", fault="policy"
            )
    if call.error:
        for _, run in asks:
            run.fail(call.error)
        return
    latency = time.perf_counter() - t0
    for (_, run), answer in zip(asks, answers, strict=True):
        if isinstance(answer, PolicyStop):
            run.stop(answer.termination_reason)
        elif isinstance(answer, BaseException):
            run.fail(answer)
        else:
            run.give(answer, latency)
