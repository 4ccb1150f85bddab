"""The report's "Checkpoints" section: each ``rollbench checkpoints`` OUT folder among the report's inputs (the folder
holding a ``checkpoints.json`` beside the ``<step>`` run directories that were loaded), recomputed from its run
directories by :func:`rollbench.checkpoints.recompute.recompute` (the ranking, and the looks of ``--eliminate``);
every recorded number that differs from the recomputation is shown as a violation.

Each section holds the ranking table (step, run status, rate, 95% Wilson interval, scored / attempted, paired
difference to the best in points with the Holm-corrected exact McNemar p and the pairs; with ``--eliminate`` instead
of those the step's decision (chosen, kept, or the look that eliminated it) and rates labelled descriptive), the
figure of success against training step, and the verdict with its evidence (alpha, the coverage rule, episodes attempted and scored, the coverage notes; with ``--eliminate`` the chosen step, its
guarantee and the episodes used against the fixed-N design).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from rollbench.analysis.sources import Loaded
from rollbench.checkpoints.recompute import is_checkpoints_out, recompute, step_runs
from rollbench.checkpoints.view import section_view
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule


def checkpoint_folders(loaded: Loaded) -> list[Path]:
    """The OUT folders of ``rollbench checkpoints`` whose every ``<step>`` run directory is among the loaded ones
    (or those left out as in progress or as byte-copies of another: the recomputation names a copied step run,
    hostile round 15, F1): the inputs named the folder, or a folder holding it, not one of its runs
    alone. In path order."""
    dirs = [r.run_dir for r in loaded.runs if r.run_dir is not None]
    dirs += [Path(p["path"]) for p in loaded.in_progress if p.get("path")]
    dirs += [Path(c["path"]) for c in loaded.copies if c.get("path")]  # a step run copied over another: named there
    found = {d.resolve() for d in dirs}
    outs = {d.parent for d in dirs if is_checkpoints_out(d.parent)}
    return sorted(o for o in outs if {d.resolve() for d in step_runs(o)} <= found)


def without_checkpoint_runs(loaded: Loaded) -> tuple[Loaded, list[str]]:
    """``loaded`` less the runs of every :func:`checkpoint_folders` folder, and those runs' keys (sorted): a
    checkpoint run is reported in the Checkpoints section only, never pooled into the generic per-task cells nor
    compared pair by pair as an ordinary run (its checkpoints share one model name; ``--eliminate`` samples are
    adaptive). Runs left out as in progress and byte-copies stay as they were."""
    inside = {d.resolve() for out in checkpoint_folders(loaded) for d in step_runs(out)}
    moved = {id(r) for r in loaded.runs if r.run_dir is not None and r.run_dir.resolve() in inside}
    rest = [r for r in loaded.runs if id(r) not in moved]
    keys = sorted(r.key for r in loaded.runs if id(r) in moved)
    return Loaded(rest, loaded.in_progress, loaded.copies, loaded.unreadable), keys


def _figure(ranking: dict[str, Any], plots: dict[str, bytes] | None, name: str) -> bytes:
    """The success-against-step figure as PNG bytes (its NAME.png and .svg also added to ``plots`` when given)."""
    from rollbench.analysis.figures import render_figure
    from rollbench.checkpoints.figure import success_by_step_figure

    return render_figure((name, lambda: success_by_step_figure(ranking)), plots)


def checkpoint_sections(
    loaded: Loaded, plots: dict[str, bytes] | None = None, rule: CoverageRule = DEFAULT_RULE
) -> list[dict[str, Any]]:
    """One view per OUT folder (:func:`checkpoint_folders`) for ``templates/checkpoints.html.j2``: ``out``,
    ``violations``, and when it could be ranked ``head``, ``rows``, ``says``, ``evidence``, ``figure`` (base64 PNG,
    also added to ``plots`` as ``checkpoints_<i>.png``/``.svg``: file name -> bytes) and ``elimination``; the verdict
    at the default alpha and ``rule`` (the report's coverage options), never those the folder records."""
    views = []
    for i, out in enumerate(checkpoint_folders(loaded), 1):
        got = recompute(out, rule=rule)
        view = section_view(got)
        if got.ranking is not None:
            png = _figure(got.ranking, plots, f"checkpoints_{i}")
            caption = (
                f"{out.name}: success rate against training step (95% Wilson interval; hollow: worse than the best, "
                "Holm)."
                if got.elimination is None
                else f"{out.name}: success rate against training step (descriptive, adaptive sample; 95% Wilson "
                "interval; hollow: eliminated early; circled: chosen)."
            )
            view["figure"] = {"caption": caption, "png": base64.b64encode(png).decode()}
        views.append(view)
    return views


def checkpoint_warnings(sections: list[dict[str, Any]]) -> list[str]:
    """Every violation of :func:`checkpoint_sections` and its level note, prefixed with its folder (the report's top warnings and the
    command's stderr)."""
    notes = [[c["level_note"]] if c.get("level_note") else [] for c in sections]
    return [f"{c['out']}: {v}" for c, n in zip(sections, notes, strict=True) for v in [*c["violations"], *n]]
