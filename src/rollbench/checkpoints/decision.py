"""The ranking document of a ``rollbench checkpoints --eliminate`` run: the elimination's own decision with its
guarantee, never a fixed-N test.

The elimination gathered its episodes adaptively (a checkpoint stopped running at the look that dropped it; the
rule stopped when it could decide), so a McNemar p-value computed on those episodes as if their number had been
fixed in advance overstates the evidence. The verdict here is what the rule (:mod:`.eliminate`) decided: the chosen
step, with "P(chosen is more than delta below the best) <= alpha", each eliminated step with the look whose anytime
lower bound dropped it, and the episodes used against the fixed-N design. Each checkpoint's rate and Wilson
interval are still given, as descriptive numbers of an adaptive sample (they carry no test).

Errors follow the coverage rule (:mod:`rollbench.grading.coverage`) as in :func:`rollbench.checkpoints.rank.rank`:
when a checkpoint's coverage is below ``min_coverage`` the numbers are reported but nothing is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule, Outcome, coverage_gate, tally
from rollbench.grading.stats import wilson_interval

CHOSEN = "chosen_by_elimination"  # the rule chose a step with its guarantee
UNDECIDED = "undecided"  # the recorded looks end before the rule stopped
INSUFFICIENT = "insufficient_coverage"
RATES = "descriptive (adaptive sample): the rule chose each checkpoint's number of episodes; no test on them"
KEPT, ELIMINATED, CHOSEN_ROW = "kept", "eliminated", "chosen"


def eliminated_at(elimination: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """step -> the look that eliminated it: ``look`` (1-based), ``trials`` (episodes per checkpoint at that look),
    ``against`` (the look's highest-rate survivor), ``pairs``, ``difference`` (mean of against minus this step on
    the pairs both scored) and ``lower_bound`` (the anytime lower bound on that difference; above 0)."""
    out: dict[int, dict[str, Any]] = {}
    for i, look in enumerate(elimination.get("looks", []), 1):
        bounds = {b["step"]: b for b in look["bounds"]}
        for step in look["eliminated"]:
            b = bounds[step]
            out[step] = {"look": i, "trials": look["trials"], "against": look["best"], "pairs": b["pairs"],
                         "difference": b["mean"], "lower_bound": b["lower"]}  # fmt: skip
    return out


def rank_eliminated(
    runs: Sequence[tuple[int, str, Mapping[int, Outcome]]],
    elimination: Mapping[str, Any],
    *,
    alpha: float = 0.05,
    rule: CoverageRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """The ranking document of ``runs`` (``(step, run directory, outcomes)`` per checkpoint) under the
    ``elimination`` block (:func:`rollbench.checkpoints.eliminate_run.replay`'s looks, chosen step, design).

    Returns ``{"alpha", "rule", "best": None, "chosen": step | None, "verdict"`` (:data:`CHOSEN`,
    :data:`UNDECIDED` or :data:`INSUFFICIENT`), ``"says", "guarantee", "rates"`` (:data:`RATES`), ``"checkpoints",
    "notes"}``. Rows: the chosen step first, then the steps still running when the rule stopped (highest rate
    first), then the eliminated ones, the last eliminated first; each with ``step``, ``run_dir``, ``coverage``,
    ``success_rate`` and ``ci95`` (Wilson; descriptive), ``decision`` (chosen / kept / eliminated) and
    ``eliminated_at`` (:func:`eliminated_at`, None unless eliminated). No p-value: there is no fixed-N test."""
    gone = eliminated_at(elimination)
    chosen = elimination.get("chosen")
    rows: list[dict[str, Any]] = []
    for step, run_dir, outs in runs:
        cov = tally(outs.values(), rule)
        low, high = wilson_interval(cov.successes, cov.scored) if cov.scored else (None, None)
        decision = CHOSEN_ROW if step == chosen else ELIMINATED if step in gone else KEPT
        rows.append({"step": step, "run_dir": run_dir, "coverage": cov, "success_rate": cov.success_rate,
                     "ci95": [low, high], "decision": decision, "eliminated_at": gone.get(step)})  # fmt: skip
    rows.sort(key=lambda r: (r["decision"] != CHOSEN_ROW, -(r["eliminated_at"] or {"look": 10**9})["look"],
                             -(r["success_rate"] or 0.0), r["step"]))  # fmt: skip
    delta, level = float(elimination["design"]["delta"]), float(elimination["design"]["alpha"])
    doc: dict[str, Any] = {"alpha": alpha, "rule": rule.to_dict(), "best": None, "chosen": None, "rates": RATES,
                           "guarantee": None, "checkpoints": rows}  # fmt: skip
    ref = next((r for r in rows if r["step"] == chosen), rows[0] if rows else None)
    gates: list[str] = []
    for r in rows:
        assert ref is not None
        gate = coverage_gate(ref["coverage"], r["coverage"], rule, names=(f"step {ref['step']}", f"step {r['step']}"))
        gates += [gate] if gate else []
    notes = [n for r in rows for n in r["coverage"].notes(f"step {r['step']}")]
    if gates:
        verdict, says = INSUFFICIENT, f"no verdict: insufficient coverage ({gates[0]})"
    elif chosen is None:
        verdict, says = UNDECIDED, "no decision: the looks end before the rule stopped (the same command resumes)"
    else:
        doc["chosen"] = chosen
        doc["guarantee"] = f"P(step {chosen} is more than {delta:g} below the best checkpoint) <= {level:g}"
        verdict, says = CHOSEN, f"step {chosen} chosen by early elimination: {doc['guarantee']}"
    for r in rows:
        r["coverage"] = r["coverage"].to_dict()
    return {**doc, "verdict": verdict, "says": says, "notes": notes}
