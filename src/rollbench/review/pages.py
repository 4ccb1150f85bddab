"""Server-rendered HTML pages of the dashboard (every value escaped; assets under ``/static``, nothing remote).

The success-rate chart is an inline SVG drawn here: one row per task, a bar for the rate and a whisker for its
95% Wilson interval (both as graded by :func:`rollbench.grade.grade.grade`).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from rollbench.review.charts import rate_chart, timeline_svg


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _interval(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"


def _page(title: str, body: str, script_data: dict[str, Any] | None = None) -> str:
    data = ""
    if script_data is not None:
        payload = json.dumps(script_data, default=str).replace("</", "<\\/")
        data = f'<script type="application/json" id="page-data">{payload}</script>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)} · rollbench</title><link rel="stylesheet" href="/static/dashboard.css"></head>
<body><header><a class="brand" href="/">rollbench review</a><nav><a href="/">Runs</a>
<a href="/disagreements">Disagreements</a><a href="/api/labels">Label totals</a><a href="/api/labels.csv">labels.csv</a>
<a href="/api/runs">runs.json</a></nav></header><main>{body}</main>{data}
<script src="/static/dashboard.js"></script></body></html>"""


def _hosts(doc: dict[str, Any]) -> str:
    rows = []
    for h in doc["hosts"]:
        state = f'<span class="bad">{_e(h["error"])}</span>' if h["error"] else '<span class="ok">up</span>'
        stale = f"stale since {_e(h['stale_since'])}" if h.get("stale_since") else ""
        rows.append(
            f"<tr><td>{_e(h['host'] or '?')}</td><td>{_e(h['source'])}</td><td>{h['runs']}</td>"
            f"<td>{state}</td><td>{stale}</td></tr>"
        )
    errors = "".join(f"<li>{_e(e)}</li>" for e in doc.get("errors", []))
    errors += "".join(
        f"<li>label {_e(u['label'])} of {_e(u['key'])} is not in rubric {_e(doc['rubric']['id'])} (kept in the file)</li>"
        for u in doc.get("unknown_labels", [])
    )
    return (
        '<details class="hosts"><summary>Hosts</summary><table><tr><th>host</th><th>source</th><th>runs</th>'
        f"<th>state</th><th></th></tr>{''.join(rows)}</table>"
        + "</details>"
        + (f'<ul class="bad">{errors}</ul>' if errors else "")
    )


def runs_page(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    rows = []
    for r in runs:
        live = r.get("live")
        progress = ""
        if live:
            progress = f'{live["episodes_done"]}/{live["episodes_total"]} <span class="{"bad" if live["stale"] else "ok"}">{"stale" if live["stale"] else "live"}</span>'
        elif r.get("stale"):
            progress = '<span class="bad">stale (peer down)</span>'
        if r.get("run_status") in ("RUNNING", "INTERRUPTED"):
            progress = f'<span class="status">{_e(r["run_status"])}</span> ' + progress
        n = r["episodes_recorded"]
        label_state = "none" if r["labeled"] == 0 else ("all" if r["labeled"] >= n else "some")
        rows.append(
            f'<tr data-task="{_e(" ".join(r["tasks"]))}" data-policy="{_e(r["policy"])} {_e(r["model"])}" '
            f'data-status="{_e(r["status"])}" data-host="{_e(r["host"])}" data-robot="{_e(r["robot"])}" '
            f'data-labels="{label_state}">'
            f'<td><a href="{_e(r["urls"]["page"])}">{_e(r["key"])}</a></td><td>{_e(", ".join(r["tasks"]))}</td>'
            f"<td>{_e(r['policy'])}{'<br><small>' + _e(r['model']) + '</small>' if r['model'] else ''}</td>"
            f'<td><span class="status {_e(r["status"])}">{_e(r["status"])}</span> {progress}</td>'
            f'<td data-sort="{r["success_rate"] if r["success_rate"] is not None else -1}">{_pct(r["success_rate"])} '
            f"<small>{_interval(r['ci95_low'], r['ci95_high'])}</small></td>"
            f'<td data-sort="{n}">{n}/{r["episodes_requested"]}</td>'
            f'<td data-sort="{r["labeled"]}">{r["labeled"]}</td><td data-sort="{r["disagreements"]}">'
            f"{r['disagreements'] or ''}</td><td>{_e(r['created'])}</td></tr>"
        )
    filters = "".join(
        f'<label>{name} <input data-filter="{key}" placeholder="any"></label>'
        for name, key in (("task", "task"), ("policy/model", "policy"), ("host", "host"), ("robot", "robot"))
    )
    body = f"""<h1>Runs <small>{len(runs)} · generated {_e(doc["generated_at"])} · rubric {_e(doc["rubric"]["id"])}</small></h1>
{_hosts(doc)}
<form class="filters" onsubmit="return false">{filters}
<label>status <select data-filter="status"><option value="">any</option><option>OK</option><option>PARTIAL</option><option>FAILED</option></select></label>
<label>labels <select data-filter="labels"><option value="">any</option><option value="none">unlabelled</option><option value="some">partly</option><option value="all">all labelled</option></select></label></form>
<table class="runs sortable"><thead><tr><th>run (host/robot/name)</th><th>tasks</th><th>policy</th><th>status</th>
<th>success rate [95% CI]</th><th>episodes</th><th>labelled</th><th>disagree</th><th>created</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>"""
    return _page("Runs", body, {"page": "runs"})


def _task_table(results: dict[str, Any] | None) -> str:
    if not results:
        return "<p>No graded results.</p>"
    lat = (results.get("latency") or {}).get("by_task", {})
    rows = []
    for name, t in results["tasks"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in t["termination_reasons"].items())
        p50 = (lat.get(name) or {}).get("p50_s")
        p95 = (lat.get(name) or {}).get("p95_s")
        latency = "" if p50 is None else f"{1000 * p50:.1f} / {1000 * (p95 or 0):.1f} ms"
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{t['episodes']}</td><td>{t['successes']}</td><td>{_pct(t['success_rate'])}</td>"
            f"<td>{_interval(t['ci95_low'], t['ci95_high'])}</td><td>{_e(t['mean_length'])}</td>"
            f"<td>{_e(t['median_length'])}</td><td>{_e(reasons)}</td><td>{latency}</td></tr>"
        )
    o = results["overall"]
    return (
        "<table><tr><th>task</th><th>episodes</th><th>successes</th><th>success rate</th><th>95% Wilson CI</th>"
        "<th>mean length</th><th>median length</th><th>termination reasons</th><th>latency p50 / p95</th></tr>"
        + "".join(rows)
        + f"<tr class='total'><td>overall (pooled)</td><td>{o['episodes']}</td><td>{o['successes']}</td>"
        f"<td>{_pct(o['pooled_success_rate'])}</td><td>{_interval(o['pooled_ci95_low'], o['pooled_ci95_high'])}</td>"
        f"<td colspan=4>mean of task rates {_pct(o['mean_task_success_rate'])}</td></tr></table>"
    )


