"""One run whose run.json cannot be read costs only itself (hostile round 15, F8): with ``--allow-damaged``,
``summarize`` and ``report`` of a folder leave it out, name it (a ``warning:`` line, ``unreadable`` in the JSON, a CSV
column, a report line) and summarise the runs beside it; without the flag it is exit 2 naming it, and ``compare``
(each argument an arm) refuses it.

Oracles: hand counts of the episodes each sound run recorded, the paths the test wrote, the refusal lines."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """F/A (zero, 3 episodes), F/B (scripted-expert, 2 episodes), F/C (a run whose run.json was cut to ``{"x":``)."""
    root = tmp_path_factory.mktemp("unreadable") / "F"
    evaluate(out=root / "A", env="scripted/reach", policy="zero", episodes=3, max_steps=5)
    evaluate(out=root / "B", env="scripted/reach", policy="scripted-expert", episodes=2, max_steps=5)
    shutil.copytree(root / "A", root / "C")
    (root / "C" / "run.json").write_text('{"x":')
    return root


def _why(folder: Path) -> str:
    return f"{folder / 'C' / 'run.json'} is not a rollbench run log: it is not readable JSON: "


def test_without_allow_damaged_the_unreadable_run_is_exit_2_naming_it(folder: Path) -> None:
    proc = invoke("summarize", folder)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {_why(folder)}") and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("content", ['{"x":', "[1, 2]"])
def test_summarize_allow_damaged_leaves_the_unreadable_run_out_and_summarises_the_others(
    folder: Path, tmp_path: Path, content: str
) -> None:
    here = tmp_path / "F"
    shutil.copytree(folder, here)
    (here / "C" / "run.json").write_text(content)
    proc = invoke("summarize", here, "--allow-damaged", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    [left_out] = doc["unreadable"]
    assert left_out["path"] == str(here / "C")
    assert left_out["why"].startswith(f"{here / 'C' / 'run.json'} is not a rollbench run log: ")
    assert sorted((r["path"], r["episodes"]) for r in doc["runs"]) == [(str(here / "A"), 3), (str(here / "B"), 2)]
    assert {c["model"]: c["episodes"] for c in doc["cells"]} == {"zero": 3, "scripted-expert": 2}
    assert f"warning: {here / 'C'} is left out, unreadable: {left_out['why']}" in proc.stderr.splitlines()


def test_summarize_csv_names_the_unreadable_run_on_every_row(folder: Path) -> None:
    proc = invoke("summarize", folder, "--allow-damaged", "--csv")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(io.StringIO(proc.stdout)))
    assert rows[0][-1] == "unreadable_runs_left_out"
    assert len(rows) == 3 and [r[-1] for r in rows[1:]] == [str(folder / "C")] * 2


@pytest.mark.slow
def test_report_allow_damaged_names_the_unreadable_run_and_reports_the_others(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    proc = invoke("report", f"{folder}/", "--allow-damaged", "--out", out)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert f"Left out, unreadable (--allow-damaged): {folder / 'C'} (" in html
    assert str(folder / "A") in html and str(folder / "B") in html
    assert f"warning: {folder / 'C'} is left out, unreadable: {_why(folder)}" in proc.stderr


def test_compare_refuses_an_unreadable_arm_even_with_allow_damaged(folder: Path) -> None:
    proc = invoke("compare", folder / "A", folder / "C", "--allow-damaged")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {_why(folder)}") and len(proc.stderr.strip().splitlines()) == 1
