"""The coverage rule: which episodes a rate or a comparison scores, which it leaves out and why, and when a comparison
may give a verdict at all. One rule for every surface that reports a rate or a comparison (grade, summarize, compare,
report, sequential, robustness, reproduce, the MCP tools, the dashboard); docs/analysis.md, "Errors and coverage",
states it for users.

The rule, per arm (one run, or one policy of a sequential or robustness plan) and task:

* An episode that did not error is **scored**: a success or a failure, as recorded.
* An episode that errored with a **policy** fault is the policy's behaviour: it is scored as a **failure** and named
  (``"B: 8 policy errors counted as failures"``), unless :attr:`CoverageRule.exclude_policy_errors`
  (``--exclude-policy-errors``) leaves it out like the others.
* An episode that errored with an **environment** or **infrastructure** fault (or an ``unclassified`` one, recorded
  before faults existed: it cannot be charged to the policy) is **excluded**: left out of the rate's numerator and
  denominator and listed. A pair with such an episode on either side is not a pair: paired tests see only pairs
  whose both episodes are scored.
* ``attempted`` counts the recorded episodes (plus, where a caller says so, planned episodes that were not
  recorded, which are excluded as ``not_recorded``); ``scored`` the episodes the rate counts; ``coverage`` is
  scored / attempted.
* **Coverage gate**: when either arm's coverage is below :attr:`CoverageRule.min_coverage` (default 0.95,
  ``--min-coverage``) the comparison still reports its numbers, but its verdict is :data:`INSUFFICIENT_COVERAGE`,
  never "better" or "worse". An arm with nothing attempted has coverage 0.

Everything here is pure: counts in, counts out. Faults are the strings of :data:`rollbench.core.contracts.FAULTS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rollbench.core.contracts import FAULTS, ConfigError

DEFAULT_MIN_COVERAGE = 0.95
MIN_COVERAGE_OPTION = "--min-coverage"
EXCLUDE_POLICY_ERRORS_OPTION = "--exclude-policy-errors"
MIN_COVERAGE_HELP = (
    "Coverage gate: with fewer than this share of either arm's attempted episodes scored (environment and "
    "infrastructure errors are not scored), the verdict is 'insufficient coverage'."
)
EXCLUDE_POLICY_ERRORS_HELP = "Leave policy-fault errors out of rates and pairs too (by default they count as failures)."
UNCLASSIFIED = "unclassified"  # an error recorded before ``rollbench/error_fault`` existed
NOT_RECORDED = "not_recorded"  # a planned episode that was never recorded (only when a caller counts them)
EXCLUDED_REASONS: tuple[str, ...] = (*FAULTS, UNCLASSIFIED, NOT_RECORDED)  # ordered, for stable output

# verdict codes shared by the comparisons (sequential's decisions use the same spellings)
B_BETTER = "b_better"
A_BETTER = "a_better"
NO_DIFFERENCE = "no_significant_difference"
INSUFFICIENT_COVERAGE = "insufficient_coverage"
VERDICT_LABELS: dict[str, str] = {
    B_BETTER: "B better",
    A_BETTER: "A better",
    NO_DIFFERENCE: "no significant difference",
    INSUFFICIENT_COVERAGE: "insufficient coverage",
}


@dataclass(frozen=True)
class CoverageRule:
    """The rule's two settings. ``min_coverage`` in [0, 1] (scored / attempted needed in each arm for a verdict);
    ``exclude_policy_errors``: leave policy-fault errors out as well instead of counting them as failures.
    Raises ConfigError (naming ``--min-coverage``) for a bound outside [0, 1]."""

    min_coverage: float = DEFAULT_MIN_COVERAGE
    exclude_policy_errors: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_coverage <= 1.0 or self.min_coverage != self.min_coverage:
            raise ConfigError(f"{MIN_COVERAGE_OPTION} must be between 0 and 1, got {self.min_coverage}")

    def to_dict(self) -> dict[str, Any]:
        return {"min_coverage": self.min_coverage, "exclude_policy_errors": self.exclude_policy_errors}

    def in_words(self) -> str:
        """The rule as a note states it: ``min coverage 0.95, policy errors counted as failures`` (or ``left out``)."""
        errors = "left out" if self.exclude_policy_errors else "counted as failures"
        return f"min coverage {self.min_coverage:g}, policy errors {errors}"


DEFAULT_RULE = CoverageRule()


@dataclass(frozen=True)
class Outcome:
    """One recorded episode as the rule sees it: ``success`` and ``fault`` (None when the episode did not error;
    else one of FAULTS or ``unclassified``)."""

    success: bool
    fault: str | None = None


class EpisodeFacts(Protocol):
    """What the coverage rule and the robustness study read of an episode: grade's
    :class:`~rollbench.core.grade_model.GradedEpisode`, or an analysis episode
    (:class:`rollbench.analysis.episodes.AnalysisEpisode`: a run directory's or a dashboard export's). ``trial``
    None: the episode pairs with nothing; ``error_fault`` outside FAULTS counts as ``unclassified``."""

    @property
    def episode_index(self) -> int: ...
    @property
    def task(self) -> str: ...
    @property
    def trial(self) -> int | None: ...
    @property
    def initial_state(self) -> int | None: ...
    @property
    def success(self) -> bool: ...
    @property
    def termination_reason(self) -> str | None: ...
    @property
    def error_fault(self) -> str | None: ...


def outcome_of(row: EpisodeFacts) -> Outcome:
    """The :class:`Outcome` of an episode (``success``, ``termination_reason``, ``error_fault``): an episode errored
    when its termination reason is ``error``; its fault is ``error_fault`` when that is one of FAULTS, else
    ``unclassified``."""
    if row.termination_reason != "error":
        return Outcome(row.success, None)
    return Outcome(row.success, row.error_fault if row.error_fault in FAULTS else UNCLASSIFIED)


def exclusion(outcome: Outcome, rule: CoverageRule = DEFAULT_RULE) -> str | None:
    """Why the rule leaves ``outcome`` out (its fault), or None when it is scored."""
    if outcome.fault is None or (outcome.fault == "policy" and not rule.exclude_policy_errors):
        return None
    return outcome.fault


def score(outcome: Outcome, rule: CoverageRule = DEFAULT_RULE) -> int | None:
    """1 (success), 0 (failure, a counted policy error included) or None (excluded)."""
    if exclusion(outcome, rule) is not None:
        return None
    return int(outcome.success and outcome.fault is None)


@dataclass(frozen=True)
class ArmCoverage:
    """The counts of one arm (and task, or pooled): ``attempted`` episodes; ``scored`` (the rate's denominator) with
    ``successes``; ``errored``: errored episodes per fault (every fault of FAULTS, 0 if none, plus ``unclassified``
    when any); ``excluded``: episodes left out per reason (only reasons with a count); ``policy_errors_as_failures``:
    policy-fault errors scored as failures."""

    attempted: int
    scored: int
    successes: int
    errored: dict[str, int]
    excluded: dict[str, int]
    policy_errors_as_failures: int

    @property
    def coverage(self) -> float:
        """scored / attempted in [0, 1]; 0.0 when nothing was attempted."""
        return self.scored / self.attempted if self.attempted else 0.0

    @property
    def success_rate(self) -> float | None:
        """successes / scored; None when nothing was scored."""
        return self.successes / self.scored if self.scored else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form every surface uses: the fields plus ``coverage``."""
        return {
            "attempted": self.attempted,
            "scored": self.scored,
            "successes": self.successes,
            "coverage": self.coverage,
            "errored": dict(self.errored),
            "excluded": dict(self.excluded),
            "policy_errors_as_failures": self.policy_errors_as_failures,
        }

    def notes(self, arm: str) -> list[str]:
        """Sentences naming what the rate does with this arm's errors, e.g. ``"B: 8 policy errors counted as
        failures"``, ``"A: 4 environment errors left out (not scored)"``; [] when nothing errored or was left out."""
        out = []
        if self.policy_errors_as_failures:
            n = self.policy_errors_as_failures
            out.append(f"{arm}: {n} policy error{'s' if n != 1 else ''} counted as failures")
        for reason, n in self.excluded.items():
            what = "planned episodes not recorded" if reason == NOT_RECORDED else f"{reason} errors"
            if n == 1:
                what = "planned episode not recorded" if reason == NOT_RECORDED else f"{reason} error"
            out.append(f"{arm}: {n} {what} left out (not scored)")
        return out


def tally(outcomes: Iterable[Outcome], rule: CoverageRule = DEFAULT_RULE, *, not_recorded: int = 0) -> ArmCoverage:
    """The :class:`ArmCoverage` of ``outcomes`` under ``rule``. ``not_recorded``: planned episodes of this arm that
    were never recorded, counted as attempted and excluded (``not_recorded``); 0 where a caller judges recorded
    episodes only. Raises ValueError for a negative ``not_recorded``."""
    if not_recorded < 0:
        raise ValueError(f"not_recorded must be >= 0, got {not_recorded}")
    errored = dict.fromkeys(FAULTS, 0)
    excluded: dict[str, int] = {}
    attempted = scored = successes = policy_failures = 0
    for o in outcomes:
        attempted += 1
        if o.fault is not None:
            errored[o.fault] = errored.get(o.fault, 0) + 1
        why = exclusion(o, rule)
        if why is not None:
            excluded[why] = excluded.get(why, 0) + 1
            continue
        scored += 1
        successes += score(o, rule) or 0
        policy_failures += o.fault == "policy"
    if not_recorded:
        excluded[NOT_RECORDED] = not_recorded
    ordered = {r: excluded[r] for r in EXCLUDED_REASONS if r in excluded}
    return ArmCoverage(attempted + not_recorded, scored, successes, errored, ordered, policy_failures)


def merge(parts: Iterable[ArmCoverage]) -> ArmCoverage:
    """The pooled :class:`ArmCoverage` of several tasks' counts (sums of every count)."""
    errored = dict.fromkeys(FAULTS, 0)
    excluded: dict[str, int] = {}
    attempted = scored = successes = policy_failures = 0
    for p in parts:
        attempted, scored, successes = attempted + p.attempted, scored + p.scored, successes + p.successes
        policy_failures += p.policy_errors_as_failures
        for k, n in p.errored.items():
            errored[k] = errored.get(k, 0) + n
        for k, n in p.excluded.items():
            excluded[k] = excluded.get(k, 0) + n
    ordered = {r: excluded[r] for r in EXCLUDED_REASONS if r in excluded}
    return ArmCoverage(attempted, scored, successes, errored, ordered, policy_failures)


@dataclass(frozen=True)
class DroppedPair:
    """A planned pair that is not a pair: its ``position`` in the inputs and, per side (``"A"``, ``"B"``), the
    reason the rule excluded that side's episode."""

    position: int
    reasons: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "reasons": dict(self.reasons)}


