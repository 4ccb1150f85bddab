"""``rollbench report``: one self-contained, offline HTML file (figures inlined as base64 PNG, no script, no
external resource) with the inputs, the task x model summary, success rate per task with interval bars, the
comparison tables and difference plots, episode length and policy latency distributions, and, when a dashboard URL
is given, links to every episode's review page and video. ``--plots DIR`` writes the same figures as PNG and SVG.

The comparison covers the run directories among the inputs (exports carry no horizon or success rule, so they are
summarised but not compared), each pair decided on its own (:func:`rollbench.analysis.compare.compare_where_paired`):
paired statistics where the pair's episodes pair on their common tasks, unpaired statistics (Fisher's exact test)
only where they do not, said in that pair's table; pairs with no task in common are listed, not compared. When any
comparison is unpaired, a warning at the top of the report says which. Summary warnings (repeated episodes pooled in
one cell) are shown at the top too.

Figures are drawn one at a time and closed once written, so any number of runs keeps at most one figure open.
"""

from __future__ import annotations

import base64
import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollbench.analysis.sources import Loaded
from rollbench.analysis.summarize import Labels, summarize_runs

_CSS = """
body{font-family:Georgia,serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}th,td{border:1px solid #ccc;padding:.2em .5em}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0}figure img{max-width:100%}figcaption{font-size:.85em;color:#555}
.note{font-size:.85em;color:#555}.warn{color:#8a3b00;background:#fff4e0;padding:.3em .5em}
"""


def _e(value: Any) -> str:
    return html.escape("—" if value is None else str(value))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _pts(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}"


def _p(x: float | None) -> str:
    return "—" if x is None else (f"{x:.3g}" if x >= 0.001 else f"{x:.1e}")


def _table(head: list[str], rows: list[list[str]], numeric_from: int) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i >= numeric_from else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def figure_specs(loaded: Loaded, summary: dict[str, Any], comparison: dict[str, Any] | None) -> dict[str, Any]:
    """Name -> (a function drawing the matplotlib Figure, caption) for the report, in report order. Nothing is
    drawn here: call each function when the figure is needed and close its figure once written."""
    from rollbench.analysis import figures

    out: dict[str, Any] = {
        "success_rate": (
            lambda: figures.success_rate_figure(summary),
            "Success rate per task and model (95% Wilson interval).",
        ),
    }
    for i, c in enumerate((comparison or {}).get("comparisons", []), 1):
        cap = f"{c['b']} minus {c['a']} per task and pooled ({c['statistics']} bootstrap 95% interval)."
        out[f"difference_{i}"] = (lambda c=c: figures.difference_figure(c), cap)
    out["episode_length"] = (lambda: figures.length_figure(loaded.runs), "Episode length (steps) per task and run.")
    dirs = [r for r in loaded.runs if r.run_dir is not None]
    if dirs:
        out["latency"] = (lambda: figures.latency_figure(dirs), "Policy call latency per run (recorded per step).")
    return out


def render_figure(draw: Any, plots_dir: Path | None) -> bytes:
    """Draw one figure, write it as ``plots_dir``/NAME.png and .svg when given (``draw`` is ``(name, function)``),
    and return it as PNG bytes; the figure is closed before returning."""
    import matplotlib.pyplot as plt

    from rollbench.analysis import figures

    name, make = draw
    fig = make()
    try:
        if plots_dir is not None:
            for ext in ("png", "svg"):
                fig.savefig(plots_dir / f"{name}.{ext}", format=ext, dpi=150)
        return figures.to_png(fig)
    finally:
        plt.close(fig)  # also when writing a plot file failed


