"""A peer's transcript and video are fetched with the same bounds as its listing (issue 42, B): a peer that drips
its answer is cut off at a total deadline (504), one that answers more than the cap is cut off (502), and a
video over the cap is never kept in ``--cache-dir``; the central dashboard's answer is a short JSON error that
never echoes the peer's bytes. The peer is a real loopback HTTP server (a bounded thread per request); the oracles
are the status codes, the cache directory's files and the marker bytes the peer sent."""

from __future__ import annotations

import json
import re
import time
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from dashboard_support import ServerThread, fake_peer, peer_run
from rollbench.dashboard import peers

pytestmark = pytest.mark.timeout(120)

RUN = peer_run()
MARKER = b"PEERBODY-"
DRIP_BYTES = 150  # at 0.1 s a byte: 15 s for the whole answer, far past the 1 s deadline of these tests


def peer(body: bytes, drip_s: float = 0.0) -> AbstractContextManager[str]:
    """A peer answering /api/runs with one run at once and every other GET with ``body`` (dripped when ``drip_s``)."""
    return fake_peer(body, drip_s, runs_listing=json.dumps({"runs": [RUN]}).encode())


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "TOTAL_S", 1.0)
    monkeypatch.setattr(peers, "MEDIA_TOTAL_S", 1.0)
    monkeypatch.setattr(peers, "MAX_TRANSCRIPT_BYTES", 1000)
    monkeypatch.setattr(peers, "MAX_MEDIA_BYTES", 100_000)


def ask(url: str, path: str, cache: Path) -> tuple[httpx.Response, float]:
    srv = ServerThread([], cache.parent / "labels.json", cache_dir=cache, peers=[url]).start()
    try:
        started = time.monotonic()
        r = httpx.get(srv.url + path, timeout=60)
        return r, time.monotonic() - started
    finally:
        srv.stop()


def cached_files(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


@pytest.mark.parametrize("path", ["/transcript/h/r/n/0", "/media/h/r/n/0/top"])
def test_a_dripping_peer_gets_a_504_at_the_deadline_and_nothing_is_cached(
    small_bounds: None, tmp_path: Path, path: str
) -> None:
    with peer(MARKER * (DRIP_BYTES // len(MARKER)), drip_s=0.1) as url:
        r, took = ask(url, path, tmp_path / "cache")
    assert r.status_code == 504
    assert r.headers["content-type"].startswith("application/json")
    assert "took over 1 s" in r.text and MARKER not in r.content
    assert took < DRIP_BYTES * 0.1 / 2  # answered, not read to the peer's end (generous: a loaded machine)
    assert cached_files(tmp_path / "cache") == []


@pytest.mark.parametrize(("path", "cap"), [("/transcript/h/r/n/0", 1000), ("/media/h/r/n/0/top", 100_000)])
def test_a_peer_answer_over_the_cap_gets_a_502_and_nothing_is_kept(
    small_bounds: None, tmp_path: Path, path: str, cap: int
) -> None:
    with peer(MARKER * (3 * cap // len(MARKER))) as url:
        r, _ = ask(url, path, tmp_path / "cache")
    assert r.status_code == 502
    assert f"over {cap:,} bytes" in r.text and MARKER not in r.content
    assert len(r.content) < 500
    assert cached_files(tmp_path / "cache") == []


@pytest.mark.parametrize("path", ["/transcript/h/r/n/0", "/media/h/r/n/0/top"])
def test_a_peer_answer_within_the_bounds_is_served_and_a_video_cached(
    small_bounds: None, tmp_path: Path, path: str
) -> None:
    body = MARKER * 50
    with peer(body) as url:
        r, _ = ask(url, path, tmp_path / "cache")
    assert r.status_code == 200 and r.content == body
    files = cached_files(tmp_path / "cache")
    if path.startswith("/media"):  # peer-media/PEER/h/r/n/0/top/VERSION.mp4 (rollbench.dashboard.media_cache)
        assert len(files) == 1 and re.fullmatch(r"peer-media/[0-9a-f]{16}/h/r/n/0/top/[0-9a-f]{32}\.mp4", files[0])
    else:
        assert files == []
