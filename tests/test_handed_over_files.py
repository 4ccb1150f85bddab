"""Files someone hands over (a label sidecar, a dashboard export, a run folder) are read as data: a value inside them
never names a path to open, every field is typed, and one bad run does not break the sound runs beside it (hostile
round 13: F6, F5, F9). Oracles: hand-written files and hand counts."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate

SECRET = "MY-PRIVATE-VALUE-sk_live_1234"


@pytest.fixture(scope="module")
def sound_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "R"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=3, max_steps=5)
    return out


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a refusal (exit 2, no traceback)."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def _handed_folder(tmp_path: Path, sound_run: Path, rubric: object) -> tuple[Path, Path]:
    """A copy of the run in a folder whose labels.json records ``rubric``, and a private file of the reader's."""
    private = tmp_path / "private.yaml"
    private.write_text(f"name: x\nversion: 1\nlabels: [{SECRET}, b]\n")
    handed = tmp_path / "handed"
    shutil.copytree(sound_run, handed / "R")
    entry = {"label": "failed", "annotator": "x", "labeled_at": "2026-01-01T00:00:00Z", "history": []}
    labels = {"version": 1, "rubric": rubric, "labels": {"vm/point/R/0": entry}}
    (handed / "labels.json").write_text(json.dumps(labels))
    return handed, private


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "summarize"])
def test_a_label_files_rubric_path_is_never_opened_and_its_content_never_quoted(
    tmp_path: Path, sound_run: Path, command: str
) -> None:
    handed, private = _handed_folder(tmp_path, sound_run, None)
    data = json.loads((handed / "labels.json").read_text())
    data["rubric"] = str(private)
    (handed / "labels.json").write_text(json.dumps(data))
    private.chmod(0o000)  # were it opened, the error would say "not readable"; it must not be touched at all
    try:
        if command == "report":
            r = invoke("report", f"{handed}/", "--out", tmp_path / "rep.html")
        else:
            r = invoke("summarize", handed / "R", "--labels", handed / "labels.json")
    finally:
        private.chmod(0o600)
    line = _one_line(r)
    assert line.startswith(f"error: label file {handed / 'labels.json'} records a value as its rubric")
    assert "not a built-in rubric (outcome-v1, harm-five-class-v1)" in line
    everything = r.stdout + r.stderr
    assert SECRET not in everything and str(private) not in everything and "readable" not in everything


