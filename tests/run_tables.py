"""Test helper: a recorded run's tables read straight from its files (the oracle side of bit-for-bit comparisons).

``recorded_tables(run)``: all per-step rows (data/) and episode records (meta/episodes/), minus measured durations;
``info_and_stats(run)``: meta/info.json and meta/stats.json; ``last_execution(run)``: run.json's newest execution.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TIMING_COLUMNS = {"policy.latency_s", "rollbench/wall_time_s"}  # measured durations: differ between any two runs


def _nan_comparable(table: pa.Table) -> pa.Table:
    """The NaN state and action of padding frames (an episode without steps, see rollbench.record.lerobot) replaced
    by a sentinel, so that ``Table.equals`` (where NaN != NaN) compares them."""
    for name in ("observation.state", "action"):
        col = table[name].combine_chunks()
        flat = col.flatten().to_numpy(zero_copy_only=False).copy()
        flat[np.isnan(flat)] = -1e30
        fixed = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), col.type.list_size)
        table = table.set_column(table.schema.get_field_index(name), name, fixed)
    return table


def recorded_tables(run_dir: Path) -> tuple[pa.Table, list[dict[str, Any]]]:
    """All per-step rows (data/) and all episode records (meta/episodes/) of a run, minus timing columns."""
    data = pa.concat_tables(pq.read_table(f) for f in sorted(run_dir.glob("data/chunk-*/file-*.parquet"))).drop_columns(
        ["policy.latency_s"]
    )
    data = _nan_comparable(data)
    meta = [
        {k: v for k, v in row.items() if k not in TIMING_COLUMNS}
        for f in sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet"))
        for row in pq.read_table(f).to_pylist()
    ]
    return data, meta


def info_and_stats(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    info = json.loads((run_dir / "meta/info.json").read_text())
    stats = json.loads((run_dir / "meta/stats.json").read_text())
    stats.pop("policy.latency_s", None)
    return info, stats


def last_execution(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())["executions"][-1]


def same_run(a: Path, b: Path, videos: int = 0) -> None:
    """Assert that runs ``a`` and ``b`` recorded the same episodes (:func:`recorded_tables`); with ``videos`` cameras,
    the same mp4 bytes for every episode."""
    data_a, meta_a = recorded_tables(a)
    data_b, meta_b = recorded_tables(b)
    assert data_a.equals(data_b)
    assert meta_a == meta_b
    mp4 = sorted(p.relative_to(a) for p in a.glob("videos/*/chunk-*/file-*.mp4"))
    assert mp4 == sorted(p.relative_to(b) for p in b.glob("videos/*/chunk-*/file-*.mp4"))
    assert len(mp4) == videos * len(meta_a)
    for rel in mp4:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
