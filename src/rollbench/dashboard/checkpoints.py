"""The dashboard's checkpoints pages: the ``rollbench checkpoints`` OUT folders among the local runs, each recomputed
from its run directories (:func:`rollbench.checkpoints.recompute.recompute`, as ``rollbench report`` does).

A folder is found, never named by a request: it is the parent of a local run (found below a ``--root`` by the
catalog) that holds a regular ``checkpoints.json``. Its name is its path below that root, the root's own name
first (``runs/act-pusht``); a request's name is only looked up among those found (404 otherwise), so no request
reaches a path the catalog did not list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from rollbench.checkpoints.recompute import is_checkpoints_out, recompute
from rollbench.checkpoints.view import section_view
from rollbench.core.format import is_decimal
from rollbench.dashboard.catalog import Catalog
from rollbench.dashboard.charts import step_chart_svg


def _name(folder: Path, roots: list[Path]) -> str:
    for root in roots:
        if folder == root or root in folder.parents:
            return "/".join((root.name, *folder.relative_to(root).parts))
    return folder.name


def folders(catalog: Catalog) -> dict[str, Path]:
    """Name -> OUT folder of every checkpoints folder holding a local run, by name (the first root wins a name)."""
    records, _ = catalog.records()
    found: dict[str, Path] = {}
    for parent in sorted({rec.run_dir.parent for rec in records}):
        if is_checkpoints_out(parent):
            found.setdefault(_name(parent, catalog.roots), parent)
    return dict(sorted(found.items()))


def listing(catalog: Catalog) -> list[dict[str, str]]:
    """``[{"name", "page", "api"}]`` of :func:`folders` (what the runs page links and ``/api/checkpoints`` lists)."""
    return [
        {"name": name, "page": f"/checkpoints/{quote(name)}", "api": f"/api/checkpoints/{quote(name)}"}
        for name in folders(catalog)
    ]


def detail(catalog: Catalog, name: str) -> dict[str, Any] | None:
    """``/api/checkpoints/NAME``: the folder recomputed at the default alpha and coverage rule (``ranking``,
    ``elimination``, ``statuses``, ``violations``, ``level_note``: one line when checkpoints.json records another),
    the page's view (:func:`rollbench.checkpoints.view.section_view`) and each step's run page; None for a name
    that is not a found folder."""
    folder = folders(catalog).get(name)
    if folder is None:
        return None
    got = recompute(folder)
    records, _ = catalog.records()
    runs = {rec.run_dir: f"/run/{rec.identity.key}" for rec in records if rec.run_dir.parent == folder}
    return {
        "name": name,
        "ranking": got.ranking,
        "elimination": got.elimination,
        "statuses": {str(s): st for s, st in got.statuses.items()},
        "violations": got.violations,
        "level_note": got.level_note,  # the folder records another alpha / rule than the verdict's (defaults)
        "view": section_view(got),
        "run_pages": {str(int(d.name)): url for d, url in sorted(runs.items()) if is_decimal(d.name)},
    }


def chart(d: dict[str, Any]) -> Any:
    """The success-against-step SVG of a :func:`detail` (None when nothing was ranked)."""
    return step_chart_svg(d["ranking"]) if d["ranking"] is not None else None