@pytest.mark.slow
def test_a_rubric_typed_on_the_command_line_is_the_one_used_and_must_match_the_label_file(
    tmp_path: Path, sound_run: Path
) -> None:
    handed, _ = _handed_folder(tmp_path, sound_run, "grasp-v2")
    rubric = tmp_path / "grasp.json"
    rubric.write_text(json.dumps({"name": "grasp", "version": 2, "labels": ["failed", "clean"]}))
    ok = invoke("summarize", handed / "R", "--labels", handed / "labels.json", "--rubric", rubric, "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["rubric"] == "grasp-v2"
    other = invoke("summarize", handed / "R", "--labels", handed / "labels.json", "--rubric", "outcome-v1")
    assert "was written with rubric 'grasp-v2', not 'outcome-v1'" in _one_line(other)
    # without --rubric the recorded custom id names nothing to read: refused, the id quoted (it has an id's shape)
    bare = invoke("summarize", handed / "R", "--labels", handed / "labels.json")
    assert "records 'grasp-v2' as its rubric, which is not a built-in rubric" in _one_line(bare)


def test_a_rubric_files_errors_name_the_position_never_the_content(tmp_path: Path, sound_run: Path) -> None:
    bad = tmp_path / "r.yaml"
    bad.write_text(f"name: x\nversion: 1\nlabels: [{SECRET}, b]\nsecret_api: 1\n")
    r = invoke("summarize", sound_run, "--rubric", bad)
    assert _one_line(r) == f"error: rubric {bad}: 1 unknown field(s); the fields are name, version, labels, description"
    bad.write_text(f"name: x\nversion: 1\nlabels: [b, {SECRET}]\n")
    line = _one_line(invoke("summarize", sound_run, "--rubric", bad))
    assert line == f"error: rubric {bad}: label names must match ^[a-z0-9][a-z0-9_-]*$ (label 2 does not)"


def _export(tmp_path: Path, episodes: list[dict[str, object]], **run: object) -> Path:
    """A hand-written dashboard export of one run (scripted/reach) with ``episodes``."""
    doc = {"runs": [{"host": "vm", "robot": "point", "name": "R", "policy": "zero", "episodes": episodes, **run}]}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    return path


def _episode(index: int, success: object) -> dict[str, object]:
    return {"episode_index": index, "task": "scripted/reach", "trial": index, "seed": index, "success": success}


@pytest.mark.parametrize("success", ["false", "0", [0], 0.5, 1, None])
def test_an_exports_success_that_is_not_a_json_bool_is_named_never_counted(tmp_path: Path, success: object) -> None:
    export = _export(tmp_path, [_episode(0, False), _episode(1, success), _episode(2, False)])
    for command in ("summarize", "report"):
        extra = ["--out", str(tmp_path / "r.html")] if command == "report" else []
        line = _one_line(invoke(command, export, *extra))
        assert line.startswith(f"error: {export} (runs[0]): episode 1 has success ")
        assert line.endswith(" (expected bool)")
    assert not (tmp_path / "r.html").exists()


def test_an_export_counts_exactly_its_json_true_successes(tmp_path: Path) -> None:
    export = _export(tmp_path, [_episode(0, True), _episode(1, False), _episode(2, True)])
    cell = json.loads(invoke("summarize", export, "--json").stdout)["cells"][0]
    assert (cell["successes"], cell["episodes"]) == (2, 3)  # hand count: episodes 0 and 2


@pytest.mark.parametrize(
    ("episodes", "run", "message"),
    [
        ([_episode(0, True), _episode(0, False)], {}, "(runs[0]): episode 0 appears 2 times (episode_index is unique)"),
        ([_episode(0, True)], {"host": 7}, "(runs[0]): host, robot and name must be strings"),
        (
            [{**_episode(0, True), "return": "1.5"}],
            {},
            "episode 0 has return '1.5' (expected int or float or NoneType)",
        ),
        ([{**_episode(0, True), "trial": "0"}], {}, "episode 0 has trial '0' (expected int or NoneType)"),
    ],
)
def test_an_exports_mistyped_or_repeated_fields_are_named(
    tmp_path: Path, episodes: list[dict[str, object]], run: dict[str, object], message: str
) -> None:
    export = _export(tmp_path, episodes, **run)
    line = _one_line(invoke("summarize", export))
    assert line.startswith(f"error: {export} (runs[0])") and line.endswith(message)


@pytest.mark.slow
@pytest.mark.parametrize(("field", "value"), [("host", "vm/../x"), ("host", ".."), ("robot", "a b")])
def test_a_run_recording_a_bad_identity_is_damaged_and_the_runs_beside_it_are_still_read(
    tmp_path: Path, sound_run: Path, field: str, value: str
) -> None:
    folder = tmp_path / "F"
    shutil.copytree(sound_run, folder / "good")
    shutil.copytree(sound_run, folder / "bad")
    doc = json.loads((folder / "bad" / "run.json").read_text())
    doc["identity"][field] = value
    (folder / "bad" / "run.json").write_text(json.dumps(doc, indent=2))
    violation = (
        f"run.json's identity.{field} {value!r} is not an identity segment (letters, digits, '.', '_', '-', "
        "not starting with '.', '_' or '-', at most 200 characters)"
    )
    graded = invoke("grade", folder / "bad", "--json")
    assert graded.returncode == 1 and json.loads(graded.stdout)["violations"] == [violation]
    refused = _one_line(invoke("summarize", folder))
    assert refused.startswith(f"error: {folder / 'bad'} is damaged (1 violation(s) by rollbench grade: {violation})")
    marked = invoke("summarize", folder, "--allow-damaged", "--json")
    assert marked.returncode == 0, marked.stderr
    runs = {r["path"]: r for r in json.loads(marked.stdout)["runs"]}
    assert (runs[str(folder / "bad")]["damaged"], runs[str(folder / "bad")]["violations"]) == (True, [violation])
    assert runs[str(folder / "good")]["status"] == "OK" and "damaged" not in runs[str(folder / "good")]
    assert "is damaged and included only because of --allow-damaged" in marked.stderr
    cell = json.loads(marked.stdout)["cells"][0]
    assert cell["episodes"] == 6  # hand count: the good run's 3 and the marked run's 3
    report = invoke("report", f"{folder}/", "--allow-damaged", "--out", tmp_path / "r.html")
    assert report.returncode == 0, report.stderr


def _hashes(root: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda text: text.replace('"fps": 10', '"fps": ' + "9" * 5000, 1), "is not readable JSON"),
        (lambda text: '{"codebase_version": "v3.0"}', "has no 'features' object"),
        (lambda text: "[1, 2]", "is not a JSON object (it holds a list)"),
        (lambda text: text.replace('"fps": 10', '"fps": 99', 1), "says fps 99, not the plan's 10"),
    ],
)
def test_resume_refuses_a_damaged_info_json_naming_it_and_changes_nothing(
    tmp_path: Path, sound_run: Path, edit: Callable[[str], str], why: str
) -> None:
    run = tmp_path / "R"
    shutil.copytree(sound_run, run)
    info = run / "meta" / "info.json"
    info.write_text(edit(info.read_text()))
    before = _hashes(run)
    line = _one_line(invoke("eval", "--resume", run))
    assert line == (
        f"error: --resume {run}: meta/info.json {why}; the run is damaged and cannot be resumed (nothing was "
        f"changed; `rollbench grade {run}` lists every problem)"
    )
    assert _hashes(run) == before
