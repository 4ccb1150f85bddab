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
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from rollbench.core.identity import check_segment
from rollbench.record.runlog import utc_now

TIMEOUT_S = 3.0  # per read of a peer's answer
TOTAL_S = 10.0  # the whole answer of /api/runs or an episode: a peer dripping bytes is cut off here
MAX_ANSWER_BYTES = 64 * 2**20  # 64 MiB: a listing of thousands of runs is a few MB


class PeerError(Exception):
    """A peer's answer is too slow, too large or not the listing a dashboard serves."""


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

    def get_json(self, path: str) -> Any:
        """The peer's JSON answer at ``path``, read within :data:`TOTAL_S` seconds in all and at most
        :data:`MAX_ANSWER_BYTES` bytes (PeerError otherwise; httpx.HTTPError for a failed request)."""
        deadline = time.monotonic() + TOTAL_S
        body = bytearray()
        with httpx.stream("GET", self.url + path, headers=self._headers(), timeout=TIMEOUT_S) as resp:
            resp.raise_for_status()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise PeerError(f"its answer is over {MAX_ANSWER_BYTES:,} bytes")
                if time.monotonic() > deadline:
                    raise PeerError(f"its answer took over {TOTAL_S:g} s")
        return json.loads(bytes(body))

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

    def cached_media(self, cache_dir: Path, key_path: str, camera: str) -> Path:
        """The peer's video ``/media/KEY/CAMERA`` as a local file under ``cache_dir`` (downloaded once; temp file +
        rename). Raises httpx.HTTPError when the peer cannot deliver it."""
        for seg in [*key_path.split("/"), camera]:
            check_segment(seg, "path segment")
        dest = cache_dir / "media" / key_path / f"{camera}.mp4"
        if dest.is_file():
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
        try:
            with (
                os.fdopen(fd, "wb") as fh,
                httpx.stream(
                    "GET", f"{self.url}/media/{key_path}/{quote(camera)}", headers=self._headers(), timeout=TIMEOUT_S
                ) as resp,
            ):
                resp.raise_for_status()
                for chunk in resp.iter_bytes():
                    fh.write(chunk)
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
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
