"""The reproduction document as an HTML section (for ``rollbench report --reference``): escaped text only, no
script, no external resource, the same numbers and sentences as the plain-text form."""

from __future__ import annotations

import html
from typing import Any

from rollbench.reproduce.document import sentence
from rollbench.reproduce.protocol import describe


def _e(value: Any) -> str:
    return html.escape("—" if value is None else str(value))


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _p(x: float) -> str:
    return f"{x:.2g}" if x >= 0.001 else f"{x:.1e}"


def reproduction_html(doc: dict[str, Any]) -> str:
    """``<h2>Reproduction</h2>`` with the reference, the rule, one table row per suite (and overall), each row's
    sentence and protocol differences, and what did not match."""
    ref = doc["reference"]
    head = ["suite", "successes", "episodes", "rate", "95% CI", "reference", "difference", "p", "power", "verdict"]
    rows = [*doc["rows"], *([{**doc["overall"], "suite": "overall"}] if doc["overall"] else [])]
    body = []
    for r in rows:
        cells = [r["suite"], r["successes"], r["episodes"], _pct(r["rate"]), f"{_pct(r['ci95_low'])} – {_pct(r['ci95_high'])}",
                 f"{r['reference_rate']:g}%", f"{r['difference_pts']:+.1f} pts", _p(r["p_value"]), f"{r['power']:.2f}",
                 r["verdict"]]  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    notes = [f"<li>{_e(r['suite'])}: {_e(sentence(r, doc))}</li>" for r in rows]
    notes += [f"<li>{_e(r['suite'])}: protocol differs: {_e(describe(d))}</li>" for r in doc["rows"]
              for d in r["protocol_differences"]]  # fmt: skip
    notes += [f"<li>run {_e(run['run_dir'])} departs from the benchmark: {_e(describe(d))}</li>" for run in doc["runs"]
              for d in run["differences"]]  # fmt: skip
    if doc["reference_not_in_runs"]:
        notes.append(f"<li>not in the runs: {_e(', '.join(doc['reference_not_in_runs']))}</li>")
    if ref["discrepancy"]:
        notes.append(f"<li>note on the source: {_e(ref['discrepancy'])}</li>")
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (
        f"<h2>Reproduction of {_e(ref['name'])}</h2><p class=note>{_e(ref['policy'])}, reported by "
        f"{_e(ref['reported_by'])}; source: {_e(ref['source_label'])}. Runs: "
        f"{_e(', '.join(r['run_dir'] for r in doc['runs']))}. Rule: {_e(doc['rule'])}.</p>"
        f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table><ul class=note>{''.join(notes)}</ul>"
    )
