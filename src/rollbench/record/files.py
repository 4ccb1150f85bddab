"""Atomic file writes and episode video encoding. Every file rollbench writes appears whole or not at all.

Atomicity: write to a temporary file in the same directory, ``fsync`` it, ``os.replace`` it onto the target, then
``fsync`` the directory (POSIX rename is atomic within one file system).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import finite_json, strict_dumps
from rollbench.core.walk import walk_tree
from rollbench.record.parquet_bounds import check_decoded, open_bounded
from rollbench.record.safe_files import RUN_BOUNDS, is_regular, open_regular, run_files

VIDEO_CODEC = "libx264"  # H.264 in PyAV's bundled FFmpeg; decodable by LeRobot's pyav and torchcodec back-ends
VIDEO_PIX_FMT = "yuv420p"


def _file_mode() -> int:
    """The mode ``open()`` would give a new file (0o666 minus the umask); ``mkstemp`` alone gives 0o600.

    Read once, at import: ``os.umask`` can only be read by setting it, and setting it while other threads create files
    (the dashboard's label writes, the pool's workers) would give their files the wrong mode."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replaced_atomically(path: Path, suffix: str = ".tmp", durable: bool = True) -> Iterator[str]:
    """A new temporary file beside ``path`` (mode :data:`FILE_MODE`) for the ``with`` body to fill by name; on a clean
    exit it replaces ``path`` atomically (``durable``: the file is fsync'd first and the directory after), on an
    exception it is removed and ``path`` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.fchmod(fd, FILE_MODE)  # run directories are shared (other users, Ray nodes): not owner-only
    os.close(fd)
    try:
        yield tmp
        if durable:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically. ``durable=False`` skips the fsyncs: still atomic against process
    crashes (rename), but after a power loss the file may be old; only for files rebuilt from others on open."""
    with replaced_atomically(path, durable=durable) as tmp, open(tmp, "wb") as f:
        f.write(data)


