"""Hostile round 19's bounded-reader classes (attacker b, F2 and F4) for ``scripts/hostile_inputs.py`` (its
:class:`Runner` ``r``; seeded by ``r.rng``; each variant holds on main and fails before the fix). Every command runs
under an address-space limit (:data:`AS_LIMIT`) and a deadline, so a variant that fails costs this machine nothing:

* r19 F2 (ids ``r19b-transcript-``): an episode row of the runner's run given a transcript that is a sparse file
  (``truncate``: no disk used) of a random size, over the 256 MiB a transcript may hold (up to 64 GiB) or under it
  with a hole (2 to 200 MiB): ``grade`` exits 1 in one named violation (``... is not read (N bytes, over ...)`` or
  ``(a sparse file ...``), no traceback, no MemoryError, and ``runs --grade`` still lists the run;
* r19 F2 (ids ``r19b-parquet-``): a step file of the run made sparse at a random size (2 MiB to 2 GiB): ``grade``
  names it as not read;
* r19 F4 (ids ``r19b-video-``): in a recorded ``--video`` run (32x32 frames), episode 0's video replaced by one
  written with PyAV of random kind: ``frames``, 2 to 100 times the episode's steps of the run's size (``has more
  than L frames for L steps``); ``size``, frames of a random larger size (up to 4096x2160) repeated by packet copy
  to 200 to 600 frames (``... pixels (width x height), not the 32x32 the run records``, decoded in no time); or
  ``sparse``, the video truncated past its end to a random size (``a sparse file``).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

AS_LIMIT = 4 << 30  # bytes of address space each command gets (grade of a sound run needs under 2 GiB)
DEADLINE_S = 60
KEY = "observation.images.top"
OVER = "bytes, over the 268,435,456 rollbench reads"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _cli(r: Any, *args: object) -> tuple[subprocess.CompletedProcess[str], float]:
    """``rollbench ARGS`` within :data:`AS_LIMIT` and :data:`DEADLINE_S` (a hang: exit -999), and its seconds."""
    cmd = [r.rb, *map(str, args)]
    t = time.monotonic()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, env=r.env,
                             stdin=subprocess.DEVNULL, preexec_fn=_limited)  # fmt: skip
    except subprocess.TimeoutExpired:
        res = subprocess.CompletedProcess(cmd, -999, "", "HANG")
    return res, time.monotonic() - t


def _check(res: subprocess.CompletedProcess[str], exits: set[int], words: str) -> list[str]:
    both = res.stdout + res.stderr
    problems = ["hung"] * (res.returncode == -999) + ["traceback"] * ("Traceback" in both)
    problems += ["MemoryError"] * ("MemoryError" in both)
    problems += [f"exit {res.returncode} not in {sorted(exits)}"] * (res.returncode not in exits)
    problems += [f"{words!r} not said"] * (words not in " ".join(both.split()))
    return problems


def _report(r: Any, cid: str, problems: list[str], res: subprocess.CompletedProcess[str]) -> None:
    if problems:
        r.failures.append(f"{cid}: {', '.join(problems)}; stdout {res.stdout.strip()[-300:]!r}")


def _give_transcript(run: Path, episode: int, rel: str) -> None:
    """Set episode ``episode``'s row's ``rollbench/transcript`` to ``rel`` (as a hand edit with pyarrow would)."""
    import pyarrow.parquet as pq

    f = run / f"meta/episodes/chunk-000/file-{episode:03d}.parquet"
    t = pq.read_table(f)
    i = t.schema.get_field_index("rollbench/transcript")
    pq.write_table(t.set_column(i, t.schema.field(i), [[rel] * t.num_rows]), f)


def sparse_transcripts(r: Any, n: int) -> None:
    """Round 19 F2: a sparse transcript is one named violation, read in bounded memory; the run still lists."""
    for i in range(n):
        cid = f"r19b-transcript-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        over = r.rng.random() < 0.5
        size = r.rng.randint(257 << 20, 64 << 30) if over else r.rng.randint(2 << 20, 200 << 20)
        e = r.rng.randrange(3)
        d = r.copy(cid)
        rel = f"transcripts/chunk-000/file-{e:03d}.jsonl"
        _give_transcript(d / "run", e, rel)
        (d / "run" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "run" / rel).write_text('{"type": "episode"}\n')
        os.truncate(d / "run" / rel, size)
        words = f"episode {e}: transcript {rel} is not read (" + (f"{size:,} {OVER})" if over else "a sparse file (")
        res, _ = _cli(r, "grade", d / "run")
        problems = _check(res, {1}, words)
        listed, _ = _cli(r, "runs", d, "--grade")
        problems += [f"runs --grade: {p}" for p in _check(listed, {0}, "is not read (")]
        _report(r, cid, problems, res)


def sparse_step_files(r: Any, n: int) -> None:
    """Round 19 F2: a sparse step file is named as not read (never read into memory)."""
    for i in range(n):
        cid = f"r19b-parquet-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        d = r.copy(cid)
        f = d / "run" / f"data/chunk-000/file-{r.rng.randrange(3):03d}.parquet"
        size = r.rng.randint(2 << 20, 2 << 30)
        os.truncate(f, size)
        words = f"file {f} is not read (" + (f"{size:,} {OVER})" if size > 1 << 28 else "a sparse file (")
        res, _ = _cli(r, "grade", d / "run")
        _report(r, cid, _check(res, {1}, words), res)


def _encode(path: Path, frames: int, height: int, width: int, copies: int = 1) -> None:
    """``frames`` frames of ``height`` x ``width`` written with PyAV (x264 ultrafast, all in one GOP), their packets
    muxed ``copies`` times one after the other (as ``ffmpeg -stream_loop`` copies them: a large video made fast)."""
    import av
    import numpy as np

    tmp = path.with_suffix(".one.mp4")
    with av.open(str(tmp), mode="w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "51", "g": str(frames + 1), "bf": "0", "threads": "1"}
        for k in range(frames):
            img = np.full((height, width, 3), (k * 9) % 256, dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        container.mux(stream.encode(None))
    with av.open(str(tmp)) as src, av.open(str(path), mode="w") as out:
        template = src.streams.video[0]
        stream = out.add_stream_from_template(template)
        packets = [(bytes(p), p.is_keyframe) for p in src.demux(template) if p.size]
        for c in range(copies):
            for k, (data, key) in enumerate(packets):
                packet = av.Packet(data)
                packet.stream, packet.time_base = stream, Fraction(1, 10)
                packet.pts = packet.dts = c * len(packets) + k
                packet.is_keyframe = key
                out.mux(packet)
    tmp.unlink()


def videos(r: Any, n: int) -> None:
    """Round 19 F4: a handed-over video costs at most ``length + 1`` frames of the run's size to grade."""
    wanted = [f"r19b-video-{i}" for i in range(n)]
    if not any(r.pattern in cid for cid in wanted):
        return
    base = r.work / "r19b-video-run"
    if not base.exists():
        r.cli("eval", "--env", "scripted/reach", "--policy", "random", "--episodes", "2", "--max-steps", "8",
              "--video", "--image-size", "32x32", "--out", base)  # fmt: skip
    for cid in wanted:
        if r.pattern not in cid:
            continue
        r.count += 1
        d = r.work / "cases" / cid
        shutil.copytree(base, d / "run")
        video = d / "run" / f"videos/{KEY}/chunk-000/file-000.mp4"
        length = _length(d / "run")
        kind = r.rng.choice(["frames", "size", "sparse"])
        if kind == "frames":
            _encode(video, length * r.rng.randint(2, 100), 32, 32)
            words = f"({KEY}) has more than {length} frames for {length} steps"
        elif kind == "size":
            w, h = r.rng.randrange(256, 4097, 2), r.rng.randrange(256, 2161, 2)
            _encode(video, 4, h, w, copies=r.rng.randint(50, 150))
            words = f"({KEY}) is {w}x{h} pixels (width x height), not the 32x32 the run records"
        else:
            os.truncate(video, r.rng.randint(2 << 20, 8 << 30))
            words = "is not read (a sparse file ("
        res, took = _cli(r, "grade", d / "run")
        problems = _check(res, {1}, words)
        problems += [f"grade took {took:.1f} s"] * (took > 20)
        _report(r, f"{cid}-{kind}", problems, res)


def _length(run: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_table(run / "meta/episodes/chunk-000/file-000.parquet")["length"][0].as_py())


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each (each copies a run and grades it)."""
    m = max(2, n // 2)
    sparse_transcripts(r, m)
    sparse_step_files(r, m)
    videos(r, m)