def _comparison_html(comparison: dict[str, Any]) -> str:
    parts = []
    for c in comparison["comparisons"]:
        paired = c["statistics"] == "paired"
        head = ["task", "A", "B", "B − A (pts)", "95% CI (bootstrap)"]
        head += (["A only", "B only", "McNemar p"] if paired else ["Fisher p"]) + ["p (Holm)"]
        rows = []
        for r in [*c["tasks"], {"task": "pooled", **c["pooled"]}]:
            row = [_e(r["task"]), _pct(r["a"]["success_rate"]), _pct(r["b"]["success_rate"]), _pts(r["difference"])]
            row.append(f"[{_pts(r['diff_ci95_low'])}, {_pts(r['diff_ci95_high'])}]")
            row += [_e(r["a_only"]), _e(r["b_only"])] if paired else []
            row += [_p(r["p_value"]), _p(r.get("p_holm", r.get("p_holm_pairs")))]
            rows.append(row)
        kind = "paired" if paired else "UNPAIRED"
        title = f"A = {_e(c['a'])} ({_e(c['model_a'])}), B = {_e(c['b'])} ({_e(c['model_b'])}) — {kind}"
        note = ""
        if not paired:
            note = (
                "<p class=warn>Unpaired statistics for this pair (Fisher's exact test, unpaired bootstrap): "
                f"{_e(c.get('unpaired_reason', 'compare --unpaired'))}.</p>"
            )
        if c["tasks_not_compared"]:
            note += f"<p class=note>Tasks not in both runs (not compared): {_e(', '.join(c['tasks_not_compared']))}</p>"
        parts.append(f"<h3>{title}</h3>" + note + _table(head, rows, 1))
    if comparison.get("not_compared"):
        skipped = "; ".join(f"{x['a']} vs {x['b']}" for x in comparison["not_compared"])
        parts.append(f"<p class=note>Not compared (no task in common): {_e(skipped)}.</p>")
    if len(comparison["ranking"]) > 2:
        rows = [
            [_e(r["rank"]), _e(r["run"]), _e(r["model"]), _pct(r["success_rate"]), _e(r["episodes"])]
            for r in comparison["ranking"]
        ]
        parts.append("<h3>Ranking by pooled success rate</h3>" + _table(["rank", "run", "model", "rate", "n"], rows, 3))
    return "".join(parts)


SHOWN_PAIRS = 5  # pairs named in the unpaired warning; the rest are counted (each is marked in the report)


def unpaired_warning(comparison: dict[str, Any] | None) -> str | None:
    """The report's top warning when any comparison uses unpaired statistics (naming the first
    :data:`SHOWN_PAIRS` pairs and counting the rest), else None."""
    if not comparison:
        return None
    unpaired = [c for c in comparison["comparisons"] if c["statistics"] != "paired"]
    if not unpaired:
        return None
    shown = unpaired[:SHOWN_PAIRS]
    pairs = "; ".join(f"{c['a']} vs {c['b']} ({c.get('unpaired_reason', 'unpaired')})" for c in shown)
    if len(unpaired) > len(shown):
        pairs += f"; and {len(unpaired) - len(shown)} more, each marked UNPAIRED in the report"
    return (
        f"{len(unpaired)} of {len(comparison['comparisons'])} comparisons use unpaired statistics (Fisher's exact "
        f"test), weaker than the paired McNemar test, because their episodes do not pair: {pairs}"
    )


def report_warnings(comparison: dict[str, Any] | None, summary: dict[str, Any]) -> list[str]:
    """The report's warnings, in order: unpaired comparisons (:func:`unpaired_warning`), then the summary's."""
    return [w for w in [unpaired_warning(comparison)] if w] + summary["warnings"]


def _episode_links(loaded: Loaded, url: str) -> str:
    base = html.escape(url.rstrip("/"), quote=True)
    parts = []
    for run in loaded.runs:
        cams = []
        if run.run_dir is not None:
            from rollbench.grade.files import read_info

            feats = read_info(Path(run.run_dir), []).get("features", {})  # regular file, inside the run, or {}
            cams = [k.removeprefix("observation.images.") for k, v in feats.items() if v.get("dtype") == "video"]
        rows = []
        for ep in run.episodes:
            key = html.escape(run.identity.episode_key(ep["episode_index"]), quote=True)
            links = f'<a href="{base}/episode/{key}">review</a>'
            links += "".join(f' <a href="{base}/media/{key}/{html.escape(c, quote=True)}">{_e(c)}</a>' for c in cams)
            ok = "success" if ep["success"] else ep.get("termination_reason")
            rows.append([_e(ep["episode_index"]), _e(ep["task"]), _e(ep["seed"]), _e(ok), links])
        parts.append(
            f"<details><summary>{_e(run.key)} ({len(rows)} episodes)</summary>"
            + _table(["episode", "task", "seed", "outcome", "links"], rows, 99)
            + "</details>"
        )
    return "".join(parts)


