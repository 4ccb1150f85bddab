"""Robustness studies (``rollbench robustness``): pairing, statistics against hand counts and scipy, refusals, and a
real LIBERO-PRO study whose perturbed episodes never run under the base prompt or base initial state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.stats import binomtest

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.analysis.robustness import robustness_study
from rollbench.analysis.sources import RunData
from rollbench.core.contracts import ConfigError
from rollbench.core.identity import RunIdentity
from rollbench.core.runlog_model import PerturbationRecord, Plan, PlannedEpisode, PlanTask, RunLog
from rollbench.core.spec import EvalSpec
from rollbench.envs.libero import setup as libero_setup


def _run(
    rows: list[tuple[str, int, bool, dict[str, Any] | None, bool]],
    horizons: dict[str, int] | None = None,
    faults: dict[int, str] | None = None,
) -> RunData:
    """A run of ``(task, trial, success, perturbation, errored)`` rows, as grade and run.json would give them (the
    planned episodes validated; the RunLog and Plan around them hold only them, their tasks (horizon 10 unless
    ``horizons`` says otherwise) and a spec, built unvalidated); ``faults``: episode_index -> its error's fault."""
    planned, episodes = [], []
    for i, (task, trial, success, pert, errored) in enumerate(rows):
        planned.append(
            PlannedEpisode(episode_index=i, task=task, trial=trial, seed=trial, initial_state=None, task_index=0,
                           instruction="do", max_steps=10, success_rule="any_step",
                           perturbation=PerturbationRecord(**pert) if pert else None)
        )  # fmt: skip
        episodes.append(
            AnalysisEpisode(episode_index=i, task=task, trial=trial, success=success,
                            termination_reason="error" if errored else ("success" if success else "max_steps"),
                            error_fault=(faults or {}).get(i))
        )  # fmt: skip
    tasks = [PlanTask.model_construct(name=t, max_steps=(horizons or {}).get(t, 10), success_rule="any_step",
                                      settle_steps=0) for t in dict.fromkeys(r[0] for r in rows)]  # fmt: skip
    log = RunLog.model_construct(
        plan=Plan.model_construct(episodes=planned, tasks=tasks),
        spec=EvalSpec(env="f/base/0", policy="p", episodes=1, image_size=(64, 64)),
    )
    return RunData(
        identity=RunIdentity("h", "r", "n"), source="test", policy="p", model="m", status="OK",
        episodes=episodes, log=log,
    )  # fmt: skip


def _pert(category: str, control: str | None, level: float | None = None) -> dict[str, Any]:
    return {"category": category, "level": level, "control": control, "detail": ""}


def test_study_pairs_trials_with_their_control_and_counts_match_hand_counts_and_scipy() -> None:
    control = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
    position = [1, 1, 1, 0, 0, 0, 0, 0, 1, 0]  # both 3, control only 5, perturbed only 1, neither 1
    language = [1, 1, 1, 1, 1, 1, 1, 1, 0, 1]  # both 8, perturbed only 1, neither 1
    rows: list[tuple[str, int, bool, dict[str, Any] | None, bool]] = []
    rows += [("f/base/0", k, bool(s), None, False) for k, s in enumerate(control)]
    rows += [("f/pos/0", k, bool(s), _pert("position", "f/base/0"), False) for k, s in enumerate(position)]
    rows += [("f/lan/0", k, bool(s), _pert("language", "f/base/0"), False) for k, s in enumerate(language)]
    rows += [("f/shift/0", k, k < 4, _pert("shift", "f/base/0", 0.1), False) for k in range(10)]
    rows += [("f/shift2/0", k, k < 1, _pert("shift", "f/base/0", 0.3), False) for k in range(10)]
    rows += [("f/orphan/0", 0, True, _pert("position", None), False)]  # names no control
    rows += [("f/pos/0", 10, True, _pert("position", "f/base/0"), False)]  # trial 10 has no control episode
    rows += [("f/base/0", 11, True, None, True), ("f/pos/0", 11, True, _pert("position", "f/base/0"), False)]
    study = robustness_study(_run(rows))
    assert study is not None
    pos, lan, shift = (study["categories"][c] for c in ("position", "language", "shift"))
    assert list(study["categories"]) == ["position", "language", "shift"]
    assert (pos["pairs"], pos["both"], pos["control_only"], pos["perturbed_only"], pos["neither"]) == (10, 3, 5, 1, 1)
    assert pos["control"]["successes"] == 8 and pos["perturbed"]["successes"] == 4
    assert pos["difference"] == pytest.approx(-0.4)
    assert pos["p_value"] == pytest.approx(binomtest(5, 6, 0.5).pvalue) == pytest.approx(0.21875)
    assert lan["p_value"] == 1.0 and lan["difference"] == pytest.approx(0.1)
    low, high = pos["difference_ci95"]
    assert low <= -0.4 <= high and low >= -1 and high <= 1
    # Holm over the three categories, by hand: sorted p, multiplied by 3, 2, 1, running maximum, capped at 1
    p = {c: b["p_value"] for c, b in study["categories"].items()}
    order = sorted(p, key=p.get)  # type: ignore[arg-type]
    adj, running = {}, 0.0
    for i, c in enumerate(order):
        running = max(running, min(1.0, (3 - i) * p[c]))
        adj[c] = running
    for c, b in study["categories"].items():
        assert b["p_holm"] == pytest.approx(adj[c])
    assert [lv["level"] for lv in shift["levels"]] == [0.1, 0.3]
    assert [lv["perturbed"]["successes"] for lv in shift["levels"]] == [4, 1]
    assert [lv["control"]["successes"] for lv in shift["levels"]] == [8, 8]
    assert shift["pairs"] == 20 and pos["levels"] == []
    assert study["unpaired"] == 2 and study["dropped_errors"] == 1


