"""Hostile round 19 (b), F2 and F4: what a reader of a handed-over run may cost is bounded by stated limits.

F2: an agent's transcript (and a run's parquet file) over its byte bound, or with a hole (``truncate -s 20G``: no
disk used), is one named violation, read in bounded memory; every other run still lists. F4: an episode video is
decoded at most to ``length + 1`` frames, and never when its frames are of another size than meta/info.json's
shape.

Oracles: the violation lines are written out by hand (sizes as the test made them); memory is the child process's
own peak resident size (``VmHWM``) under an ``RLIMIT_AS`` far below the file's size; the videos are written with PyAV directly and
their frames counted by PyAV's own decoder; the work done is counted on the demuxer's packets.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import av
import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agent_double import serve_as_provider
from caged_grade import grade_in_a_cage
from cli_in_process import invoke
from dashboard_support import ServerThread
from rollbench.api import evaluate, grade
from rollbench.record import files as record_files
from rollbench.record import transcript as record_transcript
from rollbench.record.files import count_video_frames, read_parquet
from rollbench.record.safe_files import UnsafeFile, read_regular_json

TRANSCRIPT = "transcripts/chunk-000/file-000.jsonl"
VIDEO = "videos/observation.images.top/chunk-000/file-000.mp4"
KEY = "observation.images.top"


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agent") / "run"
    with serve_as_provider():
        evaluate(env="scripted/reach", policy="agent:local/giver", episodes=2, out=out)
    assert grade(out).violations == []
    return out


@pytest.fixture(scope="module")
def video_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("video") / "run"
    evaluate(
        env="scripted/reach", policy="random", episodes=2, max_steps=6, seed=1, video=True, image_size=(32, 32), out=out
    )
    assert grade(out).violations == []
    return out


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def _length(run: Path, episode: int) -> int:
    return int(pq.read_table(run / f"meta/episodes/chunk-000/file-{episode:03d}.parquet")["length"][0].as_py())


# ---- F2: transcripts ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_sparse_20_gib_transcript_is_one_violation_graded_promptly_in_bounded_memory(
    agent_run: Path, tmp_path: Path
) -> None:
    run = _copy(agent_run, tmp_path / "run")
    os.truncate(run / TRANSCRIPT, 20 << 30)  # a hole: no disk used
    got = grade_in_a_cage(run)
    assert got["violations"] == [
        f"episode 0: transcript {TRANSCRIPT} is not read (21,474,836,480 bytes, over the 268,435,456 rollbench reads)"
    ]
    assert got["s"] < 30
    assert got["peak_rss_kib"] < 1 << 20  # under 1 GiB (measured 0.27 GiB) for 20 GiB (whole: MemoryError)


def test_a_sparse_transcript_under_the_bound_is_named_as_sparse_and_not_read(agent_run: Path, tmp_path: Path) -> None:
    run = _copy(agent_run, tmp_path / "run")
    os.truncate(run / TRANSCRIPT, 100 << 20)
    (violation,) = grade(run).violations
    assert violation.startswith(
        f"episode 0: transcript {TRANSCRIPT} is not read (a sparse file (104,857,600 bytes, "
    ), violation


def test_a_transcript_one_byte_over_the_bound_is_not_read_and_one_at_it_is(
    agent_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _copy(agent_run, tmp_path / "run")
    text = (run / TRANSCRIPT).read_text()
    (run / TRANSCRIPT).write_text(text.rstrip("\n") + " " * 10 + "\n")  # JSON whitespace: the larger transcript
    size = (run / TRANSCRIPT).stat().st_size
    assert size > (run / "transcripts/chunk-000/file-001.jsonl").stat().st_size
    monkeypatch.setattr(record_transcript, "MAX_TRANSCRIPT_BYTES", size)
    at = grade(run)
    assert at.violations == [] and at.episodes[0].agent_usage is not None
    monkeypatch.setattr(record_transcript, "MAX_TRANSCRIPT_BYTES", size - 1)
    assert grade(run).violations == [
        f"episode 0: transcript {TRANSCRIPT} is not read ({size:,} bytes, over the {size - 1:,} rollbench reads)"
    ]


def test_a_transcript_is_read_a_line_at_a_time_with_the_same_totals(agent_run: Path) -> None:
    """The streamed reader against the whole file parsed by the standard library (the transcript's own lines)."""
    path = agent_run / TRANSCRIPT
    whole = [json.loads(line) for line in path.read_text().splitlines()]
    streamed = record_transcript.read_transcript(path, agent_run)
    assert isinstance(streamed, Iterator)
    assert list(streamed) == whole
    calls = [ln for ln in whole if ln["type"] == "call"]
    assert record_transcript.usage_totals(whole) == {
        "model_calls": len(calls),
        **{k: sum(c["usage"][k] for c in calls) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        "cost_usd": None if all(c.get("cost_usd") is None for c in calls) else sum(c["cost_usd"] for c in calls),
    }


def test_a_cost_too_large_for_a_float_counts_as_no_cost() -> None:
    """A hand-edited call line's ``cost_usd`` of 400 digits (strict JSON reads it as an int; ``float()`` overflows)."""
    lines = [{"type": "call", "usage": {}, "cost_usd": 10**400}, {"type": "call", "usage": {}, "cost_usd": 0.5}]
    assert record_transcript.usage_totals(lines) == {
        "model_calls": 2,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost_usd": 0.5,
    }


def test_every_other_run_still_lists_beside_a_run_with_an_oversized_transcript(agent_run: Path, tmp_path: Path) -> None:
    """In this process: 300 MiB, over the bound but small enough to cost this test little if the bound were gone."""
    root = tmp_path / "root"
    _copy(agent_run, root / "good")
    bad = _copy(agent_run, root / "bad")
    os.truncate(bad / TRANSCRIPT, 300 << 20)
    said = f"episode 0: transcript {TRANSCRIPT} is not read (314,572,800 bytes, over the 268,435,456 rollbench reads)"
    r = invoke("runs", root, "--grade")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    rows = [ln.split("│")[1].strip() for ln in r.stdout.splitlines() if ln.startswith("│")]
    assert rows == ["bad", "good"]
    assert said in " ".join(r.stdout.split())
    r = invoke("summarize", root, "--allow-damaged")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    srv = ServerThread([root], tmp_path / "labels.json", cache_dir=tmp_path / "cache").start()
    try:
        listing = httpx.get(srv.url + "/api/runs", timeout=120)
        assert listing.status_code == 200
        assert sorted(run["name"] for run in listing.json()["runs"]) == ["bad", "good"]
        assert httpx.get(srv.url + "/", timeout=120).status_code == 200
    finally:
        srv.stop()


# ---- F2: parquet files and JSON documents of a run -------------------------------------------------------------


def test_a_sparse_or_oversized_step_file_is_named_and_not_read(video_run: Path, tmp_path: Path) -> None:
    run = _copy(video_run, tmp_path / "run")
    over, holey = run / "data/chunk-000/file-000.parquet", run / "data/chunk-000/file-001.parquet"
    os.truncate(over, 300 << 20)
    os.truncate(holey, 20 << 20)
    violations = grade(run, check_videos=False).violations
    assert f"file {over} is not read (314,572,800 bytes, over the 268,435,456 rollbench reads)" in violations
    assert any(v.startswith(f"file {holey} is not read (a sparse file (20,971,520 bytes, ") for v in violations)
    with pytest.raises(UnsafeFile, match="314,572,800 bytes, over the 268,435,456 rollbench reads"):
        read_parquet(over)


def test_a_json_run_file_over_256_mib_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "stats.json"
    path.write_text("{}")
    os.truncate(path, (256 << 20) + 1)
    with pytest.raises(UnsafeFile, match="268,435,457 bytes, over the 268,435,456 rollbench reads"):
        read_regular_json(path)


# ---- F4: videos --------------------------------------------------------------------------------------------------


def _write_video(path: Path, frames: int, height: int, width: int) -> None:
    """``frames`` grey frames of ``height`` x ``width`` as H.264 in mp4, written with PyAV directly."""
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "threads": "1"}
        for i in range(frames):
            img = np.full((height, width, 3), (i * 7) % 256, dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        container.mux(stream.encode(None))


def _decoded(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


class _Counted:
    """``av.open``'s container, counting the packets its demuxer hands out (the decoding work done)."""

    opened: ClassVar[list[_Counted]] = []

    def __init__(self, container: Any, file: Any) -> None:
        self.container, self.packets = container, 0
        self.name = Path(os.readlink(f"/proc/self/fd/{file.fileno()}")).name if hasattr(file, "fileno") else str(file)
        _Counted.opened.append(self)

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.container.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.container, name)

    def demux(self, *args: Any) -> Iterator[Any]:
        for packet in self.container.demux(*args):
            self.packets += 1
            yield packet


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[_Counted]:
    real = av.open
    _Counted.opened = []
    monkeypatch.setattr(av, "open", lambda file, *a, **k: _Counted(real(file, *a, **k), file))
    return _Counted.opened


def test_a_video_with_more_frames_than_steps_is_decoded_only_to_length_plus_one(
    video_run: Path, tmp_path: Path, counted: list[_Counted]
) -> None:
    run = _copy(video_run, tmp_path / "run")
    length = _length(run, 0)
    _write_video(run / VIDEO, 400, 32, 32)
    assert _decoded(run / VIDEO) == 400
    counted.clear()
    assert grade(run).violations == [
        f"episode 0: video file {VIDEO} ({KEY}) has more than {length} frames for {length} steps"
    ]
    assert [c.name for c in counted] == ["file-000.mp4", "file-001.mp4"]
    assert counted[0].packets <= length + 1  # one packet per frame: the decoder stopped at length + 1 frames, not 400


def test_a_video_of_another_frame_size_than_info_json_is_refused_without_decoding(
    video_run: Path, tmp_path: Path, counted: list[_Counted]
) -> None:
    run = _copy(video_run, tmp_path / "run")
    _write_video(run / VIDEO, 50, 48, 64)
    assert json.loads((run / "meta/info.json").read_text())["features"][KEY]["shape"] == [32, 32, 3]
    counted.clear()
    assert grade(run).violations == [
        f"episode 0: video file {VIDEO} ({KEY}) is 64x48 pixels (width x height), not the 32x32 the run records "
        "(meta/info.json); not decoded"
    ]
    assert [c.name for c in counted] == ["file-000.mp4", "file-001.mp4"]
    assert counted[0].packets == 0  # the container was opened, no packet demuxed


def test_a_video_without_a_recorded_frame_size_is_not_decoded(video_run: Path, tmp_path: Path) -> None:
    run = _copy(video_run, tmp_path / "run")
    info = json.loads((run / "meta/info.json").read_text())
    info["features"][KEY]["shape"] = [32, 32]
    (run / "meta/info.json").write_text(json.dumps(info))
    assert (
        f"episode 0: video file {VIDEO} ({KEY}) is not decoded: meta/info.json records no frame size for it"
        in grade(run).violations
    )


def test_a_video_whose_packets_decode_to_nothing_is_bounded_too(tmp_path: Path) -> None:
    """Packets that give no frame (P-frames with no key frame before them) cost decoding without counting: at most
    ``limit`` of them are fed."""
    good = tmp_path / "good.mp4"
    _write_video(good, 3, 32, 32)
    bad = tmp_path / "bad.mp4"
    with av.open(str(good)) as src, av.open(str(bad), mode="w") as out:
        template = src.streams.video[0]
        stream = out.add_stream_from_template(template)
        p_frame = bytes(next(p for p in src.demux(template) if p.size and not p.is_keyframe))
        for i in range(500):
            packet = av.Packet(p_frame)
            packet.stream, packet.pts, packet.dts, packet.time_base = stream, i, i, Fraction(1, 10)
            out.mux(packet)
    with pytest.raises(record_files.VideoRefused, match="holds more than 6 packets and its first 6 decode to 0 frames"):
        count_video_frames(bad, limit=6, size=(32, 32))


def test_a_video_with_many_packets_of_another_stream_is_bounded_too(tmp_path: Path) -> None:
    """3 frames and 400 audio packets (rollbench writes no audio): at most ``2 * limit`` packets are read."""
    path = tmp_path / "av.mp4"
    with av.open(str(path), mode="w") as container:
        video = container.add_stream("libx264", rate=10)
        video.width, video.height, video.pix_fmt = 32, 32, "yuv420p"
        audio = container.add_stream("aac", rate=8000, layout="mono")
        for _ in range(3):
            img = np.zeros((32, 32, 3), dtype=np.uint8)
            container.mux(video.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        container.mux(video.encode(None))
        for i in range(400):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 8000, i * 1024
            container.mux(audio.encode(frame))
        container.mux(audio.encode(None))
    with av.open(str(path)) as container:
        assert sum(1 for p in container.demux(audio=0) if p.size) >= 400
    assert count_video_frames(path) == 3
    with pytest.raises(
        record_files.VideoRefused, match=r"^holds more than 12 packets \(of all its streams\) before 6 "
    ):
        count_video_frames(path, limit=6, size=(32, 32))


def test_an_unbounded_count_still_counts_every_frame(tmp_path: Path) -> None:
    path = tmp_path / "v.mp4"
    _write_video(path, 37, 32, 32)
    assert count_video_frames(path) == 37 == _decoded(path)
    assert count_video_frames(path, limit=37, size=(32, 32)) == 37
    assert count_video_frames(path, limit=38, size=(32, 32)) == 37


def _packets_and_frames(path: Path) -> tuple[int, int]:
    with av.open(str(path)) as container:
        packets = sum(1 for p in container.demux(video=0) if p.size)
    return packets, _decoded(path)


def test_every_recorded_video_holds_one_packet_per_frame(video_run: Path) -> None:
    """What the packet bound relies on, for the videos rollbench writes (x264, B-frames, ``g`` 2)."""
    for e in (0, 1):
        path = video_run / f"videos/{KEY}/chunk-000/file-{e:03d}.mp4"
        assert _packets_and_frames(path) == (_length(video_run, e), _length(video_run, e))


@pytest.mark.sim
@pytest.mark.slow
def test_every_recorded_metaworld_video_holds_one_packet_per_frame(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    run = tmp_path / "mw"
    evaluate(env="metaworld/reach-v3", policy="random", episodes=2, max_steps=40, video=True, out=run)
    for e in (0, 1):
        (path,) = run.glob(f"videos/*/chunk-000/file-{e:03d}.mp4")
        assert _packets_and_frames(path) == (_length(run, e), _length(run, e))
        h, w, _ = json.loads((run / "meta/info.json").read_text())["features"][path.parent.parent.name]["shape"]
        assert count_video_frames(path, limit=_length(run, e) + 1, size=(h, w)) == _length(run, e)


def test_a_recorded_table_is_unchanged_by_the_bounded_reader(video_run: Path) -> None:
    path = video_run / "data/chunk-000/file-000.parquet"
    assert read_parquet(path).equals(pq.read_table(path))
    assert isinstance(read_parquet(path), pa.Table)
