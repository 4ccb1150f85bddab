"""Peers of a central dashboard: other ``rollbench dashboard`` servers, each serving its own host's runs.

The central dashboard reads a peer's ``/api/runs`` (with the peer's token as a bearer header), keeps the last good
answer, and when the peer stops answering reports it in ``hosts[]`` with ``error`` and ``stale_since`` (the time
of the last good answer, or of the first failure if there never was one) while still listing the runs it last saw,
marked ``stale``. Episode details and media are fetched from the peer on demand; media files are cached under the
central dashboard's cache directory (never inside a run directory), so a peer that goes down keeps the videos
already watched. Labels are never sent to peers: the central dashboard keeps them in its own sidecar. Only a peer's own runs
(``source: local`` in its answer) are taken, so a central dashboard listed as another's peer is not re-exported.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from rollbench.core.identity import check_segment
from rollbench.record.runlog import utc_now
from rollbench.wire.outbound import http_client, total_deadline

TIMEOUT_S = 3.0  # per read of a peer's answer
TOTAL_S = 10.0  # the whole answer of /api/runs, an episode or a transcript: a peer dripping bytes is cut off here
MAX_ANSWER_BYTES = 64 * 2**20  # 64 MiB: a listing of thousands of runs is a few MB
MAX_TRANSCRIPT_BYTES = 4 * 2**20  # 4 MiB: an agent transcript of a long episode is tens of kB
MEDIA_TOTAL_S = 60.0  # one episode video from a peer: at most a minute in all
MAX_MEDIA_BYTES = 256 * 2**20  # 256 MiB: an episode's mp4 is a few MB; more is never kept in the cache


class PeerError(Exception):
    """A peer's answer is too slow, too large or not the listing a dashboard serves. ``status`` is the HTTP status
    the central dashboard answers with (504 for a deadline, 502 otherwise)."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


