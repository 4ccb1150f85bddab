"""Nothing outside a run directory is read, written or deleted through a link inside it, and a crashed writer's
temporary files are cleaned up inside it.

Decision (docs/design.md, "Files outside the run directory"): a link under the run directory that leads outside it
makes ``eval``/``--resume`` refuse with a one-line error (exit 2) before anything is opened, and makes ``grade``
report the link as a violation and leave the files behind it unread. Links that stay inside are allowed.

Real runs throughout: ``scripted/reach`` recorded with video by ``rollbench.api.evaluate``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from file_trees import tree_hash
from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError

ARGS = {"env": "scripted/reach", "policy": "random", "episodes": 3, "max_steps": 4, "seed": 1, "video": True}
ARGS["image_size"] = (32, 32)
CAM = "videos/observation.images.top"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recorded") / "run"
    evaluate(out=out, **ARGS)
    return out


def move_out(run: Path, sub: str, outside: Path) -> None:
    """Move ``run/sub`` to ``outside/sub`` and leave a link to it in its place."""
    target = outside / sub.replace("/", "_")
    shutil.move(run / sub, target)
    (run / sub).symlink_to(target, target_is_directory=True)


# Each case puts a link leading outside under one sub-folder, with files behind it that a careless clean-up,
# resume or grade would delete, overwrite or read: leftover data/video files of episodes "not committed" (a resume
# deletes those), staged copies of committed episodes (deleted on open), and the episode rows and info.json.
def link_data_dir(run: Path, outside: Path) -> None:
    move_out(run, "data/chunk-000", outside)
    shutil.copy(outside / "data_chunk-000/file-000.parquet", outside / "data_chunk-000/file-007.parquet")


def link_meta_dir(run: Path, outside: Path) -> None:
    move_out(run, "meta", outside)


def link_videos_dir(run: Path, outside: Path) -> None:
    move_out(run, f"{CAM}/chunk-000", outside)
    shutil.copy(next((outside).glob("*/file-000.mp4")), next(outside.glob("*chunk-000")) / "file-009.mp4")


def link_staging_dir(run: Path, outside: Path) -> None:
    staged = outside / "staging" / "episode-000000"
    staged.mkdir(parents=True)
    (staged / "episode.json").write_text("{}")
    (outside / "staging" / ".tmp-000001-deadbeef").mkdir()
    (run / ".staging").symlink_to(outside / "staging", target_is_directory=True)


def link_data_file(run: Path, outside: Path) -> None:
    victim = outside / "victim.parquet"
    shutil.copy(run / "data/chunk-000/file-000.parquet", victim)
    (run / "data/chunk-000/file-005.parquet").symlink_to(victim)


def link_info_file(run: Path, outside: Path) -> None:
    victim = outside / "info.json"
    shutil.move(run / "meta/info.json", victim)
    (run / "meta/info.json").symlink_to(victim)


CASES = [link_data_dir, link_meta_dir, link_videos_dir, link_staging_dir, link_data_file, link_info_file]


@pytest.fixture(params=CASES, ids=lambda f: f.__name__)
def linked(request: pytest.FixtureRequest, recorded: Path, tmp_path: Path) -> tuple[Path, Path]:
    run, outside = tmp_path / "run", tmp_path / "outside"
    shutil.copytree(recorded, run, symlinks=True)
    outside.mkdir()
    request.param(run, outside)
    return run, outside


def test_resume_refuses_a_link_leading_outside_and_touches_nothing(linked: tuple[Path, Path]) -> None:
    run, outside = linked
    before_out, before_run = tree_hash(outside), tree_hash(run)
    with pytest.raises(ConfigError, match="is a link leading outside the run directory") as err:
        evaluate(out=run, **ARGS)
    assert "\n" not in str(err.value) and "remove it" in str(err.value)
    assert tree_hash(outside) == before_out
    assert tree_hash(run) == before_run  # refused before anything was opened: run.json still says what it said


def test_grade_reports_the_link_and_leaves_the_outside_unread(linked: tuple[Path, Path]) -> None:
    run, outside = linked
    before = tree_hash(outside)
    r = grade(run)
    assert r.status in ("PARTIAL", "FAILED")  # FAILED when the episode rows themselves are behind the link
    link = [v for v in r.violations if "is a link leading outside the run directory" in v]
    assert len(link) == 1 and link[0].endswith("; not read")
    assert tree_hash(outside) == before


def test_grade_counts_nothing_read_through_an_outside_link(recorded: Path, tmp_path: Path) -> None:
    """The episode rows moved outside and linked back: grade sees no recorded episode (it reads none of them)."""
    run, outside = tmp_path / "run", tmp_path / "outside"
    shutil.copytree(recorded, run, symlinks=True)
    outside.mkdir()
    move_out(run, "meta/episodes", outside)
    r = grade(run)
    assert r.episodes_recorded == 0 and r.status == "FAILED"
    assert "3 of 3 requested episodes are not recorded (episodes 0, 1, 2)" in r.reasons


def test_a_link_that_stays_inside_the_run_directory_is_allowed(recorded: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(recorded, run, symlinks=True)
    (run / "notes").mkdir()
    (run / "notes" / "info-link.json").symlink_to(run / "meta" / "info.json")
    assert grade(run).status == "OK"
    assert evaluate(out=run, **ARGS).status == "OK"


def test_resume_removes_a_crashed_writers_temp_files_inside_the_run(recorded: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(recorded, run, symlinks=True)
    committed = tree_hash(run)
    temps = [  # mkstemp's exact form: 8 characters of a-z, 0-9 and _
        run / "data/chunk-000/.file-003.parquet.k2j4h1ab.tmp",  # atomic_write_bytes of an uncommitted data file
        run / "meta/episodes/chunk-000/.file-003.parquet.x81hd0_z.tmp",
        run / "meta/.info.json.0s9d8f12.tmp",
        run / f"{CAM}/chunk-000/.file-003.mp4.j1k2l3mn.mp4",  # a partial video (encode_video)
        run / ".run.json.8d7f6g00.tmp",
    ]
    for t in temps:
        t.write_bytes(b"partial")
    staged_tmp = run / ".staging" / ".tmp-000003-0badf00d"
    staged_tmp.mkdir(parents=True)
    (staged_tmp / "data.parquet").write_bytes(b"partial")
    r = evaluate(out=run, **ARGS)
    assert r.status == "OK" and r.episodes_recorded == 3
    assert not any(t.exists() for t in temps) and not staged_tmp.exists()
    after = tree_hash(run)
    for f in ("data/chunk-000/file-000.parquet", "meta/episodes/chunk-000/file-002.parquet"):
        assert after[f] == committed[f]
