"""The measurement instrument of ``benchmarks/bench_libero_stacks.py``: the scripted libero_spatial expert
(``benchmarks/libero_bowl_expert.py``) solves a hand-checked episode when run as a user runs it (``rollbench eval
--policy libero_bowl_expert:make`` with ``benchmarks/`` on ``PYTHONPATH``), graded from the recorded files.

The hand-checked episode: libero_spatial task 0 ("pick up the black bowl between the plate and the ramekin and place
it on the plate"), trial 0 (seed 0, initial state 0). Driven by an independent loop (LIBERO's env stepped directly
with the expert's actions, no rollbench episode runner), the gripper closed on the bowl's rim at steps 35-44, lifted
the bowl from z 0.898 m to 1.011 m, carried it 11.6 cm along x and let it go over the plate; LIBERO's own
``_check_success`` first held after action 97, with the bowl at (0.055, 0.205, 0.907) m resting on the plate at
(0.053, 0.205, 0.902) m. Real LIBERO on both stacks, no doubles."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rollbench
from rollbench.envs.libero import setup as libero_setup

REPO = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.sim,
    pytest.mark.slow,
    pytest.mark.skipif(libero_setup.missing() is not None, reason=f"LIBERO not installed: {libero_setup.missing()}"),
]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_libero_stacks", REPO / "benchmarks/bench_libero_stacks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("facts") / "facts.json"
    path.write_text(json.dumps(_bench().decode("libero_spatial", [0], range(1), 0)))
    return path


def _eval(env: str, facts: Path, out: Path) -> rollbench.GradeDocument:
    opts = json.dumps({"facts": str(facts), "base_seed": 0})
    cmd = [sys.executable, "-m", "rollbench", "eval", "--env", env, "--policy", "libero_bowl_expert:make"]
    cmd += ["--policy-options", opts, "--episodes", "1", "--out", str(out)]
    env_vars = {**os.environ, "PYTHONPATH": str(REPO / "benchmarks"), "MUJOCO_GL": "egl"}
    done = subprocess.run(cmd, env=env_vars, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return rollbench.grade(out)


def test_the_decoded_facts_name_the_bddl_goal_objects_and_the_bowl_on_the_table(facts: Path) -> None:
    entry = json.loads(facts.read_text())["tasks"]["libero_spatial/0"]
    assert (entry["pick"], entry["place"]) == ("akita_black_bowl_1", "plate_1")
    pick, place = entry["initial_states"]["0"]["pick"], entry["initial_states"]["0"]["place"]
    assert [round(v, 3) for v in pick] == [-0.063, 0.202, 0.898]  # read off the env's observation by hand
    assert [round(v, 3) for v in place] == [0.053, 0.205, 0.902]


def test_the_expert_solves_the_hand_checked_episode_in_process_at_the_step_the_independent_loop_saw(
    facts: Path, tmp_path: Path
) -> None:
    result = _eval("libero/libero_spatial/0", facts, tmp_path / "run")
    (ep,) = result.episodes
    assert (ep.seed, ep.initial_state, ep.success, ep.length) == (0, 0, True, 97)
    assert ep.termination_reason == "success"


@pytest.mark.venv
def test_the_expert_solves_it_on_the_reference_stack_from_a_process_whose_in_process_libero_set_its_config(
    facts: Path, tmp_path: Path
) -> None:
    """Decoding the facts ran LIBERO in this process, which points ``LIBERO_CONFIG_PATH`` at rpent-libero's config;
    the eval inherits it, and the libero_ref env host must still read its own package's files (it once failed with
    ``FileNotFoundError: Initialization states unavailable``)."""
    from rollbench.envs.libero.ref import FAMILY

    if FAMILY.missing() is not None:
        pytest.skip(str(FAMILY.missing()))
    assert "LIBERO_CONFIG_PATH" in os.environ  # the precondition the fixture's in-process decode creates
    result = _eval("libero_ref/libero_spatial/0", facts, tmp_path / "run")
    (ep,) = result.episodes
    assert (ep.seed, ep.initial_state, ep.success) == (0, 0, True)
