"""A run directory written before run.json became a typed model (issue 41, item 1) still grades and resumes.

``tests/fixtures/run_473e79e`` is a whole run directory recorded by rollbench at commit 473e79e (before the run log
was read and written as :class:`rollbench.core.runlog_model.RunLog`) with
``rollbench eval --env scripted/reach --policy zero --episodes 3 --max-steps 5``. The oracle is what that rollbench
wrote: its graded ``results`` and its run.json keys.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rollbench.grading.grade import grade
from rollbench.record.runlog import read_run_log

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run_473e79e"


def keys(doc: Any, at: str = "") -> set[str]:
    """Every key path of a JSON document (list items under ``[]``)."""
    if isinstance(doc, dict):
        return {p for k, v in doc.items() for p in {f"{at}.{k}"} | keys(v, f"{at}.{k}")}
    if isinstance(doc, list):
        return {p for v in doc for p in keys(v, f"{at}[]")}
    return set()


# the coverage rule's fields (issue 40, item 1) that grade adds to every task, suite and overall block since this
# run was recorded: new keys beside the old ones, whose values are unchanged
COVERAGE_FIELDS = {
    "scored", "coverage", "excluded", "policy_errors_as_failures", "scored_success_rate", "scored_ci95_low",
    "scored_ci95_high",
}  # fmt: skip


def without_coverage(doc: dict[str, Any]) -> dict[str, Any]:
    """A grade document without :data:`COVERAGE_FIELDS` in its task, suite and overall blocks."""

    def strip(block: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in block.items() if k not in COVERAGE_FIELDS}

    return {
        **doc,
        "tasks": {t: strip(b) for t, b in doc["tasks"].items()},
        "suites": {t: strip(b) for t, b in doc["suites"].items()},
        "overall": strip(doc["overall"]),
    }


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    return run


def test_a_run_recorded_before_typed_run_logs_grades_to_the_results_it_recorded(old_run: Path) -> None:
    recorded = json.loads((old_run / "run.json").read_text())["results"]
    assert without_coverage(grade(old_run).to_json()) == recorded
    log = read_run_log(old_run)
    assert log is not None
    assert (log.run_id, log.status, log.plan.episodes_requested, [t.name for t in log.plan.tasks]) == (
        "run",
        "OK",
        3,
        ["scripted/reach"],
    )
    assert log.to_json() == json.loads((old_run / "run.json").read_text())  # read back whole: every key, every value


def test_resuming_a_run_recorded_before_typed_run_logs_keeps_its_keys_and_adds_one_execution(old_run: Path) -> None:
    before = json.loads((old_run / "run.json").read_text())
    r = subprocess.run(
        [sys.executable, "-m", "rollbench", "eval", "--resume", str(old_run)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    after = json.loads((old_run / "run.json").read_text())
    added = {f".results.{b}.{f}" for b in ("tasks.scripted/reach", "overall") for f in COVERAGE_FIELDS}
    assert keys(after) == keys(before) | added
    assert [after[k] for k in ("spec", "spec_identity", "plan", "provenance", "identity", "warnings")] == [
        before[k] for k in ("spec", "spec_identity", "plan", "provenance", "identity", "warnings")
    ]
    # the old run was finished: resuming it has nothing to do, so no execution is added (issue 42, item 18)
    assert after["executions"] == before["executions"] and after["status"] == "OK"
    assert after["results"]["episodes"] == before["results"]["episodes"]
