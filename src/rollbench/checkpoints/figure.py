"""The figure of a ranking: success rate against training step (matplotlib, Agg backend: files only)."""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


def success_by_step_png(ranking: dict[str, Any], dpi: int = 110) -> bytes:
    """PNG bytes of :func:`success_by_step_figure` (the figure is closed)."""
    fig = success_by_step_figure(ranking)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def success_by_step_figure(ranking: dict[str, Any]) -> Figure:
    """The matplotlib Figure (the caller closes it): each checkpoint's success rate (%) at its training step with its
    95% Wilson interval, the best (when the ranking names one) circled, checkpoints significantly worse than it
    (Holm) drawn hollow; for an ``--eliminate`` ranking (rows with a ``decision``) the chosen step circled and the
    eliminated ones hollow, the rates labelled descriptive."""
    rows = sorted((r for r in ranking["checkpoints"] if r["success_rate"] is not None), key=lambda r: r["step"])
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    steps = [r["step"] for r in rows]
    rates = [100 * r["success_rate"] for r in rows]
    lo = [100 * (r["success_rate"] - r["ci95"][0]) for r in rows]
    hi = [100 * (r["ci95"][1] - r["success_rate"]) for r in rows]
    ax.plot(steps, rates, color="C0", lw=1)
    ax.errorbar(steps, rates, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    adaptive = any("decision" in r for r in rows)  # --eliminate: the elimination's decisions, no fixed-N test
    if adaptive:
        dropped = [r["decision"] == "eliminated" for r in rows]
        labels = ("not eliminated", "eliminated early", "chosen")
        marked = ranking.get("chosen")
    else:
        dropped = [r.get("paired", {}).get("worse", False) for r in rows]
        labels = ("not separated from the best", "worse than the best (Holm)", "best")
        marked = ranking.get("best")
    ax.scatter(
        [s for s, w in zip(steps, dropped, strict=True) if not w],
        [v for v, w in zip(rates, dropped, strict=True) if not w],
        color="C0",
        zorder=3,
        label=labels[0],
    )
    ax.scatter(
        [s for s, w in zip(steps, dropped, strict=True) if w],
        [v for v, w in zip(rates, dropped, strict=True) if w],
        facecolor="white",
        edgecolor="C0",
        zorder=3,
        label=labels[1],
    )
    if marked is not None:
        b = next(r for r in rows if r["step"] == marked)
        ax.scatter([b["step"]], [100 * b["success_rate"]], s=160, facecolor="none", edgecolor="C3", lw=2, zorder=4,
                   label=labels[2])  # fmt: skip
    ax.set_ylim(-2, 102)
    ax.set_xlabel("training step")
    ax.set_ylabel("success rate (%), bars: 95% Wilson" + (" (descriptive)" if adaptive else ""))
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig
