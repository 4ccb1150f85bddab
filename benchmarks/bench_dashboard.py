"""``GET /api/runs`` of the review dashboard over 1,000 runs x 50 episodes (target: under 1 s).

Synthesis: one real run is recorded (``scripted/reach``, ``zero`` policy, 50 episodes, 64x64 video, so every episode
has a data file, an episode row and a video), then copied ``--runs`` times as hard links (``cp -al``: instant, no
space); each copy is a distinct run because a run's name is its directory's name. Half the episodes of every tenth
run get a label in the sidecar, so the label join does real work.

A real uvicorn server (``rollbench.dashboard.app``) serves the root on a loopback port; the script times with httpx:

* cold grading: the first ``/api/runs`` over ``--cold-sample`` copies only (each run graded from disk with DuckDB
  and its episode rows read): seconds per run. Grading a thousand runs that way takes ~1,000 x that; the dashboard
  never blocks on it for more than ``sync_budget_s`` (2 s): the rest is graded by a background thread and listed
  as ``GRADING`` meanwhile.
* warm: the median of ``--reps`` calls over all runs once graded (runs unchanged: two ``stat`` calls per run, the
  label join and the per-run JSON are cached). So that the script does not spend ~1,000 gradings to get there, run
  ``run-0000`` is graded for real and its record is given to the other copies with their own directory and
  identity: they are hard links of the same files, so grading them would give exactly that record.
* after touching one run: a call right after one run's ``info.json`` changed (that run alone is re-graded).

Run: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_dashboard.py [--runs 1000] [--episodes 50] [--reps 5]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from dashboard_support import ServerThread
from rollbench.api import evaluate
from rollbench.core.identity import RunIdentity
from rollbench.dashboard.catalog import read_run, run_signature


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold-sample", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        seed_run = work / "seed-run"
        t0 = time.perf_counter()
        evaluate(
            env="scripted/reach",
            policy="zero",
            episodes=args.episodes,
            max_steps=20,
            video=True,
            image_size=(64, 64),
            out=seed_run,
            host_label="bench",
        )
        root = work / "root"
        root.mkdir()
        for i in range(args.runs):
            subprocess.run(["cp", "-al", str(seed_run), str(root / f"run-{i:04d}")], check=True)
        labels = {
            f"bench/point/run-{i:04d}/{e}": {"label": "failed", "note": "", "annotator": "bench", "history": []}
            for i in range(0, args.runs, 10)
            for e in range(0, args.episodes, 2)
        }
        (work / "labels.json").write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": labels}))
        print(f"synthesised {args.runs} runs x {args.episodes} episodes in {time.perf_counter() - t0:.1f} s")
        sample = work / "sample"
        sample.mkdir()
        for i in range(args.cold_sample):
            subprocess.run(["cp", "-al", str(seed_run), str(sample / f"run-{i:04d}")], check=True)
        srv = ServerThread([sample], work / "labels.json", cache_dir=work / "cache-sample").start()
        try:
            t = time.perf_counter()
            httpx.get(srv.url + "/api/runs", timeout=3600).raise_for_status()
            cold_per_run = (time.perf_counter() - t) / args.cold_sample
        finally:
            srv.stop()
        srv = ServerThread([root], work / "labels.json", cache_dir=work / "cache")
        catalog = srv.dashboard.catalog
        first = read_run(root / "run-0000")
        for i in range(args.runs):
            d = (root / f"run-{i:04d}").resolve()
            rec = dataclasses.replace(
                first, run_dir=d, identity=RunIdentity("bench", "point", d.name), signature=run_signature(d)
            )
            catalog._cache[d] = rec
        srv.start()
        try:
            with httpx.Client(base_url=srv.url, timeout=3600) as c:
                t = time.perf_counter()
                r = c.get("/api/runs")
                first_call = time.perf_counter() - t
                doc = r.json()
                assert len(doc["runs"]) == args.runs and all(len(x["episodes"]) == args.episodes for x in doc["runs"])
                assert doc["pending"] == 0
                warm = []
                for _ in range(args.reps):
                    t = time.perf_counter()
                    c.get("/api/runs").raise_for_status()
                    warm.append(time.perf_counter() - t)
                # hard links share one info.json: give one run a file of its own, changed
                info = root / "run-0000" / "meta" / "info.json"
                data = info.read_bytes()
                info.unlink()
                info.write_bytes(data)
                t = time.perf_counter()
                c.get("/api/runs").raise_for_status()
                touched = time.perf_counter() - t
        finally:
            srv.stop()
    size_mb = len(r.content) / 1e6
    print(
        f"| runs x episodes | response | first call (labels joined, encoded) | warm, median of {args.reps} "
        "| one run changed | cold grading per run |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    print(
        f"| {args.runs} x {args.episodes} | {size_mb:.1f} MB | {first_call:.3f} s | {statistics.median(warm):.3f} s "
        f"| {touched:.3f} s | {cold_per_run:.2f} s |"
    )


if __name__ == "__main__":
    main()
