"""``rollbench sequential --min-coverage / --exclude-policy-errors``: the coverage rule's options (the names of
``grading/coverage.py`` and of compare/summarize) are recorded in each arm's run.json ``sequential`` block, and
``compare --sequential`` recomputes under them. Oracle: hand counts over the trials (``scripted/faulty`` fails at reset
on seeds with ``seed % 3 == 2``; the expert succeeds and ``zero`` fails on every other one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
def test_the_options_are_recorded_and_compare_sequential_recomputes_under_them(lowered):
    out, doc = lowered
    for arm in ("a", "b"):
        block = json.loads((out / f"{arm}-scripted_faulty" / "run.json").read_text())["sequential"]
        assert block["coverage_rule"] == {"min_coverage": 0.5, "exclude_policy_errors": True}
        assert block["decision"] == "b_better"
    again = compare_sequential([out])
    assert again["tasks"][0]["decision"] == doc["tasks"][0]["decision"] == "b_better"
    assert again["tasks"][0]["errors"] == doc["tasks"][0]["errors"]
    r = invoke(["compare", "--sequential", str(out), "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"][0]["errors"]["coverage_min"] == 0.5


def test_a_min_coverage_outside_0_1_is_refused_with_exit_2_and_one_line(tmp_path):
    r = invoke(_argv(tmp_path / "cmp", "--min-coverage", "1.5")[len(ROLLBENCH) :])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["error: --min-coverage must be between 0 and 1, got 1.5"]
    assert not (tmp_path / "cmp").exists()
