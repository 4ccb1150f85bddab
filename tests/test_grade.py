"""Grading from disk: results recomputed from the files, and invariant violations provoked on purpose."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate, grade
from rollbench.grading.grade import wilson_interval
from scripted_replay import replay


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    evaluate(
        env="scripted/reach",
        policy="random",
        episodes=6,
        max_steps=15,
        seed=4,
        video=True,
        image_size=(32, 32),
        out=out,
    )
    return out


def test_results_match_an_independent_replay_of_the_recorded_actions(run: Path) -> None:
    result = grade(run)
    assert result.status == "OK" and result.reasons == [] and result.violations == []
    successes = 0
    for ep in result.episodes:
        data = pq.read_table(run / f"data/chunk-000/file-{ep.episode_index:03d}.parquet")
        actions = np.asarray(data["action"].to_pylist(), dtype=np.float32)
        states, succ = replay(ep.seed, actions)
        np.testing.assert_array_equal(np.asarray(data["observation.state"].to_pylist(), dtype=np.float32), states)
        assert ep.seed == 4 + ep.episode_index
        assert ep.length == (succ.index(True) + 1 if any(succ) else 15)
        assert ep.success == any(succ)
        successes += any(succ)
    t = result.tasks["scripted/reach"]
    assert (t.episodes, t.successes) == (6, successes)
    assert (t.ci95_low, t.ci95_high) == wilson_interval(successes, 6)
    assert json.loads((run / "run.json").read_text())["results"] == result.to_json()


def test_wilson_interval_matches_published_values() -> None:
    # Wilson (1927); e.g. 0/10 -> [0, 0.2775], 10/10 -> [0.7225, 1], 5/10 -> [0.2366, 0.7634] (standard tables)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert wilson_interval(5, 10) == pytest.approx((0.23659, 0.76341), abs=1e-5)


def test_missing_episode_is_a_violation_and_partial(run: Path) -> None:
    (run / "meta/episodes/chunk-000/file-003.parquet").unlink()
    r = grade(run)
    assert r.status == "PARTIAL" and r.episodes_recorded == 5
    assert "1 of 6 requested episodes are not recorded (episode 3)" in r.reasons
    assert any("total_episodes=6 but 5 episodes are recorded" in v for v in r.violations)
    assert any("data rows exist for episodes without an episode record: [3]" in v for v in r.violations)


def test_duplicated_episode_index_is_a_violation(run: Path) -> None:
    shutil.copy(run / "meta/episodes/chunk-000/file-001.parquet", run / "meta/episodes/chunk-000/file-099.parquet")
    r = grade(run)
    assert r.status == "PARTIAL"
    assert "episode 1 is recorded 2 times" in r.violations


def test_truncated_data_file_is_named_as_unreadable(run: Path) -> None:
    f = run / "data/chunk-000/file-002.parquet"
    f.write_bytes(f.read_bytes()[:-40])
    r = grade(run)
    assert r.status == "PARTIAL"
    assert any(v.startswith(f"file {f} is unreadable") for v in r.violations)


def test_tampered_success_flag_disagrees_with_step_data(run: Path) -> None:
    f = run / "meta/episodes/chunk-000/file-000.parquet"
    t = pq.read_table(f)
    flipped = not t["rollbench/success"][0].as_py()
    idx = t.schema.get_field_index("rollbench/success")
    pq.write_table(t.set_column(idx, "rollbench/success", [[flipped]]), f)
    r = grade(run)
    assert any(v.startswith(f"episode 0: recorded success={flipped} but its step data gives") for v in r.violations)


def test_video_with_wrong_frame_count_is_a_violation(run: Path) -> None:
    from rollbench.record.files import encode_video

    video = run / "videos/observation.images.top/chunk-000/file-001.mp4"
    encode_video(video, [np.zeros((32, 32, 3), np.uint8)] * 2, fps=10)
    r = grade(run)
    length = r.episodes[1].length
    assert (
        f"episode 1: video file videos/observation.images.top/chunk-000/file-001.mp4 (observation.images.top) has 2 "
        f"frames for {length} steps"
    ) in r.violations


def test_one_errored_episode_makes_the_run_partial_with_its_reason(tmp_path: Path) -> None:
    r = evaluate(env="scripted/faulty", policy="scripted-expert", episodes=4, seed=0, out=tmp_path / "r")
    assert r.status == "PARTIAL"
    assert r.episodes_recorded == 4
    assert r.tasks["scripted/faulty"].errors == 1
    faults = {"policy": 0, "environment": 1, "infrastructure": 0}
    assert r.tasks["scripted/faulty"].errors_by_fault == r.overall.errors_by_fault == faults
    assert r.reasons == [
        "episode 2 (scripted/faulty, seed 2) ended in error (environment fault): RuntimeError: scripted/faulty: "
        "reset fails on purpose for seed 2 (seed % 3 == 2)",
        "errors by fault: 1 environment",
    ]


def test_all_episodes_errored_is_failed(tmp_path: Path) -> None:
    r = evaluate(env="scripted/faulty", policy="scripted-expert", episodes=1, seed=2, out=tmp_path / "r")
    assert r.status == "FAILED"


def test_nan_in_one_episode_is_partial_and_names_that_episode(tmp_path: Path) -> None:
    r = evaluate(
        env="scripted/reach",
        policy="fault_policies:nan_on_seed",
        policy_options={"bad_seed": 1, "step": 1},
        episodes=3,
        out=tmp_path / "r",
    )
    assert r.status == "PARTIAL"
    assert [e.termination_reason for e in r.episodes] == ["success", "error", "success"]
    assert "non-finite action (NaN or inf) at step 1" in r.reasons[0]
    assert r.episodes[1].length == 1


def test_next_done_on_a_row_before_the_last_is_a_violation(run: Path) -> None:
    f = run / "data/chunk-000/file-002.parquet"
    t = pq.read_table(f)
    n = t.num_rows
    assert n >= 2
    done = [True] + [False] * (n - 2) + [True]  # also done at frame 0
    pq.write_table(t.set_column(t.schema.get_field_index("next.done"), "next.done", [done]), f)
    r = grade(run)
    assert r.status == "PARTIAL"
    assert r.violations == [f"episode 2: next.done is true on frame 0, but only the last frame ({n - 1}) may be done"]


def test_an_episode_without_a_done_row_is_a_violation(run: Path) -> None:
    f = run / "data/chunk-000/file-001.parquet"
    t = pq.read_table(f)
    pq.write_table(t.set_column(t.schema.get_field_index("next.done"), "next.done", [[False] * t.num_rows]), f)
    assert grade(run).violations == [f"episode 1: no row has next.done (its last frame {t.num_rows - 1} must)"]


def test_duplicate_episode_rows_count_once_for_the_run_and_the_task(run: Path) -> None:
    ref = grade(run)
    shutil.copy(run / "meta/episodes/chunk-000/file-001.parquet", run / "meta/episodes/chunk-000/file-099.parquet")
    r = grade(run)
    assert r.episodes_recorded == 6 and r.tasks["scripted/reach"].episodes == 6
    assert [e.episode_index for e in r.episodes] == list(range(6))
    assert r.tasks["scripted/reach"].successes == ref.tasks["scripted/reach"].successes
    assert r.violations == ["episode 1 is recorded 2 times"]


def test_a_missing_or_unreadable_video_is_named(run: Path) -> None:
    videos = run / "videos/observation.images.top/chunk-000"
    (videos / "file-003.mp4").unlink()
    (videos / "file-004.mp4").write_bytes(b"not an mp4 at all")
    r = grade(run)
    assert "episode 3: video file videos/observation.images.top/chunk-000/file-003.mp4 is missing" in r.violations
    (bad,) = [v for v in r.violations if v.startswith("episode 4:")]
    assert bad.startswith("episode 4: video file videos/observation.images.top/chunk-000/file-004.mp4 is unreadable (")
    assert not any("-1 frames" in v for v in r.violations)


def _relabel(run: Path, column: str, value: object) -> None:
    """Set ``column`` to ``value`` on every episode record (as a hand edit with pyarrow would)."""
    for f in sorted((run / "meta/episodes").rglob("*.parquet")):
        t = pq.read_table(f)
        idx = t.schema.get_field_index(column)
        pq.write_table(t.set_column(idx, column, [[value] * t.num_rows]), f)


def test_max_steps_termination_before_the_relabelled_horizon_is_a_violation(tmp_path: Path) -> None:
    # zero never reaches the goal: every episode ends max_steps after 3 steps; relabel the horizon 30 everywhere
    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, out=out)
    assert grade(out).violations == []
    doc = json.loads((out / "run.json").read_text())
    doc["spec"]["max_steps"] = 30
    for t in doc["plan"]["tasks"]:
        t["max_steps"] = 30
    (out / "run.json").write_text(json.dumps(doc))
    _relabel(out, "rollbench/max_steps", 30)
    r = grade(out)
    for e in (0, 1):
        assert f"episode {e}: termination max_steps after 3 steps, but its horizon is 30 steps" in r.violations
    assert r.status == "PARTIAL"  # the status rule: violations make a run PARTIAL


def test_a_success_termination_without_a_held_success_is_a_violation(run: Path) -> None:
    _relabel(run, "rollbench/termination_reason", "success")
    r = grade(run)  # random on scripted/reach never succeeds: no recorded step completes the rule
    assert (
        "episode 0: termination success, but its step data does not reach the success rule (any_step, hold 1) "
        "first on its last step" in r.violations
    )


def test_an_any_step_success_that_did_not_end_the_episode_is_a_violation(tmp_path: Path) -> None:
    # hold 3 relabelled hold 1: the expert's first successful step now completes the rule, yet the episode went on
    out = tmp_path / "run"
    evaluate(env="scripted/reach", policy="scripted-expert", episodes=1, max_steps=30, seed=1, success_hold=3, out=out)
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")["next.success"].to_pylist()
    assert data[-3:] == [True] * 3 and data[-4] is False  # hand count: the hold of 3 ended the episode
    doc = json.loads((out / "run.json").read_text())
    doc["spec"]["success_hold"] = 1
    (out / "run.json").write_text(json.dumps(doc))
    r = grade(out)
    assert (
        "episode 0: termination success, but its step data does not reach the success rule (any_step, hold 1) "
        "first on its last step" in r.violations
    )
