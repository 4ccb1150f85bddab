"""Test helper: one episode driven with a single policy, straight through :class:`~rollbench.run.episode.EpisodeRun`
(the loop's rules without lockstep, batching or a worker), for tests of the episode rules themselves. rollbench
itself always drives episodes through :func:`rollbench.run.lockstep.run_lockstep` (B = 1 included)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rollbench.core.contracts import Env, Policy
from rollbench.core.episode import EpisodeRecord
from rollbench.core.plan import PlannedEpisode
from rollbench.run.episode import EpisodeRun, LoopRules


def rollout(
    env: Env,
    policy: Policy,
    planned: PlannedEpisode,
    *,
    cameras: Sequence[str] = (),
    record_frames: bool = False,
    replan_every: int = 1,
    on_step: Callable[[int], None] | None = None,
    success_hold: int = 1,
    latency: str = "none",
    stale: str = "skip",
) -> EpisodeRecord:
    """Run one episode of ``planned`` (its seed, initial state, instruction, horizon and success rule).

    Args:
        env: a live env for ``planned.task``.
        policy: reset here with ``(task, seed)`` before the first action.
        cameras: the policy's cameras, rendered into ``observation.images`` on the steps it is asked for a chunk
            (and, with record_frames, into frames on every step).
        record_frames: keep rendered frames for the episode video.
        replan_every: actions executed from each chunk before the policy is asked again (>= 1).
        on_step: called with the step number after every step (progress reporting).
        success_hold: consecutive success steps needed (see :func:`held_success`).
        latency, stale: simulated policy-call duration and the stale-action rule (canonical ``EvalSpec.latency``
            and ``EvalSpec.stale``; see :mod:`rollbench.run.schedule`).

    Never raises for episode-level failures: they end the episode with termination reason ``error``.
    After the last step, a policy that defines ``finish_episode(outcome)`` (``outcome``: termination_reason,
    success, length, error) is asked for the episode's artifacts (``{kind: bytes}``), kept in ``extra``; if it
    raises, the episode ends as ``error``.
    """
    run = EpisodeRun(
        env,
        planned,
        cameras=cameras,
        record_frames=record_frames,
        rules=LoopRules(replan_every, success_hold, latency, stale),
    )
    run.begin(lambda: policy.reset(env.task, planned.seed))
    while not run.done:
        if run.prepare():
            run.ask(policy)
        if run.done:
            break
        run.advance()
        if on_step is not None:
            on_step(run.step - 1)
    return run.finish(policy)
