"""Readers never follow, count twice or delete through links, FIFOs or sockets; a damaged run is never silently
analysed; a byte-copy of a run is pooled once (issue 20, items 3 and 4).

Real runs (``scripted/reach`` with video, recorded once per module) and real files; a canary tree beside the runs
is hashed before and after every command. Commands that could hang on a FIFO, and resumes, run as real ``rollbench``
processes with a timeout; the analysis commands over damaged files run in this process (``cli_in_process.invoke``:
the same exit code, stdout and stderr, an escaped exception printed as its traceback).
The expected numbers come from the recording arguments and from pyarrow reading the step files directly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError
from rollbench.record.safe_files import scan_run_files

sys.path.insert(0, str(Path(__file__).parent))
from cli_in_process import invoke
from conftest import run_cli
from file_trees import tree_hash

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
    assert (r.status, r.violations, r.episodes_recorded) == ("OK", [], 3)
    assert r.overall.successes == successes_on_disk(run)
    with pytest.raises(ConfigError, match="data/chunk-001 is a symbolic link"):  # the writer would write through it
        evaluate(out=run, **ARGS)
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
    # refused, the FIFO left where it is (even meta/info.json, which the writer rebuilds: it deletes only its own files)
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
    into_log = invoke("report", run, "--out", run / "run.json")
    plots = invoke("report", run, "--out", run.parent / "x.html", "--plots", run / "plots")
    a_dir = invoke("report", run, "--out", run.parent)
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
        r = invoke(*cmd)
        assert r.returncode == 2, (cmd, r.stderr)
        assert f"{run} is damaged" in r.stderr and "file-001.parquet" in r.stderr and "--allow-damaged" in r.stderr
    assert not (run.parent.parent / "rep.html").exists()


@pytest.mark.slow
def test_allow_damaged_includes_the_run_marked_in_every_output(truncated: tuple[Path, Path], other: Path) -> None:
    run, good = truncated[0], other
    doc = json.loads(invoke("summarize", run, "--json", "--allow-damaged").stdout)
    entry = doc["runs"][0]
    assert entry["damaged"] is True and any("file-001.parquet" in v for v in entry["violations"])
    assert doc["cells"][0]["damaged_runs"] == [entry["run"]]
    assert any("is damaged and included only because of --allow-damaged" in w for w in doc["warnings"])
    csv = invoke("summarize", run, "--csv", "--allow-damaged").stdout.splitlines()
    assert csv[0].endswith(",damaged_runs") and csv[1].endswith(entry["run"])
    # the cut episode has no readable step rows, so it is not graded (not a failure): the runs no longer pair
    cmp = json.loads(invoke("compare", good, run, "--json", "--allow-damaged", "--unpaired").stdout)
    assert [r.get("damaged", False) for r in cmp["runs"]] == [False, True]
    text = invoke("compare", good, run, "--allow-damaged", "--unpaired").stdout
    verdicts = [line.strip() for line in text.splitlines() if line.strip().startswith("verdict")]
    assert verdicts and all(v.startswith("verdict (on damaged runs, --allow-damaged): ") for v in verdicts)
    html = run.parent.parent / "rep.html"
    rep = invoke("report", run, "--out", html, "--allow-damaged")
    assert rep.returncode == 0, rep.stderr
    assert "DAMAGED" in html.read_text()


@pytest.mark.slow
def test_a_byte_copy_of_a_run_is_pooled_once(recorded: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    shutil.copytree(recorded, root / "a", symlinks=True)
    shutil.copytree(recorded, root / "a-copy", symlinks=True)
    r = invoke("summarize", root, "--json")
    doc = json.loads(r.stdout)
    assert [c["episodes"] for c in doc["cells"]] == [3]  # recorded once: 3 episodes, not 6
    assert doc["cells"][0]["successes"] == successes_on_disk(recorded)
    assert doc["copies"] == [{"run": doc["copies"][0]["run"], "path": str(root / "a-copy"), "same_as": str(root / "a")}]
    assert "is a copy of" in r.stderr
    cmp = invoke("compare", root / "a", root / "a-copy")
    assert cmp.returncode == 2 and "is a copy of" in cmp.stderr


# ---- issue 30, items 1-5: resume and the writer touch only regular files they created, by exact name ------------


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    """Path -> (kind, content hash or link target) of every entry under ``root``; FIFOs and sockets are never
    opened (the oracle must not hang on what it checks)."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = Path(dirpath) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                out[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif stat.S_ISREG(mode):
                out[str(p.relative_to(root))] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p.relative_to(root))] = ("dir" if stat.S_ISDIR(mode) else "special", "")
    return out


