"""Released paths never clash (hostile round 18, F1/F2): every path a release would write (runs' directory names
after redaction, every file in them, label files, MANIFEST.json) is checked before the first write; two sources on
one path (equal, or equal but for letter case or Unicode normalisation: one file on macOS or Windows), a file where
another needs a folder, a run named ``MANIFEST.json`` (or ``labels`` with ``--labels``) and a run given as ``.`` or
``..`` are refused, exit 2, one line naming the sources, nothing written. The oracle: the refusal lines written out
by hand, the release directory's absence (and the parent's unchanged listing), and for the run named ``labels``
released without label files, its files read back byte for byte and MANIFEST.json against a walk of the release."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.api import evaluate

DATE = "2026-01-01"
ADDRESS = "alice@corp-secret.example"  # released as REDACTED-email-1-


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clash") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1)
    return out


def copy(recorded: Path, to: Path) -> Path:
    shutil.copytree(recorded, to)
    return to


def release(*args: object, cwd: Path | None = None) -> tuple[int, list[str], str]:
    r = invoke("release", *args, "--date", DATE, cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stderr.splitlines(), r.stdout


def refused(code: int, lines: list[str], out: Path) -> str:
    assert code == 2 and len(lines) == 1, lines
    assert not out.exists()
    return lines[0]


@pytest.mark.parametrize("dry", [False, True], ids=["write", "dry-run"])
def test_a_run_named_labels_is_refused_when_label_files_are_released(recorded: Path, tmp_path: Path, dry: bool) -> None:
    run = copy(recorded, tmp_path / "src/labels")
    notes = tmp_path / "lab/run.json"
    notes.parent.mkdir()
    notes.write_text('{"my": "notes"}')
    out = tmp_path / "rel"
    code, lines, _ = release(run, "--labels", notes, "--out", out, *(["--dry-run"] if dry else []))
    assert refused(code, lines, out) == (
        f"error: the run {run} would be released as labels, the folder of the --labels files; release a copy of it "
        "under another directory name, or the labels on their own"
    )


def test_a_run_named_labels_alone_is_released_as_a_run_not_as_label_files(recorded: Path, tmp_path: Path) -> None:
    run = copy(recorded, tmp_path / "src/labels")
    other = {"version": 1, "rubric": "outcome-v1", "labels": {"other/robot/name/0": {"label": "failed"}}}
    (run / "notes.json").write_text(json.dumps(other))  # shaped as a label file: cut to nothing were it treated so
    out = tmp_path / "rel"
    code, lines, stdout = release(run, "--out", out)
    assert code == 0, lines
    assert "not a label file" not in stdout and "label(s)" not in stdout
    assert json.loads((out / "labels/notes.json").read_text()) == other
    assert (out / "labels/data/chunk-000/file-000.parquet").read_bytes() == (
        run / "data/chunk-000/file-000.parquet"
    ).read_bytes()
    doc = json.loads((out / "MANIFEST.json").read_text())
    assert doc["runs"] == ["labels"] and doc["labels"] == [] and doc["label_entries"] == {}
    listed = [f["path"] for f in doc["files"]]
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert sorted(listed) == [p for p in on_disk if p != "MANIFEST.json"] and len(set(listed)) == len(listed)
    assert invoke("grade", out / "labels").returncode == 0


def test_a_run_released_under_a_placeholder_and_one_named_so_are_refused(recorded: Path, tmp_path: Path) -> None:
    one = copy(recorded, tmp_path / f"src/{ADDRESS}")
    two = copy(recorded, tmp_path / "src/REDACTED-email-1-")
    out = tmp_path / "rel"
    code, lines, _ = release(one, two, "--out", out)
    assert refused(code, lines, out) == (
        f"error: the runs {one} and {two} would both be released as REDACTED-email-1-; release a copy of one under "
        "another directory name"
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [("Pick", "pick"), ("caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9"))],
    ids=["letter case", "unicode normalisation"],
)
def test_runs_whose_names_one_file_system_holds_as_one_are_refused(
    recorded: Path, tmp_path: Path, first: str, second: str
) -> None:
    one = copy(recorded, tmp_path / "a" / first)
    two = copy(recorded, tmp_path / "b" / second)
    out = tmp_path / "rel"
    code, lines, _ = release(one, two, "--out", out)
    assert refused(code, lines, out) == (
        f"error: the runs {one} and {two} would both be released as {first} and {second}, one path on a "
        "case-insensitive file system (macOS, Windows); release a copy of one under another directory name"
    )


def test_a_run_named_manifest_json_is_refused_and_nothing_is_written(recorded: Path, tmp_path: Path) -> None:
    run = copy(recorded, tmp_path / "src/MANIFEST.json")
    out = tmp_path / "rel"
    code, lines, _ = release(run, "--out", out)
    assert refused(code, lines, out) == (
        f"error: the run {run} would be released as MANIFEST.json, the name of the release's manifest; release a "
        "copy of it under another directory name"
    )


def test_two_label_files_of_one_name_are_refused(recorded: Path, tmp_path: Path) -> None:
    run = copy(recorded, tmp_path / "src/run")
    for d in "ab":
        (tmp_path / d).mkdir()
        (tmp_path / d / "notes.txt").write_text(f"notes {d}\n")
    out = tmp_path / "rel"
    code, lines, _ = release(
        run, "--labels", tmp_path / "a/notes.txt", "--labels", tmp_path / "b/notes.txt", "--out", out
    )
    assert refused(code, lines, out) == (
        f"error: {tmp_path / 'a/notes.txt'} and {tmp_path / 'b/notes.txt'} would both be released as "
        "labels/notes.txt; rename one (a copy) and release again"
    )


@pytest.mark.parametrize(
    ("names", "said"),
    [
        ((ADDRESS, "REDACTED-email-1-"), "{1} and {0} would both be released as run/REDACTED-email-1-"),
        (
            ("README.md", "readme.md"),
            "{0} and {1} would both be released as run/README.md and run/readme.md, one path "
            "on a case-insensitive file system (macOS, Windows)",
        ),
    ],
    ids=["redacted name", "letter case"],
)
def test_two_files_of_a_run_released_as_one_path_are_refused(
    recorded: Path, tmp_path: Path, names: tuple[str, str], said: str
) -> None:
    run = copy(recorded, tmp_path / "src/run")
    for name in names:
        (run / name).write_text(f"{name}\n")
    out = tmp_path / "rel"
    code, lines, _ = release(run, "--out", out)
    expected = said.format(*(run / n for n in names))
    assert refused(code, lines, out) == f"error: {expected}; rename one (a copy) and release again"


def test_a_file_released_where_another_needs_a_folder_is_refused(recorded: Path, tmp_path: Path) -> None:
    run = copy(recorded, tmp_path / "src/run")
    (run / ADDRESS).write_text("one\n")  # released as the file run/REDACTED-email-1-
    (run / "REDACTED-email-1-").mkdir()
    (run / "REDACTED-email-1-/x.txt").write_text("two\n")
    out = tmp_path / "rel"
    code, lines, _ = release(run, "--out", out)
    assert refused(code, lines, out) == (
        f"error: {run / ADDRESS} would be released as the file run/REDACTED-email-1-, where "
        f"{run / 'REDACTED-email-1-/x.txt'} needs the folder run/REDACTED-email-1-; rename one (a copy) and release "
        "again"
    )


def test_a_run_given_as_dot_or_dotdot_is_refused_and_nothing_lands_outside_out(recorded: Path, tmp_path: Path) -> None:
    run = copy(recorded, tmp_path / "src/run")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for given, cwd in ((str(run / "meta") + "/..", None), (".", run)):
        code, lines, _ = release(given, "--out", tmp_path / "rel", cwd=cwd)
        assert refused(code, lines, tmp_path / "rel") == (
            f"error: the run {given} has no directory name of its own; give it by its folder's name (../NAME)"
        )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_release_into_an_out_another_release_holds_or_filled_since_is_refused(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile round 18 (b, F3): two releases into one new --out both passed the "new or empty" check and wrote into
    it, the last MANIFEST.json replacing the other. The write holds a lock on --out and finds it still empty."""
    from rollbench.record.locks import DirLock
    from rollbench.release import copy as release_copy

    run = copy(recorded, tmp_path / "src" / "run")
    out = tmp_path / "rel"
    out.mkdir()
    other = DirLock(out)
    other.acquire()  # another release writing it (a separate open file description: flock refuses this one)
    try:
        code, err, _ = release(run, "--out", out)
    finally:
        other.release()
    assert (code, err) == (
        2,
        [f"error: --out {out} is being written by another rollbench release; a release needs its own"],
    )
    assert list(out.iterdir()) == []
    checked = release_copy.check_files

    def another_release_writes_meanwhile(*args: object, **kwargs: object) -> object:
        result = checked(*args, **kwargs)  # type: ignore[arg-type]
        (out / "MANIFEST.json").write_text("{}")  # after this command's first check, before its first write
        return result

    monkeypatch.setattr(release_copy, "check_files", another_release_writes_meanwhile)
    code, err, _ = release(run, "--out", out)
    assert (code, err) == (
        2,
        [f"error: --out {out} is no longer empty (another release wrote into it); a release needs a fresh one"],
    )
    assert [p.name for p in out.iterdir()] == ["MANIFEST.json"] and (out / "MANIFEST.json").read_text() == "{}"
