"""A policy whose skill comes from a checkpoint folder (for ``rollbench checkpoints`` tests on the scripted family):
``checkpoint_policies:make`` with ``{"checkpoint": PATH}`` reads ``PATH/config.json``'s ``skill`` in [0, 1]; on a
trial whose seed's hash draw is below ``skill`` it steps at the goal (the episode succeeds), else it holds still
(the episode fails). So a checkpoint's outcomes are known in advance (:func:`expected_success`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

import rollbench


def expected_success(skill: float, seed: int) -> bool:
    """Whether a checkpoint of ``skill`` succeeds on the trial of ``seed`` (the oracle of the tests)."""
    return bool(np.random.default_rng([seed, 4242]).random() < skill)


class SkillPolicy:
    def __init__(self, skill: float) -> None:
        self.skill = skill
        self.info = rollbench.PolicyInfo(name="skill", chunk_size=1, tasks=("scripted/*",))
        self.good = False

    def reset(self, task: rollbench.TaskInfo, seed: int) -> None:
        self.good = expected_success(self.skill, seed)

    def act(self, observation: rollbench.Observation, instruction: str) -> np.ndarray:
        s = observation.state
        a = np.clip((s[2:4] - s[0:2]) / 0.1, -1.0, 1.0) if self.good else np.zeros(2)
        return a.astype(np.float32)[None, :]

    def close(self) -> None:
        pass


@rollbench.policy_options(checkpoint=str)
def make(name: str, options: Mapping[str, Any]) -> SkillPolicy:
    return SkillPolicy(float(json.loads((Path(options["checkpoint"]) / "config.json").read_text())["skill"]))


def write_checkpoint(root: Path, step: int, skill: float, lerobot_layout: bool = True) -> Path:
    """A checkpoint folder as lerobot-train lays it out: ``root/checkpoints/<6-digit step>/pretrained_model/`` with
    config.json (holding ``skill``) and a model.safetensors stand-in; ``root/<step>/`` without the layout."""
    folder = root / "checkpoints" / f"{step:06d}" / "pretrained_model" if lerobot_layout else root / f"step-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    (folder / "config.json").write_text(json.dumps({"skill": skill}))
    return folder
