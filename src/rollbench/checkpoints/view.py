"""A recomputed ``rollbench checkpoints`` OUT folder (:class:`~rollbench.checkpoints.recompute.Recomputed`) as plain
values for a page: the ranking table's rows, the verdict's evidence and the looks of ``--eliminate``. The report's
"Checkpoints" section and the dashboard's checkpoints page show the same view."""

from __future__ import annotations

from typing import Any

from rollbench.checkpoints.recompute import Recomputed
from rollbench.core.format import MISSING, interval, p_value, pct, points

HEAD = ["step", "run", "success", "95% CI", "scored/attempted", "diff to best (pts)", "p (Holm)", "pairs"]


def _eliminated_at(elimination: dict[str, Any] | None) -> dict[int, str]:
    """step -> "look L (N episodes)" for each step the rule eliminated."""
    out: dict[int, str] = {}
    for i, look in enumerate((elimination or {}).get("looks", []), 1):
        for step in look["eliminated"]:
            out[step] = f"look {i} ({look['trials']} episodes)"
    return out


def _rows(got: Recomputed) -> list[list[Any]]:
    assert got.ranking is not None
    gone = _eliminated_at(got.elimination)
    rows = []
    for r in got.ranking["checkpoints"]:
        cov, paired = r["coverage"], r.get("paired")
        row = [r["step"], got.statuses.get(r["step"], MISSING), pct(r["success_rate"]), interval(*r["ci95"])]
        row.append(f"{cov['scored']}/{cov['attempted']}")
        if paired is None:
            row += ["best" if r["step"] == got.ranking["best"] else "highest rate", MISSING, MISSING]
        else:
            worse = " worse" if paired["worse"] else ""
            row += [points(paired["difference"]), p_value(paired["p_holm"]) + worse, paired["pairs"]]
        if got.elimination is not None:
            row.append(gone.get(r["step"], "chosen" if r["step"] == got.elimination["chosen"] else "kept"))
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
        f"paired to the best on the episodes both scored; exact McNemar p, Holm-corrected over the "
        f"{max(0, len(rk['checkpoints']) - 1)} comparisons at alpha {rk['alpha']:g}",
        *rk.get("notes", []),
    ]
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
    best in points, Holm p with "worse", pairs, and with ``--eliminate`` the look that eliminated it), ``says``,
    ``evidence`` (sentences) and ``elimination`` (None without ``--eliminate``)."""
    view: dict[str, Any] = {"out": str(got.out), "violations": got.violations, "ranking": got.ranking is not None}
    if got.ranking is not None:
        view.update(
            head=HEAD + (["eliminated at"] if got.elimination is not None else []),
            rows=_rows(got),
            says=got.ranking["says"],
            evidence=_evidence(got),
            elimination=_elimination_view(got.elimination) if got.elimination is not None else None,
        )
    return view