def render_report(
    loaded: Loaded,
    *,
    labels: Labels | None = None,
    comparison: dict[str, Any] | None = None,
    dashboard_url: str | None = None,
    plots_dir: Path | None = None,
    summary: dict[str, Any] | None = None,
) -> str:
    """The report as one HTML document (str). Figures are PNG data URIs; ``plots_dir`` also gets PNG + SVG files.
    ``summary``: ``summarize_runs(loaded, labels=labels)`` when the caller has it already (computed here if not)."""
    from importlib.metadata import version

    __version__ = version("rollbench")

    if summary is None:
        summary = summarize_runs(loaded, labels=labels)
    if plots_dir is not None:
        plots_dir.mkdir(parents=True, exist_ok=True)
    img = {}
    for name, (make, cap) in figure_specs(loaded, summary, comparison).items():
        png = base64.b64encode(render_figure((name, make), plots_dir)).decode()
        img[name] = (
            f'<figure><img alt="{_e(cap)}" src="data:image/png;base64,{png}"><figcaption>{_e(cap)}</figcaption></figure>'
        )
    runs_rows = [
        [
            _e(r["run"]),
            _e(r["model"]),
            _e(r["policy"]),
            _e(r["status"]) + (" <strong>DAMAGED</strong>" if r.get("damaged") else ""),  # --allow-damaged
            _e(r["episodes"]),
            _e(r["path"]),
        ]
        for r in summary["runs"]
    ]
    cell_rows = [
        [
            *(_e(c.get(k)) for k in ("task", "model", "instruction")),
            _e(", ".join(c["variants"]) or None),
            *(_e(c.get(k)) for k in ("episodes", "repeats", "errored", "successes")),
            _pct(c["success_rate"]),
            f"{_pct(c['ci95_low'])} – {_pct(c['ci95_high'])}",
        ]
        for c in summary["cells"]
    ]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = [
        f"<h1>rollbench report</h1><p class=note>Generated {now} by rollbench {_e(__version__)} from the recorded "
        "run files; every number is recomputed from disk (<code>rollbench grade</code>, <code>rollbench "
        "summarize</code>, <code>rollbench compare</code>).</p>",
    ]
    warnings = report_warnings(comparison, summary)
    sections += [f"<p class=warn><strong>Warning:</strong> {_e(w)}</p>" for w in warnings]
    sections.append("<h2>Runs</h2>" + _table(["run", "model", "policy", "status", "episodes", "source"], runs_rows, 4))
    if loaded.in_progress:
        left = ", ".join(f"{p['run']} ({p['why']})" for p in loaded.in_progress)
        sections.append(f"<p class=note>Left out, still being recorded: {_e(left)}</p>")
    sections.append(
        "<h2>Success rate per task</h2>"
        + _table(
            ["task", "model", "instruction", "variants", "n", "repeats", "errored", "successes", "rate", "95% CI"],
            cell_rows,
            4,
        )
        + img["success_rate"]
    )
    if comparison:
        diffs = "".join(v for k, v in img.items() if k.startswith("difference_"))
        b = comparison["bootstrap"]
        method = (
            "<p class=note>Each pair of runs is compared on the tasks both ran, and decided on its own. Paired "
            "(where the two runs' episodes pair by task, seed, initial state and instruction, with the same horizon "
            "and success rule): the difference is B minus A with a paired bootstrap 95% percentile interval "
            f"({b['n_resamples']} resamples, seed {b['seed']}; pooled: resampled within each task) and p is the "
            "exact McNemar test on the discordant pairs. Unpaired (only where the episodes do not pair; said in the "
            "pair's table): Fisher's exact test and an unpaired bootstrap interval. p is Holm-corrected across "
            "tasks; pooled, with more than one comparison, across the comparisons made. Errored episodes count as "
            "failures.</p>"
        )
        sections.append("<h2>Comparison</h2>" + method + _comparison_html(comparison) + diffs)
    sections.append("<h2>Episode lengths and policy latency</h2>" + img["episode_length"] + img.get("latency", ""))
    if dashboard_url:
        sections.append("<h2>Episodes</h2>" + _episode_links(loaded, dashboard_url))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>rollbench report</title>'
        f"<style>{_CSS}</style></head><body>{''.join(sections)}</body></html>"
    )


def report_comparison(loaded: Loaded, seed: int = 0, n_resamples: int = 10_000) -> dict[str, Any] | None:
    """The comparison a report shows: :func:`rollbench.analysis.compare.compare_where_paired` over the run
    directories (pairing decided per pair); None with fewer than two run directories."""
    from rollbench.analysis.compare import compare_where_paired

    dirs = [r for r in loaded.runs if r.run_dir is not None]
    if len(dirs) < 2:
        return None
    return compare_where_paired(dirs, seed=seed, n_resamples=n_resamples)