@dataclass(frozen=True)
class Pairs:
    """The pairs a paired test may use: ``a`` and ``b`` int8 0/1 arrays of equal length (scored on both sides),
    ``positions`` their indices in the inputs, and ``dropped`` the pairs left out, in input order."""

    a: np.ndarray
    b: np.ndarray
    positions: list[int]
    dropped: list[DroppedPair] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.a.size)

    def dropped_by_reason(self) -> dict[str, int]:
        """Dropped pairs per (side, reason), keyed ``"A environment"`` etc.; a pair dropped on both sides counts
        under both."""
        out: dict[str, int] = {}
        for d in self.dropped:
            for side, why in sorted(d.reasons.items()):
                out[f"{side} {why}"] = out.get(f"{side} {why}", 0) + 1
        return out


def pair(a: Sequence[Outcome], b: Sequence[Outcome], rule: CoverageRule = DEFAULT_RULE) -> Pairs:
    """The :class:`Pairs` of two arms' outcomes, position ``i`` being the same planned episode (same task, seed,
    initial state, instruction) in both. A position whose episode is excluded on either side is dropped (and listed);
    a policy error counted as a failure stays in its pair as a failure. Raises ValueError on unequal lengths."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    xa: list[int] = []
    xb: list[int] = []
    positions: list[int] = []
    dropped: list[DroppedPair] = []
    for i, (oa, ob) in enumerate(zip(a, b, strict=True)):
        sa, sb = score(oa, rule), score(ob, rule)
        if sa is None or sb is None:
            reasons = {side: why for side, why in (("A", exclusion(oa, rule)), ("B", exclusion(ob, rule))) if why}
            dropped.append(DroppedPair(i, reasons))
            continue
        xa.append(sa)
        xb.append(sb)
        positions.append(i)
    return Pairs(np.array(xa, dtype=np.int8), np.array(xb, dtype=np.int8), positions, dropped)


def coverage_gate(
    a: ArmCoverage, b: ArmCoverage, rule: CoverageRule = DEFAULT_RULE, *, names: tuple[str, str] = ("A", "B")
) -> str | None:
    """None when both arms' coverage is at least ``rule.min_coverage``; else the sentence saying which arm fell
    short, e.g. ``"insufficient coverage: A scored 8 of 12 attempted episodes (66.7%), B 8 of 12 (66.7%); a verdict
    needs at least 95% in each arm"``."""
    if a.coverage >= rule.min_coverage and b.coverage >= rule.min_coverage:
        return None
    (na, nb) = names
    return (
        f"insufficient coverage: {na} scored {a.scored} of {a.attempted} attempted episodes ({a.coverage:.1%}), "
        f"{nb} {b.scored} of {b.attempted} ({b.coverage:.1%}); a verdict needs at least "
        f"{rule.min_coverage:.0%} in each arm"
    )


