"""The one episode loop in rollbench: reset, observe, act, step, until a termination reason.

Per-step convention (LeRobot): row ``t`` holds the observation *before* action ``t``, the action, and the reward,
success and done flags observed *after* it (``next.*``). Video frame ``t`` is the image of observation ``t``, so an
episode of ``T`` steps has ``T`` rows and ``T`` video frames.

Termination reasons (first that applies after each step): ``success`` (``any_step`` rule only: the episode stops at
the first success), ``env_terminated``, ``truncated``, ``max_steps`` (the horizon was reached). ``policy_stop`` when
the policy raises :class:`~rollbench.types.PolicyStop`, ``give_up`` when it raises
:class:`~rollbench.types.PolicyGiveUp`; ``error`` when the env or policy raises, or the policy returns
a non-finite or wrongly shaped action: the steps before it are kept, the episode is not a success, the run goes on.

Success: ``any_step`` is true if ``next.success`` was ever true; ``final_step`` is the last row's ``next.success``.
An env that already reports success right after reset sets ``success_at_reset``; such an episode never counts as
a policy success (see :mod:`rollbench.grading`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rollbench.plan import PlannedEpisode
from rollbench.types import Env, EpisodeError, Observation, Policy, PolicyStop, TaskInfo


@dataclass
class EpisodeRecord:
    """Everything one episode produced. Arrays have one row per executed step (``length`` rows).

    Attributes:
        states: ``float32 (T, state_dim)``, observation before each action.
        actions: ``float32 (T, action_dim)``, as executed.
        rewards: ``float32 (T,)``; successes, dones: ``bool (T,)`` after each action.
        latencies: ``float32 (T,)`` seconds spent in ``policy.act`` on steps that called it, NaN on steps served
            from a queued action chunk.
        frames: camera -> list of ``uint8 (H, W, 3)``, one per step (empty unless video was asked for).
        error: ``"ExceptionType: message"`` when termination_reason is ``error``.
        extra: ``{"artifacts": {kind: bytes}}`` when the policy has a ``finish_episode(outcome) -> {kind: bytes}``
            method (see :data:`rollbench.record.lerobot.ARTIFACT_PATHS` for the kinds, e.g. an LLM agent's
            ``transcript``); they are staged and committed atomically with the episode.
    """

    planned: PlannedEpisode
    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    successes: np.ndarray
    dones: np.ndarray
    latencies: np.ndarray
    frames: dict[str, list[np.ndarray]]
    success: bool
    success_at_reset: bool
    termination_reason: str
    error: str | None = None
    error_traceback: str | None = None
    wall_time_s: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return len(self.actions)


def _as_chunk(raw: object, action_dim: int, step: int) -> np.ndarray:
    """Validate a policy's output as a ``float32 (k, action_dim)`` chunk, k >= 1; raise EpisodeError if not."""
    try:
        arr = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EpisodeError(f"policy returned a non-numeric action at step {step}: {exc}") from None
    shape = arr.shape
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != action_dim:
        raise EpisodeError(
            f"policy returned an action of shape {shape} at step {step}; expected "
            f"({action_dim},) or (k, {action_dim}) with k >= 1"
        )
    if not np.isfinite(arr).all():
        raise EpisodeError(f"policy returned a non-finite action (NaN or inf) at step {step}: {arr.tolist()}")
    return arr


