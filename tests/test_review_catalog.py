"""The dashboard's run catalog: runs over the grading budget are listed as pending and graded in the background;
graded records are kept on disk outside the run directory and reused until the run changes."""

from __future__ import annotations

import time
from pathlib import Path

from dashboard_support import record_run
from rollbench.dashboard.catalog import Catalog
from rollbench.grading.grade import grade
from rollbench.record.runlog import read_run_log


def _wait_graded(catalog: Catalog, timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records, pending = catalog.records()
        if records and not pending:
            return records
        time.sleep(0.2)
    raise AssertionError("the background grader did not grade the run")


def test_runs_over_the_budget_are_pending_then_graded_in_the_background(tmp_path: Path):
    run = record_run(tmp_path / "runs" / "r", "hostA", policy="zero", episodes=2)
    catalog = Catalog([tmp_path / "runs"], sync_budget_s=0)
    records, pending = catalog.records()
    assert records == [] and [p.key for p in pending] == ["hostA/point/r"]
    (rec,) = _wait_graded(catalog)
    assert rec.result == grade(run, check_videos=False)


def test_graded_records_are_reused_after_a_restart_until_the_run_changes(tmp_path: Path):
    run = record_run(tmp_path / "runs" / "r", "hostA", policy="zero", episodes=2)
    before = sorted(p.name for p in run.rglob("*"))
    Catalog([tmp_path / "runs"], cache_dir=tmp_path / "cache").records()
    assert len(list((tmp_path / "cache" / "graded").glob("*.json"))) == 1
    restarted = Catalog([tmp_path / "runs"], cache_dir=tmp_path / "cache", sync_budget_s=0)
    records, pending = restarted.records()
    assert [r.identity.key for r in records] == ["hostA/point/r"] and pending == []
    # the reused record holds the whole run log (its plan's episodes too), as read from run.json itself
    assert records[0].log == read_run_log(run) and len(records[0].log.plan.episodes) == 2
    info = run / "meta" / "info.json"
    info.write_text(info.read_text())  # the writer rewrites info.json after every committed episode
    changed = Catalog([tmp_path / "runs"], cache_dir=tmp_path / "cache", sync_budget_s=0)
    records, pending = changed.records()
    assert records == [] and [p.key for p in pending] == ["hostA/point/r"]
    _wait_graded(changed)
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing written inside the run directory


def test_a_run_served_from_the_disk_cache_is_the_run_read_from_its_files(tmp_path: Path):
    """The cache holds the grade document and the dashboard's episodes (graded episode, recorded instruction, file
    links) as JSON; read back, they are the same models and give the same summary, byte for byte."""
    import json

    from rollbench.dashboard.catalog import read_run
    from rollbench.dashboard.summary import run_summary

    run = record_run(tmp_path / "runs" / "r", "hostA", policy="random", episodes=2)
    Catalog([tmp_path / "runs"], cache_dir=tmp_path / "cache").records()
    (cached,) = Catalog([tmp_path / "runs"], cache_dir=tmp_path / "cache", sync_budget_s=0).records()[0]
    fresh = read_run(run)
    assert cached.result == fresh.result and cached.episodes == fresh.episodes
    assert [e.instruction for e in fresh.episodes] == ["move the point to the goal"] * 2  # scripted/reach's
    videos = fresh.episodes[0].artifacts.videos
    assert {cam: (v.path, v.ready) for cam, v in videos.items()} == {
        "top": ("videos/observation.images.top/chunk-000/file-000.mp4", True)
    }
    assert json.dumps(run_summary(cached)) == json.dumps(run_summary(fresh))