def verdict(p_value: float | None, difference: float | None, *, alpha: float = 0.05, gate: str | None = None) -> str:
    """A comparison's verdict code (:data:`VERDICT_LABELS`): :data:`INSUFFICIENT_COVERAGE` when ``gate`` (from
    :func:`coverage_gate`) says so, whatever the numbers; else ``b_better`` / ``a_better`` when ``p_value`` <=
    ``alpha`` and the difference (B minus A) is positive / negative; else ``no_significant_difference``."""
    if gate is not None:
        return INSUFFICIENT_COVERAGE
    if p_value is None or difference is None or p_value > alpha or difference == 0:
        return NO_DIFFERENCE
    return B_BETTER if difference > 0 else A_BETTER


def gated_decision(decision: str, gate: str | None) -> str:
    """A decision already made by another rule (e.g. sequential's ``b_better``): :data:`INSUFFICIENT_COVERAGE`
    instead of it when ``gate`` is not None, else unchanged."""
    return INSUFFICIENT_COVERAGE if gate is not None else decision


def coverage_lines(block: Mapping[str, Any], damaged: bool = False) -> list[str]:
    """The plain-text lines every surface shows under a comparison block (a ``compare`` task or pooled block:
    ``coverage`` {a, b: :meth:`ArmCoverage.to_dict`}, ``error_notes``, ``verdict``, ``coverage_gate`` and, paired,
    ``pairs``, ``pairs_dropped``, ``pairs_dropped_by_reason``): each arm's attempted / scored / errored by fault, the
    notes naming its errors, the pairs compared and dropped, and the verdict (with the gate's reason when it
    withheld one). ``damaged``: an arm is a damaged run included with ``--allow-damaged``, which the verdict
    line then says."""
    lines = []
    for arm in ("a", "b"):
        cov = block["coverage"][arm]
        faults = ", ".join(f"{n} {f}" for f, n in cov["errored"].items() if n) or "none"
        lines.append(
            f"{arm.upper()}: attempted {cov['attempted']}, scored {cov['scored']} (coverage {cov['coverage']:.1%}), "
            f"errored: {faults}"
        )
    lines += block["error_notes"]
    if block.get("pairs") is not None:
        dropped = block.get("pairs_dropped", 0)
        why = ", ".join(f"{k} {n}" for k, n in block.get("pairs_dropped_by_reason", {}).items())
        unit = f"scene ({block['scenes']} scenes)" if block.get("unit") == "scene" else "pair"
        lines.append(
            f"pairs compared: {block['pairs']}"
            + (f"; not pairs: {dropped} ({why})" if dropped else "")
            + f"; unit: {unit}, {block.get('test', '')}"
        )
    verdict = VERDICT_LABELS.get(block["verdict"], block["verdict"])
    head = "verdict (on damaged runs, --allow-damaged)" if damaged else "verdict"
    lines.append(f"{head}: {block['coverage_gate'] or verdict}")
    return lines
