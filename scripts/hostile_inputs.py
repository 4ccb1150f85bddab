#!/usr/bin/env python3
"""Hostile-input runner (issue 30): plant damaged, foreign or malicious inputs in copies of a sound run and feed
them to the real ``rollbench`` executable, checking that nothing hangs, nothing prints a traceback, nothing that
was refused changed, nothing outside the run was touched and no planted module was imported.

    python scripts/hostile_inputs.py                 # every class, seed 0
    python scripts/hostile_inputs.py --seed 7 -k fifo  # other random variants, only cases whose id has "fifo"

Classes (each case is generated from a seeded RNG, so another ``--seed`` gives new variants of every class):

* ``link``/``fifo``/``socket`` in the writer's namespace of a run, then ``eval --resume``: exit 2, tree unchanged;
* writer-like temporary names that are not the writer's, then ``eval --resume``: exit 0, they all survive;
* a foreign or retyped parquet file in place of an episode's, a damaged ``meta/info.json`` field, then ``grade``
  (exit 1 with a violation naming the file), ``summarize``/``report`` (exit 2, one line), ``runs --grade``;
* a run.json naming a module (a planted one that writes a marker when imported), then ``eval --resume``;
* ``serve-policy`` over HTTP: Host headers, repeated headers and observations off the task's declared shapes.

Exit status 0 when every case held, 1 otherwise (each failing case is printed with what was seen). Needs only
rollbench installed (``rollbench`` on PATH or ``--rollbench PATH``); takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TIMEOUT = 120
WRITER_DIRS = ["data/chunk-000", "meta/episodes/chunk-000", "meta", ".staging", "."]


def snapshot(root: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISREG(mode):
                out[str(p.relative_to(root))] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            elif stat.S_ISLNK(mode):
                out[str(p.relative_to(root))] = ("link", os.readlink(p))
            else:
                out[str(p.relative_to(root))] = ("dir" if stat.S_ISDIR(mode) else "special", "")
    return out


class Runner:
    def __init__(self, rollbench: str, work: Path, rng: random.Random, pattern: str) -> None:
        self.rb, self.work, self.rng, self.pattern = rollbench, work, rng, pattern
        self.failures: list[str] = []
        self.count = 0
        self.sound = work / "sound"
        self.planted = work / "planted"
        self.marker = work / "IMPORTED"
        self.planted.mkdir()
        (self.planted / "rbh_marker.py").write_text(f"open({str(self.marker)!r}, 'w').write('x')\nmake = None\n")
        self.env = {**os.environ, "PYTHONPATH": str(self.planted)}
        self.cli(
            "eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "3", "--out", self.sound
        )

    def cli(self, *args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [self.rb, *map(str, args)]
        try:
            r = subprocess.run(
                cmd, capture_output=True, text=True, timeout=TIMEOUT, env=self.env, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(cmd, -999, "", "HANG")
        if check and r.returncode not in (0, 1):
            raise SystemExit(f"setup command failed: {' '.join(cmd)}\n{r.stderr}")
        return r

    def copy(self, name: str) -> Path:
        d = self.work / "cases" / name
        shutil.copytree(self.sound, d / "run", symlinks=True)
        (d / "canary").mkdir()
        (d / "canary" / "keep.txt").write_text("canary")
        return d

    def case(self, cid: str, plant: Callable[[Path], None], args: list[str], exits: set[int], unchanged: bool,
             words: str = "") -> None:  # fmt: skip
        if self.pattern not in cid:
            return
        self.count += 1
        d = self.copy(cid)
        run = d / "run"
        plant(run)
        before, canary = snapshot(run), snapshot(d / "canary")
        r = self.cli(*[a.replace("RUN", str(run)).replace("DIR", str(d)) for a in args], check=False)
        seen = f"{cid}: exit {r.returncode}; stderr {r.stderr.strip()[-400:]!r}"
        problems = []
        if r.returncode == -999:
            problems.append("hung")
        if "Traceback" in r.stdout + r.stderr:
            problems.append("traceback")
        if r.returncode not in exits:
            problems.append(f"exit not in {sorted(exits)}")
        if r.returncode == 2 and len(r.stderr.strip().splitlines()) != 1:
            problems.append("a refusal of more than one line")
        if unchanged and snapshot(run) != before:
            problems.append("the run changed")
        if snapshot(d / "canary") != canary:
            problems.append("outside the run changed")
        if words and words not in r.stdout + r.stderr:
            problems.append(f"{words!r} not said")
        if self.marker.exists():
            problems.append("a planted module was imported")
            self.marker.unlink()
        if problems:
            self.failures.append(f"{seen}: {', '.join(problems)}")

    # ---- classes --------------------------------------------------------------------------------------------
    def links_and_specials(self, n: int) -> None:
        for i in range(n):
            where = self.rng.choice(WRITER_DIRS)
            kind = self.rng.choice(["link-in", "link-out", "dangling", "fifo", "socket", "dir-link"])
            name = self.rng.choice(["file-001.parquet", "file-007.parquet", "episode-000003", ".tmp-x", "info.json",
                                    f".file-003.parquet.{self.rng.randrange(10**6):06d}.tmp", "run.lock"])  # fmt: skip

            def plant(run: Path, where: str = where, kind: str = kind, name: str = name) -> None:
                d = run / where
                d.mkdir(parents=True, exist_ok=True)
                p = d / name
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif os.path.lexists(p):
                    p.unlink()
                if kind == "link-in":
                    os.symlink(os.path.relpath(run / "meta/info.json", d), p)
                elif kind == "link-out":
                    os.symlink(run.parent / "canary/keep.txt", p)
                elif kind == "dangling":
                    os.symlink("nowhere", p)
                elif kind == "dir-link":
                    os.symlink(os.path.relpath(run / "data", d), p)
                elif kind == "fifo":
                    os.mkfifo(p)
                else:
                    s, cwd = socket.socket(socket.AF_UNIX), os.getcwd()
                    os.chdir(d)  # a relative name: an AF_UNIX path is at most 107 bytes
                    try:
                        s.bind(name)
                    finally:
                        os.chdir(cwd)
                        s.close()

            self.case(f"resume-{kind}-{where.strip('.') or 'top'}-{name}-{i}", plant, ["eval", "--resume", "RUN"],
                      {2}, unchanged=True, words="remove it")  # fmt: skip

    def foreign_temps(self, n: int) -> None:
        for i in range(n):
            rnd = "".join(self.rng.choice("abcdefxyz019") for _ in range(self.rng.randrange(1, 9)))
            names = [f".mine{rnd}.tmp", f"meta/.README.{rnd}.tmp", f"data/chunk-000/.notes.{rnd}.tmp",
                     f"data/chunk-000/.file-000.parquet.{rnd}.mp4", f"meta/.run.json.{rnd}.tmp",
                     f".staging/.tmp-{rnd}/keep", f"videos/.x.{rnd}.mp4"]  # fmt: skip
            rel = self.rng.choice(names)

            def plant(run: Path, rel: str = rel) -> None:
                (run / rel).parent.mkdir(parents=True, exist_ok=True)
                (run / rel).write_text("mine")

            cid = f"temps-{i}-{rel.replace('/', '_')}"
            self.case(cid, plant, ["eval", "--resume", "RUN"], {0}, unchanged=False)
            if self.pattern in cid and not (self.work / "cases" / cid / "run" / rel).exists():
                self.failures.append(f"{cid}: the resume deleted {rel}, which is not the writer's")

    def foreign_files(self, n: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for i in range(n):
            target = self.rng.choice(["meta/episodes/chunk-000/file-00{}.parquet", "data/chunk-000/file-00{}.parquet"])
            target = target.format(self.rng.randrange(4))
            how = self.rng.choice(["tasks", "retype", "nulls", "garbage", "empty-table"])

            def plant(run: Path, target: str = target, how: str = how) -> None:
                p = run / target
                if how == "tasks":
                    shutil.copyfile(run / "meta/tasks.parquet", p)
                elif how == "garbage":
                    p.write_bytes(bytes(self.rng.randrange(256) for _ in range(64)))
                elif how == "empty-table":
                    pq.write_table(pa.table({"x": pa.array([], pa.int64())}), p)
                elif p.exists():
                    t = pq.read_table(p)
                    col = self.rng.choice([c for c in t.column_names if c not in ("action", "observation.state")])
                    values = (
                        pa.array([str(v) for v in t.column(col).to_pylist()])
                        if how == "retype"
                        else pa.nulls(t.num_rows, t.schema.field(col).type)
                    )
                    pq.write_table(t.set_column(t.column_names.index(col), col, values), p)

            for cmd, exits in ((["grade", "RUN"], {0, 1}), (["summarize", "RUN"], {0, 2}),
                               (["report", "RUN", "--out", "DIR/r.html"], {0, 2}), (["runs", "--grade", "DIR"], {0})):  # fmt: skip
                self.case(f"{cmd[0]}-{how}-{target.replace('/', '_')}-{i}", plant, cmd, exits, unchanged=True)

    def info_fields(self) -> None:
        for field, value in (("fps", 0), ("fps", -1), ("fps", "10"), ("fps", 1e309), ("total_frames", -3),
                             ("chunks_size", 0), ("features", {"action": {"dtype": 3}})):  # fmt: skip

            def plant(run: Path, field: str = field, value: object = value) -> None:
                info = json.loads((run / "meta/info.json").read_text())
                info[field] = value
                (run / "meta/info.json").write_text(json.dumps(info))

            self.case(f"info-{field}-{value!r}"[:60], plant, ["summarize", "RUN"], {2}, unchanged=True, words=field)

    def resume_names(self) -> None:
        for field, value in (("policy", "rbh_marker:make"), ("env", "gym:rbh_marker:X-v0"),
                             ("policy_options", {"python": "/bin/true"}), ("policy", "lerobot:/etc")):  # fmt: skip

            def plant(run: Path, field: str = field, value: object = value) -> None:
                log = json.loads((run / "run.json").read_text())
                log["spec"][field] = value
                (run / "run.json").write_text(json.dumps(log))

            self.case(
                f"resume-names-{field}-{value}"[:60], plant, ["eval", "--resume", "RUN"], {2}, True, "--trust-run"
            )

    def served(self) -> None:
        if self.pattern not in "serve-policy":
            return
        import httpx

        proc = subprocess.Popen([self.rb, "serve-policy", "--policy", "random", "--protocol", "http", "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)  # fmt: skip
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split(" at ", 1)[1].strip()
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            for host in (f"127.0.0.1:{port}@evil.com", "evil.com", "127.1", f"127.0.0.1:{port} x", "[::1"):
                self.count += 1
                r = httpx.get(url, headers={"host": host}, timeout=30)
                if r.status_code not in (400, 421):
                    self.failures.append(f"serve-policy Host {host!r}: answered {r.status_code}")
            httpx.post(url, json={"session": "s", "reset": {"task": "scripted/reach", "seed": 0}}, timeout=60)
            for state in ({"dtype": "int64", "shape": [4], "data": [2**63, 0, 0, 0]},
                          {"dtype": "float32", "shape": [3], "data": [0, 0, 0]},
                          {"dtype": "float16", "shape": [4], "data": [1e5, 0, 0, 0]},
                          {"dtype": "uint8", "shape": [4], "data": [256, 0, 0, 0]}):  # fmt: skip
                self.count += 1
                r = httpx.post(url, json={"session": "s", "instruction": "x", "state": state}, timeout=60)
                if r.status_code != 400:
                    self.failures.append(f"serve-policy state {state}: answered {r.status_code}")
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
            if "Traceback" in err:
                self.failures.append(f"serve-policy printed a traceback: {err[-400:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="RNG seed of the generated variants")
    ap.add_argument("-n", type=int, default=8, help="variants per randomised class")
    ap.add_argument("-k", default="", help="only cases whose id contains this")
    ap.add_argument("--rollbench", default=shutil.which("rollbench") or "rollbench")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rollbench-hostile-") as tmp:
        r = Runner(a.rollbench, Path(tmp), random.Random(a.seed), a.k)
        started = time.monotonic()
        r.links_and_specials(a.n)
        r.foreign_temps(a.n)
        r.foreign_files(a.n)
        r.info_fields()
        r.resume_names()
        r.served()
        print(f"{r.count} hostile inputs, {len(r.failures)} failed, {time.monotonic() - started:.0f} s (seed {a.seed})")
        for f in r.failures:
            print("FAIL", f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
