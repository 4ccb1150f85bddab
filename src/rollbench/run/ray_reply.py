"""The driver's side of shipped episodes (:mod:`rollbench.record.shipping`): check each Ray actor's reply, stage it
into the run directory (first-wins), or record the episode as an ``infrastructure`` error when the reply is bad."""

from __future__ import annotations

import dataclasses
import sys

from rollbench.core.episode import failed_episode
from rollbench.core.plan import PlannedEpisode
from rollbench.record.lerobot import dataset_features, stage_episode, video_key
from rollbench.record.shipping import BadReply, allowed_names, check_reply, stage_shipped
from rollbench.record.staged_check import StagedShape
from rollbench.run.observer import EpisodeSummary
from rollbench.run.pool import recorded_summary
from rollbench.run.worker import WorkerSetup


class ReplyChecker:
    """Stages the episodes Ray actors ship to this process (see the module docstring)."""

    def __init__(self, setup: WorkerSetup, max_bytes: int) -> None:
        self.setup, self.max_bytes = setup, max_bytes
        keys = {video_key(c) for facts in setup.run.tasks.values() for c in facts.video_cameras}
        self.names = allowed_names(keys)
        first = setup.run.tasks[setup.run.plan.tasks[0].name]  # every task records the same features
        features = dataset_features(first.task, (), (1, 1), delay_columns=setup.run.spec.latency != "none")
        self.shape = StagedShape.of(features, len(setup.run.plan.instructions))
        self.bad = 0  # replies recorded as errors

    def record(self, planned: PlannedEpisode, summary: object, shipped: object, shared: bool) -> EpisodeSummary:
        """Stage ``shipped`` (the actor's reply for ``planned``) unless the actor staged it itself (``shared``);
        return the summary read back from what is staged (the actor's own summary only says whether its policy
        hung)."""
        hung = isinstance(summary, EpisodeSummary) and summary.policy_hung is True
        run_dir, e = self.setup.run_dir, planned.episode_index
        if shared and shipped is None:  # the actor staged it on the shared file system
            done = recorded_summary(run_dir, planned)
            if done is not None:
                return dataclasses.replace(done, policy_hung=hung)
            if isinstance(summary, EpisodeSummary):  # staged, not yet visible here (NFS attribute caching)
                return summary
        try:
            staged = stage_shipped(run_dir, check_reply(shipped, e, self.names, self.max_bytes), self.shape, planned)
        except BadReply as exc:
            self.bad += 1
            print(f"warning: episode {e}: {exc}; recorded as an infrastructure error", file=sys.stderr)
            task = self.setup.tasks[planned.task]
            staged = stage_episode(run_dir, failed_episode(planned, task, exc, "infrastructure"), task.fps)
        done = recorded_summary(run_dir, planned)
        assert done is not None, f"episode {e} is neither staged nor committed"  # this process just staged it
        return dataclasses.replace(done, staged=staged, policy_hung=hung)
