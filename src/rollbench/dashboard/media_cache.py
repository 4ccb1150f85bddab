"""The central dashboard's cache of its peers' episode videos, under ``CACHE_DIR/peer-media/`` (hostile round 14, F2).

An entry is ``peer-media/PEER/HOST/ROBOT/NAME/EPISODE/CAMERA/VERSION.mp4``: ``PEER`` is a digest of the peer's
normalised URL (:func:`peer_digest`; the URL itself, which viewers see anyway, is never a path), so one peer's
video is never served for another peer's run of the same identity; ``VERSION`` is a digest of the run's
``signature`` as the peer's listing announces it (:func:`~rollbench.dashboard.summary.signature_digest`, which
changes whenever a file of the run does), so a run re-recorded under the same name never gets the old video. A
peer that announces no signature (an older rollbench) is keyed by what its listing says of the run and the
episode instead (``created``, and the episode's recorded fields). An entry is used only when it is a regular file,
reached through no link below the cache directory, of the ``size`` the peer announced for that video (when it
announces one); otherwise it is downloaded again.

Bounds: one entry per (peer, episode, camera): storing a new version deletes the older ones there; and at most
:data:`MAX_CACHED_VIDEOS` entries and :data:`MAX_CACHE_BYTES` bytes in all: after each download the least recently
used entries (by mtime; a cache hit touches its entry) are deleted until both hold. Only files this cache names
(``VERSION.mp4``, and its own ``.dl-*.part`` downloads once abandoned) are ever deleted, by ``lstat`` as regular
files, in directories walked without following links. Errors: :class:`UnsafeFile` (an ``OSError``) when the entry's
path passes through a symbolic link below the cache directory.

Downloads in flight (hostile round 16, F5): each holds a request thread for up to ``peers.MEDIA_TOTAL_S``, so at most
:data:`MAX_DOWNLOADS` run at once in this process and at most :data:`MAX_DOWNLOADS_PER_PEER` from one peer, and one
entry is downloaded by one request at a time (:func:`download_slot`); a request past these gets :class:`Busy` at once
(the dashboard's 503), never a queued thread, so a peer dripping its videos never holds the threads its pages need.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rollbench.core.walk import Bounds, walk_tree
from rollbench.record.safe_files import UnsafeFile, check_no_link_below

MEDIA_DIR = "peer-media"
MAX_CACHED_VIDEOS = 1_000  # entries in all; an episode's mp4 is a few MB, so about a few GB at most in practice
MAX_CACHE_BYTES = 8 * 2**30  # 8 GiB in all (each entry is at most peers.MAX_MEDIA_BYTES, 256 MiB)
MAX_WALK_ENTRIES = 100_000  # directory entries one bound check visits
# a bound check's walk (rollbench.core.walk): an entry lies 6 levels below peer-media/; past the bounds it stops
WALK_BOUNDS = Bounds(max_entries=MAX_WALK_ENTRIES, max_depth=16, on_excess="truncate")
ABANDONED_PART_S = 3_600.0  # a download's temporary file untouched this long was abandoned (a download takes <= 60 s)
PART_PREFIX, PART_SUFFIX = ".dl-", ".part"
_ENTRY = re.compile(r"[0-9a-f]{32}\.mp4")
_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_DOWNLOADS = 8  # peer videos downloading at once, in all: 8 of the server's 40 worker threads at most
MAX_DOWNLOADS_PER_PEER = 2  # from one peer (an episode page's cameras): a bad peer holds 2 threads, not the pool
_DOWNLOADS: dict[str, str] = {}  # the entry path of each download in flight -> its peer's digest
_DOWNLOADS_LOCK = threading.Lock()
_LOCK = threading.Lock()  # storing, pruning and creating directories: one thread at a time
# what a peer's listing adds to an episode on its side (its own labels), which says nothing of the recording
_NOT_RECORDED = frozenset({"label", "note", "annotator", "labeled_at", "disagreement", "live", "stale"})


class Busy(Exception):
    """No download slot for a peer's video now (:func:`download_slot`): the text says which bound and to retry."""


@contextlib.contextmanager
def download_slot(peer_url: str, path: Path) -> Iterator[None]:
    """Hold one of the :data:`MAX_DOWNLOADS` download slots (at most :data:`MAX_DOWNLOADS_PER_PEER` for
    ``peer_url``) for the entry ``path`` while the block runs; :class:`Busy` at once when the entry is already being
    downloaded or a bound is reached (never waits)."""
    key, peer = os.fspath(path), peer_digest(peer_url)
    with _DOWNLOADS_LOCK:
        if key in _DOWNLOADS:
            raise Busy("this video is being fetched by another request; retry in a few seconds")
        if sum(p == peer for p in _DOWNLOADS.values()) >= MAX_DOWNLOADS_PER_PEER:
            raise Busy(
                f"{MAX_DOWNLOADS_PER_PEER} of its videos are being fetched (at most {MAX_DOWNLOADS_PER_PEER} per peer "
                "at once); retry in a few seconds"
            )
        if len(_DOWNLOADS) >= MAX_DOWNLOADS:
            raise Busy(
                f"{MAX_DOWNLOADS} peer videos are being fetched (at most {MAX_DOWNLOADS} at once); retry in a few seconds"
            )
        _DOWNLOADS[key] = peer
    try:
        yield
    finally:
        with _DOWNLOADS_LOCK:
            del _DOWNLOADS[key]


def peer_digest(url: str) -> str:
    """16 hex digits naming the peer ``url`` once normalised: scheme and host lower case, the default port dropped,
    no trailing ``/`` (``HTTP://Box:80/`` and ``http://box`` are one peer)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""  # lower case, an IPv6 literal without its brackets
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:  # not a port (the CLI refuses such a URL): the URL as given
        return hashlib.sha256(url.encode()).hexdigest()[:16]
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return hashlib.sha256(f"{scheme}://{netloc}{parts.path.rstrip('/')}".encode()).hexdigest()[:16]


def announced(run: dict[str, Any], episode_index: int, camera: str) -> tuple[str, int | None]:
    """(VERSION, announced size or None) of a camera's video of a peer's run summary (module docstring)."""
    episode: dict[str, Any] = next((e for e in run.get("episodes", []) if e.get("episode_index") == episode_index), {})
    video = episode.get("videos", {}).get(camera)
    size = video.get("size") if isinstance(video, dict) else None
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        size = None
    signature = run.get("signature")
    if isinstance(signature, str):
        basis: Any = ["signature", signature]
    else:
        recorded = {k: v for k, v in episode.items() if k not in _NOT_RECORDED}
        basis = ["listing", run.get("created"), run.get("episodes_recorded"), recorded]
    text = json.dumps(basis, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32], size


def entry_path(cache_dir: Path, peer_url: str, key_path: str, camera: str, version: str) -> Path:
    """Where the entry lives (``key_path`` = ``HOST/ROBOT/NAME/EPISODE``, its segments checked by the caller);
    UnsafeFile when that path passes through a symbolic link below ``cache_dir``."""
    path = cache_dir / MEDIA_DIR / peer_digest(peer_url) / key_path / camera / f"{version}.mp4"
    try:
        check_no_link_below(cache_dir, path)
    except UnsafeFile:
        raise UnsafeFile(f"{path.parent} passes through a symbolic link in the cache directory; not used") from None
    return path


def lookup(path: Path, size: int | None) -> bool:
    """True when ``path`` is a usable entry: a regular file (not a link) of ``size`` bytes (any size when None);
    it is then touched (most recently used)."""
    with _LOCK:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or (size is not None and st.st_size != size):
            return False
        with contextlib.suppress(OSError):
            os.utime(path, follow_symlinks=False)
        return True


def temp_file(path: Path) -> tuple[int, str]:
    """A new temporary file beside the entry ``path`` (its directories made): (descriptor, name)."""
    with _LOCK:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=path.parent, prefix=PART_PREFIX, suffix=PART_SUFFIX)


def store(tmp: str, path: Path, cache_dir: Path) -> None:
    """Move the complete download ``tmp`` to the entry ``path``, delete the older versions beside it and keep the
    whole cache within its bounds (module docstring)."""
    with _LOCK:
        os.replace(tmp, path)
        _prune_siblings(path)
        _enforce_bounds(cache_dir / MEDIA_DIR, keep=path)


def _owned(entry: os.DirEntry[str], now: float) -> bool:
    """True for a regular file this cache made and may delete: an entry, or a download abandoned long ago."""
    try:
        if not entry.is_file(follow_symlinks=False):
            return False
        if _ENTRY.fullmatch(entry.name):
            return True
        part = entry.name.startswith(PART_PREFIX) and entry.name.endswith(PART_SUFFIX)
        return part and now - entry.stat(follow_symlinks=False).st_mtime > ABANDONED_PART_S
    except OSError:
        return False


def _prune_siblings(path: Path) -> None:
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(path.parent) as it:
        for entry in it:
            if entry.name != path.name and _owned(entry, now):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _enforce_bounds(root: Path, keep: Path) -> None:
    """Delete the least recently used entries (never ``keep``) until at most :data:`MAX_CACHED_VIDEOS` entries of
    at most :data:`MAX_CACHE_BYTES` bytes in all remain; then remove the directories left empty."""
    listing = walk_tree(root, WALK_BOUNDS)  # past the bounds: the entries of the directories read (the same each time)
    entries = [
        (f.mtime_ns, f.size, os.fspath(root / f.rel))
        for f in listing.files
        if _ENTRY.fullmatch(f.name) and root / f.rel != keep
    ]
    total = sum(size for _, size, _ in entries) + _size(keep)
    count = len(entries) + 1
    for _, size, name in sorted(entries):
        if count <= MAX_CACHED_VIDEOS and total <= MAX_CACHE_BYTES:
            break
        with contextlib.suppress(OSError):
            os.unlink(name)
            count -= 1
            total -= size
            _remove_empty_dirs(Path(name).parent, root)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _remove_empty_dirs(directory: Path, root: Path) -> None:
    """``os.rmdir`` ``directory`` and its parents below ``root`` while they are empty (rmdir refuses otherwise)."""
    while directory != root and root in directory.parents:
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = directory.parent
