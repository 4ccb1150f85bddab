"""``rollbench sequential`` through the other executions of api.evaluate: B served by a real ``rollbench
serve-policy`` (websocket, loopback) and both arms on Ray actors give the looks and decision of the in-process run."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollbench.api import Execution
from rollbench.core.spec import build_spec
from rollbench.sequential.runner import SequentialConfig, run_sequential
from served_policy import served

# Base seed of the comparison: B is decided better at the third look (pair 15) instead of the fourth with seed 0, and
# every look's round costs both arms' runs (Ray actors in the second test).
SEED = 8


@pytest.fixture(scope="module")
def want(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The oracle of both tests: the same comparison run in-process, once for the module."""
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=SEED)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=SEED)
    out = tmp_path_factory.mktemp("reference") / "in-process"
    return run_sequential(a, b, out, SequentialConfig(delta=0.2, look_every=5))["tasks"][0]


@pytest.mark.slow
def test_a_served_arm_gives_the_decision_of_the_in_process_one(want: dict, tmp_path: Path) -> None:
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=SEED)
    with served(tmp_path, "scripted-expert", "ws") as (url, log, _):
        b = build_spec(env="scripted/reach", policy=url, episodes=1, seed=SEED)
        got = run_sequential(a, b, tmp_path / "served", SequentialConfig(delta=0.2, look_every=5))["tasks"][0]
    assert log.exists() and log.stat().st_size > 0  # B really went over the wire
    assert (got["looks"], got["decision"]) == (want["looks"], want["decision"])


@pytest.mark.ray
@pytest.mark.slow
def test_ray_actors_give_the_decision_of_the_in_process_run(want: dict, tmp_path: Path) -> None:
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=SEED)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=SEED)
    execution = Execution(executor="ray", workers=2)
    got = run_sequential(a, b, tmp_path / "ray", SequentialConfig(delta=0.2, look_every=5, execution=execution))[
        "tasks"
    ][0]
    assert (got["looks"], got["decision"]) == (want["looks"], want["decision"])
