"""No output option writes into a release directory (hostile round 15, F4): its MANIFEST.json is the record of
every released file and redaction, written once by ``rollbench release``. ``report --out REL/MANIFEST.json``,
``--plots`` under it, ``serve-policy --log-requests REL/MANIFEST.json``, ``eval --out REL/new`` and the dashboard's
default label file in it are each refused with exit 2 and one line naming the path and the release, and the manifest
keeps its bytes. A directory whose MANIFEST.json is not rollbench's is not a release.

Oracles: the manifest's bytes before and after, the refusal lines in full, the file written where it is allowed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_in_process import invoke
from rollbench.record.safe_files import is_release_manifest, release_dir_containing


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a recorded run A, the release REL of A) of scripted/reach."""
    root = tmp_path_factory.mktemp("release_out")
    proc = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", root / "A")
    assert proc.returncode == 0, proc.stderr
    proc = invoke("release", root / "A", "--out", root / "REL")
    assert proc.returncode == 0, proc.stderr
    return root / "A", root / "REL"


def _refusal(option: str, out: Path, rel: Path) -> str:
    return (
        f"error: {option} {out} lies inside the release directory {os.path.realpath(rel)} (its MANIFEST.json records "
        "every released file and redaction); write outputs elsewhere"
    )


@pytest.mark.slow
def test_report_out_or_plots_in_a_release_is_refused_and_the_manifest_keeps_its_bytes(
    release: tuple[Path, Path],
) -> None:
    run, rel = release
    manifest = rel / "MANIFEST.json"
    before = manifest.read_bytes()
    for args, option, out in (
        (("--out", manifest), "--out", manifest),
        (("--out", rel / "report.html"), "--out", rel / "report.html"),
        (("--out", rel.parent / "r.html", "--plots", rel / "labels" / "figs"), "--plots", rel / "labels" / "figs"),
    ):
        proc = invoke("report", run, *args)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.strip() == _refusal(option, out, rel)
    assert manifest.read_bytes() == before
    assert not (rel / "report.html").exists() and not (rel / "labels" / "figs").exists()
    assert json.loads(before)["rollbench_release"] == 3


@pytest.mark.slow
def test_serve_policy_log_requests_into_a_release_manifest_is_refused_before_serving(
    release: tuple[Path, Path],
) -> None:
    _, rel = release
    manifest = rel / "MANIFEST.json"
    before = manifest.read_bytes()
    proc = invoke("serve-policy", "--policy", "zero", "--protocol", "http", "--port", "0", "--log-requests", manifest)
    assert proc.returncode == 2
    assert proc.stderr.strip() == _refusal("--log-requests", manifest, rel)
    assert manifest.read_bytes() == before


@pytest.mark.slow
def test_eval_out_and_the_dashboards_default_labels_in_a_release_are_refused(release: tuple[Path, Path]) -> None:
    _, rel = release
    proc = invoke("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", rel / "B")
    assert proc.returncode == 2
    assert proc.stderr.strip() == _refusal("--out", rel / "B", rel)
    assert not (rel / "B").exists()
    proc = invoke("dashboard", "--root", rel, "--port", "0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == _refusal("--labels", rel / "labels.json", rel)


@pytest.mark.slow
def test_a_directory_whose_manifest_is_not_rollbenchs_takes_a_report(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = release
    (tmp_path / "MANIFEST.json").write_text('{"name": "someone else\'s package", "files": []}\n')
    proc = invoke("report", run, "--out", tmp_path / "report.html")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "report.html").read_bytes().startswith(b"<!")


@pytest.mark.parametrize(
    ("text", "is_release"),
    [
        ('{\n  "date": "x",\n  "rollbench_release": 2\n}\n', True),
        ('{"pad": "' + "x" * (3 << 20) + '", "rollbench_release": 2}', True),  # the mark past the first MiB
        ('{"rollbench_release": 2, "pad": "' + "x" * (3 << 20) + '"}', True),  # ... and before the last one
        ('{"name": "rollbench", "release": 2}', False),
        ('["rollbench_release"]', False),  # not a JSON object
    ],
)
def test_a_release_is_recognised_by_its_manifests_mark(tmp_path: Path, text: str, is_release: bool) -> None:
    (tmp_path / "MANIFEST.json").write_text(text)
    assert is_release_manifest(tmp_path / "MANIFEST.json") is is_release
    assert release_dir_containing(tmp_path / "a" / "b.html") == (tmp_path.resolve() if is_release else None)


def test_a_link_or_fifo_named_manifest_does_not_make_a_release(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text('{"rollbench_release": 2}')
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "MANIFEST.json").symlink_to(real)
    (tmp_path / "f").mkdir()
    os.mkfifo(tmp_path / "f" / "MANIFEST.json")
    assert release_dir_containing(tmp_path / "l" / "x") is None
    assert release_dir_containing(tmp_path / "f" / "x") is None
