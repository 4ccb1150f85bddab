"""docs/run.schema.json and docs/grade.schema.json: what the models give, and what real runs write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from rollbench.api import evaluate
from rollbench.core.grade_model import GradeDocument
from rollbench.core.runlog_model import RunLog
from rollbench.core.schemas import SCHEMAS, schema_text
from rollbench.run.runners import Execution

DOCS = Path(__file__).resolve().parents[1] / "docs"
ROLLBENCH = str(Path(sys.executable).with_name("rollbench"))


def test_committed_schema_files_are_what_the_models_generate() -> None:
    for name, model in SCHEMAS.items():
        assert (DOCS / name).read_text() == schema_text(model), f"run `python -m rollbench.core.schemas` ({name})"


def _swept_resumed_run(out: Path) -> dict:
    """A sweep over two tasks, one of which errors on some seeds, with a simulated latency, run on 2 workers and
    resumed re-running errors: run.json then holds variants, a delay block, pool counters, two executions and
    replacements."""
    spec = dict(
        env="scripted/reach,scripted/faulty",
        policy="scripted-expert",
        episodes=3,
        max_steps=20,
        latency="steps:1",
        stale="execute",
    )
    evaluate(**spec, instruction_perturb=("synonym",), out=out, execution=Execution(workers=2))
    evaluate(**spec, instruction_perturb=("synonym",), out=out, execution=Execution(retry_errors="all"))
    return json.loads((out / "run.json").read_text())


@pytest.mark.slow
def test_a_real_run_json_and_grade_json_validate_against_models_and_committed_schemas(tmp_path: Path) -> None:
    log = _swept_resumed_run(tmp_path / "run")
    assert {"replacements", "results"} <= set(log) and len(log["executions"]) == 2
    assert log["executions"][0]["worker_starts"] == 2 and {"variants", "delay"} <= set(log["results"])
    graded = subprocess.run(
        [ROLLBENCH, "grade", str(tmp_path / "run"), "--json"], capture_output=True, text=True, timeout=300
    )
    doc = json.loads(graded.stdout)
    # the models keep every key of the files, unchanged (closed blocks would refuse any other)
    assert RunLog.model_validate(log).model_dump(mode="json", by_alias=True, exclude_unset=True) == log
    assert GradeDocument.model_validate(doc).model_dump(mode="json", by_alias=True, exclude_unset=True) == doc
    # and a validator other than pydantic accepts them against the committed schema files
    jsonschema.validate(log, json.loads((DOCS / "run.schema.json").read_text()))
    jsonschema.validate(doc, json.loads((DOCS / "grade.schema.json").read_text()))


def test_the_schema_refuses_a_grade_document_with_an_unknown_key_or_status() -> None:
    schema = json.loads((DOCS / "grade.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    minimal = {
        "status": "FAILED",
        "reasons": ["no episode was recorded"],
        "violations": [],
        "episodes_requested": 1,
        "episodes_recorded": 0,
        "tasks": {},
        "suites": {},
        "overall": {
            "tasks": 0,
            "episodes": 0,
            "successes": 0,
            "errors": 0,
            "errors_by_fault": {},
            "pooled_success_rate": None,
            "pooled_ci95_low": 0.0,
            "pooled_ci95_high": 1.0,
            "mean_task_success_rate": None,
        },
        "latency": {
            "policy_calls": 0,
            "calls_per_episode": None,
            "p50_s": None,
            "p95_s": None,
            "p99_s": None,
            "mean_s": None,
            "by_task": {},
        },
        "episodes": [],
        "timing": {"eval_wall_time_s": None, "invocations": 0, "invocations_unrecorded": 0, "episode_time_s": 0.0},
    }
    assert validator.is_valid(minimal)
    assert not validator.is_valid({**minimal, "status": "GOOD"})
    assert not validator.is_valid({**minimal, "extra": 1})
