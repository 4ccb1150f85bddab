"""Reading rollbench's recorded actions in the compat tests (pyarrow only; rollbench is not importable here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


def recorded_actions(run_dir: Path, episode: int) -> np.ndarray:
    """``float32 (T, action_dim)`` from rollbench's data file of ``episode``, in frame order."""
    rows = pq.read_table(run_dir / f"data/chunk-000/file-{episode:03d}.parquet", columns=["frame_index", "action"])
    t = rows.to_pydict()
    return np.asarray(t["action"], dtype=np.float32)[np.argsort(t["frame_index"])]
