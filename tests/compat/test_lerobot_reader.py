"""rollbench run directories open with lerobot's own reader, ``lerobot.datasets.lerobot_dataset.LeRobotDataset``
(lerobot 0.6.1, and the older 0.4.4 line; codebase v3.0), from the local directory only (``HF_HUB_OFFLINE=1``: no
hub access).

Runs only in the LeRobot venv made by ``scripts/lerobot_compat.sh`` (tests/conftest.py skips collecting this folder
where lerobot is not importable). The runs are recorded by the core install's ``rollbench eval`` in a subprocess.

The runs do not depend on the LeRobot line, so ``scripts/lerobot_compat.sh --lerobot both`` records each once for both
lines (``shared_runs.shared_run``); each line opens them with its own ``LeRobotDataset``.

The oracle for every value is rollbench's own record of the same run: ``rollbench grade --json`` (counts, lengths,
episode order), ``run.json`` (instructions and task indices) and the parquet and mp4 files read with pyarrow and PyAV.

Every run directory opens as it is, with no ``episodes=`` argument: LeRobot 0.4.4 requires frames for every episode in
``meta/episodes`` (otherwise it goes to the hub), so an episode that ended in an error before its first step is
recorded with one padding frame (NaN state and action, ``next.done`` true, a black video frame; see
``rollbench.record.lerobot``), tested below.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from conftest import run_cli

sys.path.insert(0, str(Path(__file__).parent))
from shared_runs import shared_run

pytestmark = [pytest.mark.venv, pytest.mark.slow]

HEIGHT, WIDTH = 48, 64  # not square, so a swapped height and width cannot pass


def record(out: Path, *args: str) -> dict[str, Any]:
    """Record a run with ``rollbench eval --video`` and return ``rollbench grade OUT --json``."""
    r = run_cli("eval", *args, "--video", "--image-size", f"{HEIGHT}x{WIDTH}", "--out", out, timeout=600)
    assert r.returncode in (0, 1), r.stderr  # 1 = PARTIAL, expected for the faulty env
    g = run_cli("grade", out, "--json")
    assert g.returncode == r.returncode, g.stderr
    return json.loads(g.stdout)


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    args = ("--env", "scripted/reach,scripted/reach-final", "--policy", "scripted-expert", "--episodes", "3")
    args += ("--max-steps", "12", "--action-noise", "0.3", "--seed", "5")
    return shared_run("scripted", lambda out: record(out, *args), tmp_path_factory)


@pytest.fixture(scope="module")
def metaworld_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    args = ("--env", "metaworld/pick-place-v3,metaworld/reach-v3", "--policy", "metaworld-expert", "--episodes", "1")
    return shared_run("metaworld", lambda out: record(out, *args, "--max-steps", "60", "--seed", "0"), tmp_path_factory)


def open_dataset(run_dir: Path, **kw: Any) -> LeRobotDataset:
    return LeRobotDataset(repo_id=f"rollbench/{run_dir.name}", root=run_dir, **kw)


def recorded_rows(run_dir: Path) -> pa.Table:
    files = sorted(run_dir.glob("data/chunk-*/file-*.parquet"))
    return pa.concat_tables(pq.read_table(f) for f in files).sort_by("index")


def decode_frame(path: Path, k: int) -> np.ndarray:
    """Frame ``k`` of ``path`` as uint8 (H, W, 3), decoded with PyAV (an independent decoder)."""
    with av.open(str(path)) as c:
        for i, frame in enumerate(c.decode(video=0)):
            if i == k:
                return frame.to_ndarray(format="rgb24")
    raise AssertionError(f"{path} has no frame {k}")


def check_run(run_dir: Path, graded: dict[str, Any], video: bool = True) -> None:
    ds = open_dataset(run_dir)
    log = json.loads((run_dir / "run.json").read_text())
    episodes = graded["episodes"]
    lengths = [e["length"] for e in episodes]

    assert ds.num_episodes == graded["episodes_recorded"] == graded["episodes_requested"] == len(episodes)
    assert ds.num_frames == len(ds) == sum(lengths)
    assert list(ds.meta.episodes["length"]) == lengths

    # meta/tasks.parquet: task_index -> the instruction rollbench gave the policy
    tasks = {int(row["task_index"]): task for task, row in ds.meta.tasks.iterrows()}
    assert tasks == dict(enumerate(log["plan"]["instructions"]))

    rows = recorded_rows(run_dir)
    state_dim = rows.schema.field("observation.state").type.list_size
    action_dim = rows.schema.field("action").type.list_size
    planned = {p["episode_index"]: p for p in log["plan"]["episodes"]}
    expected_episode = np.repeat(np.arange(len(lengths)), lengths)
    expected_frame = np.concatenate([np.arange(n) for n in lengths])
    for i in range(len(ds)):
        item = ds[i]
        e = int(item["episode_index"])
        assert (e, int(item["frame_index"]), int(item["index"])) == (expected_episode[i], expected_frame[i], i)
        assert item["observation.state"].shape == (state_dim,)
        assert item["action"].shape == (action_dim,)
        np.testing.assert_array_equal(item["observation.state"].numpy(), rows["observation.state"][i].values)
        np.testing.assert_array_equal(item["action"].numpy(), rows["action"][i].values)
        assert item["task"] == planned[e]["instruction"]
        assert int(item["task_index"]) == planned[e]["task_index"]

    if not video:
        assert ds.meta.video_keys == []
        return
    (key,) = ds.meta.video_keys
    for i in (0, len(ds) - 1):  # first frame of the run and last frame of the last episode
        item = ds[i]
        frame = item[key]
        assert frame.shape == (3, HEIGHT, WIDTH)
        e, k = int(item["episode_index"]), int(item["frame_index"])
        mp4 = run_dir / f"videos/{key}/chunk-000/file-{e:03d}.mp4"
        ours = decode_frame(mp4, k).astype(np.float32) / 255.0
        theirs = frame.permute(1, 2, 0).numpy()
        assert np.abs(ours - theirs).max() <= 1.5 / 255, "LeRobot decoded another frame than PyAV (1 level allowed)"


def test_scripted_run_opens_with_lerobot_dataset(scripted_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, graded = scripted_run
    assert graded["status"] == "OK"
    assert len(graded["tasks"]) == 2
    check_run(run_dir, graded)


@pytest.mark.sim
def test_metaworld_run_opens_with_lerobot_dataset(metaworld_run: tuple[Path, dict[str, Any]]) -> None:
    run_dir, graded = metaworld_run
    assert graded["episodes_recorded"] == 2
    check_run(run_dir, graded)
    ds = open_dataset(run_dir)
    assert ds.fps == 80 and ds[0]["observation.state"].shape == (39,) and ds[0]["action"].shape == (4,)


def test_run_with_an_episode_that_failed_at_reset_opens_as_it_is(tmp_path_factory: pytest.TempPathFactory) -> None:
    args = ("--env", "scripted/faulty", "--policy", "scripted-expert", "--episodes", "4")
    out, graded = shared_run("faulty", lambda o: record(o, *args), tmp_path_factory)
    assert graded["status"] == "PARTIAL"
    steps = {e["episode_index"]: e["length"] for e in graded["episodes"]}
    assert steps[2] == 0 and all(n > 0 for e, n in steps.items() if e != 2)  # seed 2 fails at reset
    frames = [max(n, 1) for _, n in sorted(steps.items())]  # the padding frame of episode 2
    ds = open_dataset(out)
    assert ds.num_episodes == 4
    assert ds.num_frames == len(ds) == sum(frames)
    assert list(ds.meta.episodes["length"]) == frames
    assert list(ds.meta.episodes["rollbench/steps"]) == [steps[e] for e in sorted(steps)]
    assert [int(ds[i]["episode_index"]) for i in range(len(ds))] == list(np.repeat(range(4), frames))
    pad = ds[frames[0] + frames[1]]  # the one frame of episode 2
    assert (int(pad["episode_index"]), int(pad["frame_index"]), bool(pad["next.done"])) == (2, 0, True)
    assert np.isnan(pad["action"].numpy()).all() and np.isnan(pad["observation.state"].numpy()).all()
    (key,) = ds.meta.video_keys
    assert pad[key].shape == (3, HEIGHT, WIDTH) and float(pad[key].max()) <= 2 / 255  # black


def test_latency_run_opens_with_its_delay_columns_as_ordinary_scalar_features(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``--latency``: ``policy.obs_frame_index``, ``policy.chunk_index`` (int64) and ``policy.hold`` (bool) per step,
    on the padding frame of an episode that failed at reset too (-1, -1, false), so every data file has one schema."""
    args = ("--env", "scripted/faulty", "--policy", "scripted-expert", "--episodes", "3", "--max-steps", "8")
    args += ("--latency", "steps:2", "--stale", "execute")
    out, graded = shared_run("latency", lambda o: record(o, *args), tmp_path_factory)
    assert graded["status"] == "PARTIAL" and graded["delay"]["call_delay_steps"] == 2
    ds = open_dataset(out)
    rows = recorded_rows(out)
    for key in ("policy.obs_frame_index", "policy.chunk_index", "policy.hold"):
        assert [ds[i][key].item() for i in range(len(ds))] == rows[key].to_pylist()
    # episode 0 (seed 0), single-step chunks delayed 2 steps and executed late: hold, hold, then the action computed
    # on observation 0 at step 2, hold at 3 and 4 while the call on observation 3 is out, its action at step 5, ...
    assert rows["policy.obs_frame_index"].to_pylist()[:8] == [-1, -1, 0, -1, -1, 3, -1, -1]
    pad = ds[len(ds) - 1]  # episode 2 (seed 2) failed at reset: its one padding frame
    assert (int(pad["episode_index"]), pad["policy.obs_frame_index"].item(), pad["policy.hold"].item()) == (
        2,
        -1,
        False,
    )


