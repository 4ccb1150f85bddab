"""JSON documents the dashboard serves, built from graded runs and the label sidecar.

A *run summary* (one element of ``/api/runs``'s ``runs``) is built from a :class:`~rollbench.dashboard.catalog.RunRecord`
by :func:`run_summary` and carries no labels; :func:`join_labels` adds the labels of the sidecar the serving dashboard
keeps (a central dashboard joins its own sidecar to its peers' summaries). URLs are paths on the serving dashboard:
``/episode/HOST/ROBOT/NAME/E`` (review page), ``/media/HOST/ROBOT/NAME/E/CAMERA`` (video, range requests),
``/transcript/HOST/ROBOT/NAME/E`` (when the run recorded one).

An episode's ``status`` is its recorded outcome as graded: ``error`` (termination reason ``error``), ``success``
or ``failure``. A *disagreement* is a labelled episode whose label implies a success value
(:meth:`rollbench.dashboard.rubrics.Rubric.implies_success`) different from the graded one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from rollbench.core.format import csv_cell
from rollbench.core.grade_model import GradedEpisode, PooledBlock
from rollbench.core.identity import RunIdentity
from rollbench.dashboard.catalog import RunRecord, Signature
from rollbench.dashboard.labels import LabelFile
from rollbench.dashboard.rubrics import Rubric

CSV_COLUMNS = ("key", "label", "note", "annotator", "labeled_at", "task", "instruction", "policy", "model", "status")


def episode_status(ep: Mapping[str, Any] | GradedEpisode) -> str:
    """``error``, ``success`` or ``failure``: of a graded episode, or of a summary's episode row (a peer's too)."""
    if isinstance(ep, GradedEpisode):
        return "error" if ep.termination_reason == "error" else ("success" if ep.success else "failure")
    if ep.get("termination_reason") == "error":
        return "error"
    return "success" if ep.get("success") else "failure"


def policy_model(prov: Mapping[str, Any]) -> str | None:
    """The model behind the policy, when the policy (e.g. a policy server's metadata) recorded one in its
    provenance (run.json ``plan.policy.provenance``, open: policies add their own keys)."""
    for key in ("model", "model_name", "checkpoint", "model_id"):
        if isinstance(prov.get(key), str) and prov[key]:
            return str(prov[key])
    return None


def signature_digest(signature: Signature) -> str:
    """The run's ``signature`` as a summary carries it: the first 32 hex digits of the SHA-256 of the catalog's
    :func:`~rollbench.dashboard.catalog.run_signature` (path, size, mtime_ns and inode of every file) as JSON. It
    changes whenever a file of the run does; a central dashboard keys its cached copies of the run's videos by it."""
    return hashlib.sha256(json.dumps(signature, separators=(",", ":")).encode()).hexdigest()[:32]


def run_summary(rec: RunRecord) -> dict[str, Any]:
    """The label-free summary of one local run (see the module docstring)."""
    ident = rec.identity
    spec = rec.log.spec
    result = rec.result
    path = ident.key
    episodes = []
    for ep in rec.episodes:
        g, e, arts = ep.graded, ep.episode_index, ep.artifacts
        videos = {
            cam: {
                "url": f"/media/{path}/{e}/{cam}",
                "ready": v.ready,
                "from_s": v.from_s,
                "to_s": v.to_s,
                "size": v.size,
            }
            for cam, v in arts.videos.items()
        }
        episodes.append(
            {
                "episode_index": e,
                "key": ident.episode_key(e),
                "task": g.task,
                "trial": g.trial,
                "seed": g.seed,
                "initial_state": g.initial_state,
                "instruction": ep.instruction,
                "success": g.success,
                "success_at_reset": g.success_at_reset,
                "length": g.length,
                "return": g.return_,
                "termination_reason": g.termination_reason,
                "error": g.error,
                "render_failure": g.render_failure,
                "render_fault": g.render_failure,  # deprecated name of render_failure (issue 29)
                "status": episode_status(g),
                "video_ready": bool(videos) and all(v["ready"] for v in videos.values()),
                "videos": videos,
                "urls": {
                    "review": f"/episode/{path}/{e}",
                    "transcript": f"/transcript/{path}/{e}" if arts.transcript else None,
                },
            }
        )
    return {
        **ident.to_dict(),
        "key": ident.key,
        "source": "local",
        "signature": signature_digest(rec.signature),
        "status": result.status,
        "violations": list(result.violations),  # grade's; analyses refuse such a run by default
        "run_status": rec.log.status,
        "env": spec.env,
        "policy": spec.policy,
        "model": policy_model(rec.log.plan.policy.provenance),
        "created": rec.log.provenance.created,
        "tasks": list(result.tasks),
        "episodes_requested": result.episodes_requested,
        "episodes_recorded": result.episodes_recorded,
        **_overall_fields(result.overall),
        "cameras": rec.cameras,
        "fps": rec.fps,
        "urls": {"page": f"/run/{path}", "api": f"/api/run/{path}"},
        "episodes": episodes,
    }


def _overall_fields(overall: PooledBlock) -> dict[str, object]:
    """A run summary's counts from the grade document's ``overall`` block (the coverage rule, docs/analysis.md
    "Errors and coverage": ``success_rate`` counts errors as failures, ``scored_success_rate`` follows the rule)."""
    return {
        "successes": overall.successes,
        "success_rate": overall.pooled_success_rate,
        "ci95_low": overall.pooled_ci95_low,
        "ci95_high": overall.pooled_ci95_high,
        "scored": overall.scored,
        "coverage": overall.coverage,
        "scored_success_rate": overall.scored_success_rate,
        "scored_ci95_low": overall.scored_ci95_low,
        "scored_ci95_high": overall.scored_ci95_high,
        "excluded": dict(overall.excluded or {}),
        "policy_errors_as_failures": overall.policy_errors_as_failures,
        "errors_by_fault": dict(overall.errors_by_fault),
    }


def pending_summary(ident: RunIdentity) -> dict[str, Any]:
    """A run found but not graded yet (the catalog grades it in the background): status ``GRADING``, no numbers."""
    return {
        **ident.to_dict(),
        "key": ident.key,
        "source": "local",
        "signature": None,
        "status": "GRADING",
        "run_status": None,
        "env": None,
        "policy": None,
        "model": None,
        "created": None,
        "tasks": [],
        "episodes_requested": 0,
        "episodes_recorded": 0,
        "successes": None,
        "success_rate": None,
        "ci95_low": None,
        "ci95_high": None,
        "scored": None,
        "coverage": None,
        "scored_success_rate": None,
        "scored_ci95_low": None,
        "scored_ci95_high": None,
        "excluded": {},
        "policy_errors_as_failures": None,
        "errors_by_fault": {},
        "cameras": [],
        "fps": None,
        "urls": {"page": f"/run/{ident.key}", "api": f"/api/run/{ident.key}"},
        "episodes": [],
    }


def join_labels(summary: dict[str, Any], labels: LabelFile, rubric: Rubric) -> dict[str, Any]:
    """A copy of ``summary`` whose episodes carry ``label``/``annotator``/``labeled_at``/``disagreement`` from
    ``labels``, and whose run carries ``labeled``, ``label_counts`` and ``disagreements`` (a count)."""
    out = dict(summary)
    eps = []
    counts: Counter[str] = Counter()
    disagreements = 0
    for ep in summary["episodes"]:
        entry = labels.entries.get(ep["key"]) or {}
        label = entry.get("label") if isinstance(entry.get("label"), str) else None
        implied = rubric.implies_success(label) if label else None
        disagree = implied is not None and implied != bool(ep["success"])
        eps.append(
            {
                **ep,
                "label": label,
                "note": entry.get("note") if label else None,
                "annotator": entry.get("annotator") if label else None,
                "labeled_at": entry.get("labeled_at") if label else None,
                "disagreement": disagree,
            }
        )
        if label:
            counts[label] += 1
        disagreements += disagree
    out["episodes"] = eps
    out["labeled"] = sum(counts.values())
    out["label_counts"] = dict(sorted(counts.items()))
    out["disagreements"] = disagreements
    return out


def disagreement_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every episode (of label-joined runs) whose label contradicts its graded success."""
    return [
        {
            "key": ep["key"],
            "label": ep["label"],
            "success": ep["success"],
            "termination_reason": ep["termination_reason"],
            "task": ep["task"],
            "policy": run["policy"],
            "review_url": ep["urls"]["review"],
        }
        for run in runs
        for ep in run["episodes"]
        if ep.get("disagreement")
    ]


def label_totals(labels: LabelFile) -> dict[str, Any]:
    """``/api/labels``: totals per label, per task and per model (from the sidecar's copied context)."""
    per_label: Counter[str] = Counter()
    per_task: dict[str, Counter[str]] = {}
    per_model: dict[str, Counter[str]] = {}
    for entry in labels.labeled().values():
        lab = entry["label"]
        per_label[lab] += 1
        per_task.setdefault(str(entry.get("task")), Counter())[lab] += 1
        model = entry.get("model") or entry.get("policy")
        per_model.setdefault(str(model), Counter())[lab] += 1
    return {
        "rubric": labels.rubric,
        "total": sum(per_label.values()),
        "per_label": dict(sorted(per_label.items())),
        "per_task": {k: dict(sorted(v.items())) for k, v in sorted(per_task.items())},
        "per_model": {k: dict(sorted(v.items())) for k, v in sorted(per_model.items())},
        "unknown_labels": [{"key": u.key, "label": u.label} for u in labels.unknown],
    }


def labels_csv(labels: LabelFile) -> str:
    """``/api/labels.csv``: a header then one row per labelled episode (:data:`CSV_COLUMNS`), RFC 4180 quoting,
    each cell by :func:`~rollbench.core.format.csv_cell` (formula-like text prefixed with ``'``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for key, entry in labels.labeled().items():
        writer.writerow([csv_cell(key)] + [csv_cell(entry.get(c)) for c in CSV_COLUMNS[1:]])
    return buf.getvalue()
