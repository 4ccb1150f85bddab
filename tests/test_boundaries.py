"""Values crossing a boundary into rollbench are copied once; success at reset and policy randomness come from the
right sources.

Real parts: rollbench's generic gymnasium adapter and episode loop drive real gymnasium envs (``tests/fault_envs.py``,
loaded as ``gym:fault_envs:<ID>``); the videos are real H.264 files decoded with PyAV.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate
from rollbench.policies.basic import RANDOM_POLICY_TAG

TESTS = Path(__file__).resolve().parent


def steps(run_dir: Path) -> dict[str, np.ndarray]:
    files = sorted(run_dir.glob("data/chunk-*/file-*.parquet"))
    rows = [pq.read_table(f) for f in files]
    return {
        col: np.concatenate([np.asarray(t[col].to_pylist(), dtype=np.float32) for t in rows])
        for col in ("observation.state", "action", "next.reward")
    }


def packets(run_dir: Path) -> list[bytes]:
    """The encoded video packets of every mp4 of the run, in file order: the recording itself, before a decoder."""
    import av

    out = []
    for mp4 in sorted(run_dir.glob("videos/*/chunk-*/file-*.mp4")):
        with av.open(str(mp4)) as c:
            out += [bytes(p) for p in c.demux(video=0) if p.size]
    return out


def frames(run_dir: Path) -> list[np.ndarray]:
    """The decoded frames, by one decoder thread (the oracle's own decoding cannot vary with the machine's load)."""
    import av

    out = []
    for mp4 in sorted(run_dir.glob("videos/*/chunk-*/file-*.mp4")):
        with av.open(str(mp4)) as c:
            stream = c.streams.video[0]
            stream.thread_type, stream.codec_context.thread_count = "NONE", 1
            out += [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
    return out


def test_buffer_reusing_policy_env_and_renderer_record_the_same_episodes_as_fresh_buffers(tmp_path: Path) -> None:
    common = dict(episodes=2, max_steps=8, seed=3, video=True, image_size=(32, 32))
    fresh = evaluate(env="gym:fault_envs:RollbenchPoint-v0", policy="random", out=tmp_path / "fresh", **common)
    reused = evaluate(
        env="gym:fault_envs:RollbenchReusePoint-v0",
        policy="fault_policies:reuse_buffer",
        policy_options={"inner": "random"},
        out=tmp_path / "reused",
        **common,
    )
    a, b = steps(tmp_path / "fresh"), steps(tmp_path / "reused")
    assert len(a["action"]) == 16
    for col in a:
        np.testing.assert_array_equal(a[col], b[col], err_msg=col)
    # every recorded state differs from the next one: nothing was overwritten by a later step
    assert (np.abs(np.diff(b["observation.state"][:8, :2], axis=0)).sum(axis=1) > 0).all()
    pa, pb = packets(tmp_path / "fresh"), packets(tmp_path / "reused")
    assert len(pa) == len(pb) == 16
    assert [k for k, (x, y) in enumerate(zip(pa, pb, strict=True)) if x != y] == []  # the same bytes encoded
    fa, fb = frames(tmp_path / "fresh"), frames(tmp_path / "reused")
    assert len(fa) == len(fb) == 16
    for x, y in zip(fa, fb, strict=True):
        np.testing.assert_array_equal(x, y)
    assert [e.render_failure for e in reused.episodes] == [None, None] == [e.render_failure for e in fresh.episodes]
    assert reused.status == "OK"


@pytest.mark.parametrize("key", ["success", "is_success"])
def test_gym_env_reporting_success_in_its_reset_info_is_flagged_success_at_reset(tmp_path: Path, key: str) -> None:
    env_id = {"success": "RollbenchSolvedSuccess-v0", "is_success": "RollbenchSolvedIsSuccess-v0"}[key]
    r = evaluate(env=f"gym:fault_envs:{env_id}", policy="zero", episodes=2, max_steps=5, out=tmp_path / "r")
    (task,) = r.tasks.values()
    assert [e.success_at_reset for e in r.episodes] == [True, True]
    assert [e.success for e in r.episodes] == [False, False]
    assert (task.successes, task.success_at_reset) == (0, 2)


def test_gym_env_without_success_in_its_reset_info_is_not_flagged(tmp_path: Path) -> None:
    r = evaluate(env="gym:fault_envs:RollbenchPoint-v0", policy="zero", episodes=2, max_steps=3, out=tmp_path / "r")
    assert [e.success_at_reset for e in r.episodes] == [False, False]


def test_random_policy_draws_are_independent_of_the_env_reset_stream_of_the_same_seed(tmp_path: Path) -> None:
    """scripted/reach draws its scene from ``default_rng(seed)``: start = 0.1 + 0.8 u, with u its first two draws. A
    random policy drawing from the same stream would act ``-1 + 2 u``, a function of the start position."""
    r = evaluate(env="scripted/reach", policy="random", episodes=3, max_steps=2, seed=11, out=tmp_path / "r")
    data = steps(tmp_path / "r")
    starts = data["observation.state"][::2, :2]
    first_actions = data["action"][::2]
    same_stream = -1.0 + 2.0 * (starts - 0.1) / 0.8
    assert np.abs(first_actions - same_stream).min() > 1e-3
    for k, seed in enumerate(e.seed for e in r.episodes):
        u = np.random.default_rng(seed).uniform(0.1, 0.9, size=2)  # the env's stream: the recorded start
        np.testing.assert_allclose(starts[k], u, rtol=1e-6)
        expected = np.random.default_rng([seed, RANDOM_POLICY_TAG]).uniform([-1, -1], [1, 1])  # the policy's own
        np.testing.assert_array_equal(first_actions[k], expected.astype(np.float32))


class _StateBufferEnv:
    """``scripted/reach`` whose observations all share one state array, overwritten in place by every step (an env
    returning its internal buffer through rollbench's Env protocol)."""

    def __init__(self) -> None:
        from rollbench.core.registry import EnvOptions
        from rollbench.envs.scripted import TASKS, ScriptedEnv

        self.inner = ScriptedEnv(TASKS["scripted/reach"], EnvOptions(cameras=(), image_size=(32, 32)))
        self.task = self.inner.task
        self.buffer = np.zeros(4, dtype=np.float32)

    def _shared(self, obs):  # type: ignore[no-untyped-def]
        self.buffer[:] = obs.state
        obs.state = self.buffer
        return obs

    def reset(self, seed, initial_state=None):  # type: ignore[no-untyped-def]
        return self._shared(self.inner.reset(seed, initial_state))

    def step(self, action):  # type: ignore[no-untyped-def]
        result = self.inner.step(action)
        result.observation = self._shared(result.observation)
        return result

    def success(self) -> bool:
        return self.inner.success()

    def render(self, camera: str) -> np.ndarray:
        return self.inner.render(camera)

    def close(self) -> None:
        pass


def test_env_returning_its_state_buffer_records_every_state() -> None:
    from rollbench.core.plan import PlannedEpisode
    from rollbench.core.registry import EnvOptions
    from rollbench.envs.scripted import TASKS, ScriptedEnv
    from rollbench.policies.basic import ScriptedExpert
    from single_episode import rollout

    planned = PlannedEpisode(0, "scripted/reach", 0, 5, None, 0, "reach", 6, "any_step")
    fresh = ScriptedEnv(TASKS["scripted/reach"], EnvOptions(cameras=(), image_size=(32, 32)))
    a = rollout(fresh, ScriptedExpert(), planned)
    b = rollout(_StateBufferEnv(), ScriptedExpert(), planned)
    assert a.length == b.length > 2
    np.testing.assert_array_equal(a.states, b.states)
    assert len({tuple(s) for s in b.states}) == b.length
