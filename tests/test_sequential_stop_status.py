"""A sequential arm stopped by its rule grades OK (issue 40, item 5) in ``grade``, ``rollbench runs`` and the
dashboard, while an episode the decision needed that is lost still makes it PARTIAL. The oracle: the deciding pair
read from the arm's own run.json and the planned budget, counted by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import grade
from rollbench.core.spec import build_spec
from rollbench.sequential.runner import SequentialConfig, run_sequential


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    out = tmp_path_factory.mktemp("seqstop") / "cmp"
    # seed 40: B is decided better at pair 13 (each pair is a round of both arms, each look grades both again)
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=40)
    b = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=0.0, episodes=1, seed=40)
    doc = run_sequential(a, b, out, SequentialConfig(delta=0.2, look_every=1))
    return out / "a-scripted_reach", out / "b-scripted_reach", doc["tasks"][0]


@pytest.mark.slow
def test_a_decided_arm_grades_ok_with_the_stop_as_its_reason_and_exit_0(arms: tuple[Path, Path, dict]) -> None:
    a_dir, b_dir, _ = arms
    log = json.loads((a_dir / "run.json").read_text())
    at, budget = log["sequential"]["stopped_at"], len(log["plan"]["episodes"])
    assert log["sequential"]["decision"] == "b_better" and at < budget
    for run_dir in (a_dir, b_dir):
        graded = grade(run_dir)
        assert graded.status == "OK"
        assert graded.reasons == [
            f"stopped by the sequential rule at pair {at}: B better ({budget - at} planned episodes after it were "
            "not needed)"
        ]
        r = invoke("grade", run_dir)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"stopped by the sequential rule at pair {at}: B better" in r.stdout


@pytest.mark.slow
def test_rollbench_runs_and_the_dashboard_list_a_decided_arm_as_ok(arms: tuple[Path, Path, dict]) -> None:
    a_dir, _, _ = arms
    for extra in ((), ("--grade",)):
        r = invoke("runs", a_dir.parent, "--json", *extra)
        assert r.returncode == 0, r.stderr
        rows = {row["run"]: row for row in json.loads(r.stdout)}
        assert rows[a_dir.name]["status"] == "OK"
    from rollbench.dashboard.catalog import Catalog
    from rollbench.dashboard.summary import run_summary

    records, pending = Catalog([a_dir.parent], sync_budget_s=600).records()
    assert pending == []
    status = {rec.run_dir.name: run_summary(rec)["status"] for rec in records}
    assert status[a_dir.name] == "OK"


@pytest.mark.slow
def test_an_episode_the_decision_needed_that_is_lost_keeps_the_arm_partial(
    arms: tuple[Path, Path, dict], tmp_path: Path
) -> None:
    a_dir, _, _ = arms
    copy = tmp_path / "arm"
    shutil.copytree(a_dir, copy)
    log = json.loads((copy / "run.json").read_text())
    at = log["sequential"]["stopped_at"]
    log["sequential"]["stopped_at"] = at + 2  # the decision claims two pairs more than were recorded: both lost
    (copy / "run.json").write_text(json.dumps(log))
    graded = grade(copy)
    assert graded.status == "PARTIAL"
    assert f"2 of {len(log['plan']['episodes'])} requested episodes are not recorded (episodes {at}, {at + 1})" in (
        graded.reasons
    )
    assert invoke("grade", copy).returncode == 1


@pytest.mark.slow
def test_a_decided_arms_run_json_stores_exactly_what_grade_json_prints(arms: tuple[Path, Path, dict]) -> None:
    """docs/runs.md: ``grade --json`` equals the ``results`` stored in run.json, for a decided arm too (its decision
    is recorded after its last episode was graded, and makes the episodes after the deciding pair not needed)."""
    for run_dir in arms[:2]:
        r = invoke("grade", run_dir, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        log = json.loads((run_dir / "run.json").read_text())
        assert log["results"] == json.loads(r.stdout)
        assert log["status"] == log["results"]["status"] == "OK"
