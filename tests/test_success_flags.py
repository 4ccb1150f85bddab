"""A gymnasium env's success signal and a policy's ``info`` (issue 42, item 13): only a bool or 0/1 counts as a
success flag; "False", "0", NaN, -1, an array or an object whose ``__bool__`` raises is a named environment error,
never a success and never a traceback; a policy whose ``info`` raises anything is a one-line refusal. Oracles: the
planted values and the episode records on disk."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError, EpisodeError
from rollbench.envs.gym import success_from_info


class Raises:
    def __bool__(self) -> bool:
        raise RuntimeError("no truth here")


BAD = {
    "the string False": "False",
    "the string 0": "0",
    "NaN": math.nan,
    "minus one": -1,
    "a half": 0.5,
    "an array": np.array([1, 0]),
    "a list": [True],
    "an object whose bool raises": Raises(),
    "None": None,
}
GOOD = [(True, True), (False, False), (1, True), (0, False), (1.0, True), (np.bool_(True), True), (np.array(1), True)]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_value_that_is_not_a_flag_is_a_named_environment_error(case: str) -> None:
    with pytest.raises(EpisodeError, match=r"'is_success' is .*not a success flag") as err:
        success_from_info("X-v0", {"is_success": BAD[case]})
    assert err.value.fault == "environment"


@pytest.mark.parametrize(("value", "want"), GOOD)
def test_bools_and_zero_or_one_are_flags(value: Any, want: bool) -> None:
    assert success_from_info("X-v0", {"success": value}) is want


class FlagEnv(gymnasium.Env):  # type: ignore[type-arg]
    """Reports ``is_success: False`` on its first step after a reset, then ``value`` (the probe takes one step)."""

    metadata: ClassVar[dict[str, Any]] = {"render_fps": 10}

    def __init__(self, value: Any = False) -> None:
        self.value, self.n = value, 0
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.n = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.n += 1
        return np.zeros(2, np.float32), 0.0, False, False, {"is_success": False if self.n == 1 else self.value}


@pytest.mark.parametrize("case", ["the string False", "NaN", "an array", "an object whose bool raises"])
def test_an_episode_whose_env_reports_a_bad_flag_ends_as_an_environment_error(tmp_path: Path, case: str) -> None:
    env_id = f"RbFlag{sorted(BAD).index(case)}-v0"
    gymnasium.register(id=env_id, entry_point=FlagEnv, kwargs={"value": BAD[case]})
    r = evaluate(out=tmp_path / "run", env=f"gym:{env_id}", policy="zero", episodes=2, max_steps=4, seed=0)
    eps = r.episodes
    assert [(e.success, e.termination_reason, e.error_fault) for e in eps] == [(False, "error", "environment")] * 2
    assert all("not a success flag" in e.error for e in eps)


def test_a_bad_flag_on_the_probe_step_is_a_one_line_refusal(tmp_path: Path) -> None:
    gymnasium.register(id="RbFlagProbe-v0", entry_point=lambda: _Always("0"))
    r = invoke("eval", "--env", "gym:RbFlagProbe-v0", "--policy", "zero", "--episodes", "1", "--out", tmp_path / "r")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "not a success flag" in lines[0] and "Traceback" not in r.stderr


class _Always(FlagEnv):
    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return np.zeros(2, np.float32), 0.0, False, False, {"is_success": self.value}


POLICY_MODULE = """
import numpy as np

class P:
    def __init__(self, exc):
        self.exc = exc

    @property
    def info(self):
        raise self.exc

    def reset(self, task):
        pass

    def act(self, obs):
        return np.zeros((1, 2))

    def close(self):
        pass

def value_error(*a, **k):
    return P(ValueError("boom"))

def key_error(*a, **k):
    return P(KeyError("k"))

def runtime_error(*a, **k):
    return P(RuntimeError("deep"))
"""


@pytest.mark.parametrize("factory", ["value_error", "key_error", "runtime_error"])
def test_a_policy_whose_info_raises_is_a_one_line_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factory: str
) -> None:
    (tmp_path / f"infopol_{factory}.py").write_text(POLICY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    policy = f"infopol_{factory}:{factory}"
    r = invoke("eval", "--env", "scripted/reach", "--policy", policy, "--episodes", "1", "--out", tmp_path / "r")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "its factory or its info raised" in lines[0], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "r").exists()


def test_config_error_is_what_the_probe_raises() -> None:
    with pytest.raises(ConfigError):
        success_from_info("X-v0", {})
