"""The one episode loop in rollbench: reset, observe, act, step, until a termination reason.

Per-step convention (LeRobot): row ``t`` holds the observation *before* action ``t``, the action, and the reward,
success and done flags observed *after* it (``next.*``). Video frame ``t`` is the image of observation ``t``, so an
episode of ``T`` steps has ``T`` rows and ``T`` video frames.

Termination reasons (first that applies after each step): ``success`` (``any_step`` rule only: the episode stops at
the first success), ``env_terminated``, ``truncated``, ``max_steps`` (the horizon was reached). ``policy_stop`` when
the policy raises :class:`~rollbench.core.contracts.PolicyStop`, ``give_up`` when it raises
:class:`~rollbench.core.contracts.PolicyGiveUp`; ``error`` when the env or policy raises, or the policy returns
a non-finite, non-real or wrongly shaped action: the steps before it are kept, the episode is not a success, the
run goes on. "Raises" means any ``BaseException`` (``SystemExit``, a ``KeyboardInterrupt`` the code raised itself,
custom ones) except the user's own Ctrl-C or SIGTERM, which stops the run (:mod:`rollbench.core.interrupts`).

Which action runs at each step (the chunk queue, ``replan_every``, and with ``--latency`` the inference delay, hold
actions and stale actions) is :class:`~rollbench.run.schedule.ChunkSchedule`'s.

Fault of an error (``EpisodeRecord.error_fault``, see :class:`~rollbench.core.contracts.EpisodeError`): the exception's own
``fault`` attribute when it has a valid one (``EpisodeError``, ``InfrastructureError`` raised by remote clients);
otherwise where it was raised: ``policy`` inside ``policy.reset``/``policy.act`` or for a bad action, ``environment``
inside ``env.reset``/``step``/``render``/``success``.

Values crossing a boundary are copied once when rollbench keeps them: the action chunk the policy returns (so a
policy reusing its output buffer cannot rewrite recorded actions; the env steps a copy of its row, so an env
clipping in place cannot either), the observation state the env returns, and every recorded video frame the
renderer returns. The policy sees the env's own observation arrays, in the env's own dtypes. Actions keep the
policy's float dtype and values: the env adapter gets exactly what the policy returned (and converts it to what its
simulator takes: LIBERO and robosuite float64, exact for float32 and float64), and the record holds it as float64
(:data:`rollbench.record.lerobot.ACTION_DTYPE`).

Rendering happens only where an image is looked at: the policy's cameras on the steps where it is asked for a new
chunk (a policy replanning every 5 steps gets images on one step in five; ``observation.images`` is empty on the
others), and the video's cameras on every step; a step nobody looks at renders nothing. An env that renders
inside its step (LIBERO: robosuite renders camera observations mid-step) is told before each step and reset which
cameras the observation it produces needs (its optional ``expect_images``).

Success: ``any_step`` is true if ``next.success`` was ever true; ``final_step`` is the last row's ``next.success``.
With ``success_hold = K > 1`` (``--success-hold``) success must hold for K consecutive steps: ``any_step`` then
needs a run of K true ``next.success`` rows (the episode stops at the K-th), ``final_step`` the last K rows true.
:func:`held_success` is that rule; grading recomputes success from the recorded rows with the same function.
An env that already reports success right after reset sets ``success_at_reset``; such an episode never counts as
a policy success (see :mod:`rollbench.grading.grade`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rollbench.core.contracts import (
    Env,
    EpisodeError,
    ExpectsImages,
    Fault,
    FinishesEpisodes,
    Observation,
    Policy,
    PolicyStop,
    describe,
)
from rollbench.core.episode import FINISH_EPISODE_ERROR, EpisodeRecord, fault_of, held_success
from rollbench.core.interrupts import contained
from rollbench.core.latency import delay_rule
from rollbench.core.plan import PlannedEpisode
from rollbench.run.phase import inside
from rollbench.run.render_check import RenderFailure, RenderWatch
from rollbench.run.schedule import ChunkSchedule


def _as_chunk(raw: object, action_dim: int, step: int) -> np.ndarray:
    """Validate a policy's output as a ``(k, action_dim)`` chunk, k >= 1, of the policy's own float dtype (integers
    and booleans become float64: exact); raise EpisodeError if not. The values are never rounded: the env is stepped
    with exactly what the policy returned (openpi's LIBERO client steps with ``action.tolist()``). Only real numbers
    are actions: complex numbers (whose imaginary part a cast would drop), strings (which a cast would parse) and
    objects are refused."""
    try:
        arr = np.array(raw, copy=True)  # ours from here on, even if the policy reuses its buffer
        if arr.dtype.kind != "f":
            if arr.dtype.kind not in "biu":
                raise TypeError(f"its dtype is {arr.dtype}, not a real number type")
            arr = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
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


@dataclass(frozen=True)
class LoopRules:
    """The run's rules every episode's loop follows: ``replan_every`` (actions executed from each chunk before the
    policy is asked again, >= 1), ``success_hold`` (consecutive success steps needed, see :func:`held_success`),
    ``latency`` and ``stale`` (the simulated policy-call duration and the stale-action rule, canonical
    ``EvalSpec.latency`` and ``EvalSpec.stale``; see :mod:`rollbench.run.schedule`)."""

    replan_every: int = 1
    success_hold: int = 1
    latency: str = "none"
    stale: str = "skip"


class EpisodeRun:
    """One episode, advanced a step at a time: the single implementation of the episode loop's rules.

    The lockstep driver (:mod:`rollbench.run.lockstep`) drives B of them with one batched policy call per step, at
    every batch size, B = 1 included (the tests' single-policy driver is ``tests/single_episode.py``). Per step: :meth:`prepare` (render this step's images; True when the policy must be asked: the
    :class:`~rollbench.run.schedule.ChunkSchedule` reached a replan point and no call is outstanding), then, if it returned
    True, :meth:`give` with the policy's chunk (or :meth:`fail`/:meth:`stop`), then :meth:`advance` (execute one
    action). After :meth:`begin` and after every call, :attr:`done` says whether the episode has ended;
    :meth:`finish` returns its :class:`EpisodeRecord`. No method raises for episode-level failures.
    """

    def __init__(
        self,
        env: Env,
        planned: PlannedEpisode,
        *,
        cameras: Sequence[str] = (),
        record_frames: bool = False,
        video_cameras: Sequence[str] | None = None,
        rules: LoopRules | None = None,
    ) -> None:
        rules = rules or LoopRules()
        self.env, self.planned, self.task = env, planned, env.task
        self.success_hold, self._streak = rules.success_hold, 0
        self.cameras = tuple(cameras)  # the policy's: rendered on the steps it is asked for a chunk
        video = tuple(cameras if video_cameras is None else video_cameras) if record_frames else ()
        self.replan_every = rules.replan_every
        delay = delay_rule(rules.latency, self.task.fps)
        self.schedule = ChunkSchedule(rules.replan_every, delay, rules.stale == "skip", self.task.hold)
        # per step, recorded only with a latency: observation frame the action came from, its chunk row, hold
        self.timed = delay is not None
        self.sources: list[tuple[int, int, bool]] = []
        self.final_rule = planned.success_rule == "final_step"
        self.states: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.successes: list[bool] = []
        self.latencies: list[float] = []
        self.frames: dict[str, list[np.ndarray]] = {c: [] for c in video}  # rendered every step
        self.reason = "max_steps"
        self.error: str | None = None
        self.error_fault: Fault | None = None
        self.tb: str | None = None
        self.success_at_reset = False
        self.latency = float("nan")
        self.done = False
        self.obs: Observation | None = None
        self._state = np.zeros(0, dtype=np.float32)  # this step's state as recorded (copied in prepare)
        self.watch = RenderWatch()  # black or frozen images, checked on what the policy sees
        self.render_failure: str | None = None
        self._start = time.perf_counter()

    @property
    def step(self) -> int:
        """Index of the step about to run (= rows recorded so far)."""
        return len(self.actions)

    @property
    def instruction(self) -> str:
        return self.planned.instruction

    def begin(self, reset_policy: Callable[[], None]) -> None:
        """Reset the env to the planned seed and initial state, note success at reset, then reset the policy."""
        mine = (self.planned.episode_index,)
        with contained(self._failing("environment")) as env, inside("env.reset", mine):
            self._expect(asks=True)
            self.obs = self.env.reset(self.planned.seed, self.planned.initial_state)
            self.success_at_reset = bool(self.env.success())
        if env.error:
            return
        with contained(self._failing("policy")), inside("policy.reset", mine):
            reset_policy()

    def _failing(self, where: Fault) -> Callable[[BaseException], None]:
        """``fail(exc, where)``, for :class:`~rollbench.core.interrupts.contained`."""
        return lambda exc: self.fail(exc, where)

    def _expect(self, asks: bool) -> None:
        """Tell an env that renders inside its step (LIBERO: ``expect_images``) which cameras the next observation
        needs: the video's, and the policy's when it will be asked for a chunk."""
        if isinstance(self.env, ExpectsImages):
            self.env.expect_images(
                (*self.cameras, *(c for c in self.frames if c not in self.cameras)) if asks else tuple(self.frames)
            )

    def prepare(self) -> bool:
        """Render the images this step needs (the video's cameras; the policy's too when its action queue is empty,
        see the module docstring); return True if the policy must be asked for a new chunk."""
        if self.done:
            return False
        assert self.obs is not None
        self.schedule.arrive(self.step)
        ask = self.schedule.needs_call()
        with contained(self._failing("environment")) as env, inside("env.render", (self.planned.episode_index,)):
            # the state as the env gave it, copied before the policy sees it: a policy that writes into
            # observation.state cannot change what is recorded (hostile round 11, F1)
            self._state = np.array(self.obs.state, dtype=np.float32, copy=True).reshape(self.task.state_dim)
            wanted = (*self.cameras, *(c for c in self.frames if c not in self.cameras)) if ask else tuple(self.frames)
            images = {c: self.env.render(c) for c in wanted}
            self.obs.images = {c: images[c] for c in self.cameras} if ask else {}
            for c in self.frames:
                self.frames[c].append(np.array(images[c], dtype=np.uint8, copy=True))
            if (why := self.watch.add(self.obs.images, self.obs.state)) is not None:
                self.render_failure = why
                raise RenderFailure(f"render failure: {why}")
        if env.error:
            return False
        self.latency = float("nan")
        return ask

    def give(self, raw: object, latency: float) -> None:
        """The policy's answer for this step (``latency``: seconds the call took); checked as a chunk."""
        with contained(self._failing("policy")):
            self.schedule.give(_as_chunk(raw, self.task.action_dim, self.step), self.step, latency)
            self.latency = latency

    def ask(self, policy: Policy) -> None:
        """Call ``policy.act`` for this step and :meth:`give` its answer (PolicyStop and errors end the episode)."""
        assert self.obs is not None
        with contained(self._failing("policy")) as call:
            try:
                t0 = time.perf_counter()
                raw = policy.act(self.obs, self.planned.instruction)
                latency = time.perf_counter() - t0
            except PolicyStop as stop:
                self.stop(stop.termination_reason)
                return
        if not call.error:
            self.give(raw, latency)

    def advance(self) -> None:
        """Execute this step's action (from the schedule: a chunk row or the hold action) and record the step; set
        :attr:`done` on a termination reason."""
        if self.done:
            return
        assert self.obs is not None
        with contained(self._failing("environment")) as env, inside("env.step", (self.planned.episode_index,)):
            state = self._state
            planned = self.schedule.next(self.step, state)
            action = planned.action
            self._expect(asks=self.schedule.calls_at(self.step + 1))
            result = self.env.step(action.copy())
            reward = float(result.reward)
            if not np.isfinite(reward):  # as a non-finite action ends the policy's episode (hostile round 11, F12)
                raise EpisodeError(f"env returned a non-finite reward ({reward}) at step {self.step}", "environment")
        if env.error:
            return
        self.states.append(state)
        self.actions.append(action)
        self.rewards.append(reward)
        self.successes.append(bool(result.success))
        self.latencies.append(self.latency)
        self.sources.append((planned.obs_step, planned.chunk_index, planned.hold))
        self.obs = result.observation
        self._streak = self._streak + 1 if result.success else 0
        if self._streak >= self.success_hold and not self.final_rule:
            self.reason, self.done = "success", True
        elif result.terminated:
            self.reason, self.done = "env_terminated", True
        elif result.truncated:
            self.reason, self.done = "truncated", True
        elif self.step >= self.planned.max_steps:
            self.reason, self.done = "max_steps", True

    def stop(self, reason: str = "policy_stop") -> None:
        """The policy ended the episode on purpose (``policy_stop``, or ``give_up`` from PolicyGiveUp)."""
        self.reason, self.done = reason, True

    def fail(self, exc: BaseException, where: Fault = "policy") -> None:
        """End the episode as ``error`` with ``exc`` as its reason; the steps before it are kept.

        ``where``: whose code raised it (``policy`` or ``environment``), the fault unless ``exc`` carries its own
        (see :func:`fault_of`)."""
        self.reason, self.error, self.done = "error", f"{describe(exc)}", True
        self.error_fault = fault_of(exc, where)
        self.tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))

    def finish(self, policy: object | None = None) -> EpisodeRecord:
        """The episode's record (call once, after :attr:`done`).

        ``policy``: the (per-slot) policy that played the episode; if it has ``finish_episode(outcome) -> {kind:
        bytes}`` (``outcome``: termination_reason, success, length, error), its artifacts (e.g. an LLM agent's
        transcript) go into ``extra["artifacts"]``; if that raises, the episode ends as ``error``.
        """
        if self.reason != "error" and (why := self.watch.frozen()) is not None:
            self.render_failure = why
            self.fail(RenderFailure(f"render failure: {why}"), "environment")
        n = len(self.actions)
        # a frame rendered for a step whose action then failed has no row: keep frames == rows
        for c in self.frames:
            del self.frames[c][n:]
        succ = np.asarray(self.successes, dtype=bool)
        reached = held_success(self.successes, self.success_hold, self.final_rule)
        dones = np.zeros(n, dtype=bool)
        if n:
            dones[-1] = True
        task = self.task
        success = reached and self.reason != "error" and not self.success_at_reset
        artifacts: dict[str, bytes] = {}
        if isinstance(policy, FinishesEpisodes):  # staged and committed with the episode
            outcome = {"termination_reason": self.reason, "success": success, "length": n, "error": self.error}
            with contained() as artifact, inside("policy.finish_episode", (self.planned.episode_index,)):
                artifacts = {str(k): bytes(v) for k, v in policy.finish_episode(outcome).items()}
            if artifact.error and self.reason != "error":
                self.fail(artifact.error)
                self.error = f"{FINISH_EPISODE_ERROR}{self.error}"  # after the last step: grade tells it apart
                success = False
        return EpisodeRecord(
            planned=self.planned,
            states=np.asarray(self.states, dtype=np.float32).reshape(n, task.state_dim),
            actions=np.asarray(self.actions, dtype=np.float64).reshape(n, task.action_dim),
            rewards=np.asarray(self.rewards, dtype=np.float32),
            successes=succ,
            dones=dones,
            latencies=np.asarray(self.latencies, dtype=np.float32),
            frames=self.frames,
            success=success,
            success_at_reset=self.success_at_reset,
            termination_reason=self.reason,
            error=self.error,
            error_fault=self.error_fault,
            error_traceback=self.tb,
            wall_time_s=time.perf_counter() - self._start,
            extra={"artifacts": artifacts} if artifacts else {},
            action_sources=np.asarray(self.sources[:n], dtype=np.int64).reshape(n, 3) if self.timed else None,
            render_failure=self.render_failure,
        )
