"""A recomputed ``rollbench checkpoints`` OUT folder (:class:`~rollbench.checkpoints.recompute.Recomputed`) as plain
values for a page: the ranking table's rows, the verdict's evidence and the looks of ``--eliminate`` (whose verdict is
the elimination's decision, with descriptive rates and no fixed-N test). The report's
"Checkpoints" section and the dashboard's checkpoints page show the same view."""

from __future__ import annotations

from typing import Any

from rollbench.checkpoints.recompute import Recomputed
from rollbench.core.format import MISSING, interval, p_value, pct, points

HEAD = ["step", "run", "success", "95% CI", "scored/attempted", "diff to best (pts)", "p (Holm)", "pairs"]


ELIMINATION_HEAD = ["step", "run", "rate (descriptive, adaptive sample)", "95% CI (descriptive)", "scored/attempted",
                    "decision"]  # fmt: skip


def _decision(r: dict[str, Any]) -> str:
    """``chosen``, ``kept`` or "look L (N episodes): lower bound X pts on step S minus it"."""
    at = r.get("eliminated_at")
    if at is None:
        return str(r["decision"])
    return (
        f"look {at['look']} ({at['trials']} episodes): lower bound {points(at['lower_bound'])} pts on step "
        f"{at['against']} minus it"
    )


def _rows(got: Recomputed) -> list[list[Any]]:
    assert got.ranking is not None
    rows = []
    for r in got.ranking["checkpoints"]:
        cov, paired = r["coverage"], r.get("paired")
        row = [r["step"], got.statuses.get(r["step"], MISSING), pct(r["success_rate"]), interval(*r["ci95"])]
        row.append(f"{cov['scored']}/{cov['attempted']}")
        if got.elimination is not None:
            row.append(_decision(r))
        elif paired is None:
            row += ["best" if r["step"] == got.ranking["best"] else "highest rate", MISSING, MISSING]
        else:
            worse = " worse" if paired["worse"] else ""
            row += [points(paired["difference"]), p_value(paired["p_holm"]) + worse, paired["pairs"]]
        rows.append(row)
    return rows


def _evidence(got: Recomputed) -> list[str]:
    """The verdict's evidence, one sentence each."""
    assert got.ranking is not None
    rk = got.ranking
    attempted = sum(r["coverage"]["attempted"] for r in rk["checkpoints"])
    scored = sum(r["coverage"]["scored"] for r in rk["checkpoints"])
    rule = rk["rule"]
    lines = [
        f"{len(rk['checkpoints'])} checkpoints on the same planned episodes; {attempted} episodes attempted, "
        f"{scored} scored (the coverage rule: environment and infrastructure errors left out, policy errors "
        + ("left out" if rule["exclude_policy_errors"] else "counted as failures")
        + f"; a verdict needs coverage of at least {rule['min_coverage']:.0%} in every checkpoint)",
    ]
    if got.elimination is None:
        lines.append(
            f"paired to the best on the episodes both scored; exact McNemar p, Holm-corrected over the "
            f"{max(0, len(rk['checkpoints']) - 1)} comparisons at alpha {rk['alpha']:g}"
        )
    else:
        lines += [
            "early elimination: at each look the highest-rate survivor is paired with each other survivor on the "
            "episodes both scored, and a survivor is eliminated when the anytime lower bound on that difference "
            "(Hoeffding or empirical Bernstein, union-bounded over the pairs and looks) is above 0",
            f"rates and intervals: {rk['rates']}",
        ]
    lines += rk.get("notes", [])
    if got.level_note:
        lines.append(got.level_note)
    not_ok = [f"step {s} ({st})" for s, st in sorted(got.statuses.items()) if st != "OK"]
    if not_ok and got.elimination is None:
        lines.append("runs not complete: " + ", ".join(not_ok) + " (the same command resumes them)")
    return lines


def _elimination_view(e: dict[str, Any]) -> dict[str, Any]:
    d = e["design"]
    return {
        "chosen": e["chosen"],
        "guarantee": e["guarantee"],
        "episodes_used": e["episodes_used"],
        "episodes_fixed_n": e["episodes_fixed_n"],
        "stopped": e.get("stopped"),  # why the looks ended (absent from elimination.json written before it existed)
        "design": f"delta {d['delta']:g}, alpha {d['alpha']:g}, looks at {', '.join(str(n) for n in d['looks'])} "
        f"episodes per checkpoint",
        "looks": [
            [i, look["trials"], look["best"], ", ".join(f"step {s}" for s in look["eliminated"]) or "none"]
            for i, look in enumerate(e["looks"], 1)
        ],
    }


def section_view(got: Recomputed) -> dict[str, Any]:
    """``out``, ``violations``, ``ranking`` (whether it could be ranked) and, when it could, ``head`` and ``rows``
    (one per checkpoint in rank order: step, run status, rate, Wilson interval, scored/attempted, difference to the
    best in points, Holm p with "worse", pairs; with ``--eliminate`` instead of those three the step's decision:
    chosen, kept, or the look whose anytime bound eliminated it; no p-value), ``says``,
    ``evidence`` (sentences) and ``elimination`` (None without ``--eliminate``)."""
    view: dict[str, Any] = {"out": str(got.out), "violations": got.violations, "ranking": got.ranking is not None,
                            "level_note": got.level_note}  # fmt: skip
    if got.ranking is not None:
        view.update(
            head=ELIMINATION_HEAD if got.elimination is not None else HEAD,
            rows=_rows(got),
            says=got.ranking["says"],
            evidence=_evidence(got),
            elimination=_elimination_view(got.elimination) if got.elimination is not None else None,
        )
    return view
