"""lerobot-train's checkpoint layout and each checkpoint's episodes in lerobot's own evaluation loop, made in a LeRobot
venv in one interpreter (for ``tests/test_checkpoints_lerobot.py``, which runs this file with that venv's Python).

``python lerobot_train_runs.py ROOT EPISODES MAX_STEPS KIND:STEP:TORCH_SEED ...`` writes, for each argument,
``ROOT/KIND/checkpoints/<6-digit STEP>/pretrained_model`` (``lerobot_checkpoints.make_checkpoint`` on PushT's shapes,
the weights drawn with TORCH_SEED) and then ``ROOT/reference.npz``: for each checkpoint and episode k (seed k, as
``rollbench checkpoints`` plays episode k at its default ``--seed 0``), ``KIND-STEP-k-actions`` (float32 (T, 2), the
actions PushT received) and ``KIND-STEP-k-success`` (bool), from ``lerobot_reference.reference_episodes``: lerobot's
``eval_policy`` with its ``make_env`` on ``PushtEnv(episode_length=MAX_STEPS)``, the checkpoint loaded from its folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from lerobot_checkpoints import make_checkpoint
from lerobot_reference import reference_episodes


def main(root: Path, episodes: int, max_steps: int, specs: list[str]) -> None:
    from lerobot.envs.configs import PushtEnv

    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        kind, step, seed = spec.split(":")
        folder = root / kind / "checkpoints" / f"{int(step):06d}" / "pretrained_model"
        make_checkpoint(kind, "pusht", folder, int(seed))
        played = reference_episodes(folder, PushtEnv(episode_length=max_steps), list(range(episodes)))
        for k, episode in enumerate(played):
            arrays[f"{kind}-{int(step)}-{k}-actions"] = episode["actions"]
            arrays[f"{kind}-{int(step)}-{k}-success"] = np.array(episode["success"])
    np.savez(root / "reference.npz", **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
