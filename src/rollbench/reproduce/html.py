"""The reproduction document as an HTML section (``rollbench report --reference``, the dashboard's run page):
rendered from ``templates/reproduction.html.j2`` with Jinja2's autoescaping (no script, no external resource), the
same numbers and sentences as the plain-text form."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollbench.core.format import template_environment
from rollbench.reproduce.document import sentence
from rollbench.reproduce.protocol import describe

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup

TEMPLATES = Path(__file__).with_name("templates")


@cache
def _env() -> Environment:
    return template_environment(TEMPLATES)


def _notes(doc: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    notes = [f"{r['suite']}: {sentence(r, doc)}" for r in rows]
    notes += [f"{r['suite']}: protocol differs: {describe(d)}" for r in doc["rows"] for d in r["protocol_differences"]]
    notes += [
        f"run {run['run_dir']} departs from the benchmark: {describe(d)}"
        for run in doc["runs"]
        for d in run["differences"]
    ]
    if doc["reference_not_in_runs"]:
        notes.append(f"not in the runs: {', '.join(doc['reference_not_in_runs'])}")
    if doc["reference"]["discrepancy"]:
        notes.append(f"note on the source: {doc['reference']['discrepancy']}")
    return notes


def reproduction_html(doc: dict[str, Any]) -> Markup:
    """``<h2>Reproduction of NAME</h2>`` with the reference, the rule, one table row per suite (and overall), each
    row's sentence and protocol differences, and what did not match; escaped markup, safe to embed."""
    from markupsafe import Markup

    rows = [*doc["rows"], *([{**doc["overall"], "suite": "overall"}] if doc["overall"] else [])]
    return Markup(_env().get_template("reproduction.html.j2").render(doc=doc, rows=rows, notes=_notes(doc, rows)))