def _episode_rows(run: dict[str, Any]) -> str:
    rows = []
    for ep in run["episodes"]:
        flag = ' class="disagree"' if ep["disagreement"] else ""
        rows.append(
            f"<tr{flag}><td><a href='{_e(ep['urls']['review'])}'>{ep['episode_index']}</a></td><td>{_e(ep['task'])}</td>"
            f"<td>{_e(ep['seed'])}</td><td>{'yes' if ep['success'] else 'no'}</td><td>{_e(ep['termination_reason'])}</td>"
            f"<td>{ep['length']}</td><td>{_e(ep['label'] or '')}</td><td>{'video' if ep['video_ready'] else ''}</td></tr>"
        )
    return (
        "<table class='sortable'><thead><tr><th>episode</th><th>task</th><th>seed</th><th>success</th><th>termination</th>"
        f"<th>length</th><th>label</th><th></th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _reproduction_section(key: str, doc: dict[str, Any] | None, references: list[str]) -> str:
    links = " · ".join(f'<a href="/run/{_e(key)}?reference={_e(n)}">{_e(n)}</a>' for n in references)
    head = f"<h2>Reproduce published numbers</h2><p>Compare with: {links}</p>" if references else ""
    if doc is None:
        return head
    from rollbench.reproduce.html import reproduction_html

    return head + reproduction_html(doc)


def run_page(d: dict[str, Any], reproduction: dict[str, Any] | None = None, references: list[str] | None = None) -> str:
    results = d.get("results")
    reasons = "".join(f"<li>{_e(r)}</li>" for r in (results or {}).get("reasons", [])[:30])
    live = d.get("live")
    live_html = ""
    if live:
        live_html = f"<p>live: {live['episodes_done']}/{live['episodes_total']} episodes, updated {_e(live['updated'])}{' <b class=bad>stale</b>' if live['stale'] else ''}</p>"
    body = f"""<h1>{_e(d["key"])} <span class="status {_e(d["status"])}">{_e(d["status"])}</span></h1>
<p>{_e(d["env"])} · policy {_e(d["policy"])}{" · model " + _e(d["model"]) if d.get("model") else ""} · {d["episodes_recorded"]}/{d["episodes_requested"]} episodes · source {_e(d["source"])}</p>
{live_html}{f'<p class="bad">{_e(d["error"])}</p>' if d.get("error") else ""}
{f'<ul class="reasons">{reasons}</ul>' if reasons else ""}
<h2>Per task</h2>{_task_table(results)}
<h2>Success rate with 95% Wilson interval</h2>{rate_chart(results["tasks"]) if results else ""}
{_reproduction_section(d["key"], reproduction, references or [])}
<h2>Episodes</h2>{_episode_rows(d)}"""
    return _page(d["key"], body, {"page": "run"})


def episode_page(d: dict[str, Any]) -> str:
    run, ep, rubric = d["run"], d["episode"], d["rubric"]
    videos = "".join(
        f'<figure><video muted playsinline preload="auto" data-from="{_e(v["from_s"] or 0)}" data-to="{_e(v["to_s"] or "")}" '
        f'src="{_e(v["url"])}"></video><figcaption>{_e(cam)}</figcaption></figure>'
        for cam, v in ep["videos"].items()
    )
    if not videos:
        videos = "<p>This episode has no recorded video.</p>"
    facts = [
        ("instruction", ep["instruction"]),
        ("task", ep["task"]),
        ("seed", ep["seed"]),
        ("trial", ep["trial"]),
        ("initial state", ep["initial_state"]),
        ("success (graded)", "yes" if ep["success"] else "no"),
        ("termination reason", ep["termination_reason"]),
        ("error", ep["error"]),
        ("render fault", ep["render_fault"]),
        ("length", f"{ep['length']} steps"),
        ("return", f"{ep['return']:.3f}"),
    ]
    facts_html = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts if v is not None)
    if ep["urls"].get("transcript"):
        facts_html += f"<tr><th>transcript</th><td><a href='{_e(ep['urls']['transcript'])}'>open</a></td></tr>"
    buttons = "".join(
        f'<button type="button" class="label-btn" data-label="{_e(lab["name"])}" title="{_e(lab["description"])}">'
        f"<kbd>{i + 1}</kbd> {_e(lab['name'])}</button>"
        for i, lab in enumerate(rubric["labels"][:9])
    )
    entry = d.get("label") or {}
    history = "".join(
        f"<li>{_e(h.get('labeled_at'))} {_e(h.get('annotator'))}: <b>{_e(h.get('label') or 'cleared')}</b> {_e(h.get('note'))}</li>"
        for h in reversed(entry.get("history") or [])
    )
    nav = d["nav"]
    links = " · ".join(
        f'<a href="{_e(url)}">{name}</a>'
        for name, url in (
            ("← previous", nav["prev"]),
            ("next →", nav["next"]),
            ("next unlabelled (n)", nav["next_unlabeled"]),
        )
        if url
    )
    disagree = '<p class="bad">The label contradicts the graded success.</p>' if ep["disagreement"] else ""
    body = f"""<h1><a href="{_e(run["page"])}">{_e(run["key"])}</a> / episode {ep["episode_index"]}</h1>
<p class="nav">{links}</p>
<div class="review"><section class="player"><div class="videos">{videos}</div>
<div class="controls"><button type="button" id="play">play (space)</button> <span id="clock">0.00 s</span>
<label>speed <select id="speed"><option>0.1</option><option>0.25</option><option>0.5</option><option selected>1</option><option>2</option></select></label>
<small>← → 1 s · , . one frame · [ ] 10 s · 1-9 label · 0 clear · n next unlabelled</small></div>
{timeline_svg(d["steps"], run.get("fps"))}</section>
<aside><table class="facts">{facts_html}</table>
<form id="label-form" onsubmit="return false"><h2>Label <small>{_e(rubric["id"])}</small></h2>
<p>current: <b id="current-label">{_e(ep["label"] or "none")}</b> <small id="label-by">{_e(ep["annotator"] or "")}</small></p>
<div class="label-buttons">{buttons}<button type="button" class="label-btn" data-label=""><kbd>0</kbd> clear</button></div>
<textarea id="note" rows="3" placeholder="note (saved with the label)">{_e(ep["note"] or "")}</textarea>
<button type="button" id="save-note">save note with current label</button> <span id="label-status"></span>
{disagree}<ul class="history">{history}</ul></form></aside></div>"""
    data = {
        "page": "episode",
        "label_api": f"/api/label/{ep['key']}",
        "labels": [lab["name"] for lab in rubric["labels"]],
        "label": ep["label"],
        "fps": run.get("fps") or 10,
        "next_unlabeled": nav["next_unlabeled"],
        "length": ep["length"],
    }
    return _page(f"{run['key']}/{ep['episode_index']}", body, data)


def disagreements_page(doc: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><a href='{_e(r['review_url'])}'>{_e(r['key'])}</a></td><td>{_e(r['task'])}</td><td>{_e(r['policy'])}</td>"
        f"<td>{_e(r['label'])}</td><td>{'yes' if r['success'] else 'no'}</td><td>{_e(r['termination_reason'])}</td></tr>"
        for r in doc["disagreements"]
    )
    body = f"""<h1>Disagreements <small>{len(doc["disagreements"])}</small></h1>
<p>Episodes whose human label contradicts the success the simulator recorded: check the success detector.</p>
<table class="sortable"><thead><tr><th>episode</th><th>task</th><th>policy</th><th>label</th><th>graded success</th>
<th>termination</th></tr></thead><tbody>{rows}</tbody></table>"""
    return _page("Disagreements", body, {"page": "disagreements"})
