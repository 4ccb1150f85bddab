"""``rollbench checkpoints`` on real LeRobot checkpoints: ACT and Diffusion policies saved by lerobot's own
``save_pretrained`` (in the LeRobot venv, ``tests/compat/lerobot_checkpoints.make_checkpoint``; torch seeds stand in
for training steps: 0, 1 for steps 1000, 2000 of each policy type), laid out as lerobot-train lays them out
(``checkpoints/<6-digit step>/pretrained_model/`` and the link ``checkpoints/last``), evaluated on PushT through the
LeRobot host. Two checkpoints per type: every LeRobot host start (each checkpoint's evaluation starts two: the probe
before the run and the run's) imports torch and lerobot, ~8 CPU seconds; the ranking of three or more checkpoints is
tested on scripted checkpoints (tests/test_checkpoints_cmd.py).

Oracle: each checkpoint's episodes equal those of ``rollbench eval --policy lerobot:<that checkpoint>`` run on its
own (same seeds, lengths, returns: the same actions), for both checkpoints (the one ranked best and the other).
The commands run in the test process (``cli_in_process``; the claim is about the LeRobot host, which stays a
process of its own).

Needs ``.venv-lerobot`` (``scripts/lerobot_compat.sh``): this checkout's, else ``$ROLLBENCH_LEROBOT_PYTHON``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import rollbench
from cli_in_process import invoke
from conftest import REPO

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


def _train_run(root: Path, kind: str) -> Path:
    assert PYTHON is not None
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from lerobot_checkpoints import make_checkpoint;"
        "[make_checkpoint(sys.argv[3], 'pusht', Path(sys.argv[2]) / 'checkpoints' / f'{int(s):06d}' / 'pretrained_model',"
        " int(seed)) for s, seed in (a.split(':') for a in sys.argv[4:])]"
    )
    args = [f"{s}:{seed}" for s, seed in STEPS[kind].items()]
    subprocess.run(
        [str(PYTHON), "-c", script, str(REPO / "tests" / "compat"), str(root), kind, *args], check=True, timeout=600
    )
    os.symlink(f"{max(STEPS[kind]):06d}", root / "checkpoints" / "last")
    return root


@pytest.mark.skipif(
    PYTHON is None, reason="needs .venv-lerobot (scripts/lerobot_compat.sh) or $ROLLBENCH_LEROBOT_PYTHON"
)
@pytest.mark.parametrize("kind", sorted(STEPS))
def test_lerobot_train_checkpoints_are_ranked_through_the_lerobot_host(tmp_path: Path, kind: str) -> None:
    run, out = _train_run(tmp_path / "outputs" / "train" / f"{kind}_pusht", kind), tmp_path / "out"
    options = json.dumps({"python": str(PYTHON)})
    common = [
        "--env",
        "pusht/PushT-v0",
        "--episodes",
        str(EPISODES),
        "--max-steps",
        str(MAX_STEPS),
        "--policy-options",
        options,
    ]
    got = invoke("checkpoints", run, *common, "--out", out, "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert sorted(r["step"] for r in doc["checkpoints"]) == sorted(STEPS[kind])  # checkpoints/last skipped
    assert (out / "checkpoints.png").exists()
    for step in (doc["checkpoints"][0]["step"], doc["checkpoints"][-1]["step"]):
        ckpt = run / "checkpoints" / f"{step:06d}" / "pretrained_model"
        alone = tmp_path / f"alone-{step}"
        direct = invoke("eval", "--policy", f"lerobot:{ckpt}", *common, "--out", alone)
        assert direct.returncode == 0, direct.stderr
        fields = ("seed", "success", "length", "return", "termination_reason")
        want = [tuple(e.to_json()[f] for f in fields) for e in rollbench.grade(alone).episodes]
        got_rows = rollbench.grade(out / f"{step:06d}").episodes
        assert [tuple(e.to_json()[f] for f in fields) for e in got_rows] == want
    provenance = json.loads((out / "001000" / "run.json").read_text())["plan"]["policy"]["provenance"]["lerobot"]
    assert provenance["policy_type"] == kind