def _move_and_link_back(run: Path, rel: str, to: str) -> None:
    """``rel`` moved to ``to`` (both inside the run) and a relative link left in its place."""
    (run / to).parent.mkdir(parents=True, exist_ok=True)
    (run / rel).rename(run / to)
    os.symlink(os.path.relpath(run / to, (run / rel).parent), run / rel)


def _drop_last_episode(run: Path) -> None:
    (run / DATA / "file-002.parquet").unlink()
    (run / "meta/episodes/chunk-000/file-002.parquet").unlink()


def _staging(run: Path) -> Path:
    (run / ".staging").mkdir(exist_ok=True)
    return run / ".staging"


FOREIGN = {  # what is planted -> the path the refusal names
    # item 1 and variants: links that stay inside the run, in every place the writer reads, writes or deletes
    "episode rows moved and linked back": (
        lambda r: (_drop_last_episode(r), _move_and_link_back(r, "meta/episodes/chunk-000", "meta/epchunk")),
        "meta/episodes/chunk-000",
    ),
    "data chunk moved and linked back": (lambda r: _move_and_link_back(r, DATA, "elsewhere/d"), DATA),
    "a data file linked to another episode's": (
        lambda r: (_drop_last_episode(r), os.symlink("file-000.parquet", r / DATA / "file-002.parquet")),
        f"{DATA}/file-002.parquet",
    ),
    "a dangling link among the videos": (
        lambda r: os.symlink("nowhere.mp4", next((r / "videos").iterdir()) / "chunk-000" / "file-009.mp4"),
        "file-009.mp4",
    ),
    "the whole meta directory linked": (lambda r: _move_and_link_back(r, "meta", "m2"), "meta"),
    "run.lock linked to info.json": (lambda r: os.symlink("meta/info.json", r / "run.lock"), "run.lock"),
    "staging linked to a directory inside": (
        lambda r: ((r / "s2").mkdir(), os.symlink("s2", r / ".staging")),
        ".staging",
    ),
    # items 3 and 4 and variants: FIFOs where the writer would open, remove or replace
    "a FIFO in staging (item 3)": (lambda r: os.mkfifo(_staging(r) / ".tmp-fifo"), ".staging/.tmp-fifo"),
    "a FIFO as a staged episode (item 4)": (
        lambda r: os.mkfifo(_staging(r) / "episode-000003"),
        ".staging/episode-000003",
    ),
    "a FIFO inside a writer-named temporary directory": (
        lambda r: ((_staging(r) / ".tmp-000003-0badf00d").mkdir(), os.mkfifo(r / ".staging/.tmp-000003-0badf00d/x")),
        ".tmp-000003-0badf00d/x",
    ),
    "a FIFO named like a leftover data file": (
        lambda r: os.mkfifo(r / DATA / "file-007.parquet"),
        f"{DATA}/file-007.parquet",
    ),
    "a FIFO named like the writer's temporary": (
        lambda r: os.mkfifo(r / "meta" / ".info.json.k2j4h1ab.tmp"),
        "meta/.info.json.k2j4h1ab.tmp",
    ),
    "a FIFO as the live progress file": (lambda r: os.mkfifo(r / "run.live.json"), "run.live.json"),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
@pytest.mark.slow
def test_resume_refuses_a_link_or_fifo_where_the_writer_works_and_changes_nothing(
    layout: tuple[Path, Path], case: str
) -> None:
    run, canary = layout
    plant, named = FOREIGN[case]
    plant(run)
    before, canary_before = snapshot(run), tree_hash(canary)
    r = run_cli("eval", "--resume", run, timeout=120)  # a FIFO opened for reading would block: the timeout fails it
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert named in lines[0] and "remove it" in lines[0] and "Traceback" not in r.stderr
    assert snapshot(run) == before and tree_hash(canary) == canary_before


def test_a_link_outside_the_writers_names_is_left_alone_and_the_resume_goes_on(layout: tuple[Path, Path]) -> None:
    run, _ = layout
    (run / "notes").mkdir()
    os.symlink("../meta/info.json", run / "notes" / "info-link.json")
    os.mkfifo(run / "notes" / "pipe")
    assert run_cli("eval", "--resume", run, timeout=120).returncode == 0
    assert os.path.islink(run / "notes" / "info-link.json") and stat.S_ISFIFO(os.lstat(run / "notes/pipe").st_mode)


NOT_THE_WRITERS = [  # item 2 and variants: dot-files and directories the writer's repair must not delete
    ".mydraft.tmp",
    "meta/.README.x.tmp",
    f"{DATA}/.notes.ab12cd.tmp",
    f"{DATA}/.file-000.parquet.ab12cd.mp4",  # a writer-like name with the wrong suffix
    f"{DATA}/.file-1.parquet.ab12cd.tmp",  # not a chunk file name
    "meta/.run.json.ab12cd.tmp",  # run.json's temporary, but not where run.json lives
    ".info.json.ab12cd.tmp",  # meta's, at the top
    "videos/.notes.mp4",
    "meta/episodes/.file-000.parquet.ab12cd.tmp",  # not inside a chunk directory
    ".staging/.tmp-mine/keep.txt",  # a staging directory not named like the writer's
    ".staging/.tmp-000009-0badf00d/notes.txt",  # the writer's name, a file the writer never puts there
    ".staging/episode-000001/notes.txt",  # a staged copy of a committed episode holding a user's file
]


def test_resume_deletes_only_the_writers_own_temporaries_by_exact_name(layout: tuple[Path, Path]) -> None:
    run, _ = layout
    for rel in NOT_THE_WRITERS:
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("mine")
    own = [run / DATA / ".file-003.parquet.k2j4h1ab.tmp", run / ".run.json.8d7f6g_z.tmp"]
    for p in own:
        p.write_bytes(b"partial")
    (run / ".staging/.tmp-000009-0badf00d/data.parquet").write_bytes(b"partial")  # the writer's, in its directory
    r = run_cli("eval", "--resume", run, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [rel for rel in NOT_THE_WRITERS if (run / rel).read_text() != "mine"] == []
    assert not any(p.exists() for p in own)
    assert not (run / ".staging/.tmp-000009-0badf00d/data.parquet").exists()
    assert grade(run).episodes_recorded == 3


def test_a_policys_output_and_its_children_never_reach_the_json_or_hold_the_caller(tmp_path: Path) -> None:
    """Items 5 and 11: the policy prints to stdout (Python and descriptor 1) and leaves a forked child and a
    subprocess sleeping 60 s. ``--json`` stays JSON, the prints are on stderr, and the caller's pipes end when
    rollbench exits (``subprocess.run`` waits for both pipes to close: a held pipe is the timeout)."""
    import time

    pids = tmp_path / "pids"
    opts = json.dumps({"pids": str(pids), "sleep_s": 60})
    cmd = ["eval", "--env", "scripted/reach", "--policy", "fault_policies:leaves_children", "--policy-options", opts]
    started = time.monotonic()
    try:
        r = run_cli(
            *cmd,
            "--episodes",
            "2",
            "--max-steps",
            "3",
            "--out",
            tmp_path / "run",
            "--json",
            timeout=40,
            env={"PYTHONPATH": str(Path(__file__).parent)},
        )
    finally:
        for pid in map(int, pids.read_text().split()) if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
    assert time.monotonic() - started < 40
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "OK"
    assert "policy says hello on stdout" in r.stderr and "policy writes to descriptor 1" in r.stderr
    assert len(pids.read_text().split()) == 4  # two episodes, each left two children


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("meta/tasks.parquet", "meta/episodes/chunk-000/file-003.parquet"),  # item 6 as reported
        ("meta/tasks.parquet", f"{DATA}/file-003.parquet"),
        (f"{DATA}/file-000.parquet", "meta/episodes/chunk-000/file-004.parquet"),  # a step file as episode rows
        ("meta/episodes/chunk-000/file-000.parquet", f"{DATA}/file-009.parquet"),  # episode rows as a step file
    ],
)
@pytest.mark.slow
def test_a_foreign_parquet_file_is_a_named_violation_on_every_surface(
    layout: tuple[Path, Path], tmp_path: Path, source: str, target: str
) -> None:
    """grade (API and CLI), runs --grade, MCP's grade_run and the dashboard's catalog each report the file; the
    three recorded episodes still count (the oracle: the recording arguments)."""
    import httpx

    from dashboard_support import ServerThread
    from rollbench.mcp.server import RolloutService

    run, _ = layout
    shutil.copyfile(run / source, run / target)
    r = grade(run)
    named = [v for v in r.violations if target in v]
    assert r.status == "PARTIAL" and r.episodes_recorded == 3 and len(named) == 1, r.violations
    cli = invoke("grade", run, "--json")
    assert cli.returncode == 1 and "Traceback" not in cli.stderr and target in cli.stdout
    runs = invoke("runs", run.parent, "--grade", "--json")
    assert runs.returncode == 0 and "Traceback" not in runs.stderr
    assert [row["status"] for row in json.loads(runs.stdout)] == ["PARTIAL"]
    mcp = RolloutService(run.parent).grade_run("r")
    assert not mcp.is_error and mcp.structured_content["status"] == "PARTIAL"
    srv = ServerThread([run.parent], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        listed = httpx.get(srv.url + "/api/runs", timeout=60).json()["runs"]
    finally:
        srv.stop()
    assert [any(target in v for v in row["violations"]) for row in listed] == [True]


def test_a_return_that_its_reward_rows_do_not_sum_to_is_a_named_violation(layout: tuple[Path, Path]) -> None:
    """Rewriting episode 1's ``next.reward`` rows (all 100.0, float32) leaves its recorded return behind: grade names
    it with both numbers (the oracle: pyarrow's reading of the episode row and the row count) and the untouched
    episodes raise nothing."""
    import pyarrow as pa

    run, _ = layout
    rows = pq.read_table(run / "meta/episodes/chunk-000/file-001.parquet").to_pylist()[0]
    step_file = run / DATA / "file-001.parquet"
    table = pq.read_table(step_file)
    rewards = pa.array([100.0] * table.num_rows, pa.float32())
    pq.write_table(table.set_column(table.schema.get_field_index("next.reward"), "next.reward", rewards), step_file)
    r = grade(run)
    want = f"episode 1: episode record says return {rows['rollbench/return']:g} but its next.reward rows sum to "
    recorded_max = json.loads((run / "meta/stats.json").read_text())["next.reward"]["max"][0]
    assert r.violations == [  # and meta/stats.json no longer describes the rows
        want + f"{100.0 * table.num_rows:g}",
        f"meta/stats.json: next.reward max[0] is {recorded_max:.9g} but the step rows give 100",
    ]
    assert r.status == "PARTIAL" and r.episodes_recorded == 3


@pytest.mark.parametrize("field", [{"results": "x"}, {"status": {"x": [1]}}, {"provenance": [1]}])
def test_a_run_log_field_of_the_wrong_type_is_named_by_mcp_and_hides_no_other_run(
    layout: tuple[Path, Path], tmp_path: Path, field: dict
) -> None:
    """MCP's get_run names the run.json of a run whose results/status/provenance have the wrong type (a ToolError,
    not "Error executing tool"), and list_runs still lists the sound run beside it."""
    from mcp.server.mcpserver.exceptions import ToolError

    from rollbench.mcp.server import RolloutService

    run, _ = layout
    bad = run.parent / "bad"
    shutil.copytree(run, bad)
    log = json.loads((bad / "run.json").read_text())
    log.update(field)
    (bad / "run.json").write_text(json.dumps(log))
    svc = RolloutService(run.parent)
    with pytest.raises(ToolError) as err:
        svc.get_run("bad")
    assert str(err.value).startswith(f"{bad}/run.json is not a rollbench run log: ")  # one line naming the field
    assert next(iter(field)) in str(err.value) and "\n" not in str(err.value)
    assert [r.run_id for r in svc.list_runs(10)] == ["r"]


@pytest.mark.parametrize(
    "template",
    [{"data_path": 5}, {"data_path": "{nope}.parquet"}, {"video_path": "{file_index:>99999999}"}, {"fps": "10"}],
)
def test_a_damaged_path_template_in_info_json_breaks_neither_the_dashboard_nor_grade(
    layout: tuple[Path, Path], tmp_path: Path, template: dict
) -> None:
    """A handed-over run whose meta/info.json holds a data_path/video_path that is not LeRobot's plain template (a
    number, an unknown name, a 100-MB-wide spec) or a string fps: the dashboard lists it beside the sound run and
    serves its pages (200, never a 500 for every run); grade names a bad video_path in its violations."""
    import httpx

    from dashboard_support import ServerThread

    run, _ = layout
    bad = run.parent / "bad"
    shutil.copytree(run, bad)
    info = json.loads((bad / "meta/info.json").read_text())
    info.update(template)
    (bad / "meta/info.json").write_text(json.dumps(info))
    srv = ServerThread([run.parent], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        listed = httpx.get(srv.url + "/api/runs", timeout=60)
        key = next(r["key"] for r in listed.json()["runs"] if r["name"] == "bad")
        pages = [httpx.get(srv.url + p, timeout=60).status_code for p in (f"/run/{key}", f"/episode/{key}/0")]
    finally:
        srv.stop()
    assert listed.status_code == 200 and sorted(r["name"] for r in listed.json()["runs"]) == ["bad", "r"]
    assert pages == [200, 200]
    if "video_path" in template:
        assert any("video_path '{file_index:>99999999}' cannot be filled in" in v for v in grade(bad).violations)


OUTSIDE_TEMPLATES = {
    "video_path absolute": ("video_path", "{canary}/videos/{{video_key}}/chunk-{{chunk_index:03d}}/file-{{file_index:03d}}.mp4"),
    "video_path climbing out": ("video_path", "../../canary/videos/{{video_key}}/chunk-{{chunk_index:03d}}/file-{{file_index:03d}}.mp4"),
    "video_path climbing out midway": ("video_path", "videos/../../../canary/videos/{{video_key}}/chunk-{{chunk_index:03d}}/file-{{file_index:03d}}.mp4"),
    "data_path absolute": ("data_path", "{canary}/data/chunk-{{chunk_index:03d}}/file-{{file_index:03d}}.parquet"),
    "data_path climbing out": ("data_path", "../../canary/data/chunk-{{chunk_index:03d}}/file-{{file_index:03d}}.parquet"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(OUTSIDE_TEMPLATES))
def test_a_path_template_leading_outside_the_run_is_a_named_violation(layout: tuple[Path, Path], case: str) -> None:
    """Hostile round 5, F7: a meta/info.json data_path/video_path whose text leads outside the run (absolute, or
    climbing out with ``..``) to a faithful copy of the run's own files is a violation saying so, not OK (no link is
    involved, so link_violations has nothing to name)."""
    run, canary = layout
    shutil.copytree(run / "videos", canary / "videos")  # the copies decode to the right frame counts
    shutil.copytree(run / "data", canary / "data")
    field, template = OUTSIDE_TEMPLATES[case]
    template = template.format(canary=canary)
    info = json.loads((run / "meta/info.json").read_text())
    info[field] = template
    (run / "meta/info.json").write_text(json.dumps(info))
    r = grade(run)
    if field == "data_path":  # where episode 0's rows would be read from
        said = f"leads outside the run directory (to {template.format(chunk_index=0, file_index=0)} for episode 0)"
    else:
        said = f"meta/info.json's video_path '{template}' leads outside the run directory; no video it names is read"
    named = [v for v in r.violations if said in v]
    assert r.status == "PARTIAL" and len(named) == 1, r.violations


# ---- issue 30, a fresh hostile attempt: meta/tasks.parquet, meta/stats.json and step files against meta/info.json ----
EP1 = f"{DATA}/file-001.parquet"


def _rewrite(rel: str, change: Callable[[pa.Table], pa.Table]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        pq.write_table(change(pq.read_table(run / rel)), run / rel)

    return damage


def _column(name: str, values: Callable[[pa.Table], pa.Array]) -> Callable[[pa.Table], pa.Table]:
    return lambda t: t.set_column(t.schema.get_field_index(name), name, values(t))


def _stats(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        doc = json.loads((run / "meta/stats.json").read_text())
        change(doc)
        (run / "meta/stats.json").write_text(json.dumps(doc))

    return damage


def _replace(rel: str, how: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / rel).unlink()
        if how == "dir":
            (run / rel).mkdir()
        elif how == "fifo":
            os.mkfifo(run / rel)
        elif how == "empty":
            (run / rel).write_bytes(b"")
        elif how == "link":  # the file moved elsewhere inside the run and linked back
            os.symlink(os.path.relpath(run / "moved.parquet", (run / rel).parent), run / rel)

    return damage


def _instruction(run: Path) -> str:
    return pq.read_table(run / "meta/episodes/chunk-000/file-000.parquet").column("tasks").to_pylist()[0][0]


def _action_col0(run: Path) -> list[float]:
    """Every step's first action element, from the step files (the oracle of stats.json's action entries)."""
    return [a[0] for f in sorted((run / DATA).glob("file-*.parquet")) for a in pq.read_table(f)["action"].to_pylist()]


def _steps(run: Path, rel: str) -> int:
    return pq.read_metadata(run / rel).num_rows


META_DAMAGE: dict[str, tuple[Callable[[Path], None], Callable[[Path], list[str]]]] = {
    "tasks.parquet missing": (lambda r: (r / "meta/tasks.parquet").unlink(), lambda r: ["meta/tasks.parquet is missing"]),
    "tasks.parquet a directory": (_replace("meta/tasks.parquet", "dir"),
                                  lambda r: ["meta/tasks.parquet is a directory, not a regular file; not read"]),
    "tasks.parquet a FIFO": (_replace("meta/tasks.parquet", "fifo"),
                             lambda r: ["meta/tasks.parquet is a FIFO, not a regular file; not read"]),
    "tasks.parquet empty": (_replace("meta/tasks.parquet", "empty"),
                            lambda r: ["meta/tasks.parquet is unreadable (ArrowInvalid: Parquet file size is 0 bytes)"]),
    "tasks.parquet without a task column": (
        lambda r: pq.write_table(pa.table({"task_index": [0]}), r / "meta/tasks.parquet"),
        lambda r: ["meta/tasks.parquet has no task_index and task columns (it has ['task_index'])"]),
    "tasks.parquet with a text index": (
        lambda r: pq.write_table(pa.table({"task_index": ["0"], "task": ["x"]}), r / "meta/tasks.parquet"),
        lambda r: ["meta/tasks.parquet: task_index is string and task is string, not int64 and string"]),
    "tasks.parquet lacking the episodes' index": (
        lambda r: pq.write_table(pa.table({"task_index": [5], "task": [_instruction(r)]}), r / "meta/tasks.parquet"),
        lambda r: ["episodes 0, 1, 2: the step rows name task_index 0, which meta/tasks.parquet lacks"]),
    "tasks.parquet naming another task": (
        lambda r: pq.write_table(pa.table({"task_index": [0], "task": ["x"]}), r / "meta/tasks.parquet"),
        lambda r: [f"episodes 0, 1, 2: the step rows name task 0 ('x' in meta/tasks.parquet) but the episode record "
                   f"lists {_instruction(r)!r}"]),
    "tasks.parquet with a task more": (
        lambda r: pq.write_table(pa.table({"task_index": [0, 1], "task": [_instruction(r), "y"]}), r / "meta/tasks.parquet"),
        lambda r: ["meta/info.json says total_tasks=1 but meta/tasks.parquet holds 2 tasks"]),
    "stats.json missing": (lambda r: (r / "meta/stats.json").unlink(), lambda r: ["meta/stats.json is missing"]),
    "stats.json a directory": (_replace("meta/stats.json", "dir"),
                               lambda r: ["meta/stats.json is a directory, not a regular file; not read"]),
    "stats.json a list": (lambda r: (r / "meta/stats.json").write_text("[1]"),
                          lambda r: ["meta/stats.json is not a JSON object (it holds a list)"]),
    "stats.json nested too deeply": (lambda r: (r / "meta/stats.json").write_text("[" * 100_000 + "]" * 100_000),
                                     lambda r: ["meta/stats.json is not readable JSON (it is nested too deeply: more than 64 levels)"]),
    "stats.json action max edited": (
        _stats(lambda d: d["action"]["max"].__setitem__(0, 9.0)),
        lambda r: [f"meta/stats.json: action max[0] is 9 but the step rows give {max(_action_col0(r)):.9g}"]),
    "stats.json action mean NaN": (
        _stats(lambda d: d["action"]["mean"].__setitem__(0, float("nan"))),
        lambda r: [f"meta/stats.json: action mean[0] is nan but the step rows give "
                   f"{sum(_action_col0(r)) / len(_action_col0(r)):.9g}"]),
    "stats.json count edited": (
        _stats(lambda d: d["next.reward"].update(count=[999])),
        lambda r: [f"meta/stats.json: next.reward count is [999] but the step rows give [{len(_action_col0(r))}]"]),
    "stats.json without a feature": (
        _stats(lambda d: d.pop("observation.state")),
        lambda r: ["meta/stats.json has no statistics for observation.state, which the step rows hold"]),
    "stats.json with a feature more": (
        _stats(lambda d: d.update(zzz={})),
        lambda r: ["meta/stats.json has statistics for 'zzz', which the step rows do not hold"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(META_DAMAGE))
def test_a_damaged_tasks_or_stats_file_is_one_named_violation_and_every_episode_still_counts(
    layout: tuple[Path, Path], case: str
) -> None:
    run, _ = layout
    damage, expected = META_DAMAGE[case]
    want = expected(run)  # computed from the sound files (the oracle) before the damage
    damage(run)
    r = grade(run)
    assert r.violations == want
    assert r.status == "PARTIAL" and r.episodes_recorded == 3
    assert r.overall.successes == successes_on_disk(run)


STEP_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "next.reward as float64": (
        _rewrite(EP1, _column("next.reward", lambda t: pc.cast(t["next.reward"], pa.float64()))),
        f"file {EP1}: column next.reward is declared float32 in meta/info.json but holds float64; not read"),
    "observation.state 3 wide": (
        _rewrite(EP1, _column("observation.state", lambda t: pa.FixedSizeListArray.from_arrays(
            pa.array([0.0] * 3 * t.num_rows, pa.float32()), 3))),
        f"file {EP1}: column observation.state is declared float32[4] in meta/info.json but holds float32[3]; not read"),
    "action as a variable list": (
        _rewrite(EP1, _column("action", lambda t: pa.array(t["action"].to_pylist(), pa.list_(pa.float64())))),
        f"file {EP1}: column action is declared float64[2] in meta/info.json but holds float64[]; not read"),
    "next.success as uint64 (item 4)": (
        _rewrite(EP1, _column("next.success", lambda t: pc.cast(t["next.success"], pa.uint64()))),
        f"file {EP1}: column next.success is declared bool in meta/info.json but holds uint64; not read"),
    "next.done as int8": (
        _rewrite(EP1, _column("next.done", lambda t: pc.cast(t["next.done"], pa.int8()))),
        f"file {EP1}: column next.done is declared bool in meta/info.json but holds int8; not read"),
    "frame_index as uint64": (
        _rewrite(EP1, _column("frame_index", lambda t: pc.cast(t["frame_index"], pa.uint64()))),
        f"file {EP1}: column frame_index is declared int64 in meta/info.json but holds uint64; not read"),
    "timestamp as text": (
        _rewrite(EP1, _column("timestamp", lambda t: pc.cast(t["timestamp"], pa.string()))),
        f"file {EP1}: column timestamp is declared float32 in meta/info.json but holds string; not read"),
    "a column more": (
        _rewrite(EP1, lambda t: t.append_column("extra", pa.array([1.0] * t.num_rows))),
        f"file {EP1}: column extra (float64) is not declared in meta/info.json; not read"),
    "a column less": (
        _rewrite(EP1, lambda t: t.drop_columns(["policy.latency_s"])),
        f"file {EP1}: column policy.latency_s declared in meta/info.json (float32) is missing; not read"),
    "a link to the file moved inside the run (item 3)": (
        lambda r: (shutil.copyfile(r / EP1, r / "moved.parquet"), _replace(EP1, "link")(r)),
        f"{EP1} is a symbolic link (to ../../moved.parquet), not a regular file; not read"),
    "a directory in its place": (_replace(EP1, "dir"), f"{EP1} is a directory, not a regular file; not read"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(STEP_DAMAGE))
def test_a_step_file_unlike_what_info_json_declares_is_named_and_its_episode_not_graded(
    layout: tuple[Path, Path], case: str
) -> None:
    """Items 2-4 and variants: the file is named with the column, what info.json declares and what it holds; its
    episode is left out of every number (never graded as a failure), the others count (the oracle: pyarrow reading
    the sound step files, and the frame counts of the footers)."""
    run, _ = layout
    damage, named = STEP_DAMAGE[case]
    total, ep1 = sum(_steps(run, f"{DATA}/file-00{i}.parquet") for i in range(3)), _steps(run, EP1)
    successes = successes_on_disk(run) - any(pq.read_table(run / EP1).column("next.success").to_pylist())
    damage(run)
    r = grade(run)
    assert r.violations == [
        named,
        f"meta/info.json says total_frames={total} but the data files hold {total - ep1} rows",
        f"episode 1: its episode record says {ep1} frames but no step row of it was read ({EP1}); not graded",
    ]
    assert r.status == "PARTIAL" and r.episodes_recorded == 2
    assert [e.episode_index for e in r.episodes] == [0, 2] and r.overall.successes == successes
    assert "1 of 3 requested episodes are not recorded or not graded (episode 1)" in r.reasons


def test_a_difference_every_step_file_shares_is_info_jsons_named_once(layout: tuple[Path, Path]) -> None:
    """info.json declaring an action dtype no step file holds is one violation, and every episode still counts."""
    run, _ = layout
    info = json.loads((run / "meta/info.json").read_text())
    info["features"]["action"]["dtype"] = "float16"
    (run / "meta/info.json").write_text(json.dumps(info))
    r = grade(run)
    assert r.violations == [
        "meta/info.json: every step file differs from it: column action is declared float16[2] in meta/info.json "
        "but holds float64[2]"
    ]
    assert r.episodes_recorded == 3 and r.overall.successes == successes_on_disk(run)


def test_a_non_finite_action_and_a_file_where_the_data_directory_goes_are_named(layout: tuple[Path, Path]) -> None:
    run, _ = layout
    t = pq.read_table(run / EP1)
    actions = t["action"].to_pylist()
    actions[1][0] = float("inf")
    col = pa.FixedSizeListArray.from_arrays(pa.array([x for a in actions for x in a], pa.float64()), 2)
    pq.write_table(t.set_column(t.schema.get_field_index("action"), "action", col), run / EP1)
    r = grade(run)
    assert r.violations[0] == (
        "episode 1: 1 step(s) hold an action with a NaN or an infinity, which rollbench never executes (only the "
        "padding frame of an episode that ended before its first step is all NaN)"
    )
    recorded = json.loads((run / "meta/stats.json").read_text())["action"]["max"][0]
    assert r.violations[1:] == [f"meta/stats.json: action max[0] is {recorded:.9g} but the step rows give inf"]
    shutil.rmtree(run / "data")
    (run / "data").write_text("not a directory")
    r = grade(run)
    assert r.violations[0] == "data is a regular file where a directory is expected; not read"
    assert r.episodes_recorded == 0 and r.status == "FAILED"


def test_a_video_link_leading_outside_is_named_once(layout: tuple[Path, Path]) -> None:
    """Item 8: a damaged run's violation is listed once (the link was named by the link check and again by the
    video check); every violation of grade's list is distinct."""
    run, canary = layout
    video = next((run / "videos").rglob("file-001.mp4"))
    shutil.move(video, canary / "v.mp4")
    os.symlink(canary / "v.mp4", video)
    r = grade(run)
    rel = video.relative_to(run)
    assert r.violations == [f"{rel} is a link leading outside the run directory (to {canary / 'v.mp4'}); not read"]
    cli = invoke("grade", run)
    assert cli.stdout.count(str(rel)) == 1, cli.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("next.success as uint64 (item 4)", "column next.success is declared bool in meta/info.json but holds uint64"),
        ("tasks.parquet missing", "meta/tasks.parquet is missing"),
        ("stats.json count edited", "meta/stats.json: next.reward count is [999]"),
    ],
)
def test_a_run_damaged_in_meta_or_its_step_files_is_damaged_on_every_surface(
    layout: tuple[Path, Path], other: Path, tmp_path: Path, case: str, named: str
) -> None:
    """Item 1: grade (exit 1, the violation once), summarize/compare/report (refused: exit 2, one line naming the run),
    runs --grade (marked damaged), MCP's grade_run and the dashboard's catalog all treat the run alike."""
    import httpx

    from dashboard_support import ServerThread
    from rollbench.mcp.server import RolloutService

    run, _ = layout
    (META_DAMAGE[case][0] if case in META_DAMAGE else STEP_DAMAGE[case][0])(run)
    cli = invoke("grade", run)
    assert cli.returncode == 1 and cli.stdout.count(named) == 1 and "Traceback" not in cli.stderr, cli.stdout
    for cmd in (["summarize", run], ["compare", other, run], ["report", run, "--out", tmp_path / "r.html"]):
        r = invoke(*cmd)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and f"{run} is damaged" in lines[0] and named in lines[0], r.stderr
    rows = json.loads(invoke("runs", run.parent, "--grade", "--json").stdout)
    assert [(row["status"], row.get("damaged")) for row in rows] == [("PARTIAL", True)]
    assert sum(named in v for v in rows[0]["violations"]) == 1
    mcp = RolloutService(run.parent).grade_run("r")
    assert not mcp.is_error and mcp.structured_content["status"] == "PARTIAL"
    assert sum(named in v for v in mcp.structured_content["reasons"]) == 1
    srv = ServerThread([run.parent], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        listed = httpx.get(srv.url + "/api/runs", timeout=60).json()["runs"]
    finally:
        srv.stop()
    assert [sum(named in v for v in row["violations"]) for row in listed] == [1]
