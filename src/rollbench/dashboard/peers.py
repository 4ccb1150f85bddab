"""Peers of a central dashboard: other ``rollbench dashboard`` servers, each serving its own host's runs.

The central dashboard reads a peer's ``/api/runs`` (with the peer's token as a bearer header), keeps the last good
answer, and when the peer stops answering reports it in ``hosts[]`` with ``error`` and ``stale_since`` (the time
of the last good answer, or of the first failure if there never was one) while still listing the runs it last saw,
marked ``stale``. Episode details and media are fetched from the peer on demand; media files are cached under the
central dashboard's cache directory (never inside a run directory; :mod:`rollbench.dashboard.media_cache`: keyed by
the peer and the run's announced signature), so a peer that goes down keeps the videos already watched. Labels are never sent to peers: the central dashboard keeps them in its own sidecar. Only a peer's own runs
(``source: local`` in its answer) are taken, so a central dashboard listed as another's peer is not re-exported.
Every link to a peer's run is the central's own route built from the identity it checked, never a URL the peer sent.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from rollbench.core.identity import check_segment
from rollbench.dashboard import media_cache
from rollbench.record.runlog import utc_now
from rollbench.wire.decode import ProtocolError, loads_json, unquoted_failure
from rollbench.wire.outbound import http_client, total_deadline

TIMEOUT_S = 3.0  # per read of a peer's answer
TOTAL_S = 10.0  # the whole answer of /api/runs, an episode or a transcript: a peer dripping bytes is cut off here
WAIT_S = 1.0  # a request waits at most this long for a peer's listing read in flight, then serves the last one
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


def peer_failure(exc: BaseException) -> str:
    """Why a peer could not deliver, in rollbench's own words only: a :class:`PeerError`'s text (written here from
    sizes, deadlines and field names), ``"HTTPStatusError: HTTP 503"`` for a non-2xx answer (the status code, never
    its reason phrase), otherwise :func:`~rollbench.wire.decode.unquoted_failure` (the class, the OS's words or "no
    answer within the deadline"). httpx's and h11's texts quote the peer's status line, reason phrase, header lines,
    chunk headers and redirect targets, any of which a peer may fill with whatever it likes (issue 42, hostile round
    6 F1): none of them is ever shown."""
    if isinstance(exc, PeerError):
        return f"PeerError: {exc}"
    return unquoted_failure(exc)


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
        self._fetched = float("-inf")  # when the last read of /api/runs ended
        self._reading: threading.Event | None = None  # set when the read in flight ends
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
        :data:`MAX_ANSWER_BYTES` bytes (PeerError otherwise, also for an answer that is not JSON; httpx.HTTPError for
        a failed request)."""
        body = self.get_bytes(path, MAX_ANSWER_BYTES)
        try:
            return loads_json(body)  # strict (UTF-8, finite, one value per key); its message never quotes the peer
        except ProtocolError:  # not UTF-8, NaN, a key twice, too deep: said without a byte of it
            raise PeerError(f"its answer is not JSON ({len(body):,} bytes, not shown)") from None

    def get_object(self, path: str) -> dict[str, Any]:
        """:meth:`get_json`, and PeerError unless the answer is a JSON object."""
        doc = self.get_json(path)
        if not isinstance(doc, dict):
            raise PeerError("its answer is not a JSON object")
        return doc

    def refresh(self, force: bool = False) -> None:
        """Start a background re-read of the peer's ``/api/runs`` when none is in flight and the last one ended at
        least ``refresh_s`` ago (or ``force``), then wait for the read in flight at most :data:`WAIT_S` (until it
        ends when ``force``): a caller never waits on a slow peer beyond that, it gets the last listing or the
        peer's error (hostile round 7 F4). At most one read per peer is in flight; a failed one is retried no
        sooner than ``refresh_s`` after it ended."""
        with self._lock:
            if self._reading is None and (force or time.monotonic() - self._fetched >= self.refresh_s):
                self._reading = threading.Event()
                name = f"rollbench-peer-{self.url}"
                threading.Thread(target=self._read_listing, args=(self._reading,), name=name, daemon=True).start()
            reading = self._reading
        if reading is not None:
            reading.wait(None if force else WAIT_S)

    def _read_listing(self, done: threading.Event) -> None:
        try:
            doc = self.get_json("/api/runs")
            runs = [{**r, "source": self.url} for r in _local_runs(doc)]
        except (httpx.HTTPError, PeerError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            with self._lock:
                self.error = peer_failure(exc)
                self.stale_since = self.stale_since or self.last_ok or utc_now()
        else:
            with self._lock:
                self.runs = runs
                self.generation += 1
                self.hosts = sorted({r["host"] for r in runs})
                self.error, self.stale_since, self.last_ok = None, None, utc_now()
        finally:
            with self._lock:
                self._fetched = time.monotonic()  # when the read ended: the next one no sooner than refresh_s later
                self._reading = None
            done.set()

    def host_rows(self) -> list[dict[str, Any]]:
        base = {"source": self.url, "error": self.error, "stale_since": self.stale_since, "last_ok": self.last_ok}
        if not self.hosts:
            return [{"host": None, "runs": 0, **base}]
        return [{"host": h, "runs": sum(1 for r in self.runs if r["host"] == h), **base} for h in self.hosts]

    def episode_steps(self, key_path: str) -> dict[str, list[Any]]:
        """The ``steps`` of the peer's ``/api/episode/KEY``: PeerError unless they are the per-step lists a dashboard
        serves (:func:`checked_steps`)."""
        return checked_steps(self.get_object(f"/api/episode/{key_path}").get("steps"))

    def transcript(self, key_path: str) -> bytes:
        """The peer's ``/transcript/KEY`` text, at most :data:`MAX_TRANSCRIPT_BYTES` within :data:`TOTAL_S`."""
        return self.get_bytes(f"/transcript/{key_path}", MAX_TRANSCRIPT_BYTES)

    def cached_media(self, cache_dir: Path, run: dict[str, Any], episode_index: int, camera: str) -> Path:
        """The peer's video ``/media/KEY/CAMERA`` of episode ``episode_index`` of ``run`` (its summary as this peer
        listed it) as a local file of the cache (:mod:`rollbench.dashboard.media_cache`: keyed by this peer and the
        run's announced signature, used only while a regular file of the announced size; downloaded to a temporary
        file moved in when complete, at most :data:`MAX_MEDIA_BYTES` within :data:`MEDIA_TOTAL_S`). Raises
        httpx.HTTPError when the peer cannot deliver it, PeerError when it is too slow, too large or not of the size
        its listing announced (nothing is then kept), PeerError with status 503 at once when the entry is being
        downloaded already or the downloads in flight are at their bound (:func:`media_cache.download_slot`),
        UnsafeFile (an OSError) for a cache path through a link."""
        key_path = f"{run['key']}/{episode_index}"
        for seg in [*key_path.split("/"), camera]:
            check_segment(seg, "path segment")
        version, size = media_cache.announced(run, episode_index, camera)
        dest = media_cache.entry_path(cache_dir, self.url, key_path, camera, version)
        if media_cache.lookup(dest, size):
            return dest
        try:
            with media_cache.download_slot(self.url, dest):  # bounded downloads in flight (hostile round 16, F5)
                return self._download(f"/media/{key_path}/{quote(camera)}", dest, size, cache_dir)
        except media_cache.Busy as exc:
            raise PeerError(str(exc), status=503) from None

    def _download(self, path: str, dest: Path, size: int | None, cache_dir: Path) -> Path:
        """Download the peer's ``path`` into the cache entry ``dest`` (of ``size`` bytes when announced)."""
        if media_cache.lookup(dest, size):  # stored by another request since the lookup above
            return dest
        fd, tmp = media_cache.temp_file(dest)
        try:
            with os.fdopen(fd, "wb") as fh:
                self.fetch(path, fh.write, MAX_MEDIA_BYTES, MEDIA_TOTAL_S)
                got = fh.tell()
            if size is not None and got != size:
                raise PeerError(f"its video is {got:,} bytes, not the {size:,} its listing announced")
            media_cache.store(tmp, dest, cache_dir)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a partial, slow, oversized or mis-sized download is never left in the cache
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
        _check_summary(r, f"runs[{i}]")
        out.append(_with_central_routes(r, f"runs[{i}]"))
    return out


def _with_central_routes(run: dict[str, Any], where: str) -> dict[str, Any]:
    """The peer's run with every link the central dashboard draws (run page, episode review, transcript, video) and
    every episode key rebuilt from its checked identity, the central's own routes as for a local run: the peer's
    ``urls`` and video ``url`` strings are never used (hostile round 7 F3: a ``javascript:`` href, or a link to
    another run). A camera name that is not a path segment is a PeerError."""
    key = run["key"]
    episodes = []
    for j, ep in enumerate(run["episodes"]):
        e = ep["episode_index"]
        videos = {}
        for cam, v in ep["videos"].items():
            try:
                check_segment(cam, "camera")
            except Exception:
                raise PeerError(f"{where}.episodes[{j}] has a camera name that is not a path segment") from None
            if not isinstance(v, dict):
                raise PeerError(f"{where}.episodes[{j}] has a video that is not an object")
            size = v.get("size")
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
                raise PeerError(f"{where}.episodes[{j}] has a video size that is not a number of bytes")
            videos[cam] = {**v, "url": f"/media/{key}/{e}/{cam}"}
        sent = ep.get("urls")
        transcript = isinstance(sent, dict) and isinstance(sent.get("transcript"), str)
        urls = {"review": f"/episode/{key}/{e}", "transcript": f"/transcript/{key}/{e}" if transcript else None}
        episodes.append({**ep, "key": f"{key}/{e}", "urls": urls, "videos": videos})
    return {**run, "urls": {"page": f"/run/{key}", "api": f"/api/run/{key}"}, "episodes": episodes}


_NUMBER = (int, float, type(None))
# what the central dashboard's pages and API read from a peer's run summary, with the JSON types they need
# (rollbench.dashboard.summary.run_summary writes them): a missing one is named, never a KeyError or a 500
RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "env": (str, type(None)), "policy": (str, type(None)), "model": (str, type(None)), "status": (str,),
    "created": (str, type(None)), "tasks": (list,), "episodes_requested": (int,), "episodes_recorded": (int,),
    "success_rate": _NUMBER, "ci95_low": _NUMBER, "ci95_high": _NUMBER, "cameras": (list,), "fps": _NUMBER,
}  # fmt: skip
# read by the pages when present (an older peer may lack them): of their type, or the peer is bad
OPTIONAL_RUN_FIELDS: dict[str, tuple[type, ...]] = {
    "run_status": (str, type(None)), "successes": (int, type(None)), "scored": (int, type(None)),
    "coverage": _NUMBER, "scored_success_rate": _NUMBER, "scored_ci95_low": _NUMBER, "scored_ci95_high": _NUMBER,
    "excluded": (dict,), "policy_errors_as_failures": (int, type(None)), "errors_by_fault": (dict,),
    "violations": (list,), "live": (dict, type(None)), "stale": (bool,),
}  # fmt: skip
LIVE_FIELDS: dict[str, tuple[type, ...]] = {
    "episodes_done": (int, type(None)), "episodes_total": (int, type(None)), "eta_s": _NUMBER, "stale": (bool,),
}  # fmt: skip
EPISODE_FIELDS: dict[str, tuple[type, ...]] = {
    "episode_index": (int,), "task": (str,), "instruction": (str, type(None)), "length": (int,),
    "return": _NUMBER, "termination_reason": (str, type(None)), "videos": (dict,),
}  # fmt: skip


def _check_fields(doc: dict[str, Any], fields: dict[str, tuple[type, ...]], where: str, optional: bool = False) -> None:
    for name, types in fields.items():
        value = doc.get(name, ...)
        if value is ... and optional:
            continue
        if value is ... or not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise PeerError(f"{where} has no {name} of the type a dashboard serves")


def _check_summary(run: dict[str, Any], where: str) -> None:
    """PeerError naming the first field of a peer's run summary the central dashboard reads that is missing or of
    another JSON type (its value is never quoted)."""
    _check_fields(run, RUN_FIELDS, where)
    _check_fields(run, OPTIONAL_RUN_FIELDS, where, optional=True)
    if isinstance(run.get("live"), dict):
        _check_fields(run["live"], LIVE_FIELDS, f"{where}.live", optional=True)
    if not all(isinstance(k, int) and not isinstance(k, bool) for k in run.get("excluded", {}).values()):
        raise PeerError(f"{where} has no excluded of the type a dashboard serves")
    if not isinstance(run.get("signature"), str | None):  # optional: an older peer announces none
        raise PeerError(f"{where} has a signature that is not text")
    for j, ep in enumerate(run["episodes"]):
        _check_fields(ep, EPISODE_FIELDS, f"{where}.episodes[{j}]")


STEP_FIELDS = ("timestamp", "reward", "success", "action")


def checked_steps(steps: Any) -> dict[str, list[Any]]:
    """A peer's per-step timeline (``timestamp``, ``reward``, ``success``, ``action`` lists of one length; numbers
    or null, action rows lists of them; a null reward or action value is NaN, as the peer's NaN was sent);
    PeerError naming what is not."""
    if not isinstance(steps, dict) or not all(isinstance(steps.get(k), list) for k in STEP_FIELDS):
        raise PeerError("its episode answer has no steps with timestamp, reward, success and action lists")
    n = len(steps["reward"])
    if any(len(steps[k]) != n for k in STEP_FIELDS):
        raise PeerError("its episode answer has step lists of different lengths")

    def num(v: Any) -> float:
        if v is None:
            return float("nan")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise PeerError("its episode answer has a step value that is not a number")
        return float(v)

    actions = steps["action"]
    if not all(isinstance(row, list) for row in actions):
        raise PeerError("its episode answer has an action row that is not a list")
    return {
        "timestamp": [num(t) for t in steps["timestamp"]],
        "reward": [num(r) for r in steps["reward"]],
        "success": [bool(s) for s in steps["success"]],
        "action": [[num(v) for v in row] for row in actions],
    }


def _valid_identity(run: dict[str, Any]) -> bool:
    try:
        for k in ("host", "robot", "name"):
            check_segment(run[k], k)
    except Exception:
        return False
    return True
