"""Figures of analysed runs (matplotlib, Agg backend: no display needed). Each function takes the documents of
:mod:`rollbench.analysis.summarize` / :mod:`rollbench.analysis.compare` (or :class:`~rollbench.analysis.sources.RunData`)
and returns a :class:`matplotlib.figure.Figure`; :func:`to_png` serialises one. The HTML report (``rollbench report``) draws
with them.

Every plotted number is one of the documents' numbers: success rates with their 95% Wilson intervals, differences
with their paired bootstrap 95% intervals, episode lengths (steps) from grade, and per-call policy latency (ms) as
recorded in the run's ``policy.latency_s`` column (NaN rows, steps served from a queued action chunk, are not calls).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from rollbench.analysis.sources import RunData

DIFF_LIMIT = 115.0  # the difference figure's x range (percentage points), ±100 plus room for a marker and cap
plt.rcParams.update({"font.size": 9, "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "none"})


def _short(task: str) -> str:
    return task.split("/", 1)[-1]


def _run_label(run: RunData) -> str:
    """The model, with the run's name when it says more than the model."""
    return run.model if run.identity.name == run.model else f"{run.model} ({run.identity.name})"


def success_rate_figure(summary: dict[str, Any], series_key: str = "model") -> Figure:
    """Success rate per task (rows) for each ``series_key`` value (bars), with 95% Wilson interval whiskers."""
    cells = summary["cells"]
    tasks = sorted({c["task"] for c in cells})
    # a (task, series) with several cells (several instruction texts) gets one bar per text, never just the first
    shared = Counter((c["task"], str(c.get(series_key))) for c in cells)

    def label(c: dict[str, Any]) -> str:
        name = str(c.get(series_key))
        if shared[(c["task"], name)] < 2:
            return name
        return f"{name} · {', '.join(c.get('variants') or []) or c.get('instruction') or 'canonical'}"

    series = sorted({label(c) for c in cells})
    height = max(2.0, 0.35 * len(tasks) * max(1, len(series)) + 1.0)
    fig, ax = plt.subplots(figsize=(7.0, height), layout="constrained")
    bar = 0.8 / max(1, len(series))
    # each task's own bars are centred on its row, so a task that only some series ran keeps its label at its bars
    present = [
        [name for name in series if any(c["task"] == task and label(c) == name for c in cells)] for task in tasks
    ]
    for j, name in enumerate(series):
        ys, rates, lo, hi = [], [], [], []
        for i, task in enumerate(tasks):
            c = next((c for c in cells if c["task"] == task and label(c) == name), None)
            if c is None or c["success_rate"] is None:
                continue
            ys.append(i + (present[i].index(name) - (len(present[i]) - 1) / 2) * bar)
            rates.append(100 * c["success_rate"])
            lo.append(100 * (c["success_rate"] - c["ci95_low"]))
            hi.append(100 * (c["ci95_high"] - c["success_rate"]))
        color = f"C{j % 10}"
        ax.barh(ys, rates, height=bar * 0.9, color=color, label=name)
        # the point marks the rate in the series' colour, so a 0% rate (no bar) still shows whose interval it is
        ax.errorbar(
            rates, ys, xerr=[lo, hi], fmt="o", color=color, mec="black", ecolor="black", elinewidth=0.8, capsize=2
        )
    ax.set_yticks(range(len(tasks)), [_short(t) for t in tasks])
    ax.invert_yaxis()
    ax.set_xlim(-2, 102)
    ax.set_xlabel("success rate (%), bars: 95% Wilson interval")
    ax.legend(title=series_key, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def difference_figure(comparison: dict[str, Any]) -> Figure:
    """One pair's ``rate(B) - rate(A)`` per task and pooled (points) with paired bootstrap 95% intervals."""
    rows = [*comparison["tasks"], {"task": "pooled", **comparison["pooled"]}]
    fig, ax = plt.subplots(figsize=(7.0, max(2.0, 0.35 * len(rows) + 1.2)), layout="constrained")
    for i, r in enumerate(rows):
        if r["difference"] is None:
            continue
        d, lo, hi = (100 * r[k] for k in ("difference", "diff_ci95_low", "diff_ci95_high"))
        color = "black" if r["task"] == "pooled" else "tab:blue"
        ax.errorbar([d], [i], xerr=[[d - lo], [hi - d]], fmt="o", color=color, capsize=3)
    ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(rows)), [_short(r["task"]) for r in rows])
    ax.invert_yaxis()
    # ±100 points stay clear of the frame: the limits reach past them by more than a marker and its cap
    ax.set_xlim(-DIFF_LIMIT, DIFF_LIMIT)
    ax.set_xticks([-100, -50, 0, 50, 100])
    kind = "paired" if comparison["statistics"] == "paired" else "unpaired"
    ax.set_xlabel(f"{comparison['model_b']} minus {comparison['model_a']} (percentage points), {kind} bootstrap 95% CI")
    return fig


