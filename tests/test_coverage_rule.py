"""The coverage rule (rollbench.grading.coverage): which episodes are scored, which are left out and why, the pairs a
paired test may use and the coverage gate. Oracles: counts written out by hand for each small input."""

from __future__ import annotations

import pytest

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.core.contracts import ConfigError
from rollbench.grading.coverage import (
    INSUFFICIENT_COVERAGE,
    CoverageRule,
    Outcome,
    coverage_gate,
    gated_decision,
    merge,
    outcome_of,
    pair,
    tally,
    verdict,
)

OK, FAIL = Outcome(True), Outcome(False)
POLICY, ENV, INFRA = Outcome(False, "policy"), Outcome(False, "environment"), Outcome(False, "infrastructure")


def test_environment_and_infrastructure_errors_are_left_out_and_policy_errors_count_as_failures() -> None:
    arm = tally([OK, OK, FAIL, POLICY, POLICY, ENV, INFRA, INFRA])
    # by hand: 8 attempted; scored = OK, OK, FAIL, POLICY, POLICY = 5, of which 2 successes
    assert (arm.attempted, arm.scored, arm.successes) == (8, 5, 2)
    assert arm.errored == {"policy": 2, "environment": 1, "infrastructure": 2}
    assert arm.excluded == {"environment": 1, "infrastructure": 2}
    assert arm.policy_errors_as_failures == 2
    assert arm.coverage == 5 / 8 and arm.success_rate == 2 / 5
    assert arm.notes("B") == [
        "B: 2 policy errors counted as failures",
        "B: 1 environment error left out (not scored)",
        "B: 2 infrastructure errors left out (not scored)",
    ]


def test_exclude_policy_errors_leaves_policy_errors_out_too() -> None:
    arm = tally([OK, FAIL, POLICY, POLICY, ENV], CoverageRule(exclude_policy_errors=True))
    assert (arm.attempted, arm.scored, arm.successes, arm.policy_errors_as_failures) == (5, 2, 1, 0)
    assert arm.excluded == {"policy": 2, "environment": 1}


def test_unclassified_and_unrecorded_episodes_are_attempted_but_not_scored() -> None:
    rows = [
        AnalysisEpisode(0, "t", success=True, termination_reason="success"),
        AnalysisEpisode(1, "t", success=False, termination_reason="error", error_fault="unclassified"),
        AnalysisEpisode(2, "t", success=False, termination_reason="error"),
        AnalysisEpisode(3, "t", success=False, termination_reason="error", error_fault="policy"),
    ]
    arm = tally([outcome_of(r) for r in rows], not_recorded=2)
    assert (arm.attempted, arm.scored, arm.successes) == (6, 2, 1)
    assert arm.excluded == {"unclassified": 2, "not_recorded": 2}
    assert arm.to_dict()["coverage"] == 2 / 6


def test_merge_sums_the_counts_of_tasks() -> None:
    pooled = merge([tally([OK, ENV]), tally([POLICY, OK, OK])])
    assert (pooled.attempted, pooled.scored, pooled.successes, pooled.policy_errors_as_failures) == (5, 4, 3, 1)
    assert pooled.excluded == {"environment": 1}


def test_a_pair_with_an_excluded_episode_on_either_side_is_not_a_pair() -> None:
    a = [OK, ENV, FAIL, OK, POLICY, INFRA]
    b = [OK, ENV, OK, INFRA, OK, OK]
    pairs = pair(a, b)
    assert pairs.positions == [0, 2, 4]
    assert pairs.a.tolist() == [1, 0, 0] and pairs.b.tolist() == [1, 1, 1]
    assert [(d.position, d.reasons) for d in pairs.dropped] == [
        (1, {"A": "environment", "B": "environment"}),
        (3, {"B": "infrastructure"}),
        (5, {"A": "infrastructure"}),
    ]
    assert pairs.dropped_by_reason() == {
        "A environment": 1,
        "B environment": 1,
        "B infrastructure": 1,
        "A infrastructure": 1,
    }
    with pytest.raises(ValueError):
        pair([OK], [OK, OK])


def test_the_gate_withholds_a_verdict_below_the_bound_in_either_arm() -> None:
    full, short = tally([OK] * 20), tally([OK] * 18 + [INFRA] * 2)  # coverage 1.0 and 0.9
    assert coverage_gate(full, full) is None
    gate = coverage_gate(full, short)
    assert gate == (
        "insufficient coverage: A scored 20 of 20 attempted episodes (100.0%), B 18 of 20 (90.0%); a verdict needs "
        "at least 95% in each arm"
    )
    assert verdict(0.001, 0.5, gate=gate) == INSUFFICIENT_COVERAGE
    assert gated_decision("b_better", gate) == INSUFFICIENT_COVERAGE
    assert coverage_gate(full, short, CoverageRule(min_coverage=0.9)) is None
    assert coverage_gate(tally([]), full) is not None  # nothing attempted: coverage 0


def test_verdict_without_a_gate_follows_the_p_value_and_the_sign() -> None:
    assert verdict(0.01, 0.3) == "b_better"
    assert verdict(0.01, -0.3) == "a_better"
    assert verdict(0.2, 0.3) == "no_significant_difference"
    assert verdict(None, None) == "no_significant_difference"


@pytest.mark.parametrize("bound", [-0.1, 1.5, float("nan")])
def test_a_bound_outside_zero_to_one_is_refused_naming_the_option(bound: float) -> None:
    with pytest.raises(ConfigError, match="--min-coverage"):
        CoverageRule(min_coverage=bound)
