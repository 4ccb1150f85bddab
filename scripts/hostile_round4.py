"""Issue 42's classes for ``scripts/hostile_inputs.py`` (each case drawn from the runner's seeded RNG):

* rows removed for two or more episodes, or the row tree replaced by a file: ``eval --resume`` exit 2, run unchanged;
* a wrong node type (a file for a directory, a directory for a file) where the writer works: exit 2, unchanged;
* a writer-like temporary with mkstemp's alphabet but not its 8 characters, and videos or artifacts of kinds the
  run never writes beside an interrupted commit: the resume keeps them;
* a hostile staged episode (a row field of the wrong type or range, a foreign data file of the right row count, a
  name not of the writer's exact form): the resume names it and never commits it;
* NaN or infinite rewards: ``grade --json`` is strict JSON; a run log object of the wrong JSON type: ``runs`` lists
  the others, ``summarize`` and ``release`` refuse it in one line;
* a release of a run holding another run or a hard link to a file outside it: exit 2, nothing written;
* a staged episode contradicting the plan or holding NaN/inf: named, re-run at its planned seed; a file release cannot
  scan for secrets (random binary under any name): exit 2, one line, nothing written;
* hostile round 5: a plan naming no task or episodes of a task it does not list (``runs`` lists it as damaged,
  ``grade`` names it), a ``data_path`` leading outside the run (absolute or climbing out; ``grade`` names it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

ROWS, DATA = "meta/episodes/chunk-000", "data/chunk-000"


def _stage_last(run: Path) -> Path:
    import pyarrow.parquet as pq

    last = max(int(p.stem.split("-")[1]) for p in (run / ROWS).iterdir())
    staged = run / f".staging/episode-{last:06d}"
    staged.mkdir(parents=True)
    row = pq.read_table(run / ROWS / f"file-{last:03d}.parquet").to_pylist()[0]
    row["task_index"] = 0
    (staged / "episode.json").write_text(json.dumps(row))
    table = pq.read_table(run / DATA / f"file-{last:03d}.parquet").drop_columns(["index"])
    pq.write_table(table, staged / "data.parquet")
    for p in (run / ROWS / f"file-{last:03d}.parquet", run / DATA / f"file-{last:03d}.parquet"):
        p.unlink()
    return staged


def round4(r: Any, n: int) -> None:
    """Add every issue-42 class to runner ``r`` (a ``hostile_inputs.Runner``), ``n`` variants where randomised."""
    rng = r.rng
    for i in range(n):
        k = rng.randrange(2, 4)
        picks = sorted(rng.sample(range(3), k))

        def rows(run: Path, picks: list[int] = picks) -> None:
            for e in picks:
                (run / ROWS / f"file-{e:03d}.parquet").unlink()

        r.case(
            f"r4-rows-{'-'.join(map(str, picks))}-{i}", rows, ["eval", "--resume", "RUN"], {2}, True, "no episode row"
        )
    nodes = {
        "rows-chunk-file": lambda run: (shutil.rmtree(run / ROWS), (run / ROWS).write_text("x")),
        "episodes-file": lambda run: (shutil.rmtree(run / "meta/episodes"), (run / "meta/episodes").write_text("x")),
        "last-row-dir": lambda run: (
            (run / ROWS / "file-002.parquet").unlink(),
            (run / ROWS / "file-002.parquet").mkdir(),
        ),
        "data-file-dir": lambda run: (
            (run / DATA / "file-001.parquet").unlink(),
            (run / DATA / "file-001.parquet").mkdir(),
        ),
        "info-dir": lambda run: ((run / "meta/info.json").unlink(), (run / "meta/info.json").mkdir()),
    }
    for name, plant in nodes.items():
        r.case(f"r4-node-{name}", plant, ["eval", "--resume", "RUN"], {2}, True, "which is what rollbench writes")
    for i in range(n):
        width = rng.choice([1, 4, 7, 9, 12])
        rnd = "".join(rng.choice("abcxyz0189_") for _ in range(width))
        rel = rng.choice([f".run.json.{rnd}.tmp", f"meta/.info.json.{rnd}.tmp", f"{DATA}/.file-001.parquet.{rnd}.tmp",
                          "videos/observation.images.top/chunk-000/file-002.mp4", "transcripts/chunk-000/file-002.jsonl",
                          "wire/chunk-000/file-002.jsonl"])  # fmt: skip

        def temp(run: Path, rel: str = rel) -> None:
            (run / ROWS / "file-002.parquet").unlink()  # episode 2's commit interrupted before its row
            (run / rel).parent.mkdir(parents=True, exist_ok=True)
            (run / rel).write_text("mine")

        cid = f"r4-keep-{i}-{rel.replace('/', '_')}"
        r.case(cid, temp, ["eval", "--resume", "RUN"], {0}, False)
        if r.pattern in cid and (r.work / "cases" / cid / "run" / rel).read_text() != "mine":
            r.failures.append(f"{cid}: the resume deleted {rel}, which its run never writes")
    staging = [("task_index", rng.choice([7, -1, "0", 0.0, None, [0]])), ("length", rng.choice(["3", -2, 1.5])),
               ("episode_index", rng.choice([0, "2", 99])), ("rollbench/success", rng.choice([{"a": 1}, "yes", 2])),
               ("rollbench/seed", rng.choice(["1", [1], 1.5]))]  # fmt: skip
    for field, value in staging:

        def hostile(run: Path, field: str = field, value: object = value) -> None:
            staged = _stage_last(run)
            row = json.loads((staged / "episode.json").read_text())
            (staged / "episode.json").write_text(json.dumps({**row, field: value}))

        r.case(f"r4-staged-{field}-{value!r}", hostile, ["eval", "--resume", "RUN"], {0}, False, "is damaged")

    def foreign_data(run: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        staged = _stage_last(run)
        rows = pq.read_metadata(staged / "data.parquet").num_rows
        pq.write_table(pa.table({"x": list(range(rows))}), staged / "data.parquet")

    r.case("r4-staged-foreign-data", foreign_data, ["eval", "--resume", "RUN"], {0}, False, "is damaged")
    for name in ("episode-2", "episode-0000002", "episode-00000\u0662"):
        r.case(f"r4-staged-name-{name}", lambda run, name=name: _stage_last(run).rename(run / ".staging" / name),
               ["eval", "--resume", "RUN"], {0}, False, "not named like a staged episode")  # fmt: skip
    _plan_and_unscanned(r, rng)
    _strict_and_release(r, rng)
    _round5(r, rng)


def _plan_and_unscanned(r: Any, rng: Any) -> None:
    """A staged episode contradicting the plan (its seed, trial or task) or holding a non-finite number: named and
    re-run, the committed row back at its planned seed; a file release cannot scan: refused in one line."""
    import pyarrow.parquet as pq

    contradictions = [("rollbench/seed", rng.randrange(100, 10**6)), ("rollbench/trial", rng.randrange(10, 99)),
                      ("rollbench/task", rng.choice(["scripted/push", "x"])),
                      ("rollbench/return", rng.choice([float("nan"), float("inf"), -float("inf")])),
                      ("rollbench/wall_time_s", rng.choice([float("nan"), float("inf")]))]  # fmt: skip
    for field, value in contradictions:
        planned = pq.read_table(r.sound / ROWS / "file-002.parquet").to_pylist()[0]["rollbench/seed"]

        def contradict(run: Path, field: str = field, value: object = value) -> None:
            staged = _stage_last(run)
            row = json.loads((staged / "episode.json").read_text())
            (staged / "episode.json").write_text(json.dumps({**row, field: value}))

        cid = f"r4-plan-{field}-{value!r}"
        r.case(cid, contradict, ["eval", "--resume", "RUN"], {0}, False, "is damaged")
        rows = r.work / "cases" / cid / "run" / ROWS / "file-002.parquet"
        if r.pattern in cid and pq.read_table(rows).to_pylist()[0]["rollbench/seed"] != planned:
            r.failures.append(f"{cid}: the committed episode 2 is not at its planned seed {planned}")
    for i in range(3):
        name = rng.choice(["extra/a.npy", "notes/b.bin", "shot.png", "notes/clip.mp4", "data/x.dat"])
        blob = bytes([0, 1, 2]) + bytes(rng.randrange(256) for _ in range(rng.randrange(8, 64)))

        def unscannable(run: Path, name: str = name, blob: bytes = blob) -> None:
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            (run / name).write_bytes(blob)

        r.case(f"r4-release-unscannable-{i}-{name.replace('/', '_')}", unscannable,
               ["release", "RUN", "--out", "DIR/rel", "--date", "2026-01-01", "--allow-violations"], {2}, True,
               "is not a file release can scan")  # fmt: skip


def _strict_and_release(r: Any, rng: Any) -> None:
    def nan_rewards(run: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        f = run / DATA / "file-001.parquet"
        t = pq.read_table(f)
        i = t.schema.get_field_index("next.reward")
        value = rng.choice([float("nan"), float("inf"), float("-inf")])
        pq.write_table(t.set_column(i, "next.reward", pa.array([value] * t.num_rows, pa.float32())), f)

    cid = "r4-nan-grade-json"
    r.case(cid, nan_rewards, ["grade", "RUN", "--json"], {1}, True, "not a finite number")
    for field in ("provenance", "identity", "plan.policy"):
        value = rng.choice([[1], "x", 3, True])

        def wrong_type(run: Path, field: str = field, value: object = value) -> None:
            log = json.loads((run / "run.json").read_text())
            *parents, last = field.split(".")
            obj = log
            for p in parents:
                obj = obj[p]
            obj[last] = value
            (run / "run.json").write_text(json.dumps(log))

        r.case(f"r4-type-{field}-summarize", wrong_type, ["summarize", "RUN"], {2}, True, field)
        r.case(f"r4-type-{field}-release", wrong_type, ["release", "RUN", "--out", "DIR/rel", "--date", "2026-01-01"],
               {2}, True, field)  # fmt: skip
        r.case(f"r4-type-{field}-runs", wrong_type, ["runs", "DIR"], {0}, True)
    release = ["release", "RUN", "--out", "DIR/rel", "--date", "2026-01-01"]
    r.case("r4-release-nested", lambda run: shutil.copytree(r.sound, run / "notes" / "inner"), release, {2}, True,
           "holds another run")  # fmt: skip

    def hard_link(run: Path) -> None:
        (run / "notes.txt").unlink(missing_ok=True)
        os.link(run.parent / "canary" / "keep.txt", run / "notes.txt")

    r.case("r4-release-hard-link", hard_link, release, {2}, False, "some outside the run")


def _round5(r: Any, rng: Any) -> None:
    """Hostile round 5, F6 and F7 (the policy-output class, F5, is tests/test_json_streams.py's table)."""

    def plan(change: str) -> Any:
        def tamper(run: Path) -> None:
            log = json.loads((run / "run.json").read_text())
            if change == "no-task":
                log["plan"]["tasks"] = []
            else:
                log["plan"]["episodes"][rng.randrange(len(log["plan"]["episodes"]))]["task"] = "scripted/elsewhere"
            (run / "run.json").write_text(json.dumps(log))

        return tamper

    for change in ("no-task", "stray-episode"):
        r.case(f"r5-plan-{change}-runs", plan(change), ["runs", "DIR"], {0}, True, "damaged: run")
        r.case(f"r5-plan-{change}-grade", plan(change), ["grade", "RUN"], {1}, True, "which plan.tasks does not list"
               if change != "no-task" else "plan names no task")  # fmt: skip
    outside = rng.choice(["DIR/canary/data", "../canary/data", "data/../../canary/data", "/data"])

    def data_path(run: Path) -> None:
        info = json.loads((run / "meta/info.json").read_text())
        where = outside.replace("DIR", str(run.parent))
        info["data_path"] = where + "/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
        (run / "meta/info.json").write_text(json.dumps(info))

    r.case("r5-data-path-outside", data_path, ["grade", "RUN"], {1}, True, "leads outside the run directory")
