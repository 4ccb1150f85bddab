"""``--policy-options '{"seeding": "lerobot-eval"}'`` plays what the real ``lerobot-eval`` command plays, on PushT and LIBERO.

Runs in a LeRobot venv (``bash scripts/lerobot_compat.sh --eval``, either line). The oracle is lerobot's own
``lerobot.scripts.lerobot_eval.main()`` run in this process (``lerobot_cli.run_lerobot_eval``: the console script
itself, with a tap on the actions its env receives), for ``lerobot-eval --policy.path=CKPT --env.type=pusht
--seed S --eval.n_episodes 3 --eval.batch_size 1``, on a randomly initialised Diffusion checkpoint saved by this
venv's lerobot (Diffusion samples DDPM noise from torch's global generator, so the random stream decides its
actions). rollbench runs as its CLI in a subprocess (core venv) with its policy host in this interpreter.

LIBERO: the same command on 2 episodes with ``--env.type=libero --env.task=libero_spatial --env.task_ids=[0]``,
lerobot's LiberoEnv on robosuite 1.4's behaviour where it meets it (``lerobot_reference.as_on_robosuite_14``: what
``lerobot[libero]`` installs is hf-libero on robosuite 1.4.0), against rollbench's default LIBERO scene.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

pytest.importorskip("gym_pusht", reason="lerobot's eval extras: bash scripts/lerobot_compat.sh --eval")
pytest.importorskip("einops", reason="lerobot's eval extras: bash scripts/lerobot_compat.sh --eval")
sys.path.insert(0, str(Path(__file__).parent))
from lerobot_checkpoints import make_checkpoint
from lerobot_runs import recorded_actions

pytestmark = [pytest.mark.venv, pytest.mark.sim, pytest.mark.slow]

SEED, EPISODES, STEPS = 11, 3, 24
HOST = {"python": sys.executable, "device": "cpu"}


def rollbench(
    out: Path,
    checkpoint: Path,
    seeding: str,
    *extra: object,
    episodes: int = EPISODES,
    env: str = "pusht/PushT-v0",
    steps: int = STEPS,
) -> tuple[int, str]:
    options = json.dumps({**HOST, "seeding": seeding})
    args = ("--env", env, "--policy", f"lerobot:{checkpoint}", "--policy-options", options)
    args += ("--episodes", episodes, "--seed", SEED, "--max-steps", steps, "--out", out, *extra)
    r = run_cli("eval", *args, timeout=900)
    return r.returncode, r.stderr


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], dict, Path]:
    from lerobot_cli import run_lerobot_eval

    tmp = tmp_path_factory.mktemp("exact")
    checkpoint = make_checkpoint("diffusion", "pusht", tmp / "pretrained_model")
    code, err = rollbench(tmp / "run", checkpoint, "lerobot-eval")
    assert code == 0, err[-3000:]
    argv = [f"--policy.path={checkpoint}", "--policy.device=cpu", "--env.type=pusht", f"--env.episode_length={STEPS}"]
    argv += [f"--seed={SEED}", f"--eval.n_episodes={EPISODES}", "--eval.batch_size=1"]
    played, info = run_lerobot_eval(argv, tmp / "lerobot-eval")
    return tmp / "run", played, info, checkpoint


def test_each_episode_s_actions_and_success_equal_the_real_lerobot_eval_cli(both: tuple) -> None:
    run_dir, played, info, _ = both
    graded = json.loads(run_cli("grade", run_dir, "--json").stdout)
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    assert len(played) == EPISODES
    for k, ref in enumerate(played):
        assert by_index[k]["seed"] == SEED + k
        assert by_index[k]["length"] == len(ref["actions"]) == STEPS
        assert by_index[k]["success"] == ref["success"]
        np.testing.assert_array_equal(recorded_actions(run_dir, k), ref["actions"])
    successes = sum(by_index[k]["success"] for k in range(EPISODES))
    assert successes * 100 / EPISODES == pytest.approx(info["overall"]["pc_success"])


def test_the_default_per_episode_seeding_differs_from_the_cli_from_the_first_step(both: tuple, tmp_path: Path) -> None:
    """What the README said wrongly: per-episode seeding re-seeds after the policy is built, the CLI before."""
    _, played, _, checkpoint = both
    code, err = rollbench(tmp_path / "run", checkpoint, "per-episode", episodes=1, steps=1)  # the first step is all
    assert code == 0, err[-3000:]
    first = recorded_actions(tmp_path / "run", 0)
    assert len(first) == 1
    assert not np.array_equal(first[0], played[0]["actions"][0])


def test_more_workers_and_batch_slots_are_refused_in_one_line_naming_each(both: tuple, tmp_path: Path) -> None:
    """``--workers 2 --batch-size 2`` would each break the single stream: one call names both (the refusal lists
    every reason), before anything is written."""
    _, _, _, checkpoint = both
    code, err = rollbench(tmp_path / "run", checkpoint, "lerobot-eval", "--workers", 2, "--batch-size", 2)
    assert code == 2, err
    assert "--workers 2 (give 1)" in err and "--batch-size 2 (give 1)" in err and "seeding lerobot-eval" in err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_a_resume_is_refused(both: tuple) -> None:
    run_dir, _, _, checkpoint = both
    code, err = rollbench(run_dir, checkpoint, "lerobot-eval")
    assert code == 2, err
    assert "a resume (give a new --out)" in err
    assert len(err.strip().splitlines()) == 1, err


def test_serving_it_is_refused_in_one_line(both: tuple) -> None:
    _, _, _, checkpoint = both
    options = json.dumps({**HOST, "seeding": "lerobot-eval"})
    r = run_cli(
        "serve-policy", "--policy", f"lerobot:{checkpoint}", "--policy-options", options, "--port", 0, timeout=300
    )
    assert r.returncode == 2, r.stderr
    assert "seeding lerobot-eval" in r.stderr and "cannot be served" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


LIBERO_STEPS, LIBERO_EPISODES = 12, 2  # the second episode continues the one random stream of the first


@pytest.fixture(scope="module")
def libero_both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], dict]:
    from lerobot_cli import run_lerobot_eval
    from lerobot_reference import as_on_robosuite_14, use_libero_config

    if not use_libero_config():
        pytest.skip("lerobot's LIBERO side is not installed: bash scripts/lerobot_eval_setup.sh with rollbench[libero]")
    tmp = tmp_path_factory.mktemp("exact-libero")
    checkpoint = make_checkpoint("diffusion", "libero", tmp / "pretrained_model")
    code, err = rollbench(
        tmp / "run",
        checkpoint,
        "lerobot-eval",
        env="libero/libero_spatial/0",
        steps=LIBERO_STEPS,
        episodes=LIBERO_EPISODES,
    )
    assert code == 0, err[-3000:]
    argv = [f"--policy.path={checkpoint}", "--policy.device=cpu", "--env.type=libero", "--env.task=libero_spatial"]
    argv += ["--env.task_ids=[0]", f"--env.episode_length={LIBERO_STEPS}", f"--seed={SEED}"]
    argv += [f"--eval.n_episodes={LIBERO_EPISODES}", "--eval.batch_size=1"]
    with as_on_robosuite_14():
        played, info = run_lerobot_eval(argv, tmp / "lerobot-eval")
    return tmp / "run", played, info


def test_libero_episodes_equal_the_real_lerobot_eval_cli(libero_both: tuple) -> None:
    """A Diffusion checkpoint on libero_spatial task 0: lerobot-eval's episode k (env seed --seed + k, initial state
    k) is rollbench's trial k on its default (the benchmark's) scene, action for action. Two episodes: the second
    is where lerobot-eval's single random stream (seeded once) and its next env seed and initial state meet rollbench's
    trial 1, which further episodes would only repeat."""
    run_dir, played, info = libero_both
    graded = json.loads(run_cli("grade", run_dir, "--json").stdout)
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    assert len(played) == LIBERO_EPISODES
    for k, ref in enumerate(played):
        assert (by_index[k]["seed"], by_index[k]["initial_state"]) == (SEED + k, k)
        assert by_index[k]["length"] == len(ref["actions"]) == LIBERO_STEPS
        assert by_index[k]["success"] == ref["success"]
        np.testing.assert_array_equal(recorded_actions(run_dir, k), ref["actions"])
    assert len({recorded_actions(run_dir, k)[0].tobytes() for k in range(LIBERO_EPISODES)}) == LIBERO_EPISODES
    successes = sum(by_index[k]["success"] for k in range(LIBERO_EPISODES))
    assert successes * 100 / LIBERO_EPISODES == pytest.approx(info["overall"]["pc_success"])
