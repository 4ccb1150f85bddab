"""Comparing two recorded runs file by file, for the Ray tests (a helper module, not a test module).

Two runs of one spec must record the same per-step rows, the same episode rows and the same video bytes; only the
measured durations (:data:`TIMING_COLUMNS`) differ between any two runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TIMING_COLUMNS = {"policy.latency_s", "rollbench/wall_time_s"}


def _nan_as_sentinel(table: pa.Table) -> pa.Table:
    """Padding frames hold NaN state/action (rollbench.record.lerobot); NaN != NaN in ``Table.equals``."""
    for name in ("observation.state", "action"):
        col = table[name].combine_chunks()
        flat = col.flatten().to_numpy(zero_copy_only=False).copy()
        flat[np.isnan(flat)] = -1e30
        fixed = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), col.type.list_size)
        table = table.set_column(table.schema.get_field_index(name), name, fixed)
    return table


def recorded(run_dir: Path) -> tuple[pa.Table, list[dict[str, Any]]]:
    """Every per-step row (data/) and episode row (meta/episodes/) of a run, minus the timing columns."""
    files = sorted(run_dir.glob("data/chunk-*/file-*.parquet"))
    data = _nan_as_sentinel(pa.concat_tables(pq.read_table(f) for f in files).drop_columns(["policy.latency_s"]))
    meta = [
        {k: v for k, v in row.items() if k not in TIMING_COLUMNS}
        for f in sorted(run_dir.glob("meta/episodes/chunk-*/file-*.parquet"))
        for row in pq.read_table(f).to_pylist()
    ]
    return data, meta


def same_run(a: Path, b: Path, videos: int = 0) -> None:
    """Assert that runs ``a`` and ``b`` recorded the same episodes; with ``videos`` cameras, the same mp4 bytes."""
    data_a, meta_a = recorded(a)
    data_b, meta_b = recorded(b)
    assert data_a.equals(data_b)
    assert meta_a == meta_b
    mp4 = sorted(p.relative_to(a) for p in a.glob("videos/*/chunk-*/file-*.mp4"))
    assert mp4 == sorted(p.relative_to(b) for p in b.glob("videos/*/chunk-*/file-*.mp4"))
    assert len(mp4) == videos * len(meta_a)
    for rel in mp4:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
