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
* ``meta/tasks.parquet`` and ``meta/stats.json`` missing, replaced (garbage, empty, a directory, a FIFO, a link) or
  edited, then ``grade`` (exit 1 naming the file) and ``summarize`` (exit 2, "is damaged");
* a step file's column of another dtype or width than ``meta/info.json`` declares, a link or a directory in its
  place: ``grade`` names it and leaves the episode ungraded, ``report`` refuses the run;
* a malformed ``perturbation`` record in run.json: ``robustness``, ``grade``, ``summarize`` refuse it in one line;
* labels naming episodes the released run does not record: ``release --dry-run`` says they are left out;
* a ``rollbench sequential`` decision log with parameters out of range or unlike the arms': ``compare --sequential``
  refuses it in one line naming the parameter;
* every output: no reason (a ``  - `` line) listed twice;
* a run.json naming a module (a planted one that writes a marker when imported), then ``eval --resume``;
* ``serve-policy`` over HTTP: Host headers, repeated headers and observations off the task's declared shapes;
* issue 42: rows removed, wrong node types, writer-like names, hostile staging, NaN rewards, wrong-typed run log
  objects, nested runs and hard links in a release (``scripts/hostile_round4.py``).
* issue 42's classes (``scripts/hostile_trust.py``): run.json naming servers or agents, plans that no longer resolve,
  output options inside a run, out-of-range bounds, impossible robustness controls, MCP peers naming URLs, a
  finished run resumed again.
* issue 42's last credential leaks (``scripts/hostile_credentials.py``): policy URLs with a fragment or a secret in
  their path refused without echoing it; header values nested in policy options, cookie text and URL secrets in a
  recorded run left out of every byte ``release`` writes.
* issue 42's hostile servers (``scripts/hostile_network.py``): a policy server answering with a redirect (never
  followed: exit 2 naming the status) and servers trickling their headers (the client's timeout ends the call).
* hostile round 5's reply classes (``scripts/hostile_replies.py``): policy servers and model providers whose replies
  carry the client's credential (bad header lines, websocket ``Upgrade``, dtypes, keys, resets, batch statuses, error
  bodies, odd ``Retry-After``, oversized replies): never quoted anywhere.
* hostile round 8's classes (``scripts/hostile_round8.py``): run.json strings built to make a regex backtrack, then
  ``release`` (linear: it finishes); runs given through links; names that are not UTF-8; counts above their bounds;
  an ASCII terminal.
* hostile round 9's classes (``scripts/hostile_round9.py``): recorded sequential designs and checkpoints.json numbers
  outside their bounds, export integers out of int64, checkpoints options above their bounds, markup folder names.
* hostile round 9's ``optimize-instruction`` classes (``scripts/hostile_optimize.py``): a doctored
  ``optimize.json`` (refused in one line, nothing written outside ``--out``) and an LLM provider echoing the API key
  in many forms or sending a non-string content (the key in no file and no output).
* hostile round 10's classes (``scripts/hostile_round10.py``): a policy that changes directory or whose close()
  never returns, a huge chunk size, ``compare --alpha`` without ``--power``, the token in an instruction, other
  scripts' digits in a latency or ``$COLUMNS``, repeated cameras, dashboard peers carrying credentials.
* hostile round 11's classes (``scripts/hostile_round11.py``): ``--spec RUN/run.json`` naming a planted module,
  backtracking ``release --rules`` patterns, an env whose reward turns NaN, a policy writing into its observation.
* hostile round 12's input classes (``scripts/hostile_policy_info.py``): a plug-in's ``PolicyInfo`` fields of the
  wrong type or bounds, ``compare --power`` with run-only options, an ``--instruction`` that is not UTF-8.
* hostile round 13's output classes (``scripts/hostile_round13_outputs.py``): a link, hard link or FIFO named like
  a figure in ``report --plots DIR``, ``checkpoints --out`` inside a run, a formula-like instruction in
  ``summarize --csv``.
