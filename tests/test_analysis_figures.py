"""The report's figures drawn from hand-written summary and comparison documents: where bars, labels and points land
(in data and in points on the page). The PNGs go to ``$ROLLBENCH_TEST_ARTIFACTS`` (default ``test-artifacts/``)
for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from conftest import REPO
from rollbench.analysis.figures import difference_figure, success_rate_figure, to_png


def _artifacts() -> Path:
    path = Path(os.environ.get("ROLLBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cell(task: str, model: str, rate: float, lo: float, hi: float) -> dict[str, Any]:
    return {"task": task, "model": model, "success_rate": rate, "ci95_low": lo, "ci95_high": hi, "variants": []}


def test_a_task_only_one_run_has_gets_its_label_at_its_own_bar() -> None:
    cells = [
        _cell("mw/reach-v3", "m1", 0.6, 0.3, 0.85),
        _cell("mw/reach-v3", "m2", 0.4, 0.15, 0.7),
        _cell("mw/button-press-v3", "m2", 0.8, 0.5, 0.95),  # m1 did not run this task
        _cell("mw/door-open-v3", "m1", 0.2, 0.05, 0.5),  # m2 did not run this one
    ]
    fig = success_rate_figure({"cells": cells})
    ax = fig.axes[0]
    # tasks sorted: button-press (row 0), door-open (row 1), reach (row 2); two series, so bars 0.4 high
    ticks = {t.get_text(): y for t, y in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True)}
    assert ticks == {"button-press-v3": 0, "door-open-v3": 1, "reach-v3": 2}
    bars = sorted((round(p.get_y() + p.get_height() / 2, 9), round(p.get_width(), 9)) for p in ax.patches)
    assert bars == [(0.0, 80.0), (1.0, 20.0), (1.8, 60.0), (2.2, 40.0)]  # single bars on their row, pairs around it
    (_artifacts() / "figure-success-rate-missing-task.png").write_bytes(to_png(fig))


def test_differences_of_minus_and_plus_100_points_sit_clear_of_the_frame() -> None:
    comparison = {
        "tasks": [
            {"task": "mw/reach-v3", "difference": -1.0, "diff_ci95_low": -1.0, "diff_ci95_high": -1.0},
            {"task": "mw/button-press-v3", "difference": 1.0, "diff_ci95_low": 1.0, "diff_ci95_high": 1.0},
        ],
        "pooled": {"difference": 0.0, "diff_ci95_low": -1.0, "diff_ci95_high": 1.0},
        "statistics": "paired",
        "model_a": "expert",
        "model_b": "zero",
    }
    fig = difference_figure(comparison)
    ax = fig.axes[0]
    assert ax.get_xlim() == (-115.0, 115.0)
    assert list(ax.get_xticks()) == [-100, -50, 0, 50, 100]
    fig.canvas.draw()
    box = ax.get_window_extent()
    pt = 72 / fig.dpi
    left = (ax.transData.transform((-100, 0))[0] - box.x0) * pt
    right = (box.x1 - ax.transData.transform((100, 0))[0]) * pt
    # a marker is 6 pt wide (matplotlib's default lines.markersize): its edge must be well off the axis line
    assert left > 3 * 6 and right > 3 * 6, (left, right)
    (_artifacts() / "figure-difference-100-points.png").write_bytes(to_png(fig))