def json_bytes(obj: Any) -> bytes:
    """``obj`` as the JSON file rollbench writes (indented, NaN/inf as null, numpy values and paths as plain ones)."""
    return (strict_dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n").encode()


def atomic_write_json(path: Path, obj: Any, durable: bool = True) -> None:
    atomic_write_bytes(path, json_bytes(obj), durable)


def check_output_file(path: Path, option: str, own: str | None = None) -> None:
    """ConfigError (one line naming ``option`` and ``path``) when output file ``path`` may not be written: it is,
    or lies inside, a run directory, it exists as anything but a regular file with a single name (a directory,
    a symbolic link, a FIFO, a socket, a device, or a file with other hard links), or it is a record rollbench keeps
    outside runs other than the caller's ``own`` kind (:func:`rollbench.record.safe_files.refuse_record`)."""
    from rollbench.record.safe_files import refuse_inside_run

    if os.path.isdir(path) and not os.path.islink(path):
        raise ConfigError(f"{option} {path} is a directory; give the path of a file")
    refuse_inside_run(path, option, own)  # with refuse_shared_file: a link, FIFO or hard-linked file is refused


def write_outputs(files: Sequence[tuple[Path, bytes, str]], own: str | None = None) -> None:
    """The one way rollbench writes the files a command produces for the user (a report, its figures, a figure, an
    export), each ``(path, data, option)``: every target is checked first (:func:`check_output_file`, ``own`` the
    kind of record the caller rewrites; a refusal writes nothing), then each is written as a new temporary file beside it renamed over it, so a link or hard link
    put there after the check is replaced, never written through. Not durable (no fsync): the files are rebuilt by
    running the command again. OSError (a full disk) leaves the earlier files written and no partial file."""
    for path, _, option in files:
        check_output_file(path, option, own)
    for path, data, _ in files:
        atomic_write_bytes(path, data, durable=False)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return finite_json(obj.item())
    if isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


MAX_PARQUET_BYTES = 1 << 28  # 256 MiB: a run's parquet file (an episode's steps or row; tasks) is KBs to a few MB
# and what it may decode to: MAX_DECODED_BYTES, 1 GiB (record.parquet_bounds: pages and arrays, from its footer and
# page headers; a few KiB of zstd-compressed zeros decode to GiBs, so the file's size alone does not bound a reader)


@contextlib.contextmanager
def open_parquet(path: Path, root: Path | None = None) -> Iterator[pq.ParquetFile]:
    """A run's parquet file opened for pyarrow (its footer read, no value decoded; closed on leaving the ``with``):
    :func:`~rollbench.record.safe_files.open_regular` (inside ``root`` when given) within :data:`MAX_PARQUET_BYTES`
    and without a hole (``check_dense``: pyarrow reads a column chunk whole, so a footer pointing into a hole of a
    sparse file would make it allocate the hole's size; hostile round 19, F2), and decoding to at most
    :data:`~rollbench.record.parquet_bounds.MAX_DECODED_BYTES` (:func:`~rollbench.record.parquet_bounds.check_decoded`:
    a decompression bomb), its footer within :data:`~rollbench.record.parquet_bounds.MAX_FOOTER_BYTES` before pyarrow
    parses it (:func:`~rollbench.record.parquet_bounds.open_bounded`). UnsafeFile (an OSError) naming the file and its
    numbers otherwise; an OSError naming a column chunk whose span or pages do not add up (damage); what pyarrow
    raises for a footer that does not read."""
    with open_regular(path, root, max_bytes=MAX_PARQUET_BYTES, dense=True) as raw, open_bounded(raw, path) as pf:
        check_decoded(pf, raw, path)
        yield pf


def why_not_read(exc: OSError, path: Path) -> str:
    """What an :class:`~rollbench.record.safe_files.UnsafeFile` of ``path`` says, without the path and the closing
    "not read" (``"21,474,836,480 bytes, over the 268,435,456 rollbench reads"``, ``"a FIFO, not a regular
    file"``): for a reader's own sentence that names the file its way."""
    return str(exc).removeprefix(f"{path} ").removeprefix("is ").removesuffix("; not read")


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One parquet file as a table (``columns``: only those). The same table as ``pq.read_table``, which goes through
    pyarrow's dataset layer and takes about twice as long on rollbench's small per-episode files (0.68 vs 0.35 ms
    for a 53-row data file, ``benchmarks/bench_micro.py``); raises what pyarrow raises for a missing or damaged file,
    and :class:`~rollbench.record.safe_files.UnsafeFile` (an OSError) when ``path`` is a link, FIFO, socket or
    device, over :data:`MAX_PARQUET_BYTES`, holey or decoding to more than
    :data:`~rollbench.record.parquet_bounds.MAX_DECODED_BYTES` (:func:`open_parquet`: never blocks, never follows
    the last link)."""
    with open_parquet(path) as f:
        return f.read(columns=list(columns) if columns is not None else None)


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def encode_video(path: Path, frames: Sequence[np.ndarray], fps: int, durable: bool = True) -> None:
    """Encode ``uint8 (H, W, 3)`` RGB frames as an H.264 mp4 at ``fps`` frames per second, atomically
    (``durable=False``: without the fsyncs of the file and its directory, for staged episodes; see
    :mod:`rollbench.record.lerobot`).

    One frame is written per step; the decoder sees exactly ``len(frames)`` frames.
    """
    import av  # PyAV: heavy-ish import, only needed when videos are recorded

    with replaced_atomically(path, ".mp4", durable) as tmp, av.open(tmp, mode="w") as container:
        stream = container.add_stream(VIDEO_CODEC, rate=fps)
        assert isinstance(stream, av.VideoStream)
        h, w = frames[0].shape[:2]
        stream.width, stream.height, stream.pix_fmt = w, h, VIDEO_PIX_FMT
        # one x264 thread: the same frames always give the same file (a CI run once decoded different pixels
        # from two encodings of identical frames with x264's default thread pool)
        stream.options = {"crf": "23", "preset": "veryfast", "g": "2", "threads": "1"}
        for img in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")))
        container.mux(stream.encode(None))


Size = tuple[int, int] | None  # (height, width) in pixels, or no size to check


class VideoRefused(ValueError):
    """A video :func:`count_video_frames` stops decoding; the text is a clause that follows the file's name
    (``"is 8192x4320 pixels (width x height), not the 32x32 the run records (meta/info.json); not decoded"``)."""


def count_video_frames(path: Path, root: Path | None = None, *, limit: int | None = None, size: Size = None) -> int:
    """The number of frames ``path``'s first video stream decodes to (decoding, not trusting container metadata),
    counted up to ``limit``: ``limit`` means "``limit`` or more" (decoding stops there, so a video's cost is at most
    ``limit`` frames of the run's size, whatever its length; hostile round 19, F4). Bounds, each a
    :class:`VideoRefused` (a ValueError) naming what it found:

    * ``size`` ``(height, width)``, the run's recorded frame size: the stream's size is checked before a frame is
      decoded, and each decoded frame's (an H.264 stream may change size within its packets);
    * at most ``limit`` packets that hold data are decoded (then the decoder is drained): rollbench writes one frame
      per packet, so reaching the bound with fewer than ``limit`` frames is a video rollbench did not write; and at
      most ``2 * limit`` packets of any stream are read (rollbench writes one video stream, one packet per frame
      and the demuxer's last, empty one).

    The file is opened with :func:`~rollbench.record.safe_files.open_regular` (inside ``root`` when given), and a
    file with a hole (:func:`~rollbench.record.safe_files.check_dense`) is refused: UnsafeFile (an OSError)."""
    import av

    with open_regular(path, root, dense=True) as raw, av.open(raw, mode="r") as container:
        stream = container.streams.video[0]  # IndexError: no video stream
        if size is not None:
            _check_frame_size(stream.codec_context, size, None)
        frames = data_packets = 0
        for n, packet in enumerate(container.demux()):  # every stream's: another stream's packets cost reading too
            if limit is not None and n > 2 * limit:
                others = True
                break
            if packet.stream.index != stream.index:
                continue
            data_packets += bool(packet.size)
            if limit is not None and data_packets > limit:
                others = False
                break
            for frame in stream.decode(packet):
                _check_frame_size(frame, size, frames)
                frames += 1
                if limit is not None and frames >= limit:
                    return limit
        else:
            return frames  # the demuxer's last, empty packet drained the decoder
        assert limit is not None  # the loop stops early only with a limit
        for frame in stream.decode(None):  # drain the frames of the packets fed
            _check_frame_size(frame, size, frames)
            frames += 1
        if frames >= limit:
            return limit
        why = (
            f"holds more than {2 * limit} packets (of all its streams) before {limit} frames"
            if others
            else f"holds more than {limit} packets and its first {limit} decode to {frames} frames"
        )
        raise VideoRefused(f"{why} (rollbench writes one frame per packet); not decoded further")


def _check_frame_size(frame: Any, size: Size, index: int | None) -> None:
    """VideoRefused when ``frame`` (a decoded frame, or with ``index`` None the stream's codec context) is not
    ``size`` ``(height, width)``; nothing when ``size`` is None."""
    if size is None or (frame.height, frame.width) == tuple(size):
        return
    what = "is" if index is None else f"has a frame (frame {index}) of"
    until = "not decoded" if index is None else "not decoded further"
    raise VideoRefused(
        f"{what} {frame.width}x{frame.height} pixels (width x height), not the {size[1]}x{size[0]} the run records "
        f"(meta/info.json); {until}"
    )


# ---- staying inside a run directory ----------------------------------------------------------------------------
# A run directory may be shared, copied or tampered with. rollbench never reads, writes or deletes through a link
# that leads out of it: every path it touches there is checked with these helpers first.


class OutsideRunDirError(ConfigError):
    """A path inside a run directory resolves (through a symbolic link) to a place outside it."""


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path``, with every symbolic link resolved, is ``root`` (resolved) or lies under it."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    return real == real_root or real_root in real.parents


def resolve_inside(root: Path, path: Path) -> Path:
    """``path`` if it resolves inside ``root``, else OutsideRunDirError naming the link and where it leads.

    Use before every read, write or delete of a file in a run directory (``path`` need not exist).
    """
    if not is_inside(root, path):
        raise OutsideRunDirError(
            f"{path} leads outside the run directory {root} (to {os.path.realpath(path)}); rollbench never reads, "
            "writes or deletes through such a link: remove it and run the command again"
        )
    return path


def escaping_links(root: Path) -> list[tuple[Path, Path]]:
    """Every symbolic link under ``root`` (not followed while walking) whose target lies outside ``root``.

    Returns ``(link, resolved target)`` pairs, sorted; a dangling link counts by where it points. Cost: one
    ``scandir`` per directory of the run (a few per thousand episodes), within
    :data:`~rollbench.record.safe_files.RUN_BOUNDS` (:func:`rollbench.core.walk.walk_tree`; ConfigError past them).
    """
    found: list[tuple[Path, Path]] = []
    for e in walk_tree(root, RUN_BOUNDS).others:
        p = root / e.rel
        if stat.S_ISLNK(e.mode) and not is_inside(root, p):
            found.append((p, Path(os.path.realpath(p))))
    return sorted(found)


def check_no_escaping_links(root: Path) -> None:
    """Raise OutsideRunDirError naming the first link under ``root`` that leads outside it (see escaping_links)."""
    links = escaping_links(root)
    if links:
        link, target = links[0]
        more = f" (and {len(links) - 1} more)" if len(links) > 1 else ""
        raise OutsideRunDirError(
            f"{link} is a link leading outside the run directory (to {target}){more}; rollbench never reads, writes "
            "or deletes through such a link: remove it and run the command again"
        )


_RANDOM = "[a-z0-9_]{8}"  # what tempfile.mkstemp puts between prefix and suffix: exactly 8 of a-z, 0-9, _
_NNN = "[0-9]{3}"


def writer_temps(video_keys: Sequence[str] = (), artifact_dirs: Sequence[str] = ()) -> re.Pattern[str]:
    """The exact names of a crashed writer's temporary files, relative to the run directory: ``.NAME.XXXXXXXX.tmp``
    of ``atomic_write_bytes`` and ``.NAME.XXXXXXXX.mp4`` of ``encode_video`` (XXXXXXXX: mkstemp's 8 characters),
    where NAME is a file the writer of this run writes in that very directory: videos only of ``video_keys`` (the
    run's cameras), episode artifacts only under ``artifact_dirs`` (``transcripts``, ``wire``: what the run's policy
    writes). Anything else (``.mydraft.tmp``, ``.run.json.backup.tmp``, ``data/chunk-000/.notes.ab12cd.tmp``, a
    partial video of a camera the run does not record) is not this writer's."""
    parts = [
        rf"\.run(\.live)?\.json\.{_RANDOM}\.tmp",  # run.json, run.live.json (record.runlog)
        rf"meta/\.(info\.json|stats\.json|tasks\.parquet|videos_index\.json)\.{_RANDOM}\.tmp",
        rf"(data|meta/episodes)/chunk-{_NNN}/\.file-{_NNN}\.parquet\.{_RANDOM}\.tmp",
    ]
    if artifact_dirs:
        dirs = "|".join(re.escape(d) for d in artifact_dirs)
        parts.append(rf"({dirs})/chunk-{_NNN}/\.file-{_NNN}\.jsonl\.{_RANDOM}\.tmp")  # episode artifacts
    if video_keys:
        keys = "|".join(re.escape(k) for k in video_keys)
        parts.append(rf"videos/({keys})/chunk-{_NNN}/\.file-{_NNN}\.mp4\.{_RANDOM}\.mp4")  # a partial video
    return re.compile("|".join(parts))


def remove_temp_files(root: Path, video_keys: Sequence[str] = (), artifact_dirs: Sequence[str] = ()) -> list[Path]:
    """Remove a crashed writer's temporary files from run directory ``root``; return them.

    Only regular files whose path inside ``root`` is one of :func:`writer_temps` ``(video_keys, artifact_dirs)`` are
    removed, found by :func:`~rollbench.record.safe_files.run_files` (never through a link, never a FIFO, socket or
    device, bounded): nothing is deleted that the writer did not write itself. Call only while holding the run lock.
    """
    temps = writer_temps(video_keys, artifact_dirs)
    removed: list[Path] = []
    for p in run_files(root):
        rel = p.relative_to(root).as_posix()
        if temps.fullmatch(rel) and is_regular(p) and is_inside(root, p):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def utc_now() -> str:
    """The time now, UTC, as ``YYYY-MM-DDTHH:MM:SSZ`` (the form of every time rollbench records)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
