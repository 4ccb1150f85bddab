"""The grade document is a model (issue 41): ``grade --json`` and run.json keep the bytes main 80d58e9 wrote, and the
dict reading of the old return value still answers with the same values, warning.

Oracle: ``tests/fixtures/grade_golden/golden.json``, produced by main 80d58e9's own code before the change (see the
README beside it), for five run directories recorded then and the run of commit 473e79e (no coverage keys).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from rollbench.api import grade
from rollbench.core.grade_model import GradedEpisode, GradeDocument, TaskBlock
from rollbench.record.runlog import read_run_log, record_results, write_run_log

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOLDEN: dict[str, dict[str, Any]] = json.loads((FIXTURES / "grade_golden" / "golden.json").read_text())
RUNS = {name: FIXTURES / "grade_golden" / name for name in GOLDEN if name != "run_473e79e"}
RUNS["run_473e79e"] = FIXTURES / "run_473e79e"


def _copy(name: str, tmp_path: Path) -> Path:
    run = tmp_path / name
    shutil.copytree(RUNS[name], run)
    return run


@pytest.mark.parametrize("name", sorted(RUNS))
@pytest.mark.slow
def test_grade_json_prints_the_bytes_main_printed(name: str, tmp_path: Path) -> None:
    run = _copy(name, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "rollbench", "grade", "--json", str(run)], capture_output=True, text=True, timeout=300
    )
    # main printed the run's own path; the copy sits elsewhere
    want = GOLDEN[name]["stdout"].replace(str(RUNS[name]), str(run))
    assert (done.returncode, done.stdout) == (GOLDEN[name]["exit"], want)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_recording_the_grade_writes_the_run_json_main_wrote(name: str, tmp_path: Path) -> None:
    run = _copy(name, tmp_path)
    log = read_run_log(run)
    assert log is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # nothing on this path reads the document as a dict
        record_results(run, log, grade(run), log.status)
    assert (run / "run.json").read_text() == GOLDEN[name]["run_json_regraded"]


def test_an_old_document_without_coverage_keys_reads_and_writes_back_unchanged(tmp_path: Path) -> None:
    run = _copy("run_473e79e", tmp_path)
    before = (run / "run.json").read_bytes()
    log = read_run_log(run)
    assert log is not None and log.results is not None
    assert log.results.overall.scored is None and "scored" not in log.results.to_json()["overall"]  # type: ignore[operator]
    write_run_log(run, log)
    assert (run / "run.json").read_bytes() == before


def test_grade_returns_the_model_whose_json_is_the_golden_document(tmp_path: Path) -> None:
    doc = grade(_copy("faulty", tmp_path))
    golden = json.loads(GOLDEN["faulty"]["stdout"])
    assert isinstance(doc, GradeDocument) and isinstance(doc.tasks["scripted/faulty"], TaskBlock)
    assert all(isinstance(e, GradedEpisode) for e in doc.episodes)
    assert doc.to_json() == golden
    assert doc.overall.pooled_success_rate == golden["overall"]["pooled_success_rate"]
    assert [e.return_ for e in doc.episodes] == [e["return"] for e in golden["episodes"]]
    assert doc.variants is None and "variants" not in doc.to_json()


def test_reading_the_result_as_a_dict_warns_once_per_use_and_gives_the_golden_values(tmp_path: Path) -> None:
    doc = grade(_copy("sweep", tmp_path))
    golden = json.loads(GOLDEN["sweep"]["stdout"])
    with pytest.warns(DeprecationWarning) as caught:
        rate = doc["overall"]
    assert len(caught) == 1 and "read .overall instead" in str(caught[0].message)
    assert caught[0].filename == __file__  # pointed at the caller's line
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert rate["pooled_success_rate"] == golden["overall"]["pooled_success_rate"]  # type: ignore[index]
        assert doc["episodes"][1]["return"] == golden["episodes"][1]["return"]  # type: ignore[index]
        assert doc.get("variants")["scripted/reach"]["b"]["paired"]["pairs"] == 2  # type: ignore[index]
        assert doc.get("delay") is None and doc.get("delay", "absent") == "absent"
        assert "variants" in doc and "agent_usage" not in doc
        assert doc.keys() == list(golden) == list(doc)
        assert doc == golden and doc["tasks"]["scripted/reach"] == golden["tasks"]["scripted/reach"]  # type: ignore[index]
    messages = [str(w.message) for w in seen]
    assert all(w.category is DeprecationWarning for w in seen) and len(messages) == 15
    assert "GradedEpisode['return'] is deprecated" in messages[2] and "read .return_ instead" in messages[2]
    with pytest.raises(KeyError, match="delay"), pytest.warns(DeprecationWarning):
        doc["delay"]
