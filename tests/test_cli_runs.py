"""``rollbench runs [ROOT]``: one row per run directory, newest first, from real recorded runs (Typer's CliRunner)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollbench.api import evaluate
from rollbench.cli.main import app


def runs(*args: str) -> tuple[int, str, str]:
    from rich.console import Console

    import rollbench.cli.common as common

    wide = Console(width=200)  # one line a run, whatever width this worker's output console was made with
    saved, common.out = common.out, wide
    try:
        r = CliRunner().invoke(app, ["runs", *args])
    finally:
        common.out = saved
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.slow
def test_runs_lists_each_run_with_tasks_policy_status_episodes_rate_and_date(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    evaluate(out=root / "zero", env="scripted/reach", policy="zero", episodes=2, max_steps=3)
    time.sleep(1.1)  # run.json's creation time has one-second resolution: make the order certain
    evaluate(out=root / "expert", env="scripted/reach,scripted/reach-final", policy="scripted-expert", episodes=2)
    (root / "notes").mkdir()  # not a run: no run.json, not listed
    (root / "foreign").mkdir()
    (root / "foreign" / "run.json").write_text("[]")
    code, out, _ = runs(str(root), "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["run"] for r in rows] == ["expert", "zero", "foreign"]  # newest first, unreadable last
    expert, zero, foreign = rows
    created = json.loads((root / "expert/run.json").read_text())["provenance"]["created"]
    assert expert == {
        "run": "expert",
        "run_dir": str(root / "expert"),
        "tasks": ["scripted/reach", "scripted/reach-final"],
        "policy": "scripted-expert",
        "status": "OK",
        "episodes_recorded": 4,
        "episodes_requested": 4,
        "success_rate": 1.0,
        "scored": 4,  # no errors: every recorded episode is scored (docs/analysis.md#errors-and-coverage)
        "scored_success_rate": 1.0,
        "created": created,
        "source": "run.json (graded when the run last finished)",
    }
    assert (zero["status"], zero["episodes_recorded"], zero["success_rate"]) == ("OK", 2, 0.0)
    assert (
        foreign["error"]
        == f"{root / 'foreign' / 'run.json'} is not a rollbench run log: it holds a JSON list, not an object"
    )
    code, out, _ = runs(str(root))
    assert code == 0
    found = [ln for ln in out.splitlines() if "expert" in ln and "scripted-expert" in ln]
    assert found, out  # the expert run on one line of the table
    line = found[0]
    for cell in ("scripted/reach +1 more", "OK", "4/4", "100.0%", created):
        assert cell in line


def test_a_run_left_running_by_a_dead_process_is_shown_as_stale_and_grade_recomputes(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "crashed"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=3, max_steps=3)
    log = json.loads((run / "run.json").read_text())
    log["status"] = "RUNNING"
    (run / "run.json").write_text(json.dumps(log))
    (run / "meta/episodes/chunk-000/file-002.parquet").unlink()
    (stale,) = json.loads(runs(str(tmp_path / "runs"), "--json")[1])
    assert stale["status"].startswith("RUNNING (stale: no process is writing it")
    (now,) = json.loads(runs(str(tmp_path / "runs"), "--json", "--grade")[1])
    assert (now["status"], now["episodes_recorded"], now["source"]) == ("PARTIAL", 2, "graded now")


def test_runs_of_a_missing_root_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, out, err = runs(str(tmp_path / "nope"))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"error: {tmp_path / 'nope'} is not a directory (give the directory your runs are in, e.g. runs/)"
    ]


def test_runs_lists_nested_runs_like_the_optimisers_rounds_as_the_dashboard_finds_them(tmp_path: Path) -> None:
    """An optimiser's directory holds no run.json itself; its rounds and held-out run are found below it and named
    by their path under ROOT. A run directory's own subdirectories and hidden directories are not searched."""
    from rollbench.dashboard.catalog import Catalog

    root = tmp_path / "runs"
    small = {"env": "scripted/reach", "policy": "zero", "episodes": 1, "max_steps": 2}
    evaluate(out=root / "search/rounds/search-r000", **small)
    evaluate(out=root / "search/search-holdout", **small)
    evaluate(out=root / "inner", **small)
    evaluate(out=root / "top", **small)
    (root / "inner").rename(
        root / "top/inner"
    )  # moved inside a run directory (eval refuses to write one there): not searched
    evaluate(out=root / ".hidden/run", **small)
    evaluate(out=root / "a/b/c/too-deep", **small)  # four levels down
    code, out, _ = runs(str(root), "--json")
    assert code == 0
    listed = sorted(r["run"] for r in json.loads(out))
    assert listed == ["search/rounds/search-r000", "search/search-holdout", "top"]
    assert sorted(rec.run_dir for rec in Catalog([root]).records()[0]) == sorted(
        (root / name).resolve() for name in listed
    )


def test_a_run_json_holding_a_number_too_large_for_a_float_is_listed_as_unreadable_not_inf(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    evaluate(out=root / "a", env="scripted/reach", policy="scripted-expert", episodes=2, max_steps=3)
    log = root / "a" / "run.json"
    doc = json.loads(log.read_text())
    doc["results"]["overall"]["pooled_success_rate"] = "OVERFLOW"
    log.write_text(json.dumps(doc).replace('"OVERFLOW"', "1e999"))  # JSON grammar; Python reads it as inf
    code, out, _ = runs(str(root), "--json")
    assert code == 0
    [row] = json.loads(out)
    assert row["error"] == (
        f"{log} is not a rollbench run log: it is not readable JSON: it holds a number too large for a float"
    )
    assert "success_rate" not in row
