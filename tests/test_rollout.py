"""The episode loop on the scripted env, checked against an independent replay of the recorded actions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fault_policies import Overshoot
from rollbench.core.contracts import Observation, PolicyInfo, PolicyStop, TaskInfo
from rollbench.policies.basic import RandomPolicy, ScriptedExpert
from rollbench.run.episode import EpisodeRun, LoopRules
from scripted_replay import make_env, planned, replay
from single_episode import rollout


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_expert_episode_matches_independent_replay(seed: int) -> None:
    rec = rollout(make_env(), ScriptedExpert(), planned(seed=seed))
    states, succ = replay(seed, rec.actions)
    np.testing.assert_array_equal(rec.states, states)
    assert rec.successes.tolist() == succ
    # any_step: the episode ends at the first success, so only the last step succeeds
    assert succ[-1] and not any(succ[:-1])
    assert rec.termination_reason == "success" and rec.success
    assert rec.dones.tolist() == [False] * (rec.length - 1) + [True]


def test_random_policy_runs_to_horizon_with_replayed_states() -> None:
    rec = rollout(make_env(), RandomPolicy(), planned(seed=3, max_steps=20))
    states, succ = replay(3, rec.actions)
    np.testing.assert_array_equal(rec.states, states)
    assert rec.successes.tolist() == succ
    assert rec.length == (succ.index(True) + 1 if any(succ) else 20)
    assert rec.termination_reason == ("success" if any(succ) else "max_steps")


class _Recorder:
    def __init__(
        self, out: np.ndarray | None = None, raise_at: int | None = None, stop_at: int | None = None, chunk: int = 1
    ) -> None:
        self.info = PolicyInfo(name="recorder", chunk_size=chunk)
        self.out, self.raise_at, self.stop_at, self.chunk = out, raise_at, stop_at, chunk
        self.instructions: list[str] = []
        self.calls = 0
        self.resets: list[int] = []

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.resets.append(seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self.instructions.append(instruction)
        self.calls += 1
        if self.raise_at is not None and self.calls > self.raise_at:
            raise RuntimeError("policy server exploded")
        if self.stop_at is not None and self.calls > self.stop_at:
            raise PolicyStop
        if self.out is not None:
            return self.out
        return np.zeros((self.chunk, 2), dtype=np.float32)

    def close(self) -> None:
        pass


def test_policy_receives_the_task_instruction_every_call_and_is_reset_with_the_seed() -> None:
    pol = _Recorder()
    rollout(make_env(), pol, planned(seed=5, max_steps=7))
    assert pol.instructions == ["move the point to the goal"] * 7
    assert pol.resets == [5]


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.array([[np.nan, 0.0]], dtype=np.float32), "non-finite action (NaN or inf) at step 0"),
        (np.array([[np.inf, 0.0]], dtype=np.float32), "non-finite action (NaN or inf) at step 0"),
        (np.zeros((1, 3), dtype=np.float32), "shape (1, 3) at step 0; expected (2,) or (k, 2)"),
        (np.zeros((0, 2), dtype=np.float32), "shape (0, 2) at step 0"),
    ],
)
def test_bad_action_ends_the_episode_as_an_error_with_the_reason(out: np.ndarray, message: str) -> None:
    rec = rollout(make_env(), _Recorder(out=out), planned())
    assert rec.termination_reason == "error"
    assert rec.error is not None and message in rec.error
    assert rec.length == 0 and not rec.success


def test_policy_exception_keeps_earlier_steps_and_frames() -> None:
    rec = rollout(make_env(), _Recorder(raise_at=4), planned(max_steps=10), cameras=("top",), record_frames=True)
    assert rec.termination_reason == "error"
    assert rec.error == "RuntimeError: policy server exploded"
    assert rec.length == 4
    assert len(rec.frames["top"]) == 4  # the frame rendered for the failed step is dropped


def test_policy_stop_is_its_own_termination_reason() -> None:
    rec = rollout(make_env(), _Recorder(stop_at=6), planned())
    assert (rec.termination_reason, rec.length, rec.error) == ("policy_stop", 6, None)


@pytest.mark.parametrize(("replan_every", "steps", "calls"), [(1, 10, 10), (3, 10, 4), (4, 10, 3), (5, 10, 2)])
def test_replan_every_executes_k_actions_per_chunk(replan_every: int, steps: int, calls: int) -> None:
    pol = _Recorder(chunk=5)
    rec = rollout(make_env(), pol, planned(max_steps=steps), replan_every=replan_every)
    assert pol.calls == calls == math.ceil(steps / replan_every)
    assert int(np.isfinite(rec.latencies).sum()) == calls
    assert np.isfinite(rec.latencies[::replan_every]).all()


def test_env_reset_error_is_an_error_episode() -> None:
    rec = rollout(make_env("scripted/faulty"), ScriptedExpert(), planned("scripted/faulty", seed=2))
    assert rec.termination_reason == "error" and rec.length == 0
    assert "reset fails on purpose for seed 2" in (rec.error or "")


def test_success_reached_then_lost_differs_between_rules() -> None:
    """The success-rule oracle: the overshooting policy reaches the goal, then leaves it before the horizon."""
    any_rec = rollout(make_env("scripted/reach-final"), Overshoot(), planned("scripted/reach-final", 1, 30, "any_step"))
    fin_rec = rollout(
        make_env("scripted/reach-final"), Overshoot(), planned("scripted/reach-final", 1, 30, "final_step")
    )
    assert any_rec.success and any_rec.termination_reason == "success"
    assert fin_rec.successes.any() and not fin_rec.successes[-1]
    assert not fin_rec.success and fin_rec.termination_reason == "max_steps" and fin_rec.length == 30


def test_success_at_reset_is_flagged_and_never_a_policy_success() -> None:
    env = make_env()
    original = env.reset

    def reset_on_goal(seed: int, initial_state: int | None = None) -> Observation:
        original(seed, initial_state)
        env.pos = env.goal.copy()
        return env._obs()

    env.reset = reset_on_goal  # type: ignore[method-assign]
    rec = rollout(env, _Recorder(), planned())
    assert rec.success_at_reset and rec.successes[0]
    assert not rec.success


@pytest.mark.parametrize("seed", [0, 3])
def test_success_hold_k_stops_k_minus_1_steps_after_the_first_success_and_grade_agrees(seed: int, tmp_path) -> None:
    """The expert stays at the goal once there, so with --success-hold 3 the episode runs 2 steps past its first
    success; grading recomputes the same success from the recorded rows (no violation)."""
    from rollbench.api import evaluate

    one = rollout(make_env(), ScriptedExpert(), planned(seed=seed))
    held = rollout(make_env(), ScriptedExpert(), planned(seed=seed), success_hold=3)
    assert held.length == one.length + 2 and held.successes[-3:].all() and held.success
    assert held.termination_reason == "success"
    short = rollout(make_env(), ScriptedExpert(), planned(seed=seed, max_steps=one.length + 1), success_hold=3)
    assert short.successes[-2:].all() and not short.success and short.termination_reason == "max_steps"
    result = evaluate(
        env="scripted/reach", policy="scripted-expert", episodes=2, seed=seed, success_hold=3, out=tmp_path / "r"
    )
    assert result.status == "OK" and result.violations == []
    assert result.episodes[0].length == one.length + 2


class _Counting:
    """The scripted env with every render and every stepped action logged (what the loop hands the env)."""

    def __init__(self) -> None:
        self.env = make_env()
        self.task = self.env.task
        self.renders: list[tuple[int, str]] = []
        self.stepped: list[np.ndarray] = []
        self.expected: list[tuple[str, ...]] = []  # per reset and step: the cameras its observation must carry

    def expect_images(self, cameras: tuple[str, ...]) -> None:
        self.expected.append(tuple(cameras))

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        return self.env.reset(seed, initial_state)

    def step(self, action: np.ndarray):  # type: ignore[no-untyped-def]
        self.stepped.append(action.copy())
        return self.env.step(action)

    def success(self) -> bool:
        return self.env.success()

    def render(self, camera: str) -> np.ndarray:
        self.renders.append((len(self.stepped), camera))
        return self.env.render(camera)

    def close(self) -> None:
        self.env.close()


class _Seeing(_Recorder):
    def __init__(self, chunk: int) -> None:
        super().__init__(chunk=chunk)
        self.seen: list[list[str]] = []

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self.seen.append(sorted(observation.images))
        return super().act(observation, instruction)


@pytest.mark.parametrize("video", [False, True])
def test_images_are_rendered_only_on_the_steps_the_policy_is_asked_and_for_the_video(video: bool) -> None:
    env, pol = _Counting(), _Seeing(chunk=5)
    rec = rollout(env, pol, planned(max_steps=12), cameras=("top",), record_frames=video, replan_every=5)  # type: ignore[arg-type]
    assert pol.calls == 3 and pol.seen == [["top"]] * 3  # steps 0, 5, 10
    expected = [(t, "top") for t in range(12)] if video else [(0, "top"), (5, "top"), (10, "top")]
    assert env.renders == expected
    # told before the reset and each step: observations 0, 5 and 10 are the policy's (the 12th step's is nobody's)
    assert env.expected == [("top",) if video or t in (0, 5, 10) else () for t in range(13)]
    assert len(rec.frames.get("top", [])) == (12 if video else 0)


def test_video_cameras_other_than_the_policys_are_rendered_every_step_and_never_sent() -> None:
    env, pol = _Counting(), _Seeing(chunk=5)
    run = EpisodeRun(
        env,
        planned(max_steps=6),
        cameras=(),
        record_frames=True,
        video_cameras=("top",),
        rules=LoopRules(replan_every=5),
    )  # type: ignore[arg-type]
    run.begin(lambda: None)
    while not run.done:
        if run.prepare():
            run.ask(pol)
        run.advance()
    rec = run.finish()
    assert pol.seen == [[], []] and env.renders == [(t, "top") for t in range(6)] and len(rec.frames["top"]) == 6


def test_the_env_is_stepped_with_exactly_the_policys_float64_values_and_they_are_recorded() -> None:
    third = np.array([[1 / 3, -2 / 3]])  # float64 values no float32 holds
    assert not np.array_equal(third, third.astype(np.float32))
    env = _Counting()
    rec = rollout(env, _Recorder(out=third), planned(max_steps=3))  # type: ignore[arg-type]
    assert all(a.dtype == np.float64 and a.tobytes() == third[0].tobytes() for a in env.stepped)
    assert rec.actions.dtype == np.float64 and rec.actions.tobytes() == np.repeat(third, 3, axis=0).tobytes()
