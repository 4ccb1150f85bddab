"""Scenes as the unit in ``summarize`` and ``robustness`` (issue 40, item 6), on constructed episode rows (the
analysis functions are unit-tested on rows as grade gives them): the one-sample cluster bootstrap against an
independent numpy loop with the same seed, the Wilson interval kept exactly (statsmodels) when no scene repeats, and
robustness's scene-level sign-flip p against a hand enumeration."""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.analysis.sources import Loaded, RunData
from rollbench.analysis.summarize import summarize_runs
from rollbench.cli.analysis_view import print_summary
from rollbench.core.identity import RunIdentity
from rollbench.core.runlog_model import PerturbationRecord, PlannedEpisode
from rollbench.grading.robustness import robustness_study
from rollbench.grading.scenes import cluster_bootstrap_rate


def _loop_interval(rows: list[tuple[str, Any, int]], n_resamples: int, seed: int) -> tuple[float, float]:
    """Independent oracle: ``(task, scene, outcome)`` rows; per task (sorted), draw that task's scenes (first-seen
    order) with replacement from PCG64(seed), and add up each drawn scene's episodes by a plain loop."""
    rng = np.random.Generator(np.random.PCG64(seed))
    wins, total = [0] * n_resamples, [0] * n_resamples
    for task in sorted({t for t, _, _ in rows}):
        scenes: list[Any] = []
        for t, s, _ in rows:
            if t == task and (t, s) not in scenes:
                scenes.append((t, s))
        draws = rng.integers(0, len(scenes), size=(n_resamples, len(scenes)))
        for r in range(n_resamples):
            for j in draws[r]:
                for t, s, y in rows:
                    if (t, s) == scenes[j]:
                        wins[r] += y
                        total[r] += 1
    rates = np.array(wins) / np.array(total)
    low, high = np.quantile(rates, [0.025, 0.975])
    return float(low), float(high)


def test_one_sample_cluster_bootstrap_equals_an_independent_loop_with_the_same_seed() -> None:
    rows = [("t1", k % 3, int(k % 3 != 0 or k == 3)) for k in range(9)] + [("t2", k % 2, k % 2) for k in range(6)]
    low, high = cluster_bootstrap_rate(
        [y for _, _, y in rows], [(t, s) for t, s, _ in rows], strata=[t for t, _, _ in rows], n_resamples=400, seed=5
    )
    assert (low, high) == pytest.approx(_loop_interval(rows, 400, 5), abs=1e-12)


def _run(name: str, outcomes: list[int], states: list[int | None]) -> RunData:
    episodes = [
        AnalysisEpisode(episode_index=i, task="t", seed=i, initial_state=s, instruction=None, success=bool(ok),
                        termination_reason="success" if ok else "max_steps", error_fault=None)
        for i, (ok, s) in enumerate(zip(outcomes, states, strict=True))
    ]  # fmt: skip
    return RunData(RunIdentity("h", "r", name), name, name, name, "OK", episodes)


def test_summarize_resamples_scenes_when_a_cell_repeats_an_initial_state_and_says_so() -> None:
    states = [k % 4 for k in range(12)]  # 12 episodes over 4 stored initial states
    outcomes = [int(s < 2 or k == 3) for k, s in enumerate(states)]
    doc = summarize_runs(Loaded([_run("a", outcomes, list(states))], []))
    cell = doc["cells"][0]
    assert (cell["unit"], cell["scenes"], cell["successes"], cell["scored"]) == ("scene", 4, 7, 12)
    oracle = _loop_interval([("t", s, y) for s, y in zip(states, outcomes, strict=True)], 10_000, 0)
    assert (cell["ci95_low"], cell["ci95_high"]) == pytest.approx(oracle, abs=1e-12)
    assert cell["interval"].startswith("cluster bootstrap over scenes")
    out = Console(file=io.StringIO(), width=200)
    print_summary(out, doc)
    assert "1 of 1 cell(s) repeat a scene (task x initial state)" in out.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("states", [list(range(12)), [None] * 12])