def length_figure(runs: list[RunData]) -> Figure:
    """Episode length (steps) distribution per task and run (box plots; errored episodes included)."""
    groups: list[tuple[str, list[int]]] = []
    for run in runs:
        for task in sorted({e.task for e in run.episodes}):
            lengths = [e.length for e in run.episodes if e.task == task and e.length is not None]  # export: may lack it
            groups.append((f"{_short(task)} · {_run_label(run)}", lengths))
    fig, ax = plt.subplots(figsize=(7.0, max(2.0, 0.3 * len(groups) + 1.0)), layout="constrained")
    if groups:
        ax.boxplot([g[1] for g in groups], orientation="horizontal", tick_labels=[g[0] for g in groups])
        ax.invert_yaxis()
    ax.set_xlabel("episode length (steps)")
    return fig


def read_latencies(run: RunData) -> np.ndarray:
    """Per-call policy latency (seconds, float64) recorded in a run directory's step files; empty for exports.
    Files are listed with :func:`rollbench.record.safe_files.run_files`; an unreadable one (a damaged run included
    with --allow-damaged, where grade named it) is left out."""
    from rollbench.record.files import read_parquet
    from rollbench.record.safe_files import run_files

    if run.run_dir is None:
        return np.zeros(0)
    parts = []
    for f in run_files(Path(run.run_dir), "data/chunk-*/file-*.parquet"):
        try:
            parts.append(read_parquet(f, columns=["policy.latency_s"]).column(0).to_numpy(zero_copy_only=False))
        except (OSError, ValueError, KeyError, pa.ArrowException):
            continue
    values = np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)
    return values[~np.isnan(values)]


def latency_figure(runs: list[RunData]) -> Figure:
    """Histogram of per-call policy latency (ms, log scale) for each run directory."""
    fig, ax = plt.subplots(figsize=(7.0, 3.0), layout="constrained")
    data = [(_run_label(r), read_latencies(r) * 1000) for r in runs]
    data = [(name, v[v > 0]) for name, v in data if v.size]
    if data:
        lo = min(float(v.min()) for _, v in data)
        hi = max(float(v.max()) for _, v in data)
        bins = np.geomspace(lo, max(hi, lo * 1.01), 40).tolist()
        for name, v in data:
            ax.hist(v, bins=bins, histtype="step", linewidth=1.2, label=f"{name}: p50 {np.median(v):.3g} ms")
        ax.set_xscale("log")
        # labels at 1, 2 and 5 per decade, plain numbers: matplotlib's own labels of a short log range overlap
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=8)
    ax.set_xlabel("policy call latency (ms)")
    ax.set_ylabel("calls")
    return fig


def latency_sweep_figure(sweep: dict[str, Any]) -> Figure:
    """Success rate (with 95% Wilson interval whiskers) against the simulated delay per policy call (ms) of one
    latency sweep (:func:`rollbench.analysis.latency_sweep.latency_sweeps`); each point labelled with its
    ``--latency``. A ``measured`` point without a recorded latency is left out."""
    pts = [p for p in sweep["points"] if p["delay_ms"] is not None and p["success_rate"] is not None]
    fig, ax = plt.subplots(figsize=(7.0, 3.2), layout="constrained")
    if pts:
        xs = np.array([p["delay_ms"] for p in pts])
        ys = np.array([p["success_rate"] for p in pts])
        err = np.array([[y - p["ci95_low"] for y, p in zip(ys, pts, strict=True)],
                        [p["ci95_high"] - y for y, p in zip(ys, pts, strict=True)]])  # fmt: skip
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1.2)
        for x, y, p in zip(xs, ys, pts, strict=True):
            ax.annotate(p["latency"], (x, y), textcoords="offset points", xytext=(4, 6), fontsize=8)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel(f"simulated delay per policy call (ms, at {sweep['fps']} Hz)")
    ax.set_ylabel("success rate")
    ax.set_title(f"{sweep['policy']} on {sweep['env']} (stale actions: {sweep['stale']})", fontsize=9)
    return fig


