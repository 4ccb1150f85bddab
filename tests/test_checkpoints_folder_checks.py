"""A handed-over ``rollbench checkpoints`` folder is read the same way by every surface (``rollbench report``, the
dashboard's checkpoints page, the MCP tool ``rank_checkpoints``): a damaged step run, or a step directory that is
not its step's run (swapped with another, a copy of another), is named and the folder is not ranked (hostile round
15, F9 and F1); a checkpoint compared with nothing is not called "best" (F3); a wrongly typed checkpoints.json field is
named, never a traceback (hostile round 16, F3).

Oracle: hand counts (the episodes removed, read back from the removed row file), the steps the test itself swapped
or copied, and the exact sentences the documents promise."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from checkpoint_policies import write_checkpoint
from checkpoints_html import assert_no_generic_statistics, checkpoints_section, html_report
from cli_in_process import invoke
from rollbench.cli.dashboard import DashboardOptions, build_dashboard
from rollbench.dashboard.app import create_app
from rollbench.mcp.server import build_server

SKILLS = {1000: 0.2, 2000: 0.9}
N = 6
ARGS = ["--env", "scripted/reach", "--episodes", str(N), "--policy-template", "checkpoint_policies:make"]
OPTIONS = ["--policy-options", json.dumps({"checkpoint": "{path}"})]
BASE = "http://127.0.0.1:8301"
TOOL_ERROR = "Error executing tool rank_checkpoints: "  # how the MCP SDK words every tool error


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("ckpt")
    for step, skill in SKILLS.items():
        write_checkpoint(base / "train", step, skill)
    got = invoke("checkpoints", base / "train", *ARGS, *OPTIONS, "--out", base / "out")
    assert got.returncode == 0, got.stderr
    return base / "out"


def _mcp(root: Path, name: str) -> Any:
    async def go() -> Any:
        return await build_server(root).call_tool("rank_checkpoints", {"out_name": name})

    return anyio.run(go)


@pytest.fixture
def client_of() -> Iterator[Any]:
    made: list[TestClient] = []

    def make(root: Path) -> TestClient:
        dash = build_dashboard([root], root.parent / "labels.json", DashboardOptions(cache_dir=root.parent / "c"))
        made.append(TestClient(create_app(dash), base_url=BASE).__enter__())
        return made[-1]

    yield make
    for c in made:
        c.__exit__(None, None, None)


def _swap(folder: Path) -> None:
    """Swap OUT/001000 and OUT/002000 and edit checkpoints.json to match (steps, run_dir), as a hand would."""
    a, b, tmp = folder / "001000", folder / "002000", folder / "tmp"
    a.rename(tmp), b.rename(a), tmp.rename(b)
    doc = json.loads((folder / "checkpoints.json").read_text())
    for row in doc["checkpoints"]:
        row["step"] = {1000: 2000, 2000: 1000}[row["step"]]
        row["run_dir"] = str(folder / f"{row['step']:06d}")
    (folder / "checkpoints.json").write_text(json.dumps(doc))


def _not_its_run(folder: Path, step: int, other: int) -> str:
    return (
        f"step {step}: {folder / f'{step:06d}'} is not the run of step {step} (renamed, swapped or copied?): its "
        f"run.json records the run name of step {other}, not {step}; the policy in its spec loads the checkpoint of step "
        f"{other}, not the one checkpoints.json records for step {step}"
    )


@pytest.mark.slow
def test_a_damaged_step_run_is_named_and_not_ranked_on_every_surface(out: Path, tmp_path: Path, client_of: Any) -> None:
    root = tmp_path / "root"
    shutil.copytree(out, root / "dm")
    run = root / "dm" / "002000"
    rows = sorted((run / "meta" / "episodes").rglob("file-*.parquet"))[-1]
    lost = pq.read_table(rows).num_rows  # the episodes whose row file is removed: the hand count
    data = run / "data" / rows.parent.name / rows.name
    rows.unlink(), data.unlink()
    damaged = f"step 2000: {run} is damaged: meta/info.json says total_episodes={N} but {N - lost} episodes are "
    damaged += "recorded"
    with pytest.raises(ToolError) as raised:  # MCP: a tool error, never a ranking
        _mcp(root, "dm")
    assert str(raised.value).startswith(f"{TOOL_ERROR}{root / 'dm'} is not ranked: {damaged}")
    api = client_of(root).get("/api/checkpoints/root/dm").json()  # the dashboard: withheld, the same line
    assert api["ranking"] is None and api["violations"][0].startswith(damaged)
    assert str(raised.value) == f"{TOOL_ERROR}{root / 'dm'} is not ranked: " + "; ".join(api["violations"])
    got = invoke("report", root / "dm", "--out", tmp_path / "r.html")  # the report: refused, naming the run
    assert got.returncode == 2 and f"{run} is damaged" in got.stderr and "Traceback" not in got.stderr


@pytest.mark.slow
def test_swapped_step_directories_are_named_and_not_ranked(out: Path, tmp_path: Path, client_of: Any) -> None:
    root = tmp_path / "root"
    shutil.copytree(out, root / "sw")
    _swap(root / "sw")
    expected = [_not_its_run(root / "sw", 1000, 2000), _not_its_run(root / "sw", 2000, 1000)]
    with pytest.raises(ToolError) as raised:
        _mcp(root, "sw")
    assert str(raised.value) == f"{TOOL_ERROR}{root / 'sw'} is not ranked: " + "; ".join(expected)
    api = client_of(root).get("/api/checkpoints/root/sw").json()
    assert api["ranking"] is None and api["violations"] == expected
    section = checkpoints_section(html_report(tmp_path, root / "sw"))
    for said in expected:
        assert f"<strong>Violation:</strong> {said}" in section
    assert "<strong>Verdict:</strong>" not in section and "<th>step</th>" not in section


@pytest.mark.slow
def test_a_step_run_copied_over_another_is_named_and_never_pooled(out: Path, tmp_path: Path) -> None:
    folder = tmp_path / "cp"
    shutil.copytree(out, folder)
    shutil.rmtree(folder / "001000")
    shutil.copytree(out / "002000", folder / "001000")  # a byte-copy of step 2000's run where step 1000's was
    page = html_report(tmp_path, folder)
    section = checkpoints_section(page)  # the section stays, naming the copy
    assert f"<strong>Violation:</strong> {_not_its_run(folder, 1000, 2000)}" in section
    assert "<strong>Verdict:</strong>" not in section
    assert_no_generic_statistics(page)  # the step runs are not pooled into per-task cells


@pytest.mark.slow
def test_one_checkpoint_evaluated_is_compared_with_nothing(tmp_path: Path) -> None:
    train = tmp_path / "train"
    write_checkpoint(train, 1000, 0.5)
    (write_checkpoint(train, 2000, 0.5) / "config.json").write_text('{"skill": 0.')  # a crashed save: skipped
    got = invoke("checkpoints", train, *ARGS, *OPTIONS, "--out", tmp_path / "out")
    assert got.returncode == 0, got.stderr
    says = "step 1000: only checkpoint evaluated; nothing compared"
    assert f"verdict: {says} (1 not evaluated: step 2000)" in " ".join(got.stdout.split())
    doc = json.loads((tmp_path / "out" / "checkpoints.json").read_text())
    assert (doc["verdict"], doc["best"]) == ("only_one_evaluated", None)
    section = checkpoints_section(html_report(tmp_path, tmp_path / "out"))  # recomputed: the same verdict
    assert f"<strong>Verdict:</strong> {says}" in section and "Violation" not in section


@pytest.mark.slow
def test_the_command_run_again_skips_a_damaged_step_run_naming_it(out: Path, tmp_path: Path) -> None:
    folder = tmp_path / "dm"
    shutil.copytree(out, folder)
    run = folder / "002000"
    rows = sorted((run / "meta" / "episodes").rglob("file-*.parquet"))[-1]
    lost = pq.read_table(rows).num_rows
    rows.unlink(), (run / "data" / rows.parent.name / rows.name).unlink()
    got = invoke("checkpoints", out.parent / "train", *ARGS, *OPTIONS, "--out", folder, "--json")
    assert got.returncode == 0, got.stderr
    first = f"by rollbench grade: meta/info.json says total_episodes={N} but {N - lost} episodes are recorded); "
    doc = json.loads(got.stdout)
    [skipped] = doc["skipped"]
    assert skipped["step"] == 2000 and skipped["why"].startswith(f"{run} is damaged (") and first in skipped["why"]
    assert skipped["why"].endswith("it is not ranked: move it away to evaluate step 2000 again")
    assert [r["step"] for r in doc["checkpoints"]] == [1000]  # the damaged run is never ranked
    assert doc["says"] == "step 1000: only checkpoint evaluated; nothing compared (1 not evaluated: step 2000)"


WRONG_TYPES = [  # (the edit, what the reader must say): the expected sentences are written by hand
    (lambda d: d["checkpoints"][0].update(step=[1, 2]), "checkpoints.0.step: Input should be a valid integer"),
    (lambda d: d["checkpoints"][0].update(step={"a": 1}), "checkpoints.0.step: Input should be a valid integer"),
    (lambda d: d["checkpoints"][0].update(step="1000"), "checkpoints.0.step: Input should be a valid integer"),
    (lambda d: d.update(checkpoints=None), "checkpoints: Input should be a valid list"),
    (lambda d: d.update(checkpoints=5), "checkpoints: Input should be a valid list"),
    (lambda d: d.update(checkpoints=[5]), "checkpoints.0: Input should be an object"),
    (lambda d: d["checkpoint_paths"].update({"1000": 7}), "checkpoint_paths.1000: Input should be a valid string"),
]


@pytest.mark.slow
def test_a_wrongly_typed_checkpoints_json_field_is_named_by_report_and_mcp_never_a_traceback(
    out: Path, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    for i, (edit, said) in enumerate(WRONG_TYPES):
        folder = root / f"t{i}"
        shutil.copytree(out, folder)
        doc = json.loads((folder / "checkpoints.json").read_text())
        edit(doc)
        (folder / "checkpoints.json").write_text(json.dumps(doc))
        violation = f"{folder / 'checkpoints.json'} is damaged: {said}"
        got = invoke("report", folder, "--out", tmp_path / f"r{i}.html")  # named in the report, nothing ranked
        assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
        assert got.stderr.splitlines()[0] == f"warning: {folder}: {violation}"
        section = checkpoints_section((tmp_path / f"r{i}.html").read_text())
        assert f"<strong>Violation:</strong> {violation}" in section and "<th>step</th>" not in section
        with pytest.raises(ToolError) as raised:  # MCP: a tool error naming it
            _mcp(root, f"t{i}")
        assert str(raised.value) == f"{TOOL_ERROR}{folder} is not ranked: {violation}"
