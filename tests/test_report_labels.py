"""The report shows the labels a reviewer gave in the dashboard: ``report runs/`` reads the labels.json that
``dashboard --root runs`` writes (or ``--labels FILE``) and prints a Labels section with the counts and rates
``summarize --labels --json`` computes for the same runs (the oracle: that document, and the label set by hand)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.identity import RunIdentity
from rollbench.dashboard.labels import set_label
from rollbench.dashboard.rubrics import load_rubric
from rollbench.record.runlog import require_run_log

pytestmark = pytest.mark.slow


def _labels_section(html: str) -> str:
    start = html.index("<h2>Labels</h2>")
    return html[start : html.index("<h2>", start + 5)]


def test_report_of_the_dashboards_folder_shows_its_labels_without_being_told(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for policy in ("zero", "scripted-expert"):
        evaluate(out=runs / policy, env="scripted/reach", policy=policy, episodes=3, max_steps=20)
    zero = runs / "zero"
    key = RunIdentity.from_run_log(require_run_log(zero), zero).episode_key(1)
    set_label(runs / "labels.json", key, "failed", rubric=load_rubric())  # where the dashboard writes for runs/
    plain = invoke("report", runs, "--out", tmp_path / "plain.html")
    told = invoke("report", runs, "--labels", runs / "labels.json", "--out", tmp_path / "told.html")
    assert plain.returncode == 0 and told.returncode == 0, plain.stderr + told.stderr
    section = _labels_section((tmp_path / "plain.html").read_text())
    assert section == _labels_section((tmp_path / "told.html").read_text())
    doc = json.loads(invoke("summarize", runs, "--labels", runs / "labels.json", "--json").stdout)
    cell = next(c for c in doc["cells"] if c["model"] == "zero")
    assert (cell["n_labeled"], cell["n_unlabeled"], cell["label_counts"]["failed"]) == (1, 2, 1)
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td class=n>(\d+)</td>", section)
    assert ("scripted/reach", "zero", "failed 1", "1") in rows
    assert "failure_rate 100.0%" in section and f"from {runs / 'labels.json'}" in section


def test_a_report_without_labels_has_no_labels_section(tmp_path: Path) -> None:
    evaluate(out=tmp_path / "runs" / "zero", env="scripted/reach", policy="zero", episodes=2, max_steps=3)
    assert invoke("report", tmp_path / "runs", "--out", tmp_path / "r.html").returncode == 0
    assert "<h2>Labels</h2>" not in (tmp_path / "r.html").read_text()
