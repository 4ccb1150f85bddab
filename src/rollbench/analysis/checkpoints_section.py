"""The report's "Checkpoints" section: each ``rollbench checkpoints`` OUT folder among the report's inputs (the folder
holding a ``checkpoints.json`` beside the ``<step>`` run directories that were loaded), recomputed from its run
directories by :func:`rollbench.checkpoints.recompute.recompute` (the ranking, and the looks of ``--eliminate``);
every recorded number that differs from the recomputation is shown as a violation.

Each section holds the ranking table (step, run status, rate, 95% Wilson interval, scored / attempted, paired
difference to the best in points with the Holm-corrected exact McNemar p and the pairs, and with ``--eliminate`` the
look that eliminated it), the figure of success against training step, and the verdict with its evidence (alpha,
the coverage rule, episodes attempted and scored, the coverage notes; with ``--eliminate`` the chosen step, its
guarantee and the episodes used against the fixed-N design).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from rollbench.analysis.sources import Loaded
from rollbench.checkpoints.recompute import Recomputed, is_checkpoints_out, recompute, step_runs
from rollbench.core.format import MISSING, interval, p_value, pct, points

HEAD = ["step", "run", "success", "95% CI", "scored/attempted", "diff to best (pts)", "p (Holm)", "pairs"]


def checkpoint_folders(loaded: Loaded) -> list[Path]:
    """The OUT folders of ``rollbench checkpoints`` whose every ``<step>`` run directory is among the loaded ones
    (or those left out as in progress): the inputs named the folder, or a folder holding it, not one of its runs
    alone. In path order."""
    dirs = [r.run_dir for r in loaded.runs if r.run_dir is not None]
    dirs += [Path(p["path"]) for p in loaded.in_progress if p.get("path")]
    found = {d.resolve() for d in dirs}
    outs = {d.parent for d in dirs if is_checkpoints_out(d.parent)}
    return sorted(o for o in outs if {d.resolve() for d in step_runs(o)} <= found)


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


def _figure(ranking: dict[str, Any], plots_dir: Path | None, name: str) -> bytes:
    """The success-against-step figure as PNG bytes (also ``plots_dir``/NAME.png and .svg when given); closed."""
    import matplotlib.pyplot as plt

    from rollbench.analysis.figures import to_png
    from rollbench.checkpoints.figure import success_by_step_figure

    fig = success_by_step_figure(ranking)
    try:
        for ext in ("png", "svg") if plots_dir is not None else ():
            assert plots_dir is not None
            fig.savefig(plots_dir / f"{name}.{ext}", format=ext, dpi=150)
        return to_png(fig)
    finally:
        plt.close(fig)


def checkpoint_sections(loaded: Loaded, plots_dir: Path | None = None) -> list[dict[str, Any]]:
    """One view per OUT folder (:func:`checkpoint_folders`) for ``templates/checkpoints.html.j2``: ``out``,
    ``violations``, and when it could be ranked ``head``, ``rows``, ``says``, ``evidence``, ``figure`` (base64 PNG,
    also written to ``plots_dir`` as ``checkpoints_<i>.png``/``.svg``) and ``elimination``."""
    views = []
    for i, out in enumerate(checkpoint_folders(loaded), 1):
        got = recompute(out)
        view: dict[str, Any] = {"out": str(out), "violations": got.violations, "ranking": got.ranking is not None}
        if got.ranking is not None:
            ranking = got.ranking
            png = _figure(ranking, plots_dir, f"checkpoints_{i}")
            view.update(
                head=HEAD + (["eliminated at"] if got.elimination is not None else []),
                rows=_rows(got),
                says=ranking["says"],
                evidence=_evidence(got),
                figure={
                    "caption": f"{out.name}: success rate against training step (95% Wilson interval; hollow: worse "
                    "than the best, Holm).",
                    "png": base64.b64encode(png).decode(),
                },
                elimination=_elimination_view(got.elimination) if got.elimination is not None else None,
            )
        views.append(view)
    return views
