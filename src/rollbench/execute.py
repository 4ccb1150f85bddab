"""Runs planned episodes in the current process: builds the policy and envs here, rolls out, stages the result.

Every runner (in-process, local worker processes, Ray actors) calls :class:`EpisodeWorker`; the episode loop
itself is :func:`rollbench.rollout.rollout`. Workers never compute metrics: they stage recorded episodes and
return a small summary used only for progress display.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rollbench.envs.render_check import render_fault
from rollbench.plan import PlannedEpisode, cameras_for, image_size_for
from rollbench.policies.basic import ActionNoise
from rollbench.record.lerobot import stage_episode
from rollbench.registry import EnvOptions, make_env, make_policy
from rollbench.rollout import EpisodeRecord, failed_episode, rollout
from rollbench.spec import EvalSpec
from rollbench.types import Env, Policy, TaskInfo


def build_policy(spec: EvalSpec) -> Policy:
    """The spec's policy, wrapped in seeded Gaussian action noise when ``spec.action_noise > 0``."""
    policy = make_policy(spec.policy, spec.policy_options)
    if spec.action_noise > 0:
        policy = ActionNoise(policy, spec.action_noise)
    return policy


@dataclass(frozen=True)
class EpisodeSummary:
    """What a worker reports back after staging an episode (progress display only, never results)."""

    episode_index: int
    task: str
    success: bool
    length: int
    termination_reason: str
    staged: bool  # False if another attempt of the same episode had already been recorded


@dataclass(frozen=True)
class WorkerSetup:
    """What every worker needs to run planned episodes; picklable, sent as is to worker processes and Ray actors.

    Attributes:
        spec: the run's spec.
        run_dir: the run directory (absolute), where workers stage episodes.
        tasks: task name -> TaskInfo for every task of the plan.
        replan_every: the effective replan interval (resolved once before the run, recorded in run.json).
        needs_images: whether the policy reads camera images.
    """

    spec: EvalSpec
    run_dir: Path
    tasks: dict[str, TaskInfo]
    replan_every: int
    needs_images: bool


class EpisodeWorker:
    """Holds one policy and the env of the current task; episodes of a task reuse the env (reset between them).

    ``commit`` records a finished episode and returns False if it was already recorded; default: stage it in the run
    directory (worker processes, Ray actors); the in-process runner passes ``DatasetWriter.commit_record``.
    """

    def __init__(self, setup: WorkerSetup, commit: Callable[[EpisodeRecord, str | None], bool] | None = None) -> None:
        self.setup = setup
        self.commit = commit or (
            lambda rec, fault: stage_episode(setup.run_dir, rec, setup.tasks[rec.planned.task].fps, fault)
        )
        self.policy: Policy = build_policy(setup.spec)
        self._env: Env | None = None
        self._env_task: str | None = None

    def _env_for(self, task: TaskInfo, cameras: tuple[str, ...]) -> Env:
        if self._env is None or self._env_task != task.name:
            self.close_env()
            spec = self.setup.spec
            size = image_size_for(spec, task)
            options = EnvOptions(cameras=cameras, image_size=size, fast_render=spec.fast_render)
            self._env = make_env(task, options)
            self._env_task = task.name
        return self._env

    def run(self, planned: PlannedEpisode) -> EpisodeSummary:
        spec, task = self.setup.spec, self.setup.tasks[planned.task]
        cams = cameras_for(spec, task, self.setup.needs_images)
        try:
            env = self._env_for(task, cams)
        except Exception as exc:
            rec = failed_episode(planned, task, exc)
        else:
            rec = rollout(
                env,
                self.policy,
                planned,
                cameras=cams,
                record_frames=spec.video,
                replan_every=self.setup.replan_every,
                success_hold=spec.success_hold,
            )
            if rec.termination_reason == "error":
                self.close_env()  # never reuse an env whose episode failed: its state is unknown
        fault = _render_fault(rec)
        staged = self.commit(rec, fault)
        return EpisodeSummary(
            planned.episode_index, planned.task, rec.success, rec.length, rec.termination_reason, staged
        )

    def close_env(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env, self._env_task = None, None

    def close(self) -> None:
        self.close_env()
        self.policy.close()


def _render_fault(rec: EpisodeRecord) -> str | None:
    """Black or frozen frames in any recorded camera (see :func:`rollbench.envs.render_check.render_fault`)."""
    faults = [f"{cam}: {why}" for cam, fr in rec.frames.items() if fr and (why := render_fault(fr, list(rec.states)))]
    return "; ".join(faults) or None
