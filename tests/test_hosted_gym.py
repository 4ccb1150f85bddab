"""The ``hostedgym`` family: any gymnasium env in its own interpreter, through rollbench's real env host
(docs/env-host.md). The oracle is gymnasium's own loop (tests/envhost/gym_reference_loop.py) run by the same far-side
interpreter without rollbench: every recorded state and reward equals it bit for bit. The far side is this
interpreter, and (marker ``venv``) a venv whose gymnasium and numpy pins conflict with rollbench's, built by
``bash scripts/gym_venv_setup.sh``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

from rollbench.api import evaluate
from rollbench.core import registry
from rollbench.core.contracts import ConfigError
from rollbench.core.spec import build_spec, what_it_loads
from run_tables import recorded_tables

REFERENCE = Path(__file__).with_name("envhost") / "gym_reference_loop.py"
CONFLICTING_VENV = Path(__file__).resolve().parents[1] / ".venv-gym-1.0"  # scripts/gym_venv_setup.sh


@pytest.fixture(autouse=True)
def hostedgym_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The family's entry point, also in a venv installed before it was added to pyproject (``pip install -e .``
    writes entry points at install time)."""
    points = dict(registry._env_entry_points())
    if "hostedgym" not in points:
        points["hostedgym"] = EntryPoint("hostedgym", "rollbench.envs.hosted.gym_env:FAMILY", "rollbench.envs")
        monkeypatch.setattr(registry, "_env_entry_points", lambda: points)
    registry.env_family.cache_clear()
    registry.env_families.cache_clear()
    yield
    registry.env_family.cache_clear()
    registry.env_families.cache_clear()


def _reference(python: str, env_id: str, episodes: list[dict[str, object]]) -> dict[str, object]:
    out = subprocess.run(
        [python, str(REFERENCE), env_id], input=json.dumps(episodes), capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _run_and_compare(tmp_path: Path, python: str, env_id: str) -> dict[str, object]:
    """Two random-policy episodes of ``env_id`` on the far side ``python``; asserts every recorded state and reward
    equals gymnasium's own loop in that interpreter, and returns run.json."""
    out = tmp_path / "run"
    evaluate(out=out, env=f"hostedgym:{python}:{env_id}", policy="random", episodes=2, max_steps=25, seed=3)
    data, meta = recorded_tables(out)
    rows = data.to_pylist()
    episodes = []
    for ep in meta:
        steps = [r for r in rows if r["episode_index"] == ep["episode_index"]]
        episodes.append({"seed": ep["rollbench/seed"], "actions": [r["action"] for r in steps], "rows": steps})
    assert len(episodes) == 2 and all(e["actions"] for e in episodes)
    ref = _reference(python, env_id, [{"seed": e["seed"], "actions": e["actions"]} for e in episodes])
    for ours, theirs in zip(episodes, ref["episodes"], strict=True):  # type: ignore[call-overload]
        states = np.array([r["observation.state"] for r in ours["rows"]], dtype=np.float32)
        np.testing.assert_array_equal(states, np.array(theirs["states"], dtype=np.float32))
        rewards = np.array([r["next.reward"] for r in ours["rows"]], dtype=np.float32)  # recorded as float32
        np.testing.assert_array_equal(rewards, np.array(theirs["rewards"], dtype=np.float32))
    return {**json.loads((out / "run.json").read_text()), "reference": ref}


@pytest.mark.slow
def test_a_box_env_in_another_interpreter_records_what_gymnasium_s_own_loop_produces(tmp_path: Path) -> None:
    log = _run_and_compare(tmp_path, sys.executable, "MountainCarContinuous-v0")
    task = log["plan"]["tasks"][0]
    assert task["name"] == f"hostedgym/{sys.executable}:MountainCarContinuous-v0"
    prov = log["provenance"]["hostedgym"]
    assert prov["interpreters"][sys.executable]["gymnasium"] == log["reference"]["gymnasium"]
    assert log["status"] == "OK"


@pytest.mark.slow
def test_a_discrete_env_without_success_rounds_its_actions_and_warns_that_it_is_never_successful(
    tmp_path: Path,
) -> None:
    log = _run_and_compare(tmp_path, sys.executable, "CartPole-v1")
    assert "discrete actions" in log["plan"]["tasks"][0]["source"]  # states equal only if each action was rounded
    assert any("reports no success signal" in w for w in log["warnings"])


def test_a_hosted_gym_name_is_refused_over_a_wire_and_needs_trust_to_resume(tmp_path: Path) -> None:
    name = f"hostedgym:{sys.executable}:CartPole-v1"
    with pytest.raises(ConfigError, match="names an interpreter to run"):
        registry.check_remote_name(name)
    spec = build_spec(env=name, policy="random", episodes=1)
    assert what_it_loads(spec) == [("env", name)]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("hostedgym:CartPole-v1", "is not a hosted gymnasium env; write hostedgym:PYTHON:ID"),
        ("hostedgym:/no/such/python:CartPole-v1", "interpreter '/no/such/python' does not exist"),
    ],
)
def test_a_malformed_name_or_missing_interpreter_is_one_config_error(env: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        registry.resolve_tasks(env)


def test_an_unknown_id_on_the_far_side_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"gymnasium env 'NoSuchEnv-v9' in .*probe raised"):
        registry.resolve_tasks(f"hostedgym:{sys.executable}:NoSuchEnv-v9")


@pytest.mark.venv
def test_a_venv_with_conflicting_pins_runs_and_its_own_versions_are_recorded(tmp_path: Path) -> None:
    python = CONFLICTING_VENV / "bin" / "python"
    if not python.is_file():
        pytest.skip("its venv is not built: bash scripts/gym_venv_setup.sh")
    log = _run_and_compare(tmp_path, str(python), "MountainCarContinuous-v0")
    far = log["provenance"]["hostedgym"]["interpreters"][str(python)]
    assert (
        far
        == {"gymnasium": "1.0.0", "numpy": "1.25.2"}
        == {
            "gymnasium": log["reference"]["gymnasium"],
            "numpy": log["reference"]["numpy"],
        }
    )
    assert log["provenance"]["versions"]["gymnasium"] != far["gymnasium"]  # rollbench's own stays its own
