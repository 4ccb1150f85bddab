"""``rollbench checkpoints`` on real LeRobot checkpoints: ACT and Diffusion policies saved by lerobot's own
``save_pretrained`` (in the LeRobot venv, ``tests/compat/lerobot_checkpoints.make_checkpoint``; torch seeds stand in
for training steps: 0, 1 for steps 1000, 2000 of each policy type), laid out as lerobot-train lays them out
(``checkpoints/<6-digit step>/pretrained_model/`` and the link ``checkpoints/last``), evaluated on PushT through the
LeRobot host. Two checkpoints per type: every LeRobot host start (one per checkpoint evaluated) imports torch and
lerobot, ~8 CPU seconds; the ranking of three or more checkpoints is tested on scripted checkpoints
(tests/test_checkpoints_cmd.py).

Oracle: lerobot's own evaluation loop (``tests/compat/lerobot_reference.reference_episodes``: ``eval_policy`` with
lerobot's ``make_env``, the checkpoint loaded from its folder) plays each checkpoint's episodes on the same seeds in
the LeRobot venv; every episode ``checkpoints`` recorded, for both checkpoints (the one ranked best and the other),
has lerobot's actions bit for bit, its length and its success. The checkpoints of both types and lerobot's episodes
are made by one LeRobot interpreter (``tests/compat/lerobot_train_runs.py``); torch runs single-threaded there and in
the hosts (the number of threads changes torch's floats; equality is tested at one number, as in tests/compat). The
commands run in the test process (``cli_in_process``; the claim is about the LeRobot host, which stays a process of
its own).

Needs ``.venv-lerobot`` (``scripts/lerobot_compat.sh``): this checkout's, else ``$ROLLBENCH_LEROBOT_PYTHON``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rollbench
from cli_in_process import invoke
from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "compat"))
from lerobot_runs import recorded_actions  # pyarrow and numpy only

pytestmark = [pytest.mark.venv, pytest.mark.slow, pytest.mark.sim]


def _lerobot_python() -> Path | None:
    for candidate in (REPO / ".venv-lerobot" / "bin" / "python", os.environ.get("ROLLBENCH_LEROBOT_PYTHON")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


PYTHON = _lerobot_python()
# policy type -> {training step: torch seed of its random policy}
STEPS = {"act": {1000: 0, 2000: 1}, "diffusion": {1000: 0, 2000: 1}}
EPISODES, MAX_STEPS = 2, 15


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """``(root, lerobot's episodes)``: ``root/KIND/checkpoints/...`` for both policy types and lerobot's own
    episodes of every checkpoint (``tests/compat/lerobot_train_runs.py``, one LeRobot interpreter)."""
    assert PYTHON is not None
    root = tmp_path_factory.mktemp("train")
    specs = [f"{kind}:{step}:{seed}" for kind, steps in STEPS.items() for step, seed in steps.items()]
    script = REPO / "tests" / "compat" / "lerobot_train_runs.py"
    subprocess.run(
        [str(PYTHON), str(script), str(root), str(EPISODES), str(MAX_STEPS), *specs],
        check=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    for kind in STEPS:
        os.symlink(f"{max(STEPS[kind]):06d}", root / kind / "checkpoints" / "last")
    with np.load(root / "reference.npz") as saved:
        return root, dict(saved)


@pytest.mark.skipif(
    PYTHON is None, reason="needs .venv-lerobot (scripts/lerobot_compat.sh) or $ROLLBENCH_LEROBOT_PYTHON"
)
@pytest.mark.parametrize("kind", sorted(STEPS))
def test_lerobot_train_checkpoints_are_ranked_through_the_lerobot_host(
    trained: tuple[Path, dict[str, np.ndarray]], tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the hosts' torch, as lerobot's side ran it
    root, reference = trained
    run, out = root / kind, tmp_path / "out"
    options = json.dumps({"python": str(PYTHON)})
    common = ["--env", "pusht/PushT-v0", "--episodes", str(EPISODES), "--max-steps", str(MAX_STEPS)]
    got = invoke("checkpoints", run, *common, "--policy-options", options, "--out", out, "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert sorted(r["step"] for r in doc["checkpoints"]) == sorted(STEPS[kind])  # checkpoints/last skipped
    assert (out / "checkpoints.png").exists()
    first, second = (reference[f"{kind}-{step}-0-actions"] for step in sorted(STEPS[kind]))
    assert not np.array_equal(first, second)  # the two checkpoints act apart: a swapped run would not pass
    for step in (doc["checkpoints"][0]["step"], doc["checkpoints"][-1]["step"]):
        episodes = sorted(rollbench.grade(out / f"{step:06d}").episodes, key=lambda e: e.episode_index)
        assert [e.episode_index for e in episodes] == list(range(EPISODES))
        for k, e in enumerate(episodes):
            actions = reference[f"{kind}-{step}-{k}-actions"]
            assert (e.seed, e.length, e.success) == (k, len(actions), bool(reference[f"{kind}-{step}-{k}-success"]))
            np.testing.assert_array_equal(recorded_actions(out / f"{step:06d}", k), actions)
    provenance = json.loads((out / "001000" / "run.json").read_text())["plan"]["policy"]["provenance"]["lerobot"]
    assert provenance["policy_type"] == kind
