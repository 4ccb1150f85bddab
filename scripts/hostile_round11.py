"""Hostile round 11's classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F14: ``eval --spec RUN/run.json`` of a run naming a planted module (or a server): refused, nothing imported,
  until the name is typed again or ``--trust-run`` given;
* F8: ``release --rules`` with backtracking patterns over a run whose instruction is built to make them backtrack:
  finishes (RE2), and a pattern with lookaround is refused by name;
* F12: a gymnasium env whose reward turns NaN: its episodes are the env's errors, and the run grades without a
  violation;
* F1: a policy writing into ``observation.state``: the recorded states are the env's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PLANTED = """\
import numpy as np
from rollbench import PolicyInfo
open(__import__("os").environ["RBH11_MARKER"], "w").write("imported")
class Zero:
    info = PolicyInfo(name="zero-planted")
    def reset(self, task, seed): pass
    def act(self, obs, instruction):
        obs.state[:] = 123
        return np.zeros((1, 2), np.float32)
    def close(self): pass
def make(name, options): return Zero()
"""
NAN_ENV = """\
import gymnasium as gym, numpy as np
class E(gym.Env):
    metadata = {"render_fps": 10}
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    def reset(self, seed=None, options=None):
        super().reset(seed=seed); self.t = 0
        return np.zeros(2, np.float32), {}
    def step(self, a):
        self.t += 1
        return np.zeros(2, np.float32), (float("nan") if self.t >= 3 else 0.0), False, False, {"is_success": False}
gym.register("RbhNan-v0", entry_point=E, max_episode_steps=6)
"""


def _nothing(run: Path) -> None:
    pass


def spec_from_run_json(r: Any) -> None:
    (r.planted / "rbh11_planted.py").write_text(PLANTED)
    marker = r.work / "R11-IMPORTED"
    r.env = {**r.env, "RBH11_MARKER": str(marker)}
    theirs = r.work / "r11-theirs"
    r.cli("eval", "--env", "scripted/reach", "--policy", "rbh11_planted:make", "--episodes", "1", "--max-steps", "3",
          "--out", theirs, "--trust-run")  # fmt: skip
    marker.unlink(missing_ok=True)
    r.case("r11-spec-run-json", _nothing, ["eval", "--spec", str(theirs / "run.json"), "--out", "DIR/new"], {2}, True,
           "is a recorded run.json naming policy")  # fmt: skip
    if marker.exists():
        r.failures.append("r11-spec-run-json: the module the handed-over run.json names was imported")
    if r.pattern in "r11-recorded-states":
        r.count += 1
        import pyarrow.parquet as pq

        states = pq.read_table(theirs / "data/chunk-000/file-000.parquet").column("observation.state").to_pylist()
        if any(123.0 in s for s in states):
            r.failures.append("r11-recorded-states: a policy's write into observation.state was recorded")


def release_rules(r: Any, n: int) -> None:
    for i in range(n):
        pattern = r.rng.choice([r"([a-z0-9]+[._-]?)+@corp\.com", r"(a|aa)+#x", r"(\w+\s?)+$!", r"(a+)+b"])
        letters = "a" * r.rng.randrange(30, 5000) + "!"

        def plant(run: Path, pattern: str = pattern, letters: str = letters) -> None:
            log = json.loads((run / "run.json").read_text())
            log["spec"]["instruction"] = letters
            (run / "run.json").write_text(json.dumps(log))
            (run.parent / "rules.json").write_text(json.dumps({"patterns": [{"name": "p", "regex": pattern}]}))

        r.case(f"r11-release-rules-{i}", plant, ["release", "RUN", "--out", "DIR/rel", "--rules", "DIR/rules.json",
               "--dry-run", "--allow-violations"], {0, 1, 2}, True)  # fmt: skip
    r.case("r11-release-rules-lookaround", lambda run: (run.parent / "rules.json").write_text(
        json.dumps({"patterns": [{"name": "p", "regex": "(?<!x)secret"}]})), ["release", "RUN", "--out", "DIR/rel",
        "--rules", "DIR/rules.json"], {2}, True, "is not a pattern release can run in linear time")  # fmt: skip


def nan_reward(r: Any) -> None:
    (r.planted / "rbh11_nanenv.py").write_text(NAN_ENV)
    r.case("r11-env-nan-reward", _nothing, ["eval", "--env", "gym:rbh11_nanenv:RbhNan-v0", "--policy", "zero",
           "--episodes", "2", "--out", "DIR/new"], {1}, True, "non-finite reward")  # fmt: skip
    if r.pattern in "r11-env-nan-reward-grade":
        made = sorted(r.work.glob("cases/r11-env-nan-reward/new"))
        if made:
            r.count += 1
            g = r.cli("grade", made[0], "--json", check=False)
            if g.returncode not in (0, 1) or json.loads(g.stdout or "{}").get("violations"):
                r.failures.append(f"r11-env-nan-reward-grade: exit {g.returncode}, violations in the env's own run")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    saved = r.env
    try:
        spec_from_run_json(r)
    finally:
        r.env = saved
    release_rules(r, max(2, n // 2))
    nan_reward(r)
