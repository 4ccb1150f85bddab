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
    (Holm) drawn hollow."""
    rows = sorted((r for r in ranking["checkpoints"] if r["success_rate"] is not None), key=lambda r: r["step"])
    fig, ax = plt.subplots(figsize=(7.0, 3.6), layout="constrained")
    steps = [r["step"] for r in rows]
    rates = [100 * r["success_rate"] for r in rows]
    lo = [100 * (r["success_rate"] - r["ci95"][0]) for r in rows]
    hi = [100 * (r["ci95"][1] - r["success_rate"]) for r in rows]
    ax.plot(steps, rates, color="C0", lw=1)
    ax.errorbar(steps, rates, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
    worse = [r.get("paired", {}).get("worse", False) for r in rows]
    ax.scatter(
        [s for s, w in zip(steps, worse, strict=True) if not w],
        [v for v, w in zip(rates, worse, strict=True) if not w],
        color="C0",
        zorder=3,
        label="not separated from the best",
    )
    ax.scatter(
        [s for s, w in zip(steps, worse, strict=True) if w],
        [v for v, w in zip(rates, worse, strict=True) if w],
        facecolor="white",
        edgecolor="C0",
        zorder=3,
        label="worse than the best (Holm)",
    )
    if ranking.get("best") is not None:
        b = next(r for r in rows if r["step"] == ranking["best"])
        ax.scatter(
            [b["step"]],
            [100 * b["success_rate"]],
            s=160,
            facecolor="none",
            edgecolor="C3",
            lw=2,
            zorder=4,
            label="best",
        )
    ax.set_ylim(-2, 102)
    ax.set_xlabel("training step")
    ax.set_ylabel("success rate (%), bars: 95% Wilson")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig
