"""Episodes shipped from a worker that cannot see the run directory to the one process that writes it.

A Ray actor on another node (``--executor ray`` without ``--ray-shared-fs``) runs an episode, writes its staged
files into a private temporary directory on its own disk (the very files :func:`rollbench.record.lerobot.stage_episode`
would write: ``data.parquet``, ``episode.json``, one ``<video key>.mp4`` per camera, one ``<artifact>.jsonl`` per
policy artifact), reads them back as bytes and returns them in its reply (:func:`pack_episode`). The driver checks the
reply and stages it into ``RUN_DIR/.staging`` with the same temp-dir-and-rename, first-wins step
(:func:`stage_shipped`), so the commit point, exactly-once rule, crash safety and resume are those of a local run.

Nothing in a reply is trusted: the file names must be ones the run records (no path component, no other name), the
total size is bounded (:data:`MAX_EPISODE_BYTES` unless the caller says less), the SHA-256 digest over every name and
byte must match, the episode index must be the one the driver handed out, and the staged directory must read back
whole (:func:`rollbench.record.staged_check.staged_damage`). A reply that fails any of these raises :class:`BadReply`
(an infrastructure fault): the driver records that episode as an ``error`` with this reason, never the reply's data.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rollbench.core.contracts import InfrastructureError
from rollbench.core.episode import EpisodeRecord
from rollbench.core.format import quoted
from rollbench.core.plan import PlannedEpisode
from rollbench.record.lerobot import ARTIFACT_PATHS, stage_files, write_episode_files
from rollbench.record.staged_check import StagedShape, staged_damage

MAX_EPISODE_BYTES = 1 << 30  # 1 GiB: far above any recorded episode (a 1,000-step 2-camera episode is ~10 MB)


class BadReply(InfrastructureError):
    """A worker's reply for an episode was corrupted, oversized or malformed (the episode is recorded as an error)."""


@dataclass(frozen=True)
class ShippedEpisode:
    """One staged episode as bytes. ``files``: file name -> content; ``digest``: :func:`digest_of` ``files`` as the
    worker computed it; ``size``: the total bytes the worker produced (``files`` is empty when that exceeded the
    bound it was given, so a too-large episode never crosses the wire)."""

    episode_index: int
    files: dict[str, bytes] = field(default_factory=dict)
    digest: str = ""
    size: int = 0


def digest_of(files: dict[str, bytes]) -> str:
    """SHA-256 hex digest over every ``(name, length, bytes)`` in name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def pack_episode(
    rec: EpisodeRecord, fps: int, render_failure: str | None, max_bytes: int = MAX_EPISODE_BYTES
) -> ShippedEpisode:
    """The staged files of ``rec`` as a :class:`ShippedEpisode` (written to and read back from a private temporary
    directory, then removed). An episode over ``max_bytes`` comes back with no files and its ``size``."""
    tmp = Path(tempfile.mkdtemp(prefix="rollbench-ship-"))
    try:
        write_episode_files(tmp, rec, fps, render_failure)
        files = {f.name: f.read_bytes() for f in sorted(tmp.iterdir())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(len(b) for b in files.values())
    if size > max_bytes:
        return ShippedEpisode(rec.planned.episode_index, size=size)
    return ShippedEpisode(rec.planned.episode_index, files, digest_of(files), size)


def allowed_names(video_keys: Iterable[str]) -> frozenset[str]:
    """The file names a staged episode of a run recording ``video_keys`` may hold."""
    names = {"data.parquet", "episode.json", *(f"{k}.mp4" for k in video_keys)}
    return frozenset(names | {f"{kind}.jsonl" for kind in ARTIFACT_PATHS})


def check_reply(reply: object, episode_index: int, names: frozenset[str], max_bytes: int) -> ShippedEpisode:
    """``reply`` if it is a whole, uncorrupted shipped copy of episode ``episode_index``; else raises BadReply."""
    if not isinstance(reply, ShippedEpisode) or not isinstance(reply.files, dict):
        raise BadReply(f"the worker's reply is a {type(reply).__name__}, not a shipped episode")
    if reply.episode_index != episode_index:
        raise BadReply(f"the worker's reply is for episode {reply.episode_index}, not {episode_index}")
    size = sum(len(b) for b in reply.files.values() if isinstance(b, bytes))
    if max(size, reply.size if isinstance(reply.size, int) else 0) > max_bytes:
        raise BadReply(f"the episode is {max(size, reply.size):,} bytes, over the {max_bytes:,}-byte bound")
    bad = sorted(quoted(n, as_text=True) for n, b in reply.files.items() if n not in names or not isinstance(b, bytes))
    if bad:
        raise BadReply(f"the worker's reply holds files a run does not record: {', '.join(bad)}")
    if not {"data.parquet", "episode.json"} <= reply.files.keys():
        raise BadReply("the worker's reply lacks data.parquet or episode.json")
    if digest_of(reply.files) != reply.digest:
        raise BadReply("the worker's reply failed its SHA-256 checksum (corrupted in transit)")
    return reply


def stage_shipped(
    run_dir: Path, shipped: ShippedEpisode, shape: StagedShape | None = None, planned: PlannedEpisode | None = None
) -> bool:
    """Stage a checked (:func:`check_reply`) shipped episode into ``run_dir/.staging`` atomically, first-wins like
    :func:`rollbench.record.lerobot.stage_episode`. Returns False if the episode was already staged. Raises BadReply
    if the files do not read back as a whole staged episode of this run run as ``planned`` (``shape``, ``planned``:
    the checks of :func:`rollbench.record.staged_check.staged_damage`, the writer's own; nothing is staged then)."""

    def write(tmp: Path) -> None:
        for name, data in shipped.files.items():
            (tmp / name).write_bytes(data)
        why = staged_damage(tmp, shipped.episode_index, shape, planned)
        if why is not None:
            raise BadReply(f"the shipped episode does not read back whole: {why}")

    return stage_files(run_dir, shipped.episode_index, write)
