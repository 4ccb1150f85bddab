"""The writer touches only what its own run wrote (issue 42, items 4-7): its exact temporaries and the files its
run records, never recorded episodes whose rows are gone; a wrong node type or a hostile ``.staging`` is refused or
named, never a traceback, never committed. Oracles: the recording arguments (episode counts), file hashes taken
before the resume, and pyarrow's own reading of the committed rows."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from file_trees import tree_hash
from rollbench.api import evaluate, grade
from rollbench.record.committed import committed_lengths
from rollbench.record.files import writer_temps
from rollbench.record.staged_check import staged_index

ARGS = {"env": "scripted/reach", "policy": "random", "episodes": 5, "max_steps": 4, "seed": 1}
ROWS, DATA = "meta/episodes/chunk-000", "data/chunk-000"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    evaluate(out=out, **ARGS)
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(recorded, out, symlinks=True)
    return out


def resume(run: Path) -> tuple[int, list[str]]:
    r = invoke("eval", "--resume", run)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, [ln for ln in r.stderr.splitlines() if ln.startswith(("error", "warning"))]


# ---- item 4: only the writer's exact temporaries, only what its run writes -------------------------------------
@pytest.mark.parametrize(
    "rel",
    [
        ".run.json.backup.tmp",  # the reported names: a writer-like prefix, not mkstemp's 8 characters
        "meta/.info.json.orig.tmp",
        ".run.json.abcdefg.tmp",  # 7 characters
        ".run.json.abcdefghi.tmp",  # 9
        "meta/.stats.json.ABCDEFGH.tmp",  # not mkstemp's alphabet
        f"{DATA}/.file-001.parquet.a-b_cdef.tmp",
    ],
)
def test_a_file_only_resembling_a_writer_temporary_is_kept(run: Path, rel: str) -> None:
    (run / rel).write_text("mine")
    code, _ = resume(run)
    assert code == 0 and (run / rel).read_text() == "mine"


def test_the_temporary_pattern_is_mkstemps_exact_form() -> None:
    temps = writer_temps(["observation.images.top"], ["transcripts"])
    assert temps.fullmatch(".run.json.k2j4h1a_.tmp") and temps.fullmatch("meta/.info.json.00000000.tmp")
    assert temps.fullmatch("videos/observation.images.top/chunk-000/.file-003.mp4.abcdefgh.mp4")
    assert temps.fullmatch("transcripts/chunk-001/.file-002.jsonl.abcdefgh.tmp")
    assert not temps.fullmatch("videos/observation.images.side/chunk-000/.file-003.mp4.abcdefgh.mp4")
    assert not temps.fullmatch("wire/chunk-001/.file-002.jsonl.abcdefgh.tmp")
    assert not writer_temps().fullmatch("videos/observation.images.top/chunk-000/.file-003.mp4.abcdefgh.mp4")


@pytest.mark.parametrize(
    "rel",
    [
        "videos/observation.images.top/chunk-000/file-004.mp4",  # a run without video
        "transcripts/chunk-000/file-004.jsonl",  # a policy that writes no transcript
        "wire/chunk-000/file-004.jsonl",
        "videos/observation.images.top/chunk-000/.file-004.mp4.abcdefgh.mp4",  # their temporaries too
        "transcripts/chunk-000/.file-004.jsonl.abcdefgh.tmp",
    ],
)
def test_files_of_kinds_the_run_never_writes_are_kept_beside_an_interrupted_commit(run: Path, rel: str) -> None:
    (run / ROWS / "file-004.parquet").unlink()  # episode 4's commit interrupted before its row
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    (run / rel).write_text("mine")
    code, _ = resume(run)
    assert code == 0 and (run / rel).read_text() == "mine"
    assert grade(run).episodes_recorded == 5


# ---- item 5: missing rows are never taken for leftovers -----------------------------------------------------------
MISSING_ROWS: dict[str, Callable[[Path], None]] = {
    "meta/episodes removed": lambda r: shutil.rmtree(r / "meta/episodes"),
    "rows 2-4 removed": lambda r: [(r / ROWS / f"file-00{i}.parquet").unlink() for i in (2, 3, 4)],
    "rows 3-4 removed": lambda r: [(r / ROWS / f"file-00{i}.parquet").unlink() for i in (3, 4)],
    "the row chunk emptied": lambda r: [f.unlink() for f in (r / ROWS).iterdir()],
}


@pytest.mark.parametrize("case", sorted(MISSING_ROWS))
def test_rows_missing_for_more_than_one_episode_refuse_the_resume_and_delete_nothing(run: Path, case: str) -> None:
    MISSING_ROWS[case](run)
    before = tree_hash(run)
    code, lines = resume(run)
    assert code == 2 and len(lines) == 1 and "no episode row" in lines[0], lines
    assert tree_hash(run) == before
    assert all((run / DATA / f"file-00{i}.parquet").is_file() for i in range(5))


def test_one_missing_last_row_is_an_interrupted_commit_and_runs_again(run: Path) -> None:
    (run / ROWS / "file-004.parquet").unlink()
    code, _ = resume(run)
    assert code == 0 and committed_lengths(run) == [4] * 5 and grade(run).episodes_recorded == 5


# ---- hostile round 24, F3: a rowless file can only be the next commit's ------------------------------------------
VIDEO = "videos/observation.images.top/chunk-000"  # scripted/reach's camera


@pytest.fixture(scope="module")
def recorded_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    evaluate(out=out, video=True, **ARGS)
    return out


def handed_over(recorded: Path, tmp_path: Path, kept: dict[str, list[int]]) -> Path:
    """A copy of ``recorded`` (episodes 0..4) with only episodes 0..1 committed: the rows of 2..4 gone and, of
    their data and video files, only the episodes ``kept`` lists per tree (``DATA``, ``VIDEO``)."""
    out = Path(shutil.copytree(recorded, tmp_path / "run", symlinks=True))
    for e in (2, 3, 4):
        (out / ROWS / f"file-00{e}.parquet").unlink()
        for tree, suffix in ((DATA, "parquet"), (VIDEO, "mp4")):
            if e not in kept.get(tree, []) and (f := out / tree / f"file-00{e}.{suffix}").exists():
                f.unlink()
    return out


def rowless_refusal(run: Path, files_and_verb: str) -> str:
    return (
        f"error: {run} is damaged and cannot be resumed: {files_and_verb} no episode row, but an interrupted commit "
        "leaves files without a row only for episode 2, the next to commit, so episode rows were removed or moved; "
        f"nothing was changed (`rollbench grade {run}` reports every problem)"
    )


@pytest.mark.parametrize(
    ("video", "kept", "named", "rowless_data"),
    [
        (False, {DATA: [3]}, f"{DATA}/file-003.parquet has", [3]),  # the hostile repro: the episode after the next
        (False, {DATA: [4]}, f"{DATA}/file-004.parquet has", [4]),  # the plan's last episode
        (True, {VIDEO: [3]}, f"{VIDEO}/file-003.mp4 has", []),  # a video alone (grade does not look for one)
        (True, {DATA: [2, 4], VIDEO: [2, 4]}, f"{DATA}/file-004.parquet, {VIDEO}/file-004.mp4 have", [2, 4]),
    ],
    ids=["data-next-plus-one", "data-last", "video-only", "data-and-video-beside-the-leftover"],
)
def test_a_rowless_file_past_the_next_commit_refuses_the_resume_naming_it_and_changes_nothing(
    recorded: Path,
    recorded_video: Path,
    tmp_path: Path,
    video: bool,
    kept: dict[str, list[int]],
    named: str,
    rowless_data: list[int],
) -> None:
    run = handed_over(recorded_video if video else recorded, tmp_path, kept)
    said = [v for v in grade(run).violations if v.startswith("data rows exist")]  # grade: damage, not a leftover
    assert said == [f"data rows exist for episodes without an episode record: {rowless_data}"] * bool(rowless_data)
    before, log = tree_hash(run), (run / "run.json").read_bytes()
    r = invoke("eval", "--resume", run)
    assert (r.returncode, r.stderr.splitlines()) == (2, [rowless_refusal(run, named)])
    assert tree_hash(run) == before and (run / "run.json").read_bytes() == log


@pytest.mark.parametrize("video", [False, True], ids=["data", "data-and-video"])
def test_the_next_commits_own_leftover_is_deleted_and_the_episode_recorded_again(
    recorded: Path, recorded_video: Path, tmp_path: Path, video: bool
) -> None:
    run = handed_over(recorded_video if video else recorded, tmp_path, {DATA: [2], VIDEO: [2]})
    code, lines = resume(run)
    assert code == 0 and lines == [], lines
    assert committed_lengths(run) == [4] * 5 and grade(run).episodes_recorded == 5
    assert all((run / DATA / f"file-00{e}.parquet").is_file() for e in range(5))


# ---- item 6: wrong node types ----------------------------------------------------------------------------------
def _file_for_dir(rel: str) -> Callable[[Path], None]:
    return lambda r: (shutil.rmtree(r / rel), (r / rel).write_text("x"))


def _dir_for_file(rel: str) -> Callable[[Path], None]:
    return lambda r: ((r / rel).unlink(), (r / rel).mkdir())


WRONG_NODES = {
    "a file as meta/episodes/chunk-000": (_file_for_dir(ROWS), ROWS),
    "a file as meta/episodes": (_file_for_dir("meta/episodes"), "meta/episodes"),
    "a file as data/chunk-000": (_file_for_dir(DATA), DATA),
    "a directory as the last row file": (_dir_for_file(f"{ROWS}/file-004.parquet"), f"{ROWS}/file-004.parquet"),
    "a directory as a data file": (_dir_for_file(f"{DATA}/file-002.parquet"), f"{DATA}/file-002.parquet"),
    "a directory as meta/info.json": (_dir_for_file("meta/info.json"), "meta/info.json"),
    "a file as a video key's tree": (
        lambda r: ((r / "videos").mkdir(), (r / "videos/observation.images.top").write_text("x")),
        "videos/observation.images.top",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_NODES))
def test_a_wrong_node_type_refuses_the_resume_naming_it_and_changes_nothing(run: Path, case: str) -> None:
    plant, named = WRONG_NODES[case]
    plant(run)
    before = tree_hash(run)
    code, lines = resume(run)
    assert code == 2 and len(lines) == 1 and named in lines[0], lines
    assert tree_hash(run) == before
    assert "Traceback" not in invoke("grade", run).stderr


# ---- item 7: hostile staging -----------------------------------------------------------------------------------
def _stage_last(run: Path) -> Path:
    """Episode 4 staged as the writer stages it (its committed files turned into ``.staging/episode-000004``) and
    episode 3 taken back, so a resume runs 3 and then commits the staged 4."""
    staged = run / ".staging/episode-000004"
    staged.mkdir(parents=True)
    row = pq.read_table(run / ROWS / "file-004.parquet").to_pylist()[0]
    row["task_index"] = 0
    (staged / "episode.json").write_text(json.dumps(row))
    pq.write_table(pq.read_table(run / DATA / "file-004.parquet").drop_columns(["index"]), staged / "data.parquet")
    for i in (4, 3):
        (run / ROWS / f"file-00{i}.parquet").unlink()
        (run / DATA / f"file-00{i}.parquet").unlink()
    return staged


def _edit_row(**fields: object) -> Callable[[Path], None]:
    def edit(staged: Path) -> None:
        row = json.loads((staged / "episode.json").read_text())
        (staged / "episode.json").write_text(json.dumps({**row, **fields}))

    return edit


def _edit_data(col: str, value: object) -> Callable[[Path], None]:
    def edit(staged: Path) -> None:
        t = pq.read_table(staged / "data.parquet")
        i = t.schema.get_field_index(col)
        pq.write_table(
            t.set_column(i, col, pa.array([value] * t.num_rows, t.schema.field(i).type)), staged / "data.parquet"
        )

    return edit


def _foreign_data(staged: Path) -> None:
    n = pq.read_metadata(staged / "data.parquet").num_rows
    pq.write_table(pa.table({"secret": [f"s{i}" for i in range(n)]}), staged / "data.parquet")


HOSTILE_STAGING = {
    "task_index out of range": _edit_row(task_index=7),
    "task_index negative": _edit_row(task_index=-1),
    "task_index a string": _edit_row(task_index="0"),
    "task_index a float": _edit_row(task_index=0.0),
    "task_index a bool": _edit_row(task_index=False),
    "length a string": _edit_row(length="4"),
    "episode_index another episode's": _edit_row(episode_index=1),
    "success an object": _edit_row(**{"rollbench/success": {"x": 1}}),
    "return a list": _edit_row(**{"rollbench/return": [1.0]}),
    "seed a string": _edit_row(**{"rollbench/seed": "1"}),
    "termination reason a number": _edit_row(**{"rollbench/termination_reason": 3}),
    "the row a list": lambda s: (s / "episode.json").write_text("[1, 2]"),
    "a foreign data.parquet of the right row count": _foreign_data,
    "data rows of another episode": _edit_data("episode_index", 2),
    "data rows of another task": _edit_data("task_index", 5),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_STAGING))
@pytest.mark.slow
def test_a_hostile_staged_episode_is_named_and_never_committed(run: Path, case: str) -> None:
    recorded_4 = pq.read_table(run / DATA / "file-004.parquet")
    recorded_tasks = pq.read_table(run / ROWS / "file-004.parquet")["tasks"].to_pylist()[0]
    HOSTILE_STAGING[case](_stage_last(run))
    code, lines = resume(run)
    assert code == 0 and any("staged episode 4 is damaged" in ln for ln in lines), lines
    g = grade(run)
    assert (g.status, g.episodes_recorded, g.violations) == ("OK", 5, [])
    again = pq.read_table(run / DATA / "file-004.parquet")  # re-run: this run's columns, episode 4's rows
    assert again.schema.equals(recorded_4.schema) and set(again["episode_index"].to_pylist()) == {4}
    assert pq.read_table(run / ROWS / "file-004.parquet")["tasks"].to_pylist() == [recorded_tasks]


@pytest.mark.parametrize(
    "name", ["episode-4", "episode-0000004", "episode-00000\u0664", "episode-000004 ", "episode-+00004"]
)
@pytest.mark.slow
def test_a_staged_directory_not_named_exactly_is_left_and_never_committed(run: Path, name: str) -> None:
    staged = _stage_last(run)
    _edit_row(**{"rollbench/success": True})(staged)
    staged.rename(staged.with_name(name))
    code, lines = resume(run)
    assert code == 0 and any("not named like a staged episode" in ln for ln in lines), lines
    assert (run / ".staging" / name).is_dir() and grade(run).episodes_recorded == 5
    assert staged_index(name) is None


def test_the_untouched_staged_episode_is_committed_as_staged(run: Path) -> None:
    recorded_4 = pq.read_table(run / ROWS / "file-004.parquet").to_pylist()[0]
    _stage_last(run)
    code, lines = resume(run)
    assert code == 0 and not any("damaged" in ln for ln in lines), lines
    assert (
        pq.read_table(run / ROWS / "file-004.parquet").to_pylist()[0]["rollbench/seed"] == recorded_4["rollbench/seed"]
    )
