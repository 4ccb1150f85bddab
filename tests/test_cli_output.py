"""What the command line tells a user: where a run went, what a resume will do, warnings, what ``status: OK`` means,
lengths over the episodes that ran, mean return and wall time. Real runs through the real CLI (Typer's CliRunner,
in process); ``fault_policies:nan_on_seed`` (tests/fault_policies.py) makes one episode error before its first step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rollbench.api import evaluate, grade
from rollbench.cli.main import app

SMALL = ["--env", "scripted/reach", "--policy", "zero", "--episodes", "3", "--max-steps", "3"]


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_eval_json_without_out_says_where_the_run_went(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("eval", *SMALL, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    (made,) = (tmp_path / "runs").iterdir()
    assert doc["run_dir"] == f"runs/{made.name}"
    assert {k: v for k, v in doc.items() if k != "run_dir"} == json.loads((made / "run.json").read_text())["results"]


def test_resume_says_how_many_episodes_are_recorded_and_how_many_will_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=5, max_steps=3)
    for e in (3, 4):  # as if the run had stopped after episode 2 was committed (no row, no data file)
        (run / f"meta/episodes/chunk-000/file-00{e}.parquet").unlink()
        (run / f"data/chunk-000/file-00{e}.parquet").unlink()
    r = cli("eval", "--resume", str(run))
    assert r.exit_code == 0, r.stderr
    assert f"resuming {run}: 3 of 5 episodes already recorded, 2 to run" in r.stderr
    assert grade(run).episodes_recorded == 5


def test_success_rule_override_warning_is_printed(tmp_path: Path) -> None:
    r = cli("eval", *SMALL, "--success-rule", "final_step", "--out", str(tmp_path / "run"), "--json")
    assert r.exit_code == 0, r.stderr
    warning = "success rule of scripted/reach overridden: declared any_step, graded with final_step"
    assert r.stderr.count(f"warning: {warning}") == 1  # once, not again by the progress display
    assert json.loads((tmp_path / "run/run.json").read_text())["warnings"] == [warning]


def test_status_ok_next_to_zero_success_says_what_ok_means(tmp_path: Path) -> None:
    r = cli("eval", *SMALL, "--out", str(tmp_path / "run"))
    assert r.exit_code == 0, r.stderr
    assert "status: OK — 3 of 3 requested episodes recorded" in r.stdout
    assert "(OK: the run is complete and valid" in r.stdout
    assert "it says nothing about the policy: its success rate is 0.0%)" in r.stdout


def test_lengths_and_returns_are_over_the_episodes_that_ran(tmp_path: Path) -> None:
    """Episode 1 (seed 1) returns a NaN action at its first step: it errors with no step and is left out of the
    mean/median length and mean return, but still counts as a failed episode in the success rate."""
    run = tmp_path / "run"
    options = {"inner": "scripted-expert", "bad_seed": 1, "step": 0}
    r = evaluate(out=run, env="scripted/reach", policy="fault_policies:nan_on_seed", policy_options=options, episodes=3)
    eps = r.episodes
    assert [e.length for e in eps][1] == 0 and eps[1].termination_reason == "error"
    ran = [eps[0], eps[2]]
    task = r.tasks["scripted/reach"]
    assert task.episodes == 3 and task.episodes_ran == 2 and task.success_rate == 2 / 3
    assert task.mean_length == sum(e.length for e in ran) / 2
    assert task.median_length == sum(e.length for e in ran) / 2  # the median of two is their mean
    assert task.mean_return == pytest.approx(sum(e.return_ for e in ran) / 2, rel=1e-12)


def test_table_shows_mean_return_and_eval_wall_time_from_disk(tmp_path: Path) -> None:
    run = tmp_path / "run"
    r = cli("eval", *SMALL, "--out", str(run))
    assert r.exit_code == 0, r.stderr
    log = json.loads((run / "run.json").read_text())
    timing = log["results"]["timing"]
    assert timing["invocations"] == 1 and timing["eval_wall_time_s"] == log["executions"][0]["elapsed_s"] > 0
    assert f"eval wall time: {timing['eval_wall_time_s']:.1f} s; episode times summed" in r.stdout
    mean_return = log["results"]["tasks"]["scripted/reach"]["mean_return"]
    assert "mean return" in r.stdout and f"{mean_return:.2f}" in r.stdout
    assert grade(run).to_json() == log["results"]


def test_videos_index_maps_each_episode_to_its_video_file_and_time_range(tmp_path: Path) -> None:
    from rollbench.record.files import count_video_frames

    run = tmp_path / "run"
    r = evaluate(
        out=run, env="scripted/reach", policy="random", episodes=3, max_steps=4, seed=3, video=True, image_size=(32, 32)
    )
    index = json.loads((run / "meta/videos_index.json").read_text())
    assert index["fps"] == 10 and [e["episode_index"] for e in index["episodes"]] == [0, 1, 2]
    for entry, ep in zip(index["episodes"], r.episodes, strict=True):
        assert (entry["task"], entry["trial"], entry["seed"]) == (ep.task, ep.trial, ep.seed)
        video = entry["videos"]["observation.images.top"]
        assert video["file"] == f"videos/observation.images.top/chunk-000/file-{ep.episode_index:03d}.mp4"
        assert count_video_frames(run / video["file"]) == ep.length
        assert (video["from_s"], video["to_s"]) == (0.0, ep.length / 10)
