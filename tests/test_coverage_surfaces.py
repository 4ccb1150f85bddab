"""The coverage rule on the surfaces that report rates and comparisons: compare and summarize on real scripted runs
whose env or policy fails on known seeds (hand counts of those seeds are the oracle), and a seeded simulation in which
one arm's infrastructure drops never produce a verdict."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from cli_in_process import invoke
from rollbench.analysis.compare import compare_runs
from rollbench.analysis.sources import load_runs
from rollbench.analysis.summarize import summarize_runs
from rollbench.api import evaluate
from rollbench.grading.coverage import CoverageRule, Outcome, coverage_gate, pair, tally, verdict
from rollbench.grading.stats import mcnemar_exact

FAULTY_SEEDS = [s for s in range(12) if s % 3 == 2]  # scripted/faulty fails at reset on these: 2, 5, 8, 11


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("faulty")
    for name, policy in (("expert", "scripted-expert"), ("zero", "zero")):
        evaluate(env="scripted/faulty", policy=policy, episodes=12, seed=0, out=root / name)
    return root / "expert", root / "zero"


def test_compare_on_faulty_runs_names_the_environment_errors_compares_the_pairs_that_ran_and_withholds_a_verdict(
    faulty: tuple[Path, Path],
) -> None:
    r = invoke("compare", *faulty, "--json")
    assert r.returncode == 0, r.stderr
    pooled = json.loads(r.stdout)["comparisons"][0]["pooled"]
    assert len(FAULTY_SEEDS) == 4
    for arm in ("a", "b"):
        assert pooled["coverage"][arm]["attempted"] == 12
        assert pooled["coverage"][arm]["scored"] == 8
        assert pooled["coverage"][arm]["errored"] == {"policy": 0, "environment": 4, "infrastructure": 0}
        assert pooled["coverage"][arm]["excluded"] == {"environment": 4}
    assert pooled["pairs"] == 8 and pooled["pairs_dropped"] == 4
    assert (pooled["a"]["successes"], pooled["a"]["episodes"]) == (8, 8)  # the expert on the 8 episodes that ran
    assert (pooled["b"]["successes"], pooled["b"]["episodes"]) == (0, 8)
    assert (pooled["a_only"], pooled["b_only"]) == (8, 0)
    assert pooled["p_value"] == pytest.approx(binomtest(8, 8, 0.5).pvalue)  # 2 / 2^8 = 0.0078125
    assert pooled["verdict"] == "insufficient_coverage"
    assert "A scored 8 of 12 attempted episodes (66.7%)" in pooled["coverage_gate"]
    text = invoke("compare", *faulty).stdout
    assert "A: 4 environment errors left out (not scored)" in text
    assert "B: 4 environment errors left out (not scored)" in text
    assert "pairs compared: 8; not pairs: 4" in text
    assert "verdict: insufficient coverage: A scored 8 of 12" in text
    assert "A better" not in text


def test_a_lower_coverage_bound_lets_the_same_comparison_decide(faulty: tuple[Path, Path]) -> None:
    doc = compare_runs(load_runs(list(faulty)).runs, rule=CoverageRule(min_coverage=0.6))
    assert doc["comparisons"][0]["pooled"]["verdict"] == "a_better"  # 8 of 8 pairs A only, p 0.0078 <= 0.05
    r = invoke("compare", *faulty, "--min-coverage", "1.5")
    assert (r.returncode, r.stderr) == (2, "error: --min-coverage must be between 0 and 1, got 1.5\n")


def test_summarize_rates_count_only_the_scored_episodes(faulty: tuple[Path, Path]) -> None:
    doc = summarize_runs(load_runs(list(faulty)))
    cells = {c["model"]: c for c in doc["cells"]}
    expert = cells["scripted-expert"]
    assert (expert["episodes"], expert["errored"], expert["scored"], expert["successes"]) == (12, 4, 8, 8)
    assert expert["success_rate"] == 1.0 and expert["coverage"] == 8 / 12
    assert expert["errored_by_fault"] == {"policy": 0, "environment": 4, "infrastructure": 0}
    assert cells["zero"]["success_rate"] == 0.0


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A: the scripted expert, 20 episodes. B: the same expert whose server is unreachable on seeds 0-5
    (infrastructure) and which raises its own bug on seeds 6-8 (policy). C: B without the policy bug."""
    root = tmp_path_factory.mktemp("dropped")
    flag = root / "server-down"
    flag.write_text("")
    evaluate(env="scripted/reach", policy="scripted-expert", episodes=20, out=root / "a")
    opts = {"infra_seeds": list(range(6)), "policy_seeds": [6, 7, 8], "while_exists": str(flag)}
    evaluate(env="scripted/reach", policy="fault_policies:fail_on_seeds", episodes=20, out=root / "b",
             policy_options=opts)  # fmt: skip
    evaluate(env="scripted/reach", policy="fault_policies:fail_on_seeds", episodes=20, out=root / "c",
             policy_options={**opts, "policy_seeds": []})  # fmt: skip
    return root / "a", root / "b", root / "c"


