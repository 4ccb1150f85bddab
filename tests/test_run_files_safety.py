"""Readers never follow, count twice or delete through links, FIFOs or sockets; a damaged run is never silently
analysed; a byte-copy of a run is pooled once (issue 20, items 3 and 4).

Real runs (``scripted/reach`` with video, recorded once per module) and real files; a canary tree beside the runs
is hashed before and after every command. Commands that could hang on a FIFO run as subprocesses with a timeout.
The expected numbers come from the recording arguments and from pyarrow reading the step files directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate, grade
from rollbench.record.safe_files import scan_run_files

sys.path.insert(0, str(Path(__file__).parent))
from conftest import run_cli

ARGS = {"env": "scripted/reach", "policy": "random", "episodes": 3, "max_steps": 4, "seed": 1, "video": True}
ARGS["image_size"] = (32, 32)
DATA = "data/chunk-000"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "good"
    evaluate(out=out, **ARGS)
    return out


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second recording with the same arguments: paired with ``recorded``, a different run (its own run log)."""
    out = tmp_path_factory.mktemp("other") / "other"
    evaluate(out=out, **ARGS)
    return out


def tree_hash(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file under ``root`` (links not followed: a link hashes its target's name)."""
    out = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for f in files:
            p = Path(dirpath) / f
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
            out[str(p.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


@pytest.fixture
def layout(recorded: Path, tmp_path: Path) -> tuple[Path, Path]:
    """(a fresh copy of the run under tmp/runs/r, a canary tree tmp/canary beside it)."""
    run, canary = tmp_path / "runs" / "r", tmp_path / "canary"
    shutil.copytree(recorded, run, symlinks=True)
    canary.mkdir()
    (canary / "keep.txt").write_text("canary")
    shutil.copy(recorded / DATA / "file-000.parquet", canary / "file-000.parquet")
    return run, canary


def successes_on_disk(run: Path) -> int:
    """Episodes with a true ``next.success`` row, read straight from the step files (the independent oracle)."""
    tables = [pq.read_table(f) for f in sorted((run / DATA).glob("file-*.parquet"))]
    return sum(1 for t in tables if any(t.column("next.success").to_pylist()))


def test_a_directory_link_inside_the_run_is_not_followed_nor_deleted_through(layout: tuple[Path, Path]) -> None:
    run, canary = layout
    os.symlink("chunk-000", run / "data/chunk-001")  # the same files seen twice through the link
    before, canary_before = tree_hash(run / DATA), tree_hash(canary)
    r = grade(run)
    assert (r["status"], r["violations"], r["episodes_recorded"]) == ("OK", [], 3)
    assert r["overall"]["successes"] == successes_on_disk(run)
    assert evaluate(out=run, **ARGS)["status"] == "OK"  # resume: repair sees each file once, deletes nothing
    assert tree_hash(run / DATA) == before and tree_hash(canary) == canary_before
    assert os.path.islink(run / "data/chunk-001")


def test_listing_skips_links_fifos_sockets_and_second_names(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, canary = layout
    os.symlink(canary / "file-000.parquet", run / DATA / "file-005.parquet")
    os.mkfifo(run / DATA / "file-006.parquet")
    sock = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(run / DATA)  # a relative name: AF_UNIX paths are limited to 107 bytes, tmp_path can be longer
    sock.bind("file-007.parquet")
    os.link(run / DATA / "file-000.parquet", run / DATA / "file-008.parquet")
    try:
        listing = scan_run_files(run, "data/chunk-*/file-*.parquet")
    finally:
        sock.close()
    assert [p.name for p in listing.files] == ["file-000.parquet", "file-001.parquet", "file-002.parquet"]
    assert [(p.name, why.split(",")[0]) for p, why in listing.skipped] == [
        ("file-005.parquet", "a symbolic link"),
        ("file-006.parquet", "a FIFO"),
        ("file-007.parquet", "a socket"),
        ("file-008.parquet", "a second name (hard link) of a file already read"),
    ]


@pytest.mark.parametrize("victim", [f"{DATA}/file-002.parquet", "run.json", "meta/info.json"])
@pytest.mark.slow
def test_a_fifo_in_place_of_a_run_file_never_hangs_a_reader(layout: tuple[Path, Path], victim: str) -> None:
    run, canary = layout
    (run / victim).unlink()
    os.mkfifo(run / victim)
    canary_before = tree_hash(canary)
    g = run_cli("grade", run, "--json", timeout=120)
    summary = run_cli("summarize", run.parent, timeout=120)
    report = run_cli("report", run, "--out", run.parent.parent / "rep.html", timeout=120)
    resumed = run_cli("eval", "--resume", run, timeout=120)
    assert g.returncode in (1, 2)  # a verdict (PARTIAL) or a one-line refusal, never a wait
    assert summary.returncode == 2 and report.returncode == 2  # damaged, or not a readable run
    assert "Traceback" not in g.stderr + resumed.stderr + summary.stderr + report.stderr
    if victim == "meta/info.json":  # derived from the committed episodes: resume rebuilds it as a regular file
        assert resumed.returncode == 0 and grade(run)["status"] == "OK"
    else:
        assert resumed.returncode == 2 and stat.S_ISFIFO(os.lstat(run / victim).st_mode)
    assert tree_hash(canary) == canary_before


def test_a_fifo_as_spec_or_labels_is_refused_at_once(layout: tuple[Path, Path], tmp_path: Path) -> None:
    run, _ = layout
    os.mkfifo(tmp_path / "fifo")
    spec = run_cli("eval", "--spec", tmp_path / "fifo", timeout=120)
    labels = run_cli("summarize", run, "--labels", tmp_path / "fifo", timeout=120)
    assert (spec.returncode, labels.returncode) == (2, 2)
    assert "FIFO" in spec.stderr and "FIFO" in labels.stderr


def test_the_dashboard_lists_good_runs_beside_a_fifo_run_log(layout: tuple[Path, Path], tmp_path: Path) -> None:
    import httpx

    from dashboard_support import ServerThread

    run, _ = layout
    bad = run.parent / "bad"
    shutil.copytree(run, bad, symlinks=True)
    (bad / "run.json").unlink()
    os.mkfifo(bad / "run.json")
    srv = ServerThread([run.parent], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        runs = httpx.get(srv.url + "/api/runs", timeout=60).json()
        csv = httpx.get(srv.url + "/api/labels.csv", timeout=60)
    finally:
        srv.stop()
    assert [r["name"] for r in runs["runs"]] == ["r"] and csv.status_code == 200


@pytest.mark.slow
def test_outputs_inside_a_run_directory_are_refused(layout: tuple[Path, Path]) -> None:
    run, _ = layout
    before = tree_hash(run)
    into_log = run_cli("report", run, "--out", run / "run.json")
    plots = run_cli("report", run, "--out", run.parent / "x.html", "--plots", run / "plots")
    a_dir = run_cli("report", run, "--out", run.parent)
    assert (into_log.returncode, plots.returncode, a_dir.returncode) == (2, 2, 2)
    assert "lies inside the run directory" in into_log.stderr and "is a directory" in a_dir.stderr
    assert tree_hash(run) == before
    assert sorted(p.name for p in run.parent.iterdir()) == ["r"]  # no report, no .runs.tmp left behind


@pytest.fixture
def truncated(layout: tuple[Path, Path], recorded: Path) -> tuple[Path, Path]:
    """(a run with one data file cut to half its bytes, an intact run recorded with the same arguments)."""
    run, _ = layout
    f = run / DATA / "file-001.parquet"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return run, recorded


@pytest.mark.slow
def test_a_damaged_run_is_refused_by_every_analysis_naming_the_run(truncated: tuple[Path, Path], other: Path) -> None:
    run, good = truncated[0], other
    for cmd in (
        ["summarize", run],
        ["compare", good, run],
        ["report", run, "--out", run.parent.parent / "rep.html"],
    ):
        r = run_cli(*cmd)
        assert r.returncode == 2, (cmd, r.stderr)
        assert f"{run} is damaged" in r.stderr and "file-001.parquet" in r.stderr and "--allow-damaged" in r.stderr
    assert not (run.parent.parent / "rep.html").exists()


@pytest.mark.slow
def test_allow_damaged_includes_the_run_marked_in_every_output(truncated: tuple[Path, Path], other: Path) -> None:
    run, good = truncated[0], other
    doc = json.loads(run_cli("summarize", run, "--json", "--allow-damaged").stdout)
    entry = doc["runs"][0]
    assert entry["damaged"] is True and any("file-001.parquet" in v for v in entry["violations"])
    assert doc["cells"][0]["damaged_runs"] == [entry["run"]]
    assert any("is damaged and included only because of --allow-damaged" in w for w in doc["warnings"])
    csv = run_cli("summarize", run, "--csv", "--allow-damaged").stdout.splitlines()
    assert csv[0].endswith(",damaged_runs") and csv[1].endswith(entry["run"])
    cmp = json.loads(run_cli("compare", good, run, "--json", "--allow-damaged").stdout)
    assert [r.get("damaged", False) for r in cmp["runs"]] == [False, True]
    html = run.parent.parent / "rep.html"
    rep = run_cli("report", run, "--out", html, "--allow-damaged")
    assert rep.returncode == 0, rep.stderr
    assert "DAMAGED" in html.read_text()


@pytest.mark.slow
def test_a_byte_copy_of_a_run_is_pooled_once(recorded: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(recorded, root / "a", symlinks=True)
    shutil.copytree(recorded, root / "a-copy", symlinks=True)
    r = run_cli("summarize", root, "--json")
    doc = json.loads(r.stdout)
    assert [c["episodes"] for c in doc["cells"]] == [3]  # recorded once: 3 episodes, not 6
    assert doc["cells"][0]["successes"] == successes_on_disk(recorded)
    assert doc["copies"] == [{"run": doc["copies"][0]["run"], "path": str(root / "a-copy"), "same_as": str(root / "a")}]
    assert "is a copy of" in r.stderr
    cmp = run_cli("compare", root / "a", root / "a-copy")
    assert cmp.returncode == 2 and "is a copy of" in cmp.stderr
