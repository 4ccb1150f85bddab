"""Hostile round 24's resume classes (attacker a, F3 and F4) for ``scripts/hostile_inputs.py`` (its :class:`Runner`
``r``; seeded by ``r.rng``): ``eval --resume`` of the runner's sound run (scripted/reach, 3 episodes, recorded OK,
no video) handed over damaged. Before the fix the resume deleted the recorded files of F3 without a word and
recorded into the runs of F4, which then ended PARTIAL.

* ids ``r24r-rowless-``: only episodes ``0..k-1`` committed (the later rows and data files removed) and a file
  without a row kept or planted at an index past ``k`` within the plan (episode ``k``'s data file beside it or not):
  a data file, or a video of a camera the run does not record. Commits go in episode order, so only episode ``k``
  can hold an interrupted commit's files: exit 2, one line naming the file(s), the run unchanged;
* ids ``r24r-leftover-``: the control, only episode ``k``'s data file without its row (an interrupted commit): the
  resume deletes it and records the episode again (exit 0);
* ids ``r24r-tasks-``: ``meta/tasks.parquet`` truncated, garbage, missing, another instruction's, one task more, a
  column of another type or name: exit 2, one line naming ``meta/tasks.parquet``, the run unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

RESUME = ["eval", "--resume", "RUN"]
ROW = "meta/episodes/chunk-000/file-{:03d}.parquet"
DATA = "data/chunk-000/file-{:03d}.parquet"
VIDEO = "videos/observation.images.top/chunk-000/file-{:03d}.mp4"
TASKS = "meta/tasks.parquet"
TASK = "move the point to the goal"  # scripted/reach's instruction: the sound run's one task


def _commit_only(run: Path, k: int, keep: set[int]) -> None:
    """Rows of episodes ``k..2`` removed, and their data files but those of ``keep``."""
    for e in range(k, 3):
        (run / ROW.format(e)).unlink()
        if e not in keep:
            (run / DATA.format(e)).unlink()


def rowless(r: Any, n: int) -> None:
    """A file without a row past the next commit: refused naming it; the next commit's own leftover: deleted."""
    for i in range(n):
        k = r.rng.randrange(2)  # episodes 0..k-1 committed
        later = r.rng.randrange(k + 1, 3)
        kind = r.rng.choice(["data", "video"])
        beside = r.rng.random() < 0.5  # episode k's own leftover data file too

        def plant(run: Path, k: int = k, later: int = later, kind: str = kind, beside: bool = beside) -> None:
            _commit_only(run, k, ({later} if kind == "data" else set()) | ({k} if beside else set()))
            if kind == "video":
                (run / VIDEO.format(later)).parent.mkdir(parents=True, exist_ok=True)
                (run / VIDEO.format(later)).write_bytes(b"\x00\x00\x00\x18ftypisom")

        named = (DATA if kind == "data" else VIDEO).format(later)
        words = f"{named} has no episode row, but an interrupted commit leaves files without a row only for episode {k}"
        cid = f"r24r-rowless-{kind}-k{k}-at{later}{'-beside' * beside}-{i}"
        r.case(cid, plant, RESUME, {2}, unchanged=True, words=words)
    for k in range(3):
        r.case(f"r24r-leftover-k{k}", lambda run, k=k: _commit_only(run, k, {k}), RESUME, {0}, unchanged=False)


def tasks(r: Any, n: int) -> None:
    """meta/tasks.parquet damaged, foreign or missing: refused naming it before anything is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        how = r.rng.choice(["truncated", "garbage", "missing", "another", "extra", "int32", "renamed"])
        size, byte, text = r.rng.randrange(1, 400), r.rng.randrange(256), r.rng.choice(["reach", TASK + " ", "x"])

        def plant(run: Path, how: str = how, size: int = size, byte: int = byte, text: str = text) -> None:
            p = run / TASKS
            if how == "truncated":
                p.write_bytes(p.read_bytes()[: min(size, p.stat().st_size - 1)])
            elif how == "garbage":
                p.write_bytes(bytes([byte]) * size)
            elif how == "missing":
                p.unlink()
            else:
                rows = {"another": [text], "extra": [TASK, text]}.get(how, [TASK])
                index = pa.array(range(len(rows)), pa.int32() if how == "int32" else pa.int64())
                pq.write_table(pa.table({"task_index" if how != "renamed" else "index": index, "task": rows}), p)

        r.case(f"r24r-tasks-{how}-{i}", plant, RESUME, {2}, unchanged=True, words=f"cannot be resumed: {TASKS} ")


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each randomised one (each copies the runner's sound run)."""
    m = max(2, n // 2)
    rowless(r, m)
    tasks(r, m)
