"""rollbench and lerobot's own evaluation loop (this venv's line, 0.6.1 or 0.4.4) (``lerobot.scripts.lerobot_eval.eval_policy``) count the same
successes on the same PushT seeds with the same deterministic policy (``benchmarks/_pusht_controller.py``).

Runs in the LeRobot venv after ``scripts/lerobot_eval_setup.sh`` (``bash scripts/lerobot_compat.sh --eval``); skipped
where gym-pusht or lerobot's eval dependencies are missing. rollbench runs as its own CLI in a subprocess (core
venv); lerobot's side is ``benchmarks/_lerobot_eval_side.evaluate`` in this process, with a vector env of 3 slots so
that lerobot's auto-reset and per-slot seeding are exercised. Seeds 43..48: three failures (300 steps) and three
successes of the controller.

The oracle for lerobot's count is rollbench's graded run (``rollbench grade``'s per-episode ``success``), and for
both the actions: the actions rollbench recorded must equal, bit for bit, the ones the lerobot-side policy returned,
so the two loops played the same episodes and any difference in counts is a difference in counting.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import REPO, run_cli

pytest.importorskip("gym_pusht", reason="lerobot's eval extras: bash scripts/lerobot_eval_setup.sh")
pytest.importorskip("einops", reason="lerobot's eval extras: bash scripts/lerobot_eval_setup.sh")
sys.path.insert(0, str(REPO / "benchmarks"))
import _lerobot_eval_side

sys.path.insert(0, str(Path(__file__).parent))
from shared_runs import shared_run

pytestmark = [pytest.mark.venv, pytest.mark.sim, pytest.mark.slow]

SEED, EPISODES, SLOTS = 43, 6, 3


def record_controller_run(out: Path) -> dict:
    """rollbench's run of the controller, graded (the same on both lines: ``shared_runs``)."""
    args = ("--env", "pusht/PushT-v0", "--policy", "_pusht_controller:make", "--episodes", EPISODES, "--seed", SEED)
    r = run_cli("eval", *args, "--out", out, env={"PYTHONPATH": str(REPO / "benchmarks")}, timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(run_cli("grade", out, "--json").stdout))


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    out, graded = shared_run("pusht_controller", record_controller_run, tmp_path_factory)
    lerobot = _lerobot_eval_side.evaluate(EPISODES, SEED, SLOTS)
    return out, graded, lerobot


def test_same_successes_per_seed(both: tuple[Path, dict, dict]) -> None:
    _, graded, lerobot = both
    rb = {e["seed"]: e["success"] for e in graded["episodes"]}
    lr = {e["seed"]: e["success"] for e in lerobot["per_episode"]}
    assert sorted(rb) == sorted(lr) == list(range(SEED, SEED + EPISODES))
    assert lr == rb
    assert 0 < sum(rb.values()) < EPISODES  # both outcomes occur, so the check can tell them apart


def test_same_episodes_played(both: tuple[Path, dict, dict]) -> None:
    out, graded, lerobot = both
    by_index = {e["episode_index"]: e for e in graded["episodes"]}
    for k, played in enumerate(lerobot["env_episodes"]):
        rows = pq.read_table(
            out / f"data/chunk-000/file-{k:03d}.parquet", columns=["frame_index", "action"]
        ).to_pydict()
        recorded = np.asarray(rows["action"], dtype=np.float32)[np.argsort(rows["frame_index"])]
        assert played["seed"] == by_index[k]["seed"]
        assert played["length"] == by_index[k]["length"]
        assert played["success"] == by_index[k]["success"]
        np.testing.assert_array_equal(np.asarray(played["actions"], dtype=np.float32), recorded)
