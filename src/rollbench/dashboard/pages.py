"""Server-rendered HTML pages of the dashboard: Jinja2 templates (``templates/*.html.j2``, package data) with
autoescaping on, so every value a page shows is escaped by the engine; ``None`` shows as nothing. Assets are under
``/static``; nothing is loaded from elsewhere. Each page carries its data for ``dashboard.js`` as JSON in
``<script type="application/json" id="page-data">`` (Jinja2's ``tojson``: ``<``, ``>``, ``&`` and ``'`` written
as ``\\u`` escapes, so no value can end the script element).

The success-rate chart is an inline SVG (``templates/rate_chart.html.j2``, geometry from
:func:`rollbench.dashboard.charts.rate_chart`): one row per task, a bar for the rate and a whisker for its 95% Wilson
interval (both as graded by :func:`rollbench.grading.grade.grade`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollbench.core.format import template_environment
from rollbench.dashboard.charts import rate_chart, sequential_svg, timeline_svg

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATES = Path(__file__).with_name("templates")


@cache
def _env() -> Environment:
    return template_environment(TEMPLATES)


def _render(template: str, title: str, page: str, **context: Any) -> str:
    data = context.pop("page_data", {})
    return _env().get_template(template).render(title=title, page_data={"page": page, **data}, **context)


def runs_page(doc: dict[str, Any], checkpoints: list[dict[str, str]] | None = None) -> str:
    """``/``: the hosts, filters and one row per run of ``doc`` (:meth:`~rollbench.dashboard.service.Dashboard.runs`),
    and links to the ``checkpoints`` folders (:func:`rollbench.dashboard.checkpoints.listing`)."""
    return _render("runs.html.j2", "Runs", "runs", doc=doc, checkpoints=checkpoints or [])


def checkpoints_page(d: dict[str, Any], chart: Any) -> str:
    """``/checkpoints/NAME``: a checkpoints folder (:func:`rollbench.dashboard.checkpoints.detail`) with its
    ranking, verdict and success-against-step ``chart``."""
    return _render("checkpoints.html.j2", f"Checkpoints {d['name']}", "checkpoints", d=d, chart=chart)


def run_page(d: dict[str, Any], reproduction: dict[str, Any] | None = None, references: list[str] | None = None) -> str:
    """``/run/HOST/ROBOT/NAME``: ``d`` (:meth:`~rollbench.dashboard.service.Dashboard.run_detail`) as a page, with links
    to the shipped ``references`` that share a suite with the run and, for ``?reference=NAME``, the
    ``reproduction`` document (:func:`rollbench.reproduce.reproduce`) as a section."""
    chart = rate_chart(d["results"]["tasks"]) if d.get("results") else None
    section = None
    if reproduction is not None:
        from rollbench.reproduce.html import reproduction_html

        section = reproduction_html(reproduction)
    seq = d.get("sequential") or {}
    seq_svg = sequential_svg(seq["task"]) if seq.get("task") else None
    return _render(
        "run.html.j2", d["key"], "run", d=d, chart=chart, references=references or [], reproduction=section,
        sequential=seq, sequential_svg=seq_svg,
    )  # fmt: skip


def episode_page(d: dict[str, Any]) -> str:
    """``/episode/HOST/ROBOT/NAME/E``: ``d`` (:meth:`~rollbench.dashboard.service.Dashboard.episode_detail`) with its
    videos, timeline, facts and label form."""
    run, ep, rubric, nav = d["run"], d["episode"], d["rubric"], d["nav"]
    facts = [
        ("instruction", ep["instruction"]),
        ("task", ep["task"]),
        ("seed", ep["seed"]),
        ("trial", ep["trial"]),
        ("initial state", ep["initial_state"]),
        ("success (graded)", "yes" if ep["success"] else "no"),
        ("termination reason", ep["termination_reason"]),
        ("error", ep["error"]),
        ("render failure", ep.get("render_failure", ep.get("render_fault"))),  # a peer before issue 29: its old name
        ("length", f"{ep['length']} steps"),
        ("return", f"{ep['return']:.3f}" if ep["return"] is not None else "not a number"),
    ]
    data = {
        "label_api": f"/api/label/{ep['key']}",
        "labels": [lab["name"] for lab in rubric["labels"]],
        "label": ep["label"],
        "fps": run.get("fps") or 10,
        "next_unlabeled": nav["next_unlabeled"],
        "length": ep["length"],
    }
    timeline = timeline_svg(d["steps"], run.get("fps"))
    title = f"{run['key']}/{ep['episode_index']}"
    return _render("episode.html.j2", title, "episode", d=d, facts=facts, timeline=timeline, page_data=data)


def disagreements_page(doc: dict[str, Any]) -> str:
    """``/disagreements``: the episodes of ``doc`` whose label contradicts the graded success."""
    return _render("disagreements.html.j2", "Disagreements", "disagreements", doc=doc)