class Peer:
    """One peer dashboard: its URL, token and last known runs."""

    def __init__(self, url: str, token: str | None, refresh_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.refresh_s = refresh_s
        self.runs: list[dict[str, Any]] = []
        self.hosts: list[str] = []
        self.error: str | None = None
        self.stale_since: str | None = None
        self.last_ok: str | None = None
        self._fetched = 0.0
        self.generation = 0  # bumped on every good answer (the central dashboard's cache key)
        self._lock = threading.Lock()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def fetch(self, path: str, sink: Callable[[bytes], object], max_bytes: int, total_s: float | None = None) -> None:
        """Stream the peer's answer at ``path`` into ``sink`` chunk by chunk, within ``total_s`` seconds in all
        (connect, headers and body: :func:`~rollbench.wire.outbound.total_deadline`; each read within
        :data:`TIMEOUT_S`) and at most ``max_bytes`` bytes: PeerError (status 504 past the deadline, 502 over the cap
        or for a redirect, never followed) otherwise, httpx.HTTPStatusError for a non-2xx answer, httpx.HTTPError for
        a failed request. ``total_s`` defaults to :data:`TOTAL_S`. The one bounded read of every peer answer (listings, episodes,
        transcripts, media)."""
        total_s = TOTAL_S if total_s is None else total_s
        deadline = time.monotonic() + total_s
        try:
            self._fetch(path, sink, max_bytes, total_s, deadline)
        except httpx.TimeoutException:
            if time.monotonic() < deadline:
                raise
            raise PeerError(f"its answer took over {total_s:g} s", status=504) from None

    def _fetch(
        self, path: str, sink: Callable[[bytes], object], max_bytes: int, total_s: float, deadline: float
    ) -> None:
        size = 0
        with (
            http_client(timeout=TIMEOUT_S) as client,
            total_deadline(total_s),  # connect, headers and body (rollbench.wire.outbound): not only the body
            client.stream("GET", self.url + path, headers=self._headers()) as resp,
        ):
            if resp.is_redirect:  # never followed (rollbench.wire.outbound), its Location never quoted
                raise PeerError(f"it answered HTTP {resp.status_code}, a redirect, which is never followed")
            resp.raise_for_status()
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise PeerError(f"its answer is over {max_bytes:,} bytes")
                if time.monotonic() > deadline:
                    raise PeerError(f"its answer took over {total_s:g} s", status=504)
                sink(chunk)

    def get_bytes(self, path: str, max_bytes: int) -> bytes:
        """The peer's whole answer at ``path`` (bounded as in :meth:`fetch`)."""
        body = bytearray()
        self.fetch(path, body.extend, max_bytes)
        return bytes(body)

    def get_json(self, path: str) -> Any:
        """The peer's JSON answer at ``path``, read within :data:`TOTAL_S` seconds in all and at most
        :data:`MAX_ANSWER_BYTES` bytes (PeerError otherwise; httpx.HTTPError for a failed request)."""
        return json.loads(self.get_bytes(path, MAX_ANSWER_BYTES))

    def refresh(self, force: bool = False) -> None:
        """Re-read the peer's ``/api/runs`` if the last read is older than ``refresh_s`` (or ``force``)."""
        with self._lock:
            if not force and time.monotonic() - self._fetched < self.refresh_s:
                return
            self._fetched = time.monotonic()
            try:
                doc = self.get_json("/api/runs")
                runs = _local_runs(doc)
            except (httpx.HTTPError, PeerError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                self.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                self.stale_since = self.stale_since or self.last_ok or utc_now()
                return
            self.runs = [{**r, "source": self.url} for r in runs]
            self.generation += 1
            self.hosts = sorted({r["host"] for r in self.runs})
            self.error, self.stale_since, self.last_ok = None, None, utc_now()

    def host_rows(self) -> list[dict[str, Any]]:
        base = {"source": self.url, "error": self.error, "stale_since": self.stale_since, "last_ok": self.last_ok}
        if not self.hosts:
            return [{"host": None, "runs": 0, **base}]
        return [{"host": h, "runs": sum(1 for r in self.runs if r["host"] == h), **base} for h in self.hosts]

    def episode(self, key_path: str) -> dict[str, Any]:
        return dict(self.get_json(f"/api/episode/{key_path}"))

    def transcript(self, key_path: str) -> bytes:
        """The peer's ``/transcript/KEY`` text, at most :data:`MAX_TRANSCRIPT_BYTES` within :data:`TOTAL_S`."""
        return self.get_bytes(f"/transcript/{key_path}", MAX_TRANSCRIPT_BYTES)

    def cached_media(self, cache_dir: Path, key_path: str, camera: str) -> Path:
        """The peer's video ``/media/KEY/CAMERA`` as a local file under ``cache_dir`` (downloaded once; temp file +
        rename; at most :data:`MAX_MEDIA_BYTES` within :data:`MEDIA_TOTAL_S`). Raises httpx.HTTPError when the peer
        cannot deliver it, PeerError when it is too slow or too large (nothing is then kept)."""
        for seg in [*key_path.split("/"), camera]:
            check_segment(seg, "path segment")
        dest = cache_dir / "media" / key_path / f"{camera}.mp4"
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as fh:
                self.fetch(f"/media/{key_path}/{quote(camera)}", fh.write, MAX_MEDIA_BYTES, MEDIA_TOTAL_S)
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a partial, slow or oversized download is never left in the cache
        return dest


def _local_runs(doc: Any) -> list[dict[str, Any]]:
    """The peer's own runs (``source: local``) of its ``/api/runs`` answer; PeerError naming the first thing that is
    not what a dashboard serves (the whole peer is then marked bad: its runs are not half taken)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise PeerError("its answer is not an object with a list of runs")
    out = []
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict):
            raise PeerError(f"runs[{i}] is not an object")
        if r.get("source") != "local":
            continue
        if not _valid_identity(r) or r.get("key") != f"{r['host']}/{r['robot']}/{r['name']}":
            raise PeerError(f"runs[{i}] has no valid host, robot, name and key")
        eps = r.get("episodes")
        if not isinstance(eps, list) or not all(
            isinstance(e, dict) and isinstance(e.get("key"), str) and e.get("success") in (True, False, None)
            for e in eps
        ):
            raise PeerError(f"runs[{i}] has no list of episodes with a key and a success")
        out.append(r)
    return out


def _valid_identity(run: dict[str, Any]) -> bool:
    try:
        for k in ("host", "robot", "name"):
            check_segment(run[k], k)
    except Exception:
        return False
    return True
