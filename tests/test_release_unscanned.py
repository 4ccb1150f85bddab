"""A release copies only what it scanned (issue 42, release leaks): a parquet file anywhere in a run has its string
columns redacted, a run's own video is checked for secrets, and any other file release cannot read for secrets
(a ``.npy``, an image, a binary of any name, an ``.mp4`` that is not the run's video) refuses the release: exit 2,
one line naming the file, nothing written. The oracle: the planted secret's bytes, searched for in every released
file byte for byte; for the videos, the released copy compared with the recorded one."""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate

SECRET = "sk-proj-Zq8xW3vB7nM2kL5pR9tY1uI4oP6aS0dF"  # an OpenAI-form key
DATE = "2026-01-01"
VIDEO = "videos/observation.images.top/chunk-000/file-000.mp4"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rel") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, video=True)
    assert (out / VIDEO).is_file()
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    return out


def leaked(out: Path, needle: str) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


def release(run: Path, out: Path, *extra: str) -> tuple[int, list[str]]:
    r = invoke("release", run, "--out", out, "--date", DATE, *extra)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stderr.splitlines()


def _npy(path: Path) -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([SECRET]))  # a unicode array: UTF-32, NUL bytes between the characters
    path.write_bytes(buf.getvalue())


def _bin(path: Path) -> None:
    path.write_bytes(b"\x00\x01\x02token=" + SECRET.encode() + b"\xff\xfe")


def _png(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + SECRET.encode() + b"\x00" * 16)


UNSCANNABLE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "a numpy array": ("extra/actions.npy", _npy),
    "a binary of no known kind": ("notes/blob.bin", _bin),
    "an image": ("notes/shot.png", _png),
    "a binary named like text data": ("notes/data.dat", _bin),
    "a binary at a video's name": ("videos/observation.images.top/chunk-000/file-007.mp4", _bin),
}


@pytest.mark.parametrize("case", sorted(UNSCANNABLE))
def test_a_file_release_cannot_scan_refuses_the_release_naming_it(run: Path, tmp_path: Path, case: str) -> None:
    rel, plant = UNSCANNABLE[case]
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    plant(run / rel)
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert code == 2 and len(lines) == 1 and str(run / rel) in lines[0], lines
    assert "is not a file release can scan for secrets" in lines[0]
    assert not (tmp_path / "rel").exists()


def test_a_video_copied_outside_the_runs_video_paths_is_refused(run: Path, tmp_path: Path) -> None:
    (run / "notes").mkdir()
    shutil.copyfile(run / VIDEO, run / "notes/clip.mp4")
    code, lines = release(run, tmp_path / "rel")
    assert code == 2 and len(lines) == 1 and str(run / "notes/clip.mp4") in lines[0], lines


def test_a_secret_in_a_parquet_string_column_anywhere_is_redacted(run: Path, tmp_path: Path) -> None:
    (run / "extra").mkdir()
    pq.write_table(pa.table({"note": ["fine", f"token {SECRET}"], "n": [1, 2]}), run / "extra/notes.parquet")
    code, lines = release(run, tmp_path / "rel")
    assert code == 0, lines
    assert leaked(tmp_path / "rel", SECRET) == []
    notes = pq.read_table(tmp_path / "rel/run/extra/notes.parquet").to_pydict()
    assert notes["note"][0] == "fine" and notes["note"][1].startswith("token <REDACTED:api_key:")
    assert notes["n"] == [1, 2]


def test_a_secret_in_a_step_files_string_column_is_redacted(run: Path, tmp_path: Path) -> None:
    f = run / "data/chunk-000/file-000.parquet"
    t = pq.read_table(f)
    pq.write_table(t.append_column("note", pa.array([SECRET] * t.num_rows)), f)
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert code == 0, lines
    assert leaked(tmp_path / "rel", SECRET) == []
    assert pq.read_table(tmp_path / "rel/run/data/chunk-000/file-000.parquet").num_rows == t.num_rows


def test_the_runs_own_video_is_released_byte_for_byte(run: Path, tmp_path: Path) -> None:
    code, lines = release(run, tmp_path / "rel")
    assert code == 0, lines
    assert (tmp_path / "rel/run" / VIDEO).read_bytes() == (run / VIDEO).read_bytes()


def test_a_secret_inside_the_runs_video_refuses_the_release(run: Path, tmp_path: Path) -> None:
    with open(run / VIDEO, "ab") as f:  # trailing bytes: the container still opens, and plays
        f.write(b"\x00note " + SECRET.encode())
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert code == 1 and len(lines) == 1 and "openai_key in its bytes" in lines[0], lines
    assert SECRET not in lines[0] and not (tmp_path / "rel").exists()


def test_a_secret_in_the_videos_metadata_refuses_the_release(run: Path, tmp_path: Path) -> None:
    import av

    src = run / VIDEO
    tagged = tmp_path / "tagged.mp4"
    with av.open(str(src)) as inp, av.open(str(tagged), "w") as out:
        out.metadata["comment"] = f"recorded by {SECRET}"
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    shutil.copyfile(tagged, src)
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert code == 1 and len(lines) == 1 and "in container metadata" in lines[0], lines
    assert not (tmp_path / "rel").exists()


def _with_chapter(video: Path, title: str) -> None:
    """``video`` remuxed (same packets) with one chapter titled ``title``: PyAV writes it as an mp4 chapter list
    (``chpl``) and a chapter text track (a data stream), as ffmpeg and video editors do."""
    import fractions

    import av

    chaptered = video.with_name("chaptered.mp4")
    with av.open(str(video)) as inp, av.open(str(chaptered), "w", format="mp4") as out:
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
        chapter = {
            "id": 1,
            "start": 0,
            "end": 500,
            "time_base": fractions.Fraction(1, 1000),
            "metadata": {"title": title},
        }
        out.set_chapters([chapter])
    with av.open(str(chaptered)) as back:  # the oracle: PyAV reads the chapter back
        assert [c["metadata"]["title"] for c in back.chapters()] == [title]
    chaptered.replace(video)


def test_a_secret_in_a_videos_chapter_title_refuses_the_release(run: Path, tmp_path: Path) -> None:
    _with_chapter(run / VIDEO, "db login token=Hunter2Hunter2xyz at prod")  # hostile round 18, F3
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert code == 1 and len(lines) == 1, lines
    assert f"run/{VIDEO}: the video holds a match of rule secret_field in chapter 0 metadata" in lines[0]
    assert "Hunter2" not in lines[0] and not (tmp_path / "rel").exists()


def test_a_video_carrying_a_stream_other_than_video_is_refused_naming_it(run: Path, tmp_path: Path) -> None:
    _with_chapter(run / VIDEO, "intro")  # no secret anywhere: its chapter text track is what release cannot read
    code, lines = release(run, tmp_path / "rel", "--allow-violations")
    assert lines == [
        f"error: run/{VIDEO}: the video carries a data stream (stream 1), which release cannot read for secrets "
        "(rollbench writes one video stream only); move the video out of the run, or re-encode it with its video "
        "stream alone"
    ]
    assert code == 2 and not (tmp_path / "rel").exists()