@pytest.mark.slow
def test_one_arms_infrastructure_drops_never_make_the_other_better(dropped: tuple[Path, Path, Path]) -> None:
    a, _, c = dropped
    pooled = compare_runs(load_runs([a, c]).runs)["comparisons"][0]["pooled"]
    # by hand: C drops seeds 0-5; the 14 pairs left are the expert against itself: both succeed, no discordant pair
    assert pooled["coverage"]["b"]["excluded"] == {"infrastructure": 6}
    assert (pooled["pairs"], pooled["a_only"], pooled["b_only"], pooled["p_value"]) == (14, 0, 0, 1.0)
    assert pooled["verdict"] == "insufficient_coverage"
    loose = compare_runs(load_runs([a, c]).runs, rule=CoverageRule(min_coverage=0.0))
    assert loose["comparisons"][0]["pooled"]["verdict"] == "no_significant_difference"


@pytest.mark.slow
def test_policy_errors_count_as_failures_and_are_named_unless_excluded(dropped: tuple[Path, Path, Path]) -> None:
    a, b, _ = dropped
    doc = compare_runs(load_runs([a, b]).runs, rule=CoverageRule(min_coverage=0.0))
    pooled = doc["comparisons"][0]["pooled"]
    # by hand: 20 - 6 infrastructure = 14 pairs; B fails its 3 policy-bug seeds, A succeeds everywhere
    assert "B: 3 policy errors counted as failures" in pooled["error_notes"]
    assert (pooled["pairs"], pooled["a_only"], pooled["b_only"]) == (14, 3, 0)
    assert pooled["coverage"]["b"]["scored"] == 14 and pooled["coverage"]["b"]["policy_errors_as_failures"] == 3
    excluded = compare_runs(load_runs([a, b]).runs, rule=CoverageRule(min_coverage=0.0, exclude_policy_errors=True))
    p2 = excluded["comparisons"][0]["pooled"]
    assert (p2["pairs"], p2["a_only"], p2["coverage"]["b"]["excluded"]) == (11, 0, {"policy": 3, "infrastructure": 6})
    r = invoke("compare", a, b, "--exclude-policy-errors", "--json")
    assert json.loads(r.stdout)["comparisons"][0]["pooled"]["pairs"] == 11


def _verdict(xa: np.ndarray, xb: np.ndarray, drop: set[int]) -> str:
    """The coverage rule's verdict when B's server dropped the episodes ``drop`` (infrastructure errors)."""
    oa = [Outcome(bool(v)) for v in xa]
    ob = [Outcome(False, "infrastructure") if i in drop else Outcome(bool(v)) for i, v in enumerate(xb)]
    pairs = pair(oa, ob)
    mc = mcnemar_exact(pairs.a, pairs.b)
    gate = coverage_gate(tally(oa), tally(ob))
    return verdict(mc.p_value, float(pairs.b.mean() - pairs.a.mean()) if pairs.n else None, gate=gate)


def _old_rule_says_better(xa: np.ndarray, xb: np.ndarray, drop: set[int]) -> bool:
    """The rule before issue 40, computed here with scipy: a dropped episode is a failure, McNemar at 0.05."""
    b = np.array([bool(v) and i not in drop for i, v in enumerate(xb)])
    a_only, b_only = int(np.sum(xa & ~b)), int(np.sum(~xa & b))
    return a_only + b_only > 0 and binomtest(a_only, a_only + b_only, 0.5).pvalue <= 0.05


SIMS, N = 1000, 100


@pytest.mark.parametrize("drops", [0, 2, 5])
@pytest.mark.slow
def test_seeded_simulation_random_drops_within_the_bound_keep_false_verdicts_at_alpha(drops: int) -> None:
    """Two equal policies (success 0.5, independent), 100 pairs, B's server drops ``drops`` episodes at random
    (coverage >= 0.95, so a verdict is allowed): false "better" verdicts stay at most alpha 0.05 (plus 3 standard
    errors of 1,000 simulations)."""
    rng = np.random.default_rng(40 + drops)
    false = 0
    for _ in range(SIMS):
        xa, xb = rng.random(N) < 0.5, rng.random(N) < 0.5
        drop = set(rng.choice(N, size=drops, replace=False).tolist())
        false += _verdict(xa, xb, drop) in ("a_better", "b_better")
    assert false / SIMS <= 0.05 + 3 * (0.05 * 0.95 / SIMS) ** 0.5


