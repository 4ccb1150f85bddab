"""``lerobot:USER/REPO`` (a Hub id) and the checkpoint's own lerobot version, on this venv's lerobot line.

Nothing can be downloaded here, so the Hub is a test double: a Hugging Face cache laid out by hand
(``$HF_HOME/hub/models--USER--REPO/refs/main`` naming a commit, ``snapshots/COMMIT/`` holding the files) with
``HF_HUB_OFFLINE=1``; the host's real ``huggingface_hub.snapshot_download`` resolves the id from it, as it resolves
an id downloaded before on a machine that is now offline. The checkpoint inside is saved by this venv's lerobot
(``lerobot_checkpoints.make_checkpoint``), plus the model card ``PreTrainedPolicy.push_model_to_hub`` writes in
lerobot 0.5+ (its "LeRobot version" row, here naming another release). The oracle for the actions is lerobot's own
``eval_policy`` on the same folder (``lerobot_reference.reference_episodes``). A folder without a model card (no
saved version, no mismatch) is checked on ``test_lerobot_policy.py``'s runs, whose checkpoints are such folders.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

pytest.importorskip("gym_pusht", reason="lerobot's eval extras: bash scripts/lerobot_compat.sh --eval")
sys.path.insert(0, str(Path(__file__).parent))
from lerobot_checkpoints import make_checkpoint
from lerobot_runs import recorded_actions

pytestmark = [pytest.mark.venv, pytest.mark.sim, pytest.mark.slow]

REPO_ID, COMMIT, SEED, STEPS = "someone/tiny-act-pusht", "0123456789abcdef0123456789abcdef01234567", 5, 12
CARD_VERSION = "0.5.0"  # a release neither line runs


def test_a_hub_id_runs_from_the_hub_cache_and_a_version_mismatch_is_named(tmp_path: Path) -> None:
    import lerobot
    from lerobot.envs.configs import PushtEnv
    from lerobot_reference import reference_episodes

    checkpoint = make_checkpoint("act", "pusht", tmp_path / "pretrained_model")
    hf_home = tmp_path / "hf"
    repo = hf_home / "hub" / f"models--{REPO_ID.replace('/', '--')}"
    shutil.copytree(checkpoint, repo / "snapshots" / COMMIT)
    (repo / "snapshots" / COMMIT / "README.md").write_text(
        f"---\nlibrary_name: lerobot\n---\n\n| Field | Value |\n| --- | --- |\n| LeRobot version | {CARD_VERSION} |\n"
    )
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    env = {"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    args = ("--env", "pusht/PushT-v0", "--policy", f"lerobot:{REPO_ID}", "--episodes", 1, "--seed", SEED)
    options = json.dumps({"python": sys.executable, "device": "cpu"})
    r = run_cli(
        "eval",
        *args,
        "--max-steps",
        STEPS,
        "--policy-options",
        options,
        "--out",
        tmp_path / "run",
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    mismatch = f"checkpoint saved by lerobot {CARD_VERSION}, run by lerobot {lerobot.__version__}"
    assert mismatch in " ".join((r.stdout + r.stderr).split())
    log = json.loads((tmp_path / "run" / "run.json").read_text())
    assert any(mismatch in w for w in log["warnings"])
    prov = log["plan"]["policy"]["provenance"]["lerobot"]
    assert prov["checkpoint"]["source"] == "hub"
    assert prov["checkpoint"]["repo_id"] == REPO_ID
    assert prov["checkpoint"]["revision"] == COMMIT
    assert prov["checkpoint"]["saved_by_lerobot"] == CARD_VERSION
    assert prov["version_mismatch"] == mismatch
    assert prov["versions"]["lerobot"] == lerobot.__version__
    assert prov["python_executable"] == sys.executable
    (ref,) = reference_episodes(checkpoint, PushtEnv(episode_length=STEPS), [SEED])
    np.testing.assert_array_equal(recorded_actions(tmp_path / "run", 0), ref["actions"])
