"""MetaWorld v3 adapter and its scripted expert: task table, seeding, success, rendering, expert."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("metaworld")
os.environ.setdefault("MUJOCO_GL", "egl")

from rollbench.core.contracts import ConfigError, TaskInfo
from rollbench.core.registry import EnvOptions
from rollbench.envs.metaworld import CAMERAS, FAMILY
from rollbench.policies.metaworld_expert import make_metaworld_expert

pytestmark = pytest.mark.sim


def _make(name: str, cameras: tuple[str, ...] = ()):
    return FAMILY.make(FAMILY.task(f"metaworld/{name}"), EnvOptions(cameras=cameras))


def _run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_task_table_is_static_and_complete() -> None:
    code = (
        "import sys, json; from rollbench.envs.metaworld import FAMILY; ts = FAMILY.tasks(); "
        "FAMILY.suites(); FAMILY.missing(); "
        "print(json.dumps([[t.name for t in ts], [t.instruction for t in ts], "
        "sorted(m for m in ('metaworld', 'mujoco') if m in sys.modules)]))"
    )
    names, instructions, heavy = json.loads(_run_python(code))
    assert heavy == [], f"tasks()/suites()/missing() imported {heavy}"
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    assert names == [f"metaworld/{n}" for n in ALL_V3_ENVIRONMENTS]
    assert len(names) == 50 and all(i.strip() for i in instructions)
    assert len(set(instructions)) == 50
    for t in FAMILY.tasks():
        assert (t.max_steps, t.fps, t.action_dim, t.state_dim, t.success_rule) == (500, 80, 4, 39, "any_step")
        assert t.cameras == CAMERAS
    assert FAMILY.missing() is None


def test_suites_match_metaworld() -> None:
    from metaworld import env_dict

    suites = FAMILY.suites()
    assert len(suites["MT10"]) == 10
    expected = {
        "MT10": env_dict.MT10_V3,
        "MT25": env_dict.MT25_V3,
        "MT50": env_dict.MT50_V3,
        "ML10-train": env_dict.ML10_V3["train"],
        "ML10-test": env_dict.ML10_V3["test"],
        "ML45-train": env_dict.ML45_V3["train"],
        "ML45-test": env_dict.ML45_V3["test"],
    }
    for suite, envs in expected.items():
        assert sorted(suites[suite]) == sorted(f"metaworld/{n}" for n in envs), suite
    assert list(suites["MT10"]) == [f"metaworld/{n}" for n in env_dict.MT10_V3]


def test_unknown_names_are_config_errors() -> None:
    with pytest.raises(ConfigError) as err:
        FAMILY.task("metaworld/pick-place-v2")
    assert str(err.value) == (
        "unknown task or suite 'metaworld/pick-place-v2'. Did you mean metaworld/pick-place-v3, "
        "metaworld/pick-place-wall-v3, metaworld/stick-pull-v3? 57 valid tasks and suites: list them with "
        "`rollbench envs metaworld`"
    )
    with pytest.raises(ConfigError, match="corner"):
        FAMILY.make(FAMILY.task("metaworld/reach-v3"), EnvOptions(cameras=("frontview",)))


def test_reset_is_a_pure_function_of_the_seed() -> None:
    global_rng = pickle.dumps(np.random.get_state())
    a, b = _make("pick-place-v3"), _make("pick-place-v3")
    first = a.reset(7)
    assert first.state.dtype == np.float32 and first.state.shape == (39,) and first.images == {}
    assert np.array_equal(first.raw, b.reset(7).raw)
    b.reset(3)  # history in one instance must not leak into the next episode
    for _ in range(30):
        b.step(np.array([0.5, -1.0, 1.0, 1.0], dtype=np.float32))
    assert np.array_equal(b.reset(7).raw, first.raw)
    assert np.array_equal(a._env.data.qpos, b._env.data.qpos)
    scenes = {a.reset(s).raw.tobytes() for s in range(5)}
    assert len(scenes) == 5, "distinct seeds must give distinct scenes"
    assert pickle.dumps(np.random.get_state()) == global_rng, "numpy's global RNG was touched"
    assert np.all(first.raw[36:39] != 0), "goal must be observable"

    code = (
        "import os; os.environ.setdefault('MUJOCO_GL', 'egl'); "
        "from rollbench.envs.metaworld import FAMILY; from rollbench.core.registry import EnvOptions; "
        "e = FAMILY.make(FAMILY.task('metaworld/pick-place-v3'), EnvOptions()); "
        "print(e.reset(7).raw.tobytes().hex())"
    )
    assert bytes.fromhex(_run_python(code)) == first.raw.tobytes(), "another process gave another scene"
    a.close()
    b.close()


def test_success_at_reset_describes_the_real_scene() -> None:
    # Upstream window-close-v3 returns a stale handle position at reset and reports success on every seed.
    env = _make("window-close-v3")
    obs = env.reset(0)
    assert env.success() is False
    after = env.step(np.zeros(4, dtype=np.float32))
    assert not after.success
    assert np.abs(after.observation.raw[4:7] - obs.raw[4:7]).max() < 0.01
    env.close()


STALE_AT_RESET = (
    "dial-turn-v3",
    "drawer-open-v3",
    "faucet-open-v3",
    "lever-pull-v3",
    "window-open-v3",
    "window-close-v3",
)


@pytest.mark.parametrize("name", [*STALE_AT_RESET, "pick-place-v3"])
def test_first_observation_is_the_forwarded_scene_and_the_simulation_stays_metaworlds(name: str) -> None:
    """Oracle: MetaWorld alone (gymnasium id, seeded as the adapter documents). Its reset state forwarded in place
    gives the first observation; a second, untouched copy stepped with the same actions gives every later one,
    bit for bit, over two episodes in one env (the reset copy is kept between resets)."""
    import gymnasium as gym
    import mujoco

    def metaworld_alone(seed: int):
        env = gym.make("Meta-World/goal_observable", env_name=name, seed=seed, disable_env_checker=True).unwrapped
        env._freeze_rand_vec, env.seeded_rand_vec = False, True
        env.max_path_length = 10**9
        env.np_random = np.random.default_rng(seed)
        env.reset()
        return env

    ours = _make(name)
    actions = np.random.default_rng(5).uniform(-1, 1, size=(40, 4)).astype(np.float32)
    for seed in (3, 11):
        first = ours.reset(seed).raw
        forwarded = metaworld_alone(seed)
        mujoco.mj_forward(forwarded.model, forwarded.data)
        current = forwarded._get_curr_obs_combined_no_goal()
        assert np.array_equal(first, np.hstack((current, current, forwarded._get_pos_goal())))
        alone = metaworld_alone(seed)
        alone._prev_obs = current.copy()  # upstream's stack after a reset: both halves the current frame
        for a in actions:
            expected = alone.step(a)[0]
            assert np.array_equal(ours.step(a).observation.raw, expected)
    ours.close()


def test_metaworld_never_truncates_before_our_horizon() -> None:
    env = _make("reach-v3")
    env.reset(0)
    for _ in range(501):
        result = env.step(np.zeros(4, dtype=np.float32))
        assert not result.truncated and not result.terminated
    with pytest.raises(ValueError):
        env.step(np.zeros(3, dtype=np.float32))
    env.close()


@pytest.mark.parametrize("name", ["pick-place-v3", "reach-v3", "drawer-open-v3"])
def test_expert_solves_within_150_steps(name: str) -> None:
    env = _make(name)
    policy = make_metaworld_expert("metaworld-expert", {})
    assert policy.info.name == "metaworld-expert"
    for seed in range(5):
        obs = env.reset(seed)
        policy.reset(env.task, seed)
        for _ in range(150):
            chunk = policy.act(obs, env.task.instruction)
            assert chunk.shape == (1, 4) and chunk.dtype == np.float32 and np.all(np.abs(chunk) <= 1)
            result = env.step(chunk[0])
            obs = result.observation
            if result.success:
                break
        assert env.success(), f"{name} seed {seed}: expert did not succeed within 150 steps"
    env.close()


def test_expert_refuses_other_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    from rollbench.envs.scripted import FAMILY as SCRIPTED
    from rollbench.policies import metaworld_expert

    policy = make_metaworld_expert("metaworld-expert", {})
    with pytest.raises(ConfigError, match="metaworld"):
        policy.reset(SCRIPTED.task("scripted/reach"), 0)
    only_reach = {"reach-v3": metaworld_expert._policy_map()["reach-v3"]}
    monkeypatch.setattr(metaworld_expert, "_policy_map", lambda: only_reach)
    task: TaskInfo = FAMILY.task("metaworld/push-v3")
    with pytest.raises(ConfigError, match="metaworld/reach-v3"):
        policy.reset(task, 0)


def _expected_pixel(env, camera: str, point: np.ndarray) -> tuple[float, float]:
    """Where ``point`` must appear in a right-way-up image: project it, and turn the image by 180 degrees when
    the camera's image "up" points at the floor."""
    data, model = env._view, env._env.model
    cam = data.cam(camera)
    rot = cam.xmat.reshape(3, 3)
    v = rot.T @ (point - cam.xpos)
    h, w = env.image_size
    f = (h / 2) / np.tan(np.deg2rad(model.cam(camera).fovy[0]) / 2)
    row, col = h / 2 - f * v[1] / -v[2], w / 2 + f * v[0] / -v[2]
    if rot[2, 1] < 0:  # image up has a downward world component: upside down as mounted
        row, col = h - row, w - col
    return row, col


def test_render_shape_content_and_orientation() -> None:
    env = _make("pick-place-v3", cameras=("corner", "topview"))
    obs = env.reset(0)
    assert env._renderer is None, "no renderer may exist before a camera is rendered"
    goal = obs.raw[36:39]
    for camera in ("corner", "topview", "corner3"):
        img = env.render(camera)
        assert img.shape == (224, 224, 3) and img.dtype == np.uint8 and img.mean() > 30
        blue = (img[..., 2] > 150) & (img[..., 0] < 80) & (img[..., 1] < 80)  # the goal marker
        rows, cols = np.nonzero(blue)
        assert len(rows) > 5, f"goal marker not visible from {camera}"
        row, col = _expected_pixel(env, camera, goal)
        assert abs(rows.mean() - row) < 3 and abs(cols.mean() - col) < 3, f"{camera} is not right way up"
    # rendering must not change the simulation
    plain = _make("pick-place-v3")
    plain.reset(0)
    for _ in range(10):
        action = np.array([0.3, 0.2, -0.5, 1.0], dtype=np.float32)
        env.render("corner")
        assert np.array_equal(env.step(action).observation.raw, plain.step(action).observation.raw)
    env.close()
    plain.close()