def record_libero_spatial(out: Path) -> dict[str, Any]:
    """``rollbench eval --env libero/libero_spatial --policy random --episodes 1 --out OUT``, then ``rollbench grade
    OUT --json``; skips where the core venv has no LIBERO."""
    r = run_cli(
        "eval", "--env", "libero/libero_spatial", "--policy", "random", "--episodes", "1", "--out", out, timeout=3600
    )
    if "not installed" in r.stdout + r.stderr:
        pytest.skip(f"LIBERO is not installed in the core venv: {r.stdout[-300:]}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    g = run_cli("grade", out, "--json")
    assert g.returncode == 0, g.stderr
    return dict(json.loads(g.stdout))


@pytest.mark.sim
@pytest.mark.slow
def test_full_libero_spatial_random_run_is_graded_and_opens_with_lerobot_dataset(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The issue's command as a user types it: all 10 libero_spatial tasks, 1 episode each, each to its horizon
    of 220 steps unless the random policy succeeds (real LIBERO scenes, recorded by the core venv; once for both
    lines under ``lerobot_compat.sh --lerobot both``)."""
    out, graded = shared_run("libero_spatial", record_libero_spatial, tmp_path_factory)
    assert graded["status"] == "OK" and graded["episodes_recorded"] == 10
    assert sorted(graded["tasks"]) == sorted(f"libero/libero_spatial/{i}" for i in range(10))
    for e in graded["episodes"]:
        assert e["initial_state"] == 0
        assert e["length"] == 220 or e["termination_reason"] == "success", e  # libero_spatial's horizon
    check_run(out, graded, video=False)
    ds = open_dataset(out)
    assert ds.fps == 20 and ds[0]["observation.state"].shape == (8,) and ds[0]["action"].shape == (7,)
    log = json.loads((out / "run.json").read_text())
    assert log["provenance"]["libero"]["libero_package"]["name"] == "rpent-libero"
