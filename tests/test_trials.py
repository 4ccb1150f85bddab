"""``--first-trial K --episodes N`` runs trials K..K+N-1 of a plan alone, each with the seed and initial state it has in
the full run, for every kind of task: stored initial states (``scripted/reach-init``, the LIBERO stand-in), seeded
scenes (``scripted/reach``) and gymnasium's own seeding (``gym:fault_envs:RollbenchPoint-v0``). Real envs, the
``random`` policy (its stream is keyed by the seed too), real recording."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke  # the commands in the test process: what they refuse, write and print
from rollbench.api import evaluate

TASKS = "scripted/reach-init,scripted/reach,gym:fault_envs:RollbenchPoint-v0"
TESTS = Path(__file__).resolve().parent


def episode_rows(run_dir: Path, e: int) -> dict[str, np.ndarray]:
    t = pq.read_table(run_dir / f"data/chunk-000/file-{e:03d}.parquet")
    return {c: np.asarray(t[c].to_pylist()) for c in ("observation.state", "action", "next.reward", "next.success")}


def test_trials_k_to_m_run_alone_equal_the_same_trials_of_the_full_run(tmp_path: Path) -> None:
    full = evaluate(env=TASKS, policy="random", episodes=6, max_steps=8, seed=40, out=tmp_path / "full")
    part = evaluate(env=TASKS, policy="random", episodes=2, max_steps=8, seed=40, first_trial=3, out=tmp_path / "part")
    keys = ("task", "trial", "seed", "initial_state", "length", "return", "termination_reason")
    by_trial = {(e.task, e.trial): e for e in full.episodes}
    assert [e.episode_index for e in part.episodes] == list(range(6))  # indices of this run: 0..N-1
    assert [(e.trial, e.seed) for e in part.episodes[:2]] == [(3, 43), (4, 44)]
    assert [e.initial_state for e in part.episodes] == [3, 4, None, None, None, None]
    for e in part.episodes:
        f = by_trial[(e.task, e.trial)]
        assert [e.to_json()[k] for k in keys] == [f.to_json()[k] for k in keys]
        mine, theirs = (
            episode_rows(tmp_path / "part", e.episode_index),
            episode_rows(tmp_path / "full", f.episode_index),
        )
        for col in mine:
            np.testing.assert_array_equal(mine[col], theirs[col], err_msg=f"{e.task} trial {e.trial} {col}")
    assert part.status == "OK"
    assert json.loads((tmp_path / "part" / "run.json").read_text())["spec"]["first_trial"] == 3


@pytest.mark.slow
def test_first_trial_beyond_the_stored_initial_states_is_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "r"
    ok = invoke("eval", "--env", "scripted/reach-init", "--policy", "zero", "--first-trial", "7", "--episodes", "3",
                 "--max-steps", "2", "--out", out, "--json")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert [e["initial_state"] for e in json.loads(ok.stdout)["episodes"]] == [7, 8, 9]
    bad = invoke("eval", "--env", "scripted/reach-init", "--policy", "zero", "--first-trial", "8", "--episodes", "3",
                  "--out", tmp_path / "bad")  # fmt: skip
    assert bad.returncode == 2
    assert (
        "scripted/reach-init has 10 stored initial states; --episodes 3 from --first-trial 8 would need more "
        "(trials up to 10; trial k starts from initial state k)" in bad.stderr.replace("\n", "")
    )
    assert not (tmp_path / "bad").exists()