def rollout(
    env: Env,
    policy: Policy,
    planned: PlannedEpisode,
    *,
    cameras: Sequence[str] = (),
    record_frames: bool = False,
    replan_every: int = 1,
    on_step: Callable[[int], None] | None = None,
) -> EpisodeRecord:
    """Run one episode of ``planned`` (its seed, initial state, instruction, horizon and success rule).

    Args:
        env: a live env for ``planned.task``.
        policy: reset here with ``(task, seed)`` before the first action.
        cameras: cameras rendered every step into ``observation.images`` (and into frames if record_frames).
        record_frames: keep rendered frames for the episode video.
        replan_every: actions executed from each chunk before the policy is asked again (>= 1).
        on_step: called with the step number after every step (progress reporting).

    Never raises for episode-level failures: they end the episode with termination reason ``error``.
    After the last step, a policy that defines ``finish_episode(outcome)`` (``outcome``: termination_reason,
    success, length, error) is asked for the episode's artifacts (``{kind: bytes}``), kept in ``extra``; if it
    raises, the episode ends as ``error``.
    """
    task: TaskInfo = env.task
    horizon, final_rule = planned.max_steps, planned.success_rule == "final_step"
    states: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    rewards: list[float] = []
    successes: list[bool] = []
    latencies: list[float] = []
    frames: dict[str, list[np.ndarray]] = {c: [] for c in cameras} if record_frames else {}
    reason, error, tb, success_at_reset = "max_steps", None, None, False
    queue: list[np.ndarray] = []
    start = time.perf_counter()
    step = 0
    try:
        obs: Observation = env.reset(planned.seed, planned.initial_state)
        success_at_reset = bool(env.success())
        policy.reset(task, planned.seed)
        for step in range(horizon):
            if cameras:
                obs.images = {c: env.render(c) for c in cameras}
                for c in frames:
                    frames[c].append(obs.images[c])
            latency = float("nan")
            if not queue:
                t0 = time.perf_counter()
                raw = policy.act(obs, planned.instruction)
                latency = time.perf_counter() - t0
                queue = list(_as_chunk(raw, task.action_dim, step)[:replan_every])
            action = queue.pop(0)
            state = np.asarray(obs.state, dtype=np.float32).reshape(task.state_dim)
            result = env.step(action)
            states.append(state)
            actions.append(action)
            rewards.append(float(result.reward))
            successes.append(bool(result.success))
            latencies.append(latency)
            if on_step is not None:
                on_step(step)
            obs = result.observation
            if result.success and not final_rule:
                reason = "success"
                break
            if result.terminated:
                reason = "env_terminated"
                break
            if result.truncated:
                reason = "truncated"
                break
    except PolicyStop as stop:
        reason = stop.termination_reason
    except Exception as exc:
        reason, error = "error", f"{type(exc).__name__}: {exc}"
        tb = traceback.format_exc(limit=8)
    n = len(actions)
    # a frame rendered for a step whose action then failed has no row: keep frames == rows
    for c in frames:
        del frames[c][n:]
    succ = np.asarray(successes, dtype=bool)
    reached = bool(succ[-1]) if (final_rule and n) else bool(succ.any())
    dones = np.zeros(n, dtype=bool)
    if n:
        dones[-1] = True
    success = reached and reason != "error" and not success_at_reset
    artifacts: dict[str, bytes] = {}
    finish = getattr(policy, "finish_episode", None)
    if callable(finish):  # e.g. an LLM agent's transcript; staged and committed with the episode
        outcome = {"termination_reason": reason, "success": success, "length": n, "error": error}
        try:
            artifacts = {str(k): bytes(v) for k, v in finish(outcome).items()}
        except Exception as exc:
            if reason != "error":
                reason, error, success = "error", f"{type(exc).__name__}: {exc}", False
                tb = traceback.format_exc(limit=8)
    return EpisodeRecord(
        planned=planned,
        states=np.asarray(states, dtype=np.float32).reshape(n, task.state_dim),
        actions=np.asarray(actions, dtype=np.float32).reshape(n, task.action_dim),
        rewards=np.asarray(rewards, dtype=np.float32),
        successes=succ,
        dones=dones,
        latencies=np.asarray(latencies, dtype=np.float32),
        frames=frames,
        success=success,
        success_at_reset=success_at_reset,
        termination_reason=reason,
        error=error,
        error_traceback=tb,
        wall_time_s=time.perf_counter() - start,
        extra={"artifacts": artifacts} if artifacts else {},
    )


def failed_episode(planned: PlannedEpisode, task: TaskInfo, exc: BaseException) -> EpisodeRecord:
    """The record of an episode that could not start (e.g. its env failed to build): 0 steps, reason ``error``."""
    return EpisodeRecord(
        planned=planned,
        states=np.zeros((0, task.state_dim), dtype=np.float32),
        actions=np.zeros((0, task.action_dim), dtype=np.float32),
        rewards=np.zeros(0, dtype=np.float32),
        successes=np.zeros(0, dtype=bool),
        dones=np.zeros(0, dtype=bool),
        latencies=np.zeros(0, dtype=np.float32),
        frames={},
        success=False,
        success_at_reset=False,
        termination_reason="error",
        error=f"{type(exc).__name__}: {exc}",
        error_traceback=traceback.format_exc(limit=8),
    )