* hostile round 12's MCP stdio class (``scripts/hostile_mcp_lines.py``): lines the MCP SDK cannot read (lone
  surrogates, truncated, stray bytes, deep, forbidden ids, not JSON-RPC, over-long) each get one JSON-RPC error.
* hostile round 13's reader classes (``scripts/hostile_round13_readers.py``): a label file's rubric naming a path,
  an export's ``success`` that is not a JSON bool, a recorded identity that is not a segment, moved timestamps or a
  changed fps, ``eval --resume`` of a damaged meta/info.json.
* hostile round 13's trust class (``scripts/hostile_round13_trust.py``): a handed-over run.json setting a policy
  deadline over the default or a policy option that waits (``eval --resume``/``--spec``): refused by name.
* hostile round 13's wire classes (``scripts/hostile_round13_wire.py``): an env host interpreter's version probe
  printing junk, a hello frame header too deep, with a 5000-digit integer or a key twice: refused, exit 2.
* hostile round 13's release classes (``scripts/hostile_round13_release.py``): a dictionary attack on a released
  run's digests (MANIFEST.json, ``spec_identity``) for a planted short value; an e-mail address, home path or long
  host name in a video's bytes (refused).
* hostile round 13's JSON-reading classes (``scripts/hostile_round13_transcripts.py``): deep values, integers of
  over 4,300 digits and keys named twice in run.json and meta files; ``serve-policy --obs-map`` files that are not
  JSON or FIFOs (named as ``--obs-map``).
* hostile rounds 16 and 17's classes (``scripts/hostile_round17.py``): an environment secret cut in two over
  ``--instructions`` lines or a JSON list's items, a planted value in parquet columns of every type (view, JSON
  extension, unused dictionary entries, split over a list, struct or map; its bytes as numbers refused), free-text
  ``NAME_TOKEN=value`` pairs and a secret field's value repeated elsewhere: ``release`` keeps none of them; a dashboard
  peer's run summary field of another JSON type: the central dashboard marks the peer bad, never a 500.
