"""Shipping an episode from a worker that cannot see the run directory (rollbench.record.shipping) and the Ray
options' validation, without Ray: the files the driver stages from a reply are byte for byte the files the worker
would have staged itself (the oracle: ``stage_episode`` on the same record), and every damaged reply is refused."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import run_cli
from observers import KeepRecords
from rollbench.api import Execution, RayOptions, prepare_run
from rollbench.core.contracts import ConfigError
from rollbench.core.episode import EpisodeRecord
from rollbench.record.lerobot import STAGING, stage_episode, video_key
from rollbench.record.shipping import (
    BadReply,
    ShippedEpisode,
    allowed_names,
    check_reply,
    digest_of,
    pack_episode,
    stage_shipped,
)
from rollbench.run.worker import EpisodeWorker, WorkerSetup

NAMES = allowed_names([video_key("top")])


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> EpisodeRecord:
    """One real scripted episode with video, as a worker hands it to its commit step."""
    from rollbench.core.spec import build_spec

    run_dir = tmp_path_factory.mktemp("plan")
    spec = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=3, video=True)
    run, _log = prepare_run(spec, run_dir)
    setup = WorkerSetup(run, run_dir)
    kept = KeepRecords()
    worker = EpisodeWorker(setup, recorder=kept)
    worker.run(run.plan.episodes[0])
    worker.close()
    return kept.records[0]


def _files(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


def test_a_shipped_episode_stages_the_same_files_as_staging_it_in_place(record: EpisodeRecord, tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    assert stage_episode(here, record, 10)
    shipped = pack_episode(record, 10, None)
    assert stage_shipped(there, check_reply(shipped, 0, NAMES, 1 << 30))
    a, b = _files(here / STAGING / "episode-000000"), _files(there / STAGING / "episode-000000")
    assert sorted(a) == ["data.parquet", "episode.json", "observation.images.top.mp4"]
    assert a == b
    assert not stage_shipped(there, shipped)  # first wins: a second copy is dropped
    assert shipped.size == sum(len(v) for v in a.values())


def test_every_damaged_reply_is_refused_and_nothing_is_staged(record: EpisodeRecord, tmp_path: Path) -> None:
    good = pack_episode(record, 10, None)
    flipped = bytearray(good.files["data.parquet"])
    flipped[100] ^= 1
    cases = {
        "failed its SHA-256 checksum": dataclasses.replace(good, files={**good.files, "data.parquet": bytes(flipped)}),
        "not 0": dataclasses.replace(good, episode_index=7),
        "files a run does not record: ../x": dataclasses.replace(
            good, files={**good.files, "../x": b"1"}, digest=digest_of({**good.files, "../x": b"1"})
        ),
        "lacks data.parquet": dataclasses.replace(
            good, files={"episode.json": good.files["episode.json"]}, digest=digest_of({"episode.json": b""})
        ),
        "not a shipped episode": {"files": good.files},
    }
    for why, reply in cases.items():
        with pytest.raises(BadReply, match=why.replace(".", r"\.")):
            check_reply(reply, 0, NAMES, 1 << 30)
    with pytest.raises(BadReply, match=f"{good.size:,} bytes, over the 1,000-byte bound"):
        check_reply(good, 0, NAMES, 1000)
    too_big = pack_episode(record, 10, None, max_bytes=1000)  # the worker keeps an oversized episode to itself
    assert too_big.files == {} and too_big.size == good.size
    with pytest.raises(BadReply, match="over the 1,000-byte bound"):
        check_reply(too_big, 0, NAMES, 1000)
    cut = {**good.files, "data.parquet": good.files["data.parquet"][:50]}  # checksummed, yet not a whole episode
    with pytest.raises(BadReply, match=r"does not read back whole: data\.parquet"):
        stage_shipped(tmp_path, ShippedEpisode(0, cut, digest_of(cut), len(cut)))
    assert list((tmp_path / STAGING).iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpus": 1.5}, "--ray-gpus above 1 must be a whole number (Ray's rule), got 1.5"),
        ({"cpus": 0}, "--ray-cpus must be a number from 0.0001 to 1e+14 (Ray's limits), got 0"),
        ({"cpus": 1e308}, "--ray-cpus must be a number from 0.0001 to 1e+14 (Ray's limits), got 1e+308"),
        ({"gpus": -1}, "--ray-gpus must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got -1"),
        ({"placement": "scatter"}, "unknown --ray-placement 'scatter'; valid: spread, pack"),
        ({"resources": {"GPU": 1}}, "ask for GPU with --ray-cpus/--ray-gpus"),
        (
            {"resources": {"x": -1}},
            "--ray-resources: x must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got -1",
        ),
        (
            {"resources": {"x": 5e-5}},
            "--ray-resources: x must be 0 or a number from 0.0001 to 1e+14 (Ray's limits), got 5e-05",
        ),
    ],
)
def test_bad_ray_options_are_config_errors_naming_the_flag(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        RayOptions(**kwargs)  # type: ignore[arg-type]


def test_ray_options_without_the_ray_executor_are_refused() -> None:
    with pytest.raises(ConfigError, match="only apply to --executor ray"):
        Execution(ray=RayOptions(gpus=0.5))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--executor", "ray", "--ray-resources", "{bad"], "--ray-resources is not JSON"),
        (["--executor", "ray", "--ray-resources", "[1]"], "--ray-resources must be a JSON object"),
        (["--ray-gpus", "0.5"], "only apply to --executor ray"),
    ],
)
def test_cli_bad_ray_flags_exit_2_with_one_line(flags: list[str], message: str, tmp_path: Path) -> None:
    r = run_cli("eval", "--env", "scripted/reach", "--policy", "zero", "--out", str(tmp_path / "x"), *flags)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"task_index": 3}, "task_index 3 is not one of the run's 0..0"),
        ({"task_index": "0"}, "task_index '0'"),
        ({"rollbench/success": {"x": 1}}, "rollbench/success is a dict"),
        ({"episode_index": 5}, "episode_index 5 is not 0"),
    ],
)
def test_a_shipped_episode_with_a_hostile_row_is_refused_by_the_writers_own_check(
    record: EpisodeRecord, tmp_path: Path, fields: dict[str, object], why: str
) -> None:
    """The driver stages a shipped episode only when it passes the check the writer applies to ``.staging``
    (:func:`rollbench.record.staged_check.staged_damage`): nothing hostile reaches ``.staging``."""
    import json

    from rollbench.record.staged_check import StagedShape

    good = pack_episode(record, 10, None)
    shape = StagedShape(record.states.shape[1], record.actions.shape[1], False, 1)
    assert stage_shipped(tmp_path / "ok", good, shape)
    row = {**json.loads(good.files["episode.json"]), **fields}
    files = {**good.files, "episode.json": json.dumps(row).encode()}
    with pytest.raises(BadReply, match=re.escape(why)):
        stage_shipped(tmp_path / "bad", ShippedEpisode(0, files, digest_of(files), good.size), shape)
    assert list((tmp_path / "bad" / STAGING).iterdir()) == []


def test_a_shipped_foreign_data_file_of_the_right_row_count_is_refused(record: EpisodeRecord, tmp_path: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from rollbench.record.staged_check import StagedShape

    good = pack_episode(record, 10, None)
    sink = io.BytesIO()
    pq.write_table(pa.table({"secret": ["x"] * record.length}), sink)
    files = {**good.files, "data.parquet": sink.getvalue()}
    shape = StagedShape(record.states.shape[1], record.actions.shape[1], False, 1)
    with pytest.raises(BadReply, match=r"data\.parquet has columns secret, not this run's"):
        stage_shipped(tmp_path, ShippedEpisode(0, files, digest_of(files), good.size), shape)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"rollbench/seed": 99}, "rollbench/seed 99 is not the plan's 3"),
        ({"rollbench/return": float("nan")}, "rollbench/return is nan, not a finite number"),
    ],
)
def test_a_shipped_episode_contradicting_its_plan_entry_is_refused(
    record: EpisodeRecord, tmp_path: Path, fields: dict[str, object], why: str
) -> None:
    """The planned episode the driver handed out is the oracle (seed 3 + trial 0): a reply for another seed, or
    with a non-finite number, is never staged."""
    import json

    from rollbench.record.staged_check import StagedShape

    good = pack_episode(record, 10, None)
    shape = StagedShape(record.states.shape[1], record.actions.shape[1], False, 1)
    assert stage_shipped(tmp_path / "ok", good, shape, record.planned)
    row = {**json.loads(good.files["episode.json"]), **fields}
    files = {**good.files, "episode.json": json.dumps(row).encode()}
    with pytest.raises(BadReply, match=re.escape(why)):
        stage_shipped(tmp_path / "bad", ShippedEpisode(0, files, digest_of(files), good.size), shape, record.planned)
    assert list((tmp_path / "bad" / STAGING).iterdir()) == []