def test_a_run_without_perturbed_episodes_has_no_study() -> None:
    assert robustness_study(_run([("f/base/0", 0, True, None, False)])) is None


needs_libero = pytest.mark.skipif(libero_setup.missing() is not None, reason="LIBERO not installed")


@needs_libero
@pytest.mark.slow
def test_robustness_refuses_unperturbed_tasks_and_instruction_overrides_before_running(tmp_path: Path) -> None:
    from cli_in_process import invoke  # the refusals, in the test process

    r = invoke("robustness", "--env", "libero/libero_spatial/0", "--policy", "zero", "--out", tmp_path / "a")
    assert r.returncode == 2 and "libero/libero_spatial/0 is not perturbed" in r.stderr, r.stderr
    r = invoke(
        "robustness", "--env", "libero/libero_spatial_swap", "--policy", "zero", "--instruction", "pick it up",
        "--out", tmp_path / "b",
    )  # fmt: skip
    assert r.returncode == 2 and "--instruction" in r.stderr, r.stderr
    r = invoke("robustness", "--env", "libero/libero_spatial_task", "--policy", "zero", "--out", tmp_path / "c")
    assert r.returncode == 2 and "not run in-process" in r.stderr, r.stderr
    assert not any(tmp_path.iterdir())  # nothing was recorded


