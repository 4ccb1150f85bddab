"""``grade`` checks where LeRobot readers will look for each episode's step rows (meta/info.json's ``data_path``
filled with the episode row's ``data/chunk_index`` and ``data/file_index``) against the file that holds them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate, grade


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("location") / "sound"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=3, max_steps=2)
    return run


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_a_sound_run_points_every_episode_at_its_own_file(sound: Path) -> None:
    assert grade(sound).violations == []


def test_an_episode_row_naming_another_data_file_is_a_violation(sound: Path, tmp_path: Path) -> None:
    run = _copy(sound, tmp_path / "moved")
    row = run / "meta/episodes/chunk-000/file-001.parquet"  # episode 1's row: its rows are in data/.../file-001
    table = pq.read_table(row)
    assert table.column("data/file_index").to_pylist() == [1]
    i = table.column_names.index("data/file_index")
    pq.write_table(table.set_column(i, table.schema.field(i), pa.array([2], pa.int64())), row)
    doc = grade(run)
    assert doc.violations == [
        "episode 1: its episode record and meta/info.json's data_path lead LeRobot readers to "
        "data/chunk-000/file-002.parquet, but its step rows are in data/chunk-000/file-001.parquet"
    ]
    assert doc.status == "PARTIAL"


def test_a_data_path_template_leading_nowhere_is_one_violation_naming_it(sound: Path, tmp_path: Path) -> None:
    run = _copy(sound, tmp_path / "template")
    info = json.loads((run / "meta/info.json").read_text())
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    info["data_path"] = "data/chunk-{chunk_index:03d}/ep-{file_index:03d}.parquet"
    (run / "meta/info.json").write_text(json.dumps(info))
    assert grade(run).violations == [
        "meta/info.json's data_path 'data/chunk-{chunk_index:03d}/ep-{file_index:03d}.parquet' leads LeRobot readers "
        "to none of the 3 episodes' step rows (episode 0: its episode record and meta/info.json's data_path lead "
        "LeRobot readers to data/chunk-000/ep-000.parquet, but its step rows are in data/chunk-000/file-000.parquet)"
    ]
    info["data_path"] = "data/{chunk_index.real}/x.parquet"
    (run / "meta/info.json").write_text(json.dumps(info))
    (only,) = grade(run).violations
    assert only.startswith(
        "meta/info.json's data_path 'data/{chunk_index.real}/x.parquet' cannot be filled in for episode 0"
    )
