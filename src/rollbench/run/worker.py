"""Runs planned episodes in the current process: builds the policy and envs here, runs the episodes, stages them.

Every runner (in-process, local worker processes, Ray actors) calls :class:`EpisodeWorker`; the episode loop
itself is :class:`rollbench.run.episode.EpisodeRun`, driven by :func:`rollbench.run.lockstep.run_lockstep` at every
batch size. Workers never compute metrics: they stage recorded episodes and
return a small summary used only for progress display.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from rollbench.core.batch import BatchPolicy
from rollbench.core.contracts import Env, Fault, Policy, TaskInfo
from rollbench.core.env_timeout import env_timeout_s
from rollbench.core.episode import EpisodeRecord, failed_episode
from rollbench.core.interrupts import contained
from rollbench.core.plan import PlannedEpisode, ResolvedRun, TaskFacts
from rollbench.core.registry import EnvOptions, family_of, make_env, make_policy
from rollbench.core.spec import EvalSpec
from rollbench.envs.hosted.remote import POOL
from rollbench.policies.basic import ActionNoise
from rollbench.record.lerobot import stage_episode
from rollbench.run import phase, probed
from rollbench.run.deadline import Deadline, closed_badly
from rollbench.run.env_deadline import EnvDeadline
from rollbench.run.episode import EpisodeRun, LoopRules
from rollbench.run.in_memory import borrowed, is_in_memory
from rollbench.run.lockstep import NextEpisode, as_batch_policy, run_lockstep
from rollbench.run.observer import EpisodeProgress, EpisodeStart, EpisodeSummary, RunObserver
from rollbench.run.render_check import render_failure

__all__ = ["EpisodeSummary", "EpisodeWorker", "Recorder", "Stager", "WorkerSetup", "build_policy", "deadline_fault"]

STEPS_EVERY_S = 1.0  # progress inside episodes is reported at most this often


def build_policy(spec: EvalSpec) -> Policy:
    """The spec's policy (an in-memory object's borrowed view while it is bound, :mod:`rollbench.run.in_memory`),
    wrapped in seeded Gaussian action noise when ``spec.action_noise > 0``; the one this thread's run probed and
    kept (:mod:`rollbench.run.probed`) when there is one, as it was built."""
    kept = probed.take(spec)
    if kept is not None:
        return kept
    policy = borrowed(spec.policy) if is_in_memory(spec.policy) else make_policy(spec.policy, spec.policy_options)
    if spec.action_noise > 0:
        policy = ActionNoise(policy, spec.action_noise)
    return policy


def deadline_fault(spec: EvalSpec) -> Fault:
    """Whose fault a policy call past ``--policy-timeout`` is: a served policy's is the transport's (infrastructure),
    an in-process one's the policy's (see :mod:`rollbench.run.deadline`)."""
    return "infrastructure" if "://" in spec.policy else "policy"


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker needs to run planned episodes; picklable, sent as is to worker processes and Ray actors.

    Attributes:
        run: the resolved run (plan, replan interval, each task's cameras and image size), resolved once before the
            run by ``run.prepare.prepare_run``; workers never recompute any of it.
        run_dir: the run directory (absolute), where workers stage episodes.
        batch_size: episodes a worker runs in lockstep (``--batch-size``; see :mod:`rollbench.run.lockstep`).
    """

    run: ResolvedRun
    run_dir: Path
    batch_size: int = 1

    @property
    def spec(self) -> EvalSpec:
        """The run's spec."""
        return self.run.spec

    @property
    def tasks(self) -> dict[str, TaskInfo]:
        """Task name -> TaskInfo for every task of the plan."""
        return {name: facts.task for name, facts in self.run.tasks.items()}