* hostile round 19's release manifest and name classes (``scripts/hostile_round19_manifest.py``): ``--rules``
  patterns and allow patterns that are the texts to hide (a host, a password, an environment secret's value) are in
  no released byte, MANIFEST.json included; an annotator's name in the label's note and history, the run's notes,
  JSON keys and parquet columns is in no released byte.
* hostile round 19's encoding classes (``scripts/hostile_round19.py``): text in UTF-16/32 without a byte order mark
  (refused by name), a key interleaved with NULs or zero-width characters in JSON and parquet strings (never
  released), an environment secret in UTF-8/UTF-16 or UTF-16 text with an e-mail, home path or ``token=`` in a
  video's bytes (refused).
* hostile round 19's HTTP server classes (``scripts/hostile_round19_http.py``): requests to serve-policy, the
  dashboard and MCP over HTTP whose headers or body stop arriving (at once or dripped) are closed or answered 408 at
  ``--request-timeout-s``; a connection over ``--max-connections`` is answered 503; a burst of connections past a
  low open-file limit leaves each server running and answering, with no traceback.
* hostile round 19's bounded-reader classes (``scripts/hostile_round19_bounds.py``): a sparse transcript or step
  file of a random size is one named violation, graded under a 4 GiB address-space limit; a video with more frames
  than steps, of another frame size than the run records, or sparse costs grade at most ``length + 1`` frames.
* hostile round 20's sequential-study classes (``scripts/hostile_round20.py``): a re-run of a decided study killed
  at a random time leaves both arms' run.json as they were; a damaged ``plan.trial_order.populations`` entry is one
  line (exit 2) in ``compare --sequential``, ``report`` and the resume under 2 GiB of address space, nothing written.
* hostile round 19's resume class (``scripts/hostile_round19_resume.py``): ``eval --resume`` of a run with one
  episode-row cell of another type or restating another plan entry, two row files swapped, or a data file column of
  another dtype, width or kind than meta/info.json declares: refused in one line naming the file and the column,
  the run unchanged.
* hostile round 21's decompression bombs (``scripts/hostile_round21_bombs.py``): a step or episode row file of a few
  hundred KiB that decodes to GiBs (zeros with zstd, one dictionary entry repeated, or a footer understating its
  pages) is named by ``grade``, refused by ``eval --resume`` and ``release``, under a 4 GiB address-space limit.
* hostile round 21's slow-reader classes (``scripts/hostile_round21_slow.py``): clients that pipeline requests to
  serve-policy, the dashboard and MCP over HTTP, or flood serve-policy's websocket with act requests or pings, and
  never read: each is reset about ``--request-timeout-s`` after the server stopped reading, and others are served
  after (websocket: one line on stderr).
* hostile round 24's resume classes (``scripts/hostile_round24_resume.py``): ``eval --resume`` of a run holding a
  data or video file without an episode row past the next episode to commit, or a damaged, foreign or missing
  ``meta/tasks.parquet``: refused in one line naming the file, the run unchanged; the next commit's own leftover is
  deleted and the episode recorded again.
* the MCP session lockout class (``scripts/hostile_mcp_sessions.py``): a client opening far more MCP sessions than
  ``mcp --transport http --max-sessions`` never locks a fresh client out (the least recently used idle session is
  evicted), nor does one holding an idle event stream on every session; only when every session has a call in
  progress is a new one answered 503 naming the option; rollouts past ``--max-rollouts`` wait or are refused, a
  waiting one cancelled is released at once, a closed call's rollout stops (hostile round 24).
* keys a terminal reassembles by moving its cursor (``scripts/hostile_cursor.py``, found after round 22): a key cut
  in two and put together on the screen by CSI D/G, ESC 7/8, CSI s/u, ``\r``, backspaces, CSI A/H, ESC M or VT, in a
  log, a JSON string or a parquet value, is in no released string as written or as pyte draws it; a progress log of
  carriage returns, colours, redraws and backspaces is released byte for byte.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_credentials  # issue 42's last credential leaks, beside this script
import hostile_cursor  # keys a terminal reassembles by moving its cursor (after round 22), beside this script
import hostile_mcp_lines  # hostile round 12's MCP stdio class, beside this script
import hostile_mcp_sessions  # the MCP session lockout class, beside this script
import hostile_network  # issue 42's hostile servers, beside this script
import hostile_optimize  # hostile round 9's optimize-instruction classes, beside this script
import hostile_policy_info  # hostile round 12's input classes, beside this script
import hostile_replies  # hostile round 5's reply classes, beside this script
import hostile_round8  # hostile round 8's classes, beside this script
import hostile_round9  # hostile round 9's classes, beside this script
import hostile_round10  # hostile round 10's classes, beside this script
import hostile_round11  # hostile round 11's classes, beside this script
import hostile_round13_outputs  # hostile round 13's output classes, beside this script
import hostile_round13_readers  # hostile round 13's reader classes, beside this script
import hostile_round13_release  # hostile round 13's release classes, beside this script
import hostile_round13_transcripts  # hostile round 13's JSON-reading classes, beside this script
import hostile_round13_trust  # hostile round 13's handed-over deadlines and waits, beside this script
import hostile_round13_wire  # hostile round 13's wire classes, beside this script
import hostile_round17  # hostile rounds 16 and 17's release and peer classes, beside this script
import hostile_round19  # hostile round 19's encoding classes, beside this script
import hostile_round19_bounds  # hostile round 19's bounded-reader classes, beside this script
import hostile_round19_http  # hostile round 19's HTTP server classes, beside this script
import hostile_round19_manifest  # hostile round 19's release manifest and annotator name classes, beside this script
import hostile_round19_resume  # hostile round 19's resume of damaged committed files, beside this script
import hostile_round20  # hostile round 20's sequential-study classes, beside this script
import hostile_round21_bombs  # hostile round 21's parquet decompression bombs, beside this script
import hostile_round21_slow  # hostile round 21's clients that never read their answers, beside this script
import hostile_round24_resume  # hostile round 24's rowless files and meta/tasks.parquet on resume, beside this script
import hostile_trust  # issue 42's classes, beside this script
from hostile_round4 import round4

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
        if words and words not in " ".join((r.stdout + r.stderr).split()):
            problems.append(f"{words!r} not said")
        reasons = [ln for ln in r.stdout.splitlines() if ln.startswith("  - ")]
        if len(set(reasons)) != len(reasons):  # issue 30, item 8: a violation listed twice
            problems.append("a reason listed twice")
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
            if where == ".":  # the top level: only the writer's own names (other names there it never touches)
                name = self.rng.choice(["run.lock", "run.live.json", f".run.json.{self.rng.randrange(10**6):06d}.tmp"])

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

    def meta_files(self, n: int) -> None:
        """meta/tasks.parquet and meta/stats.json missing, replaced or edited: grade names the file (exit 1), the
        analyses refuse the run in one line (exit 2)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for i in range(n):
            rel = self.rng.choice(["meta/tasks.parquet", "meta/stats.json"])
            how = self.rng.choice(["missing", "garbage", "empty", "dir", "fifo", "link-in", "link-out", "schema",
                                   "dtype", "edit"])  # fmt: skip
            pick = self.rng.random()

            def plant(run: Path, rel: str = rel, how: str = how, pick: float = pick) -> None:
                p = run / rel
                if how in ("missing", "dir", "fifo", "link-in", "link-out"):
                    p.unlink()
                if how == "missing":
                    return
                if how == "garbage":
                    p.write_bytes(bytes(int(pick * 255) for _ in range(40)))
                elif how == "empty":
                    p.write_bytes(b"")
                elif how == "dir":
                    p.mkdir()
                elif how == "fifo":
                    os.mkfifo(p)
                elif how == "link-in":
                    os.symlink("info.json", p)
                elif how == "link-out":
                    os.symlink(run.parent / "canary/keep.txt", p)
                elif rel.endswith(".parquet"):
                    table = {"schema": pa.table({"x": [1]}), "dtype": pa.table({"task_index": ["0"], "task": ["t"]}),
                             "edit": pa.table({"task_index": [int(pick * 9) + 1], "task": ["t"]})}[how]  # fmt: skip
                    pq.write_table(table, p)
                else:
                    stats = json.loads(p.read_text())
                    feature = sorted(stats)[int(pick * len(stats))]
                    if how == "schema":
                        stats[feature] = [1]
                    elif how == "dtype":
                        stats[feature]["count"] = ["many"]
                    else:
                        stats[feature]["max"][0] += 1.0 + pick
                    p.write_text(json.dumps(stats))

            name = rel.split("/")[-1]
            cid = f"meta-{name}-{how}-{i}"
            self.case(f"grade-{cid}", plant, ["grade", "RUN"], {1}, unchanged=True, words=name)
            self.case(f"summarize-{cid}", plant, ["summarize", "RUN"], {2}, unchanged=True, words="is damaged")

    def step_dtypes(self, n: int) -> None:
        """A step file column of another dtype or width than meta/info.json declares, a link or a directory in the
        step file's place: named (declared vs found); the episode is not graded, never a failure."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        for i in range(n):
            target = f"data/chunk-000/file-00{self.rng.randrange(3)}.parquet"
            col = self.rng.choice(["next.success", "next.done", "next.reward", "frame_index", "episode_index",
                                   "index", "task_index", "timestamp", "policy.latency_s", "observation.state",
                                   "action"])  # fmt: skip
            to = self.rng.choice(["uint64", "int8", "float64", "float16", "string", "bool", "width", "list",
                                  "link", "dir"])  # fmt: skip
            if col in ("observation.state", "action") and to not in ("width", "list", "float64", "link", "dir"):
                to = "width"  # a list column changes by its width, its element type or its kind

            def plant(run: Path, target: str = target, col: str = col, to: str = to) -> None:
                p = run / target
                if to in ("link", "dir"):
                    shutil.move(p, run / "moved.parquet")
                    os.symlink("../../moved.parquet", p) if to == "link" else p.mkdir()
                    return
                t = pq.read_table(p)
                values = t[col]
                if pa.types.is_fixed_size_list(values.type):
                    width = values.type.list_size + (1 if to == "width" else 0)
                    flat = pa.array([0.0] * width * t.num_rows, pa.float32() if to != "float64" else pa.float64())
                    values = (pa.array(values.to_pylist(), pa.list_(values.type.value_type)) if to == "list"
                              else pa.FixedSizeListArray.from_arrays(flat, width))  # fmt: skip
                else:
                    kind = {"width": "int32", "list": "int16"}.get(to, to)
                    if kind == str(values.type) or (kind == "bool" and values.type == pa.bool_()):
                        kind = "uint32"
                    values = pc.cast(pc.cast(values, pa.float64()), getattr(pa, kind)() if kind != "bool" else pa.bool_(),
                                     safe=False) if kind != "string" else pc.cast(values, pa.string())  # fmt: skip
                pq.write_table(t.set_column(t.schema.get_field_index(col), col, values), p)

            cid = f"step-{col}-{to}-{target[-12:-8]}-{i}"
            self.case(f"grade-{cid}", plant, ["grade", "RUN"], {1}, unchanged=True, words="not graded")
            self.case(f"report-{cid}", plant, ["report", "RUN", "--out", "DIR/r.html"], {2}, unchanged=True,
                      words="is damaged")  # fmt: skip

    def perturbations(self, n: int) -> None:
        """A malformed perturbation record (or plan index) in run.json: every reader refuses it in one line naming
        the field (issue 30: robustness printed a traceback-ish exit 1)."""
        blocks: list[object] = [{"category": 5}, {"level": 1}, [1], "position", {"category": "x", "level": "high"},
                                {"category": "x", "control": 3}, {"category": "x", "evil": 1}, {"category": None},
                                {"category": "x", "level": 1e309}, {"category": "x", "detail": {"a": 1}}]  # fmt: skip
        for i in range(n):
            block = self.rng.choice(blocks)
            k = self.rng.randrange(3)
            where = self.rng.choice(["episodes", "tasks"])

            def plant(run: Path, block: object = block, k: int = k, where: str = where) -> None:
                log = json.loads((run / "run.json").read_text())
                log["plan"][where][k if where == "episodes" else 0]["perturbation"] = block
                (run / "run.json").write_text(json.dumps(log))

            for cmd in (["robustness", "RUN"], ["grade", "RUN"], ["summarize", "RUN"]):
                self.case(f"{cmd[0]}-perturbation-{where}-{i}", plant, cmd, {2}, unchanged=True, words="perturbation")

    def release_labels(self, n: int) -> None:
        """Labels naming episodes the released run does not record are dropped and said so in the dry run."""
        for i in range(n):
            ep = self.rng.choice(["3", "7", "01", "999", "-1"])
            label_file = self.work / f"labels-{i}.json"

            def plant(run: Path, ep: str = ep, label_file: Path = label_file) -> None:
                ident = json.loads((run / "run.json").read_text())["identity"]
                key = f"{ident['host']}/{ident['robot']}/{run.name}"  # a run's name is its directory's
                labels = {f"{key}/0": {"label": "success"}, f"{key}/{ep}": {"label": "failed", "note": "ghost"}}
                label_file.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": labels}))

            cid = f"release-labels-{ep}-{i}"
            self.case(cid, plant, ["release", "RUN", "--labels", str(label_file), "--out", "DIR/rel", "--dry-run"],
                      {0}, unchanged=True, words="do not record left out")  # fmt: skip

    def sequential_log(self, n: int) -> None:
        """A sequential decision log whose parameters are out of range or differ from the arms': one line."""
        if not any(self.pattern in f"compare-sequential-{i}" for i in range(n)):
            return
        made = self.work / "sequential"
        self.cli("sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b",
                 "scripted-expert", "--budget", "6", "--out", made)  # fmt: skip
        edits: list[tuple[str, object]] = [("alpha", 0.1), ("alpha", 0.9), ("alpha", float("nan")), ("delta", "0.2"),
                                           ("budget", 7), ("budget", -1), ("budget", 6.5), ("look_every", 0),
                                           ("look_every", 3), ("beta", 0.3), ("p_a", 0.7), ("discordant", 0.4),
                                           ("tasks", ["other/task"])]  # fmt: skip
        for i in range(n):
            key, value = self.rng.choice(edits)
            cid = f"compare-sequential-{i}-{key}"
            if self.pattern not in cid:
                continue
            d = self.work / "cases" / cid
            shutil.copytree(made, d)
            doc = json.loads((d / "sequential.json").read_text())
            doc["parameters"][key] = value
            (d / "sequential.json").write_text(json.dumps(doc))
            self.count += 1
            r = self.cli("compare", "--sequential", d, check=False)
            lines = r.stderr.strip().splitlines()
            if r.returncode != 2 or len(lines) != 1 or f"parameters.{key}" not in lines[0] or "Traceback" in r.stderr:
                self.failures.append(f"{cid}: exit {r.returncode}; stderr {r.stderr.strip()[-300:]!r}")

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
        r.meta_files(a.n)
        r.step_dtypes(a.n)
        r.perturbations(a.n)
        r.release_labels(max(2, a.n // 4))
        r.sequential_log(a.n)
        r.resume_names()
        r.served()
        round4(r, a.n)  # issue 42's classes (scripts/hostile_round4.py)
        hostile_trust.run_all(r, a.n)
        hostile_credentials.run_all(r, a.n)
        hostile_network.run_all(r, a.n)
        hostile_replies.run_all(r, a.n)
        hostile_round8.run_all(r, a.n)
        hostile_round9.run_all(r, a.n)
        hostile_round10.run_all(r, a.n)
        hostile_round11.run_all(r, a.n)
        hostile_mcp_lines.run_all(r, a.n)
        hostile_optimize.run_all(r, a.n)
        hostile_policy_info.run_all(r, a.n)
        hostile_round13_outputs.run_all(r, a.n)
        hostile_round13_readers.run_all(r, a.n)
        hostile_round13_trust.run_all(r, a.n)
        hostile_round13_release.run_all(r, a.n)
        hostile_round13_transcripts.run_all(r, a.n)
        hostile_round13_wire.run_all(r, a.n)
        hostile_round17.run_all(r, a.n)
        hostile_round19_manifest.run_all(r, a.n)
        hostile_round19.run_all(r, a.n)
        hostile_round19_http.run_all(r, a.n)
        hostile_round19_bounds.run_all(r, a.n)
        hostile_round20.run_all(r, a.n)
        hostile_round19_resume.run_all(r, a.n)
        hostile_round21_bombs.run_all(r, a.n)
        hostile_round21_slow.run_all(r, a.n)
        hostile_round24_resume.run_all(r, a.n)
        hostile_mcp_sessions.run_all(r, a.n)
        hostile_cursor.run_all(r, a.n)
        print(f"{r.count} hostile inputs, {len(r.failures)} failed, {time.monotonic() - started:.0f} s (seed {a.seed})")
        for f in r.failures:
            print("FAIL", f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
