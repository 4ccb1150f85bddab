"""Inline SVG drawn on the server: success rate per task with its interval, and an episode's step timeline."""

from __future__ import annotations

from html import escape
from typing import Any

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def rate_chart(tasks: dict[str, dict[str, Any]], width: int = 640) -> str:
    """One row per task: a bar for the success rate and a whisker for the 95% Wilson interval (0-100%)."""
    label_w, row_h, pad = 220, 24, 28
    plot_w = width - label_w - 20
    height = pad + row_h * len(tasks) + 10
    parts = [
        f'<svg class="chart" role="img" aria-label="success rate per task" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
    ]
    for pct in (0, 25, 50, 75, 100):
        x = label_w + plot_w * pct / 100
        parts.append(f'<line x1="{x:.1f}" y1="{pad - 6}" x2="{x:.1f}" y2="{height - 6}" class="grid"/>')
        parts.append(f'<text x="{x:.1f}" y="{pad - 10}" class="tick">{pct}%</text>')
    for i, (name, t) in enumerate(tasks.items()):
        y = pad + i * row_h
        rate = t.get("success_rate")
        parts.append(f'<text x="{label_w - 8}" y="{y + 15}" class="name">{escape(name)}</text>')
        if rate is None:
            parts.append(f'<text x="{label_w + 4}" y="{y + 15}" class="tick">no episodes</text>')
            continue
        lo, hi = label_w + plot_w * t["ci95_low"], label_w + plot_w * t["ci95_high"]
        parts.append(f'<rect x="{label_w}" y="{y + 5}" width="{plot_w * rate:.1f}" height="{row_h - 10}" class="bar"/>')
        parts.append(f'<line x1="{lo:.1f}" y1="{y + 12}" x2="{hi:.1f}" y2="{y + 12}" class="ci"/>')
        for x in (lo, hi):
            parts.append(f'<line x1="{x:.1f}" y1="{y + 6}" x2="{x:.1f}" y2="{y + 18}" class="ci"/>')
        parts.append(
            f"<title>{escape(name)}: {100 * rate:.1f}% ({t['successes']}/{t['episodes']}), "
            f"95% CI {100 * t['ci95_low']:.1f}-{100 * t['ci95_high']:.1f}%</title>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _polyline(values: list[float], n: int, x0: float, w: float, y0: float, h: float, lo: float, hi: float) -> str:
    span = (hi - lo) or 1.0
    pts = " ".join(
        f"{x0 + w * (i + 0.5) / n:.1f},{y0 + h - h * (v - lo) / span:.1f}" for i, v in enumerate(values) if v == v
    )
    return pts


def timeline_svg(steps: dict[str, Any], fps: float | None, width: int = 640) -> str:
    """Reward (line), success (green band) and each action dimension (lines) per step, with a playhead.

    ``steps`` holds lists ``reward``, ``success``, ``action`` (rows of floats); x is the step (``i / fps`` seconds).
    """
    n = len(steps.get("reward") or [])
    if n == 0:
        return '<p class="timeline-empty">No steps recorded.</p>'
    x0, w = 60, width - 70
    rows = {"reward": (8, 40), "success": (56, 14), "action": (78, 70)}
    height = 158
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
        parts.append(f'<text x="{x0 + w}" y="{y - 1}" class="tick end">{min(finite):.3g} … {max(finite):.3g}</text>')
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
    parts.append(f'<line id="playhead" x1="{x0}" y1="2" x2="{x0}" y2="{height - 2}" class="playhead"/>')
    parts.append(f'<text x="{x0}" y="{height - 1}" class="tick">0 s</text>')
    parts.append(f'<text x="{x0 + w}" y="{height - 1}" class="tick end">{duration:.2f} s ({n} steps)</text>')
    parts.append("</svg>")
    return "".join(parts)
