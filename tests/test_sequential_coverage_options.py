"""``rollbench sequential --min-coverage / --exclude-policy-errors``: the coverage rule's options (the names of
``grading/coverage.py`` and of compare/summarize) are recorded in each arm's run.json ``sequential`` block, and
``compare --sequential`` decides under the gate the user types (else the defaults), never the recorded one (hostile
round 15, F5). Oracle: hand counts over the trials (``scripted/faulty`` fails at reset
on seeds with ``seed % 3 == 2``; the expert succeeds and ``zero`` fails on every other one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollbench.grading.coverage import CoverageRule
from rollbench.sequential.recompute import compare_sequential
from sequential_support import ROLLBENCH, invoke


def _argv(out: Path, *extra: str) -> list[str]:
    return [
        *ROLLBENCH, "sequential", "--env", "scripted/faulty", "--policy-a", "zero", "--policy-b", "scripted-expert",
        "--delta", "0.2", "--budget", "12", "--out", str(out), "--json", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("cov") / "cmp"
    r = invoke(_argv(out, "--min-coverage", "0.5", "--exclude-policy-errors")[len(ROLLBENCH) :])
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


@pytest.mark.slow
def test_a_lower_min_coverage_lets_the_eight_scored_pairs_of_twelve_decide(lowered):
    out, doc = lowered
    task = doc["tasks"][0]
    log = json.loads((out / "a-scripted_faulty" / "run.json").read_text())
    trials = [e["trial"] for e in log["plan"]["episodes"]][: task["pairs_attempted"]]
    lost = [k for k in trials if k % 3 == 2]  # by hand: seed = 0 + trial
    assert [p["trial"] for p in task["errors"]["pairs_left_out"]] == lost
    assert task["errors"]["coverage_min"] == 0.5 and task["errors"]["exclude_policy_errors"] is True
    assert task["decision"] == "b_better"  # 2/3 coverage passes a 0.5 gate; at the default 0.95 it does not
    n = task["stopped_at"]
    assert task["outcomes"] == {"a": [0] * n, "b": [1] * n}
    attempted = trials.index([k for k in trials if k % 3 != 2][n - 1]) + 1
    cover = 1 - sum(k % 3 == 2 for k in trials[:attempted]) / attempted
    assert task["errors"]["coverage"] == {"a": pytest.approx(cover), "b": pytest.approx(cover)}
    assert 0.5 <= cover < 0.95


@pytest.mark.slow
def test_the_options_are_recorded_and_compare_sequential_decides_under_them_only_when_typed(lowered):
    out, doc = lowered
    for arm in ("a", "b"):
        block = json.loads((out / f"{arm}-scripted_faulty" / "run.json").read_text())["sequential"]
        assert block["coverage_rule"] == {"min_coverage": 0.5, "exclude_policy_errors": True}
        assert block["decision"] == "b_better"
    again = compare_sequential([out], CoverageRule(0.5, exclude_policy_errors=True))
    assert again["tasks"][0]["decision"] == doc["tasks"][0]["decision"] == "b_better"
    assert again["tasks"][0]["errors"] == doc["tasks"][0]["errors"]
    r = invoke(["compare", "--sequential", str(out), "--min-coverage", "0.5", "--exclude-policy-errors", "--json"])
    assert r.returncode == 0, r.stderr
    typed = json.loads(r.stdout)
    assert typed["tasks"][0]["decision"] == "b_better" and typed["tasks"][0]["errors"]["coverage_min"] == 0.5
    assert typed["coverage_rule_note"] is None and typed["log"]["agrees"] is True


def _hand_counts(out: Path) -> tuple[int, int, int, int]:
    """By hand from run.json and the episode rows: (episodes recorded per arm, pairs attempted up to the decision,
    pairs tested, environment errors per arm). Seed = trial; ``seed % 3 == 2`` fails at reset."""
    import pyarrow.parquet as pq

    arm = out / "a-scripted_faulty"
    log = json.loads((arm / "run.json").read_text())
    n = log["sequential"]["stopped_at"]
    recorded = sum(pq.read_table(f).num_rows for f in (arm / "meta" / "episodes").rglob("*.parquet"))
    trials = [e["trial"] for e in log["plan"]["episodes"]][:recorded]
    scored = [k % 3 != 2 for k in trials]
    to_decision = next(i + 1 for i in range(len(trials)) if sum(scored[: i + 1]) == n)  # the n-th scored pair
    return recorded, to_decision, n, sum(k % 3 == 2 for k in trials)


@pytest.mark.slow
def test_compare_sequential_gates_a_study_recorded_at_0_5_with_the_default_0_95_and_says_what_it_counts(lowered):
    out, _ = lowered
    recorded, attempted, tested, env = _hand_counts(out)
    assert (recorded, attempted, tested, env) == (11, 11, 7, 4)  # the plan's trials 11, 2, 8, 5 fail at reset
    cover = f"{tested / attempted:.1%}"
    for typed in ([], ["--min-coverage", "0.95"]):  # the default, or typed: never the arms' recorded 0.5
        r = invoke(["compare", "--sequential", str(out), *typed])
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        row = next(line for line in lines if line.startswith("│ scripted/faulty"))
        assert [c.strip() for c in row.strip("│").split("│")][:5] == [
            "scripted/faulty", "insufficient coverage (no verdict)", str(tested), str(attempted), str(tested),
        ]  # fmt: skip
        assert (
            f"scripted/faulty: {attempted} pairs attempted up to the decision: {tested} tested, {attempted - tested} "
            "left out (an error the rule does not score on either side). Episodes recorded A 11, B 11; errored by "
            f"fault (all {recorded} attempted pairs): A {env} environment; B {env} environment. Coverage (scored / "
            f"attempted): A {cover}, B {cover}; gate 95% (policy errors counted as failures)"
        ) in lines
        note = [line for line in lines if line.startswith("the arms' run.json record the coverage rule")]
        assert note == [
            "the arms' run.json record the coverage rule (min coverage 0.5, policy errors left out) their study ran "
            "under; this comparison applies min coverage 0.95, policy errors counted as failures (the --min-coverage "
            "/ --exclude-policy-errors given, else the defaults: a handed-over file never sets the gate), so its "
            "decisions may differ from the recorded ones"
        ]
    doc = json.loads(invoke(["compare", "--sequential", str(out), "--json"]).stdout)
    assert doc["coverage_rule"] == {"min_coverage": 0.95, "exclude_policy_errors": False}
    assert doc["recorded_coverage_rule"] == {"min_coverage": 0.5, "exclude_policy_errors": True}
    assert doc["coverage_rule_note"] == note[0]
    t = doc["tasks"][0]
    assert (t["decision"], t["stopped_at"], t["errors"]["coverage_min"]) == ("insufficient_coverage", tested, 0.95)
    assert doc["log"]["agrees"] is True  # the log is checked under the rule the study ran under


@pytest.mark.slow
def test_report_and_the_dashboard_decide_the_arms_under_their_own_gate_not_the_recorded_one(lowered, tmp_path):
    from rollbench.dashboard.service import sequential_of

    out, _ = lowered
    for typed, says, noted in (([], "insufficient coverage (no verdict)", True),
                               (["--min-coverage", "0.5", "--exclude-policy-errors"], "B better", False)):  # fmt: skip
        html = tmp_path / "r.html"
        r = invoke(["report", str(out), "--out", str(html), *typed])
        assert r.returncode == 0, r.stderr
        page = html.read_text()
        section = page[page.index("<h2>Sequential decisions</h2>") :]
        assert f"<td>scripted-expert</td><td>{says}</td>" in section
        assert ("the arms&#39; run.json record the coverage rule (min coverage 0.5" in page) is noted
        if not typed:  # the fixed-N comparison of the same arms, on the same gate, says the same
            fixed = page[page.index("<h2>Comparison</h2>") : page.index("<h2>Sequential decisions</h2>")]
            assert fixed.count(">insufficient coverage</td>") == 2 and "B better" not in fixed  # task and pooled
    shown = sequential_of(out / "a-scripted_faulty", "b-scripted_faulty")
    assert shown["task"]["decision"] == "insufficient_coverage" and shown["note"].startswith("the arms' run.json")


@pytest.mark.parametrize("option", [["--seed", "1"], ["--resamples", "500"], ["--unpaired"], ["--allow-damaged"]])
def test_compare_sequential_refuses_a_fixed_n_option_in_one_line_instead_of_ignoring_it(tmp_path, option):
    r = invoke(["compare", "--sequential", str(tmp_path), *option])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {option[0]} applies to a fixed-N comparison of runs; --sequential recomputes a sequential test (its "
        "coverage gate: --min-coverage, --exclude-policy-errors): drop it, or drop --sequential"
    ]


def test_compare_sequential_refuses_a_min_coverage_outside_0_1_in_one_line(tmp_path):
    r = invoke(["compare", "--sequential", str(tmp_path), "--min-coverage", "-0.1"])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["error: --min-coverage must be between 0 and 1, got -0.1"]


def test_a_min_coverage_outside_0_1_is_refused_with_exit_2_and_one_line(tmp_path):
    r = invoke(_argv(tmp_path / "cmp", "--min-coverage", "1.5")[len(ROLLBENCH) :])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["error: --min-coverage must be between 0 and 1, got 1.5"]
    assert not (tmp_path / "cmp").exists()