@pytest.mark.parametrize("drops", [6, 15, 30])
def test_seeded_simulation_drops_beyond_the_bound_never_give_a_verdict_even_aimed_at_bs_wins(drops: int) -> None:
    """The worst case: B's server drops exactly episodes B would have won against A. Beyond 5 of 100 (coverage
    below 0.95) the verdict is always "insufficient coverage"; the old rule (a drop is a failure) says "A better"
    from the drops alone in most simulations at 30 drops."""
    rng = np.random.default_rng(400 + drops)
    verdicts: Counter[str] = Counter()
    old = 0
    for _ in range(SIMS // 4):
        xa, xb = rng.random(N) < 0.5, rng.random(N) < 0.5
        won = np.flatnonzero(xb & ~xa)
        drop = set(rng.choice(won, size=min(drops, won.size), replace=False).tolist())
        verdicts[_verdict(xa, xb, drop)] += 1
        old += _old_rule_says_better(xa, xb, drop)
    assert verdicts == {"insufficient_coverage": SIMS // 4}
    if drops == 30:
        assert old / (SIMS // 4) > 0.9


def test_grade_keeps_its_rate_and_adds_the_scored_rate_of_the_coverage_rule(faulty: tuple[Path, Path]) -> None:
    from rollbench.api import grade

    task = grade(faulty[0]).tasks["scripted/faulty"]
    assert (task.episodes, task.successes, task.success_rate) == (12, 8, 8 / 12)  # errors as failures
    assert (task.scored, task.coverage, task.scored_success_rate) == (8, 8 / 12, 1.0)
    assert (task.excluded, task.policy_errors_as_failures) == ({"environment": 4}, 0)
    r = invoke("grade", faulty[0])
    assert "scored (coverage rule): 8 of 12 episodes (66.7% coverage; left out: 4 environment" in r.stdout


def test_runs_says_its_rate_counts_errors_as_failures_and_shows_the_scored_rate(faulty: tuple[Path, Path]) -> None:
    r = invoke("runs", faulty[0].parent, "--json")
    rows = {row["run"]: row for row in json.loads(r.stdout)}
    expert = rows[faulty[0].name]  # hand count: seeds 2, 5, 8, 11 fail at reset; the expert wins the other 8
    assert (expert["success_rate"], expert["scored"], expert["scored_success_rate"]) == (8 / 12, 8, 1.0)
    text = invoke("runs", faulty[0].parent).stdout
    assert (
        f"{faulty[0].name}: success rate above counts errors as failures; scored (coverage rule): 8 of 12 episodes, "
        "success rate 100.0%"
    ) in " ".join(text.split())


def test_the_dashboards_runs_list_shows_the_scored_rate_and_coverage_in_grades_words(
    faulty: tuple[Path, Path], tmp_path: Path
) -> None:
    """Hand count: the expert succeeds on the 8 seeds that ran, the zero policy on none; 4 environment errors each."""
    from rollbench.dashboard.catalog import Catalog
    from rollbench.dashboard.pages import runs_page
    from rollbench.dashboard.summary import run_summary

    records, pending = Catalog([faulty[0].parent], cache_dir=tmp_path / "cache").records()
    rows = {r["name"]: r for r in map(run_summary, records)}
    assert pending == [] and set(rows) == {"expert", "zero"}
    expert, zero = rows["expert"], rows["zero"]
    assert (expert["scored"], expert["coverage"], expert["scored_success_rate"]) == (8, 8 / 12, 1.0)
    assert (zero["scored"], zero["coverage"], zero["scored_success_rate"]) == (8, 8 / 12, 0.0)
    assert expert["excluded"] == zero["excluded"] == {"environment": 4}
    z2 = 1.959964**2  # Wilson's interval for 8 of 8 in closed form: [n / (n + z²), 1]
    assert expert["scored_ci95_low"] == pytest.approx(8 / (8 + z2)) and expert["scored_ci95_high"] == 1.0
    assert expert["success_rate"] == 8 / 12  # grade's rate over every recorded episode stays in the JSON
    doc = {"runs": [{**r, "labeled": 0, "disagreements": 0} for r in rows.values()], "hosts": []}
    page = runs_page({**doc, "generated_at": "now", "rubric": {"id": "outcome-v1"}})
    assert "success rate, scored [95% CI]" in page
    words = "scored (coverage rule): 8 of 12 episodes (66.7% coverage; left out: 4 environment; policy errors"
    assert page.count(words) == 2 and ">100.0% <small>" in page and "66.7%" in page