def robustness_figure(study: dict[str, Any]) -> Figure:
    """Success rate against perturbation level for each graded category of a robustness study
    (:func:`rollbench.analysis.robustness.robustness_study`): the perturbed arm's rate per level with its 95% Wilson
    interval, and the control arm's rate over the same pairs (dashed). A study without levels draws one empty axis
    saying so."""
    graded = {c: b for c, b in study["categories"].items() if b["levels"]}
    fig, axes = plt.subplots(1, max(1, len(graded)), figsize=(3.6 * max(1, len(graded)), 3.0), layout="constrained",
                             squeeze=False)  # fmt: skip
    for ax, (cat, block) in zip(axes[0], graded.items(), strict=False):
        lv = block["levels"]
        xs = np.array([b["level"] for b in lv], dtype=float)
        ys = np.array([b["perturbed"]["rate"] for b in lv], dtype=float)
        err = np.array([[y - b["perturbed"]["ci95_low"] for y, b in zip(ys, lv, strict=True)],
                        [b["perturbed"]["ci95_high"] - y for y, b in zip(ys, lv, strict=True)]])  # fmt: skip
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1.2, label="perturbed")
        ax.plot(xs, [b["control"]["rate"] for b in lv], linestyle="--", marker=".", color="grey", label="control")
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel(f"{cat} level")
        ax.set_ylabel("success rate")
        ax.legend(fontsize=7, frameon=False)
    if not graded:
        axes[0][0].text(
            0.5,
            0.5,
            "no perturbation with levels in this study:\nthis figure plots success against a level;\nthe per-category table has the results",
            ha="center",
            va="center",
        )
        axes[0][0].set_axis_off()
    return fig


def sequential_figure(task: dict[str, Any]) -> Figure:
    """A sequential test's statistic against pairs: both log-likelihood ratios at every look (one task document of
    :func:`rollbench.sequential.recompute.compare_sequential`), the efficacy threshold (reached: B or A better),
    the futility threshold (both at or below: futility), the budget, and the deciding look."""
    d, looks = task["design"], task["looks"]
    fig, ax = plt.subplots(figsize=(7.0, 3.2), layout="constrained")
    xs = [lk["pairs"] for lk in looks]
    ax.step(xs, [lk["llr_b"] for lk in looks], where="post", label="llr: B better", color="tab:blue")
    ax.step(xs, [lk["llr_a"] for lk in looks], where="post", label="llr: A better", color="tab:orange")
    ax.axhline(d["efficacy_llr"], color="tab:green", linestyle="--", linewidth=1, label="decides")
    ax.axhline(d["futility_llr"], color="tab:red", linestyle=":", linewidth=1, label="futility (both below)")
    right = max(xs[-1] if xs else 1, 1)
    if task["stopped_at"] is not None:
        ax.axvline(task["stopped_at"], color="black", linewidth=0.8)
        ax.annotate(task["decision"], (task["stopped_at"], d["efficacy_llr"]), xytext=(4, 4),
                    textcoords="offset points", fontsize=8)  # fmt: skip
    ax.set_xlim(0, max(right * 1.1, right + 2))
    ax.set_ylim(max(min([0.0, *(lk["llr_a"] for lk in looks), *(lk["llr_b"] for lk in looks)]), -12) - 0.5,
                d["efficacy_llr"] + 1.5)  # fmt: skip
    ax.set_xlabel(f"pairs (budget {d['budget']}; fixed-N McNemar {d['fixed_n']})")
    ax.set_ylabel("log-likelihood ratio")
    ax.set_title(f"{task['task']}: {task['policy_b']} (B) vs {task['policy_a']} (A), delta {d['delta']:g}", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    return fig


def to_png(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (closes it)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


PLOT_FORMATS = ("png", "svg")  # the files of one figure in ``report --plots DIR``


def plot_files(fig: Figure, name: str, dpi: int = 150) -> dict[str, bytes]:
    """The figure as the files ``report --plots`` writes: ``NAME.png`` and ``NAME.svg`` -> their bytes (the figure
    stays open; the caller writes them with :func:`rollbench.record.files.write_outputs`)."""
    out = {}
    for ext in PLOT_FORMATS:
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=dpi)
        out[f"{name}.{ext}"] = buf.getvalue()
    return out


def render_figure(draw: tuple[str, Callable[[], Figure]], plots: dict[str, bytes] | None) -> bytes:
    """Draw one figure (``draw`` is ``(name, function)``), add its :func:`plot_files` to ``plots`` when given, and
    return it as PNG bytes; the figure is closed, also when drawing a file failed."""
    name, make = draw
    fig = make()
    try:
        if plots is not None:
            plots.update(plot_files(fig, name))
        return to_png(fig)
    finally:
        plt.close(fig)