@needs_libero
@pytest.mark.sim
@pytest.mark.slow
def test_libero_pro_study_records_each_episode_category_and_never_runs_a_perturbed_scene_as_its_base(
    tmp_path: Path,
) -> None:
    """Two workers, a position and a language perturbation of libero_spatial task 0 and their shared control."""
    from conftest import run_cli

    run_dir = tmp_path / "study"
    r = run_cli(
        "robustness", "--env", "libero/libero_spatial_swap/0,libero/libero_spatial_lan/0", "--policy", "random",
        "--episodes", "2", "--max-steps", "3", "--workers", "2", "--out", run_dir, "--json", timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    study = json.loads(r.stdout)
    assert {c: b["pairs"] for c, b in study["categories"].items()} == {"position": 2, "language": 2}
    log = json.loads((run_dir / "run.json").read_text())
    eps = log["plan"]["episodes"]
    assert [e["task"] for e in eps] == ["libero/libero_spatial/0"] * 2 + ["libero/libero_spatial_swap/0"] * 2 + [
        "libero/libero_spatial_lan/0"
    ] * 2
    by = {(e["task"], e["trial"]): e for e in eps}
    for k in (0, 1):
        base, swap, lan = (
            by[(f"libero/{s}/0", k)] for s in ("libero_spatial", "libero_spatial_swap", "libero_spatial_lan")
        )
        assert "perturbation" not in base
        assert swap["perturbation"] == {"category": "position", "level": None, "control": "libero/libero_spatial/0",
                                        "detail": "libero_spatial_swap"}  # fmt: skip
        assert lan["perturbation"]["category"] == "language"
        assert swap["seed"] == base["seed"] == lan["seed"] and swap["initial_state"] == base["initial_state"] == k
        # the language perturbation is told its own (the BDDL's) instruction, never the base prompt
        lan_bddl = libero_setup.liberopro_dir() / "bddl_files" / "libero_spatial_lan"  # type: ignore[operator]
        paraphrase = next(lan_bddl.glob("pick_up_the_black_bowl_between_*.bddl")).read_text()
        assert lan["instruction"] != base["instruction"] and f"(:language {lan['instruction']})" in paraphrase
    # the repositioned scene starts from LIBERO-PRO's own initial state, not the base one: first recorded states differ
    table = pq.read_table(run_dir / "data").to_pydict()
    first = {int(i): np.asarray(s) for i, s, f in zip(table["episode_index"], table["observation.state"],
                                                      table["frame_index"], strict=True) if f == 0}  # fmt: skip
    idx = {(e["task"], e["trial"]): e["episode_index"] for e in eps}
    for k in (0, 1):
        assert not np.array_equal(
            first[idx[("libero/libero_spatial_swap/0", k)]], first[idx[("libero/libero_spatial/0", k)]]
        )
    # recomputed from disk: the same document, from the CLI and from the MCP server's tool
    from cli_in_process import invoke

    again = invoke("robustness", run_dir, "--json")  # in the test process: the document it prints
    assert again.returncode == 0 and json.loads(again.stdout) == study
    from rollbench.mcp.server import RolloutService

    assert RolloutService(tmp_path).robustness("study") == study


def test_a_control_recorded_under_another_horizon_than_its_perturbed_task_is_refused_naming_both() -> None:
    rows: list[tuple[str, int, bool, dict[str, Any] | None, bool]] = []
    rows += [("f/base/0", k, True, None, False) for k in range(4)]
    rows += [("f/pos/0", k, False, _pert("position", "f/base/0"), False) for k in range(4)]
    with pytest.raises(ConfigError) as err:
        robustness_study(_run(rows, horizons={"f/pos/0": 30}))
    assert "horizon differs (tasks f/base/0 and f/pos/0: control has 10, perturbed has 30)" in str(err.value)
    assert robustness_study(_run(rows)) is not None  # the same rows under one horizon: a study


def test_environment_errors_leave_the_pair_and_withhold_the_verdict_policy_errors_count_as_failures() -> None:
    """The coverage rule (docs/analysis.md, "Errors and coverage") on a study, counted by hand: 20 trials; the
    perturbed env fails on trials 0-3 (environment), the policy raises on trial 4 (policy); the control succeeds on
    every trial and the perturbed episodes on none that ran."""
    rows: list[tuple[str, int, bool, dict[str, Any] | None, bool]] = []
    rows += [("f/base/0", k, True, None, False) for k in range(20)]
    rows += [("f/pos/0", k, False, _pert("position", "f/base/0"), k < 5) for k in range(20)]
    run = _run(rows, faults={20 + k: "environment" if k < 4 else "policy" for k in range(5)})  # the errored trials
    study = robustness_study(run)
    assert study is not None
    pos = study["categories"]["position"]
    assert (pos["pairs"], pos["control_only"], pos["perturbed_only"]) == (16, 16, 0)  # trial 4 stays: a failure
    assert pos["pairs_dropped_by_reason"] == {"B environment": 4} and study["dropped_errors"] == 4
    assert pos["coverage"]["perturbed"]["scored"] == 16 and pos["coverage"]["perturbed"]["attempted"] == 20
    assert "perturbed: 1 policy error counted as failures" in pos["error_notes"]
    assert pos["p_value"] == pytest.approx(binomtest(16, 16, 0.5).pvalue)  # decisive, yet coverage is 80%
    assert pos["verdict"] == "insufficient_coverage"


def test_the_coverage_options_set_the_studys_bound_and_leave_policy_errors_out() -> None:
    """The same hand-counted study as above under --min-coverage 0.8 --exclude-policy-errors: trial 4 (a policy
    error) leaves the pairs too (15 pairs, all control only), the perturbed arm scores 15 of 20 (75% < 80%): still
    no verdict; at --min-coverage 0.75 the exact McNemar p = 2 / 2^15 decides: control better."""
    from rollbench.grading.coverage import CoverageRule

    rows: list[tuple[str, int, bool, dict[str, Any] | None, bool]] = []
    rows += [("f/base/0", k, True, None, False) for k in range(20)]
    rows += [("f/pos/0", k, False, _pert("position", "f/base/0"), k < 5) for k in range(20)]
    run = _run(rows, faults={20 + k: "environment" if k < 4 else "policy" for k in range(5)})  # the errored trials
    strict = robustness_study(run, CoverageRule(min_coverage=0.8, exclude_policy_errors=True))
    assert strict is not None and strict["coverage_rule"] == {"min_coverage": 0.8, "exclude_policy_errors": True}
    pos = strict["categories"]["position"]
    assert (pos["pairs"], pos["control_only"], pos["perturbed_only"], strict["dropped_errors"]) == (15, 15, 0, 5)
    assert pos["pairs_dropped_by_reason"] == {"B environment": 4, "B policy": 1}
    assert pos["coverage"]["perturbed"]["scored"] == 15 and pos["verdict"] == "insufficient_coverage"
    loose = robustness_study(run, CoverageRule(min_coverage=0.75, exclude_policy_errors=True))
    assert loose is not None
    pos = loose["categories"]["position"]
    assert pos["p_value"] == 2 / 2**15 and pos["verdict"] == "a_better"


def test_robustness_and_its_mcp_tool_take_the_coverage_options_with_their_bounds(tmp_path: Path) -> None:
    import anyio

    from cli_in_process import invoke
    from rollbench.mcp.server import build_server

    r = invoke("robustness", tmp_path / "nowhere", "--min-coverage", "1.5")
    assert r.returncode == 2 and r.stderr.strip().endswith("--min-coverage must be between 0 and 1, got 1.5")
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tool,) = [t for t in anyio.run(build_server(tmp_path).list_tools) if t.name == "robustness_study"]
    props = tool.input_schema["properties"]
    assert (props["min_coverage"]["minimum"], props["min_coverage"]["maximum"], props["min_coverage"]["default"]) == (
        0,
        1,
        0.95,
    )
    assert props["exclude_policy_errors"]["default"] is False