class Recorder(Protocol):
    """How a worker records a finished episode: the in-process runner's
    :class:`~rollbench.record.background.BackgroundCommitter` (committed in this process), a Ray actor's packer
    (shipped to the driver), by default a :class:`Stager`."""

    def commit(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        """Record ``rec`` (with its render failure, if any); False if that episode was already recorded."""
        ...


@runtime_checkable
class Settles(Protocol):
    """A recorder that writes in the background and can wait for it (the in-process runner's committer)."""

    def settle(self) -> None:
        """Wait until every episode handed to ``commit`` so far is committed."""
        ...


class Stager:
    """Stages each episode in the run directory (:func:`rollbench.record.lerobot.stage_episode`), for the process
    that owns the run directory to commit in plan order."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.setup = setup

    def commit(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        fps = self.setup.run.tasks[rec.planned.task].task.fps
        return stage_episode(self.setup.run_dir, rec, fps, render_failure)


class EpisodeWorker:
    """Holds the policy (one instance per batch slot unless it batches natively) and one env per slot; episodes of
    a task reuse their slot's env (reset between them).

    ``observer`` hears each episode start (``name``: this worker's id), its steps (about once a second) and its end;
    a worker process's observer sends them over its pipe. ``recorder`` records each finished episode (default: a
    :class:`Stager`). ``policy`` builds the batch policy of the ``batch_size`` slots instead of building the spec's policy here (a Ray
    actor's client of its node's policy actor, :mod:`rollbench.run.ray_policy`).
    """

    def __init__(
        self,
        setup: WorkerSetup,
        observer: RunObserver | None = None,
        *,
        recorder: Recorder | None = None,
        policy: Callable[[], BatchPolicy] | None = None,
        name: str = "0",
    ) -> None:
        self.setup, self.name = setup, name
        self.observer = observer or RunObserver()
        self.recorder = recorder or Stager(setup)
        self.last: EpisodeSummary | None = None  # the latest episode's summary (see run)
        size = max(1, setup.batch_size)
        spec = setup.spec

        def batch() -> BatchPolicy:
            return as_batch_policy(build_policy(spec), lambda: build_policy(spec), size)

        # every policy call bounded by --policy-timeout; a policy past it is abandoned and rebuilt
        # a background recorder has committed every ended episode before the policy runs again (a policy that ends
        # the process cannot lose them: rollbench.record.background)
        settle = self.recorder.settle if isinstance(self.recorder, Settles) else None
        self.batch = Deadline(policy or batch, spec.policy_timeout_s, deadline_fault(spec), settle)
        self._envs: list[Env | None] = [None] * size
        self._env_tasks: list[str | None] = [None] * size
        self._steps_at = 0.0
        self.env_timeout_s = env_timeout_s()  # checked before the run (prepare_run): valid here

    def stepped(self, runs: list[EpisodeRun]) -> None:
        """After a lockstep step: report the running episodes' steps to the observer, at most every
        :data:`STEPS_EVERY_S` seconds."""
        now = time.monotonic()
        if now - self._steps_at < STEPS_EVERY_S:
            return
        self._steps_at = now
        self.observer.on_steps(
            self.name,
            tuple(EpisodeProgress(r.planned.episode_index, r.planned.task, r.step, r.planned.max_steps) for r in runs),
        )

    def _env_for(self, slot: int, facts: TaskFacts) -> Env:
        env = self._envs[slot]
        if env is None or self._env_tasks[slot] != facts.task.name:
            self.close_env(slot)
            options = EnvOptions(
                cameras=facts.render_cameras, image_size=facts.image_size, fast_render=self.setup.spec.fast_render
            )
            task = facts.task
            if family_of(task.name).inline:  # rollbench's own family: called inline, no deadline
                env = make_env(task, options)
            else:  # a plug-in's or a user's code: every call bounded by the env deadline (rollbench.run.env_deadline)
                env = EnvDeadline(lambda: make_env(task, options), self.env_timeout_s, task.name)
            self._envs[slot] = env
            self._env_tasks[slot] = facts.task.name
        return env

    def start(self, slot: int, planned: PlannedEpisode) -> EpisodeRun | EpisodeRecord:
        """Begin ``planned`` in ``slot``: its env reset to the planned scene, the slot's policy reset."""
        spec, facts = self.setup.spec, self.setup.run.tasks[planned.task]
        task = facts.task
        self.observer.on_episode_start(EpisodeStart(self.name, planned.episode_index, planned.task))
        phase.bind(slot, planned.episode_index)
        with contained() as build:  # an env that cannot be built (a missing asset, a broken install)
            env = self._env_for(slot, facts)
        if build.error:
            return failed_episode(planned, task, build.error, "infrastructure")
        run = EpisodeRun(
            env,
            planned,
            cameras=facts.policy_cameras,  # rendered on the steps the policy is asked for a chunk
            record_frames=spec.video,
            video_cameras=facts.video_cameras,  # rendered every step, only with --video
            rules=LoopRules(self.setup.run.replan_every, spec.success_hold, spec.latency, spec.stale),
        )
        run.begin(lambda: self.batch.reset_slot(slot, task, planned.seed))
        return run

    def finish(self, slot: int, rec: EpisodeRecord) -> EpisodeSummary:
        """Record a finished episode, tell the observer (its summary: progress display only) and return it."""
        staged = self.recorder.commit(rec, _render_failure(rec))
        if rec.termination_reason == "error":  # closed after recording: an env whose close() ends the process
            self.close_env(slot)  # never reuse an env whose episode failed: its state is unknown
        p = rec.planned
        self.last = EpisodeSummary(
            p.episode_index, p.task, rec.success, rec.length, rec.termination_reason, staged, self.batch.misses > 0
        )
        self.observer.on_episode_end(self.last)
        return self.last

    def run_stream(self, next_episode: NextEpisode) -> None:
        """Run episodes from ``next_episode`` (see :func:`rollbench.run.lockstep.run_lockstep`) ``batch_size`` at a
        time, recording each as it ends; the observer hears their starts, steps and ends."""
        run_lockstep(len(self._envs), next_episode, self, self.batch)

    def run(self, planned: PlannedEpisode) -> EpisodeSummary:
        """Run one episode and return its summary (the observer hears it too)."""
        todo = [planned]
        self.run_stream(lambda block: todo.pop() if todo else None)
        assert self.last is not None and self.last.episode_index == planned.episode_index
        return self.last

    def close_env(self, slot: int | None = None) -> None:
        """Close the env of ``slot`` (None: every slot's)."""
        for i in range(len(self._envs)) if slot is None else (slot,):
            env, self._envs[i], self._env_tasks[i] = self._envs[i], None, None
            if env is not None:
                _close_quietly(env.close, f"env {self._env_names(env)}")

    @staticmethod
    def _env_names(env: Env) -> str:
        return str(getattr(getattr(env, "task", None), "name", type(env).__name__))

    def close(self) -> None:
        """Close every env and the policy, and stop the env hosts the envs kept for reuse (they never outlive the
        run, even in a long-lived process); a close() that raises is reported on stderr, never raised: the episodes
        are already recorded."""
        self.close_env()
        _close_quietly(POOL.close_all, "idle env hosts")
        _close_quietly(self.batch.close, f"policy {self.setup.spec.policy}")


def _close_quietly(close: Callable[[], None], what: str) -> None:
    with contained(lambda exc: print(f"warning: {what}: {closed_badly(exc)}", file=sys.stderr)):
        close()


def _render_failure(rec: EpisodeRecord) -> str | None:
    """Black or frozen images the policy was given (the episode loop's check, which then ended the episode as an
    ``environment`` error), else the same check on the recorded frames of cameras the policy did not see."""
    if rec.render_failure:
        return rec.render_failure
    found = [f"{cam}: {why}" for cam, fr in rec.frames.items() if fr and (why := render_failure(fr, list(rec.states)))]
    return "; ".join(found) or None