def test_summarize_keeps_the_wilson_interval_exactly_when_no_scene_repeats(states: list[int | None]) -> None:
    outcomes = [1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1]
    cell = summarize_runs(Loaded([_run("a", outcomes, states)], []))["cells"][0]
    low, high = proportion_confint(8, 12, alpha=0.05, method="wilson")
    assert (cell["unit"], cell["scenes"], cell["interval"]) == ("episode", None, "Wilson")
    assert (cell["ci95_low"], cell["ci95_high"]) == pytest.approx((low, high), abs=1e-9)


def _study(states: list[int]) -> dict[str, Any]:
    """Control ``f/base/0`` succeeds on every trial; the perturbed ``f/pos/0`` fails 4 trials of scene 0, 2 of
    scene 1, 1 of scene 2 (12 trials, initial state = ``states[k]``)."""
    fails = {0: 4, 1: 2, 2: 1}
    seen: dict[int, int] = {}
    planned, episodes = [], []
    for k, s in enumerate(states):
        seen[s] = seen.get(s, 0) + 1
        for task, ok, pert in (("f/base/0", True, None), ("f/pos/0", seen[s] > fails.get(s, 0), "f/base/0")):
            i = len(episodes)
            record = PerturbationRecord(category="position", level=None, control=pert, detail="") if pert else None
            planned.append(
                PlannedEpisode(episode_index=i, task=task, trial=k, seed=k, initial_state=s, task_index=0,
                               instruction="do", max_steps=10, success_rule="any_step", perturbation=record)
            )  # fmt: skip
            episodes.append(AnalysisEpisode(episode_index=i, task=task, trial=k, initial_state=s, success=ok,
                                            termination_reason="success" if ok else "max_steps"))  # fmt: skip
    study = robustness_study(planned, episodes)
    assert study is not None
    return study


def test_robustness_uses_the_scene_sign_flip_test_when_trials_repeat_an_initial_state() -> None:
    block = _study([k % 3 for k in range(12)])["categories"]["position"]
    assert (block["unit"], block["scenes"], block["pairs"], block["control_only"]) == ("scene", 3, 12, 7)
    diffs = [-4 / 4, -2 / 4, -1 / 4]  # perturbed - control per scene, by hand
    hits = sum(abs(sum(e * d for e, d in zip(signs, diffs, strict=True))) >= 1.75 - 1e-12
               for signs in itertools.product((1, -1), repeat=3))  # fmt: skip
    assert block["p_value"] == hits / 8 == 2 / 8  # only all signs kept or all flipped
    assert block["test"] == "sign-flip over scenes, exact"


def test_robustness_keeps_mcnemar_over_pairs_when_no_scene_repeats() -> None:
    block = _study(list(range(12)))["categories"]["position"]  # one trial per state: scenes 0-2 each fail once
    assert (block["unit"], block["scenes"], block["control_only"], block["perturbed_only"]) == ("pair", None, 3, 0)
    assert block["p_value"] == pytest.approx(binomtest(0, 3, 0.5).pvalue) and block["test"].startswith("exact McNemar")


def test_summarize_pools_two_recorded_reach_init_runs_over_the_same_initial_states_by_scene(tmp_path: Path) -> None:
    """Real scripted runs: two runs of one policy on scripted/reach-init (stored initial states 0-4 each) share a
    cell, so each scene holds two episodes and the interval resamples scenes."""
    from rollbench.analysis.sources import load_runs
    from rollbench.api import evaluate

    for name in ("r1", "r2"):
        evaluate(env="scripted/reach-init", policy="scripted-expert", episodes=5, seed=0, action_noise=0.6,
                 max_steps=8, out=tmp_path / name)  # fmt: skip
    loaded = load_runs([tmp_path / "r1", tmp_path / "r2"])
    cell = summarize_runs(loaded)["cells"][0]
    assert (cell["unit"], cell["scenes"], cell["scored"]) == ("scene", 5, 10)
    rows = [(ep.task, ep.initial_state, int(ep.success)) for r in loaded.runs for ep in r.episodes]
    assert sorted(s for _, s, _ in rows) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert (cell["ci95_low"], cell["ci95_high"]) == pytest.approx(_loop_interval(rows, 10_000, 0), abs=1e-12)
