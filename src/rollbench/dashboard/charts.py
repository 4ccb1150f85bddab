"""Inline SVG charts of the dashboard: success rate per task with its interval (geometry here, drawn by a template,
as it shows task names), and an episode's step timeline (numbers only, drawn here as markup)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from rollbench.core.format import interval, pct

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def rate_chart(tasks: dict[str, dict[str, Any]], width: int = 640) -> dict[str, Any]:
    """The geometry of the success-rate chart (drawn by ``templates/rate_chart.html.j2``): one row per task, a bar
    for the success rate and a whisker for the 95% Wilson interval, on a 0-100% axis. Sizes are SVG user units;
    x positions are strings with one decimal, as drawn."""
    label_w, row_h, pad = 220, 24, 28
    plot_w = width - label_w - 34
    rows = []
    for i, (name, t) in enumerate(tasks.items()):
        row: dict[str, Any] = {"name": name, "y": pad + i * row_h, "rate": t.get("success_rate")}
        if row["rate"] is not None:
            lo, hi = label_w + plot_w * t["ci95_low"], label_w + plot_w * t["ci95_high"]
            row.update(
                bar_w=f"{plot_w * row['rate']:.1f}",
                lo=f"{lo:.1f}",
                hi=f"{hi:.1f}",
                rate_text=pct(row["rate"]),
                interval_text=interval(t["ci95_low"], t["ci95_high"]),
                successes=t["successes"],
                episodes=t["episodes"],
            )
        rows.append(row)
    return {
        "width": width,
        "height": pad + row_h * len(tasks) + 10,
        "label_w": label_w,
        "row_h": row_h,
        "pad": pad,
        "grid": [{"x": f"{label_w + plot_w * pct / 100:.1f}", "pct": pct} for pct in (0, 25, 50, 75, 100)],
        "rows": rows,
    }


def _polyline(values: list[float], n: int, x0: float, w: float, y0: float, h: float, lo: float, hi: float) -> str:
    span = (hi - lo) or 1.0
    pts = " ".join(
        f"{x0 + w * (i + 0.5) / n:.1f},{y0 + h - h * (v - lo) / span:.1f}" for i, v in enumerate(values) if v == v
    )
    return pts


def timeline_svg(steps: dict[str, Any], fps: float | None, width: int = 640) -> Markup:
    """Reward (line), success (green band) and each action dimension (lines) per step, with a playhead over the
    tracks (never over the labels above and below them).

    ``steps`` holds lists ``reward``, ``success``, ``action`` (rows of floats); x is the step (``i / fps`` seconds).
    """
    n = len(steps.get("reward") or [])
    if n == 0:
        return Markup('<p class="timeline-empty">No steps recorded.</p>')
    x0, w = 60, width - 70
    rows = {"reward": (20, 36), "success": (64, 14), "action": (86, 66)}
    height = 166
    duration = n / (fps or 10)
    parts = [
        f'<svg id="timeline" class="timeline" data-duration="{duration:.4f}" data-steps="{n}" data-x0="{x0}" data-w="{w}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
    ]
    for name, (y, h) in rows.items():
        parts.append(f'<text x="4" y="{y + h / 2 + 4:.0f}" class="tick">{name}</text>')
        parts.append(f'<rect x="{x0}" y="{y}" width="{w}" height="{h}" class="track"/>')
    rew = [float(r) for r in steps["reward"]]
    finite = [r for r in rew if r == r]
    y, h = rows["reward"]
    if finite:
        pts = _polyline(rew, n, x0, w, y, h, min(finite), max(finite))
        parts.append(f'<polyline points="{pts}" class="reward"/>')
        parts.append(f'<text x="{x0 + w}" y="{y - 5}" class="tick end">{min(finite):.3g} … {max(finite):.3g}</text>')
    y, h = rows["success"]
    for i, s in enumerate(steps["success"]):
        if s:
            parts.append(
                f'<rect x="{x0 + w * i / n:.1f}" y="{y}" width="{w / n + 0.5:.1f}" height="{h}" class="success"/>'
            )
    y, h = rows["action"]
    actions = steps.get("action") or []
    dims = len(actions[0]) if actions else 0
    flat = [v for row in actions for v in row if v == v]
    if flat:
        lo, hi = min(flat), max(flat)
        for d in range(min(dims, len(PALETTE))):
            pts = _polyline([row[d] for row in actions], n, x0, w, y, h, lo, hi)
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{PALETTE[d]}" stroke-width="1.2"/>')
    # the playhead spans the tracks only: the labels above and below them (the reward range, the duration) stay
    # readable when it reaches the end
    top, bottom = rows["reward"][0], rows["action"][0] + rows["action"][1]
    parts.append(f'<line id="playhead" x1="{x0}" y1="{top}" x2="{x0}" y2="{bottom}" class="playhead"/>')
    parts.append(f'<text x="{x0}" y="{height - 1}" class="tick">0 s</text>')
    parts.append(f'<text x="{x0 + w}" y="{height - 1}" class="tick end">{duration:.2f} s ({n} steps)</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # only numbers and this module's own words: nothing to escape


def sequential_svg(task: dict[str, Any], width: int = 640) -> Markup:
    """A sequential test's statistic against pairs (one task document of
    :func:`rollbench.sequential.recompute.compare_sequential`): both log-likelihood ratios as steps, the threshold
    that decides (dashed), the futility threshold (dotted), the deciding look (a vertical line with the decision)."""
    d, looks = task["design"], task["looks"]
    x0, y0, w, h = 44, 10, width - 60, 150
    n = max([lk["pairs"] for lk in looks] + [1])
    lo = max(min([0.0, d["futility_llr"]] + [min(lk["llr_a"], lk["llr_b"]) for lk in looks]), -12.0) - 0.5
    hi = d["efficacy_llr"] + 1.0

    def x(pairs: float) -> str:
        return f"{x0 + w * pairs / (n * 1.05):.1f}"

    def y(v: float) -> str:
        return f"{y0 + h - h * (max(v, lo) - lo) / (hi - lo):.1f}"

    parts = [f'<svg class="sequential" viewBox="0 0 {width} {h + 34}" width="{width}" height="{h + 34}">']
    parts.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" class="track"/>')
    for key, color in (("llr_b", PALETTE[0]), ("llr_a", PALETTE[1])):
        pts, prev = [f"{x(0)},{y(0.0)}"], 0.0
        for lk in looks:
            pts += [f"{x(lk['pairs'])},{y(prev)}", f"{x(lk['pairs'])},{y(lk[key])}"]
            prev = lk[key]
        parts.append(
            f'<polyline points="{" ".join(pts)}" fill="none" stroke="{color}" stroke-width="1.5" class="{key}"/>'
        )
    for v, dash, cls in ((d["efficacy_llr"], "5,3", "efficacy"), (d["futility_llr"], "2,2", "futility")):
        parts.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{y(v)}" y2="{y(v)}" stroke-dasharray="{dash}" class="{cls}"/>')
        parts.append(f'<text x="{x0 - 4}" y="{float(y(v)) + 4:.1f}" class="tick end">{v:.2f}</text>')
    if task["stopped_at"] is not None:
        xs = x(task["stopped_at"])
        parts.append(f'<line x1="{xs}" x2="{xs}" y1="{y0}" y2="{y0 + h}" class="decision"/>')
        parts.append(
            f'<text x="{xs}" y="{y0 + h + 14}" class="tick">{task["decision"]} at pair {task["stopped_at"]}</text>'
        )
    parts.append(
        f'<text x="{x0}" y="{y0 + h + 28}" class="tick">llr B better (blue), A better (orange) against pairs; budget {d["budget"]}</text>'
    )
    parts.append("</svg>")
    return Markup("".join(parts))  # numbers and the decision (one of four fixed words, validated): nothing to escape


def step_chart_svg(ranking: dict[str, Any], width: int = 640, height: int = 220) -> Markup:
    """Success rate (%) against training step for a checkpoints ranking (:func:`rollbench.checkpoints.rank.rank`):
    one circle per checkpoint at its rate (class ``best`` for the best, ``worse`` for those worse than it by Holm;
    with ``--eliminate`` ``chosen`` for the chosen step and ``eliminated`` for those the rule eliminated)
    with a whisker for its 95% Wilson interval, on a 0-100% axis; steps spaced linearly. Numbers only."""
    rows = sorted((r for r in ranking["checkpoints"] if r["success_rate"] is not None), key=lambda r: r["step"])
    x0, y0, w, h = 60, 14, width - 80, height - 48
    lo_step = rows[0]["step"] if rows else 0
    span = (rows[-1]["step"] - lo_step) if len(rows) > 1 else 0

    def x(step: int) -> float:
        return x0 + (w * (step - lo_step) / span if span else w / 2)

    def y(rate: float) -> float:
        return y0 + h - h * rate

    parts = [f'<svg class="steps" viewBox="0 0 {width} {height}" width="{width}" height="{height}">']
    for p in (0, 25, 50, 75, 100):
        parts.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{y(p / 100):.1f}" y2="{y(p / 100):.1f}" class="grid"/>')
        parts.append(f'<text x="{x0 - 6}" y="{y(p / 100) + 4:.1f}" class="end">{p}%</text>')
    if len(rows) > 1:
        pts = " ".join(f"{x(r['step']):.1f},{y(r['success_rate']):.1f}" for r in rows)
        parts.append(f'<polyline points="{pts}" class="rate-line"/>')
    for r in rows:
        cx, kind = x(r["step"]), "best" if r["step"] == ranking.get("best") else "point"
        kind = "worse" if (r.get("paired") or {}).get("worse") else kind
        kind = {"chosen": "chosen", "eliminated": "eliminated"}.get(r.get("decision", ""), kind)  # --eliminate
        lo, hi = r["ci95"]
        parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" class="ci"/>')
        parts.append(f'<circle cx="{cx:.1f}" cy="{y(r["success_rate"]):.1f}" r="4" class="{kind}"/>')
        parts.append(f'<text x="{cx:.1f}" y="{y0 + h + 16}" class="step">{int(r["step"])}</text>')
    parts.append(f'<text x="{x0 + w / 2:.0f}" y="{height - 4}" class="step">training step</text></svg>')
    return Markup("".join(parts))
