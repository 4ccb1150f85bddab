"""``--policy lerobot:CHECKPOINT`` plays the episodes lerobot 0.4.4's own evaluation loop plays, action for action.

Runs in the LeRobot venv (``bash scripts/lerobot_compat.sh --eval``). Checkpoints are made here with lerobot's own
``save_pretrained`` from randomly initialised ACT and Diffusion policies (``lerobot_checkpoints.py``; nothing is
downloaded, so a Hub id is exercised only as a local checkpoint folder). rollbench runs as its CLI in a subprocess
(core venv) with its policy host in this interpreter (``--policy-options python=...``); the oracle is
``lerobot_reference.reference_episodes``: lerobot's ``eval_policy`` with its ``make_env`` on the same seeds, in this
process. Every recorded action must equal lerobot's bit for bit, with the same episode length and success.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from conftest import rollbench_bin, run_cli

pytest.importorskip("gym_pusht", reason="lerobot's eval extras: bash scripts/lerobot_eval_setup.sh")
pytest.importorskip("einops", reason="lerobot's eval extras: bash scripts/lerobot_eval_setup.sh")
sys.path.insert(0, str(Path(__file__).parent))
from lerobot_checkpoints import make_checkpoint
from lerobot_runs import recorded_actions

pytestmark = [pytest.mark.venv, pytest.mark.sim, pytest.mark.slow]

SEED, EPISODES, STEPS = 7, 4, 30
HOST = json.dumps({"python": sys.executable, "device": "cpu"})


def rollbench_eval(out: Path, checkpoint: Path, *extra: object, policy: str | None = None) -> dict:
    args = ("--env", "pusht/PushT-v0", "--episodes", EPISODES, "--seed", SEED, "--max-steps", STEPS, "--out", out)
    if policy is None:
        args += ("--policy", f"lerobot:{checkpoint}", "--policy-options", HOST)
    else:
        args += ("--policy", policy)
    args += extra
    r = run_cli("eval", *args, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(run_cli("grade", out, "--json").stdout)


@contextmanager
def served(checkpoint: Path) -> Iterator[str]:
    """``rollbench serve-policy --policy lerobot:CHECKPOINT --port 0`` (websocket); yields its URL, kills it after
    (its policy host exits when the server's end of the pipe closes)."""
    cmd = [rollbench_bin(), "serve-policy", "--policy", f"lerobot:{checkpoint}", "--policy-options", HOST]
    proc = subprocess.Popen([*cmd, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving POLICY at URL" once the port is open
        assert line.startswith("serving "), (
            f"server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
        yield line.split()[-1]
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def pusht_reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, list[dict]]]:
    """``get(kind)``: one checkpoint of ``kind`` and lerobot's own episodes of it on the PushT seeds, made once and
    shared by the forms that run it (ACT in-run and served: the same folder, so one oracle for both)."""
    from lerobot.envs.configs import PushtEnv
    from lerobot_reference import reference_episodes

    made: dict[str, tuple[Path, list[dict]]] = {}

    def get(kind: str) -> tuple[Path, list[dict]]:
        if kind not in made:
            checkpoint = make_checkpoint(kind, "pusht", tmp_path_factory.mktemp(kind) / "pretrained_model")
            seeds = [SEED + k for k in range(EPISODES)]
            made[kind] = checkpoint, reference_episodes(checkpoint, PushtEnv(episode_length=STEPS), seeds)
        return made[kind]

    return get


@pytest.fixture(
    scope="module",
    params=[("act", 1, False), ("diffusion", 4, False), ("act", 1, True)],
    ids=["act-B1", "diffusion-B4", "act-served"],
)
def pusht_pair(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pusht_reference: Callable[[str], tuple[Path, list[dict]]],
) -> tuple:
    """Each against lerobot's own loop, which plays one episode at a time: ACT in-run; Diffusion (which samples
    noise) with ``--batch-size 4``, so B = 4 equals B = 1 per episode; ACT served by ``serve-policy`` to a
    ``ws://`` client, so the served form equals the in-run form."""
    kind, batch, serve = request.param
    checkpoint, reference = pusht_reference(kind)
    run = tmp_path_factory.mktemp(f"{kind}-run") / "run"
    if serve:
        with served(checkpoint) as url:
            graded = rollbench_eval(run, checkpoint, policy=url)  # image size: the server's metadata
    else:
        graded = rollbench_eval(run, checkpoint, "--batch-size", batch)
    return run, graded, reference, checkpoint


def test_pusht_actions_equal_lerobot_eval_bit_for_bit(pusht_pair: tuple) -> None:
    run_dir, graded, reference, _ = pusht_pair
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    for k, ref in enumerate(reference):
        assert by_index[k]["seed"] == SEED + k
        assert by_index[k]["length"] == len(ref["actions"])
        assert by_index[k]["success"] == ref["success"]
        np.testing.assert_array_equal(recorded_actions(run_dir, k), ref["actions"])
    assert len({recorded_actions(run_dir, k)[:, 0].tobytes() for k in range(EPISODES)}) == EPISODES  # not constant


def test_checkpoint_that_does_not_fit_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    checkpoint = make_checkpoint("act", "libero", tmp_path / "pretrained_model")
    out = tmp_path / "run"
    args = ("--env", "pusht/PushT-v0", "--policy", f"lerobot:{checkpoint}", "--episodes", 1)
    r = run_cli("eval", *args, "--policy-options", HOST, "--out", out, timeout=300)
    assert r.returncode == 2, r.stderr
    assert not out.exists()
    said = " ".join(r.stderr.split())
    for expected in (
        "input feature observation.images.image [3, 256, 256] is not provided by pusht/PushT-v0",
        "input feature observation.images.image2 [3, 256, 256] is not provided by pusht/PushT-v0",
        "input feature observation.state: checkpoint shape [8], pusht/PushT-v0 gives [2]",
        "output feature action: checkpoint shape [7], pusht/PushT-v0 takes [2]",
    ):
        assert expected in said, said


def test_run_json_records_the_checkpoint(pusht_pair: tuple) -> None:
    import hashlib

    import lerobot
    import torch

    run_dir, _, _, checkpoint = pusht_pair
    policy = json.loads((run_dir / "run.json").read_text())["plan"]["policy"]["provenance"]
    prov = policy["server_metadata"]["provenance"]["lerobot"] if "server" in policy else policy["lerobot"]
    assert prov["checkpoint"]["path"] == str(checkpoint.resolve())
    assert (
        prov["checkpoint"]["weights_sha256"]
        == hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()
    )
    assert prov["policy_type"] == json.loads((checkpoint / "config.json").read_text())["type"]
    assert prov["versions"]["lerobot"] == lerobot.__version__
    assert (
        prov["versions"]["torch"] == torch.__version__.split("+")[0] or prov["versions"]["torch"] == torch.__version__
    )
    assert prov["device"] == "cpu"
    import importlib.metadata
    import platform

    try:
        transformers = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        transformers = None
    assert prov["versions"]["transformers"] == transformers
    assert prov["python"] == platform.python_version()
    assert prov["python_executable"] == sys.executable
    assert prov["seeding"] == "per-episode"


def test_a_folder_without_a_model_card_records_no_saved_version_and_no_mismatch(pusht_pair: tuple) -> None:
    """The checkpoints here are folders ``save_pretrained`` wrote, with no model card (``README.md``): no saved
    lerobot version is recorded, so no mismatch is named, in run and served alike."""
    run_dir, _, _, checkpoint = pusht_pair
    assert not (checkpoint / "README.md").exists()
    log = json.loads((run_dir / "run.json").read_text())
    policy = log["plan"]["policy"]["provenance"]
    prov = policy["server_metadata"]["provenance"]["lerobot"] if "server" in policy else policy["lerobot"]
    assert prov["checkpoint"]["saved_by_lerobot"] is None
    assert "version_mismatch" not in prov
    assert not any("saved by lerobot" in w for w in log["warnings"])


LIBERO_TASK, LIBERO_STEPS, LIBERO_EPISODES = "libero/libero_spatial/0", 15, 2


@pytest.fixture(scope="module")
def libero_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """rollbench's default LIBERO run, and lerobot's loop on the same seeds and initial states with lerobot's
    LiberoEnv on robosuite 1.4's behaviour (as ``lerobot[libero]`` installs it: hf-libero on robosuite 1.4.0;
    ``lerobot_reference.as_on_robosuite_14``) and, for the first episode's first action, on plain robosuite 1.5.

    Two episodes: the second is the first one after a reset of the same env (seed + 1, initial state 1, both
    advanced by lerobot's loop and by rollbench's plan), the step a third or fourth episode would only repeat. The
    robosuite 1.5 side is compared at its first action only, so its episode is one step long."""
    from lerobot_reference import as_on_robosuite_14, reference_episodes, use_libero_config

    if not use_libero_config():
        pytest.skip("lerobot's LIBERO side is not installed: bash scripts/lerobot_eval_setup.sh with rollbench[libero]")
    from lerobot.envs.configs import LiberoEnv

    tmp = tmp_path_factory.mktemp("libero")
    checkpoint = make_checkpoint("act", "libero", tmp / "pretrained_model")
    args = ("--env", LIBERO_TASK, "--policy", f"lerobot:{checkpoint}", "--episodes", LIBERO_EPISODES, "--seed", SEED)
    args += ("--max-steps", LIBERO_STEPS, "--policy-options", HOST, "--out", tmp / "run")
    r = run_cli("eval", *args, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    graded = json.loads(run_cli("grade", tmp / "run", "--json").stdout)
    env_cfg = LiberoEnv(task="libero_spatial", task_ids=[0], episode_length=LIBERO_STEPS)
    seeds = [SEED + k for k in range(LIBERO_EPISODES)]
    with as_on_robosuite_14():
        reference = reference_episodes(checkpoint, env_cfg, seeds, init_states=list(range(LIBERO_EPISODES)))
    first_step = LiberoEnv(task="libero_spatial", task_ids=[0], episode_length=1)
    with as_on_robosuite_14(seeding=False):
        on_15 = reference_episodes(checkpoint, first_step, seeds[:1], init_states=[0])
    return tmp / "run", graded, reference, on_15


def test_libero_actions_equal_lerobot_eval_bit_for_bit(libero_pair: tuple) -> None:
    run_dir, graded, reference, _ = libero_pair
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    assert len(reference) == len(by_index) == LIBERO_EPISODES
    for k, ref in enumerate(reference):
        assert (by_index[k]["seed"], by_index[k]["initial_state"]) == (SEED + k, k)
        assert by_index[k]["length"] == len(ref["actions"]) == LIBERO_STEPS
        assert by_index[k]["success"] == ref["success"]
        np.testing.assert_array_equal(recorded_actions(run_dir, k), ref["actions"])


def test_libero_default_scene_is_robosuite_14_s_not_lerobot_on_robosuite_15(libero_pair: tuple) -> None:
    """rollbench's default LIBERO scene stays the benchmark's (robosuite 1.4's draws, which lerobot-eval's own
    hf-libero has too): lerobot's LiberoEnv on plain robosuite 1.5 seeds another scene, and the same checkpoint's
    actions differ from the first step."""
    run_dir, _, _, on_15 = libero_pair
    assert len(on_15[0]["actions"]) == 1
    assert not np.array_equal(recorded_actions(run_dir, 0)[0], on_15[0]["actions"][0])
    said = json.loads((run_dir / "run.json").read_text())["provenance"]["libero"]["scene_seeding"]
    assert "init noise from numpy's global generator as robosuite 1.4 does" in said, said
    assert "lerobot-eval's episode with env seed = this seed" in said, said


ALOHA_TASK, ALOHA_STEPS = "aloha/AlohaTransferCube-v0", 8


def test_aloha_actions_equal_lerobot_eval_bit_for_bit(tmp_path: Path) -> None:
    pytest.importorskip("gym_aloha", reason="lerobot's eval extras: bash scripts/lerobot_eval_setup.sh")
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")
    from lerobot.envs.configs import AlohaEnv
    from lerobot_reference import reference_episodes

    checkpoint = make_checkpoint("act", "aloha", tmp_path / "pretrained_model")
    args = ("--env", ALOHA_TASK, "--policy", f"lerobot:{checkpoint}", "--episodes", 2, "--seed", SEED)
    r = run_cli(
        "eval", *args, "--max-steps", ALOHA_STEPS, "--policy-options", HOST, "--out", tmp_path / "run", timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    graded = json.loads(run_cli("grade", tmp_path / "run", "--json").stdout)
    env_cfg = AlohaEnv(task="AlohaTransferCube-v0", episode_length=ALOHA_STEPS)
    reference = reference_episodes(checkpoint, env_cfg, [SEED, SEED + 1])
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    for k, ref in enumerate(reference):
        assert by_index[k]["seed"] == SEED + k
        assert by_index[k]["length"] == len(ref["actions"]) == ALOHA_STEPS
        assert by_index[k]["success"] == ref["success"]
        np.testing.assert_array_equal(recorded_actions(tmp_path / "run", k), ref["actions"])
