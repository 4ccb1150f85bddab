"""The central dashboard's cache of peers' videos (hostile round 14, F2): an entry belongs to one peer and one
recording of a run, so a run re-recorded under the same name, or another peer's run of the same identity, is never
shown with an old or foreign video; an entry that is not a regular file of the announced size is fetched again; the
cache keeps its bounds. Real dashboards on loopback (a real recorded run each) or a fixed-answer loopback peer; the
oracles are the MD5 of the video file the peer recorded on disk and the files under the cache directory."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from dashboard_support import ServerThread, fake_peer, peer_run
from rollbench.api import evaluate
from rollbench.dashboard import media_cache

pytestmark = pytest.mark.timeout(300)

VIDEO = "videos/observation.images.top/chunk-000/file-000.mp4"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def record(out: Path, host: str, seed: int) -> str:
    """Record a one-episode run with video (identity ``host/point/<out.name>``); the MD5 of its video file."""
    evaluate(
        env="scripted/reach", policy="random", episodes=1, seed=seed, video=True, image_size=(64, 64), out=out,
        host_label=host,
    )  # fmt: skip
    return md5((out / VIDEO).read_bytes())


def wait_for_seed(url: str, key: str, seed: int) -> None:
    """Until the central dashboard lists episode 0 of ``key`` with ``seed`` (its peer listing refreshed)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = httpx.get(url + "/api/runs", timeout=30).json()["runs"]
        run = next((r for r in runs if r["key"] == key), None)
        if run is not None and run["episodes"] and run["episodes"][0]["seed"] == seed:
            return
        time.sleep(0.2)
    raise AssertionError(f"the central dashboard never listed {key} with seed {seed}")


def cached_videos(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.mp4") if p.is_file())


@pytest.mark.slow
def test_a_peer_run_re_recorded_under_the_same_name_serves_the_new_video(tmp_path: Path) -> None:
    run = tmp_path / "peer" / "v"
    old = record(run, "vm", seed=0)
    peer = ServerThread([tmp_path / "peer"], tmp_path / "pl.json", cache_dir=tmp_path / "pc").start()
    central = ServerThread(
        [], tmp_path / "cl.json", peers=[peer.url], cache_dir=tmp_path / "cc", peer_refresh_s=0
    ).start()
    try:
        media = central.url + "/media/vm/point/v/0/top"
        assert md5(httpx.get(media, timeout=60).content) == old
        shutil.rmtree(run)
        new = record(run, "vm", seed=7)
        assert new != old  # the premise: another recording, another video
        wait_for_seed(central.url, "vm/point/v", 7)
        got = httpx.get(media, timeout=60)
        assert got.status_code == 200 and md5(got.content) == new
        # the old recording's entry was deleted when the new one was stored: one entry for the episode's camera
        assert [md5(p.read_bytes()) for p in cached_videos(tmp_path / "cc")] == [new]
    finally:
        central.stop()
        peer.stop()


@pytest.mark.slow
def test_two_peers_serving_the_same_identity_each_get_their_own_video(tmp_path: Path) -> None:
    # two hosts that both call themselves "vm" and recorded a run named "v": one identity, two recordings
    video_a = record(tmp_path / "a" / "v", "vm", seed=0)
    video_b = record(tmp_path / "b" / "v", "vm", seed=7)
    assert video_a != video_b
    peer_a = ServerThread([tmp_path / "a"], tmp_path / "al.json", cache_dir=tmp_path / "ac").start()
    peer_b = ServerThread([tmp_path / "b"], tmp_path / "bl.json", cache_dir=tmp_path / "bc").start()
    try:
        for url, expected in ((peer_a.url, video_a), (peer_b.url, video_b), (peer_a.url, video_a)):
            # a central dashboard restarted over the same cache with another --peer serving the identity
            central = ServerThread([], tmp_path / "cl.json", peers=[url], cache_dir=tmp_path / "cc").start()
            try:
                got = httpx.get(central.url + "/media/vm/point/v/0/top", timeout=60)
                assert got.status_code == 200 and md5(got.content) == expected
            finally:
                central.stop()
        assert sorted(md5(p.read_bytes()) for p in cached_videos(tmp_path / "cc")) == sorted([video_a, video_b])
    finally:
        peer_a.stop()
        peer_b.stop()


@pytest.mark.slow
def test_a_cached_video_that_is_not_a_regular_file_of_the_announced_size_is_fetched_again(tmp_path: Path) -> None:
    video = record(tmp_path / "peer" / "v", "vm", seed=0)
    size = (tmp_path / "peer" / "v" / VIDEO).stat().st_size
    peer = ServerThread([tmp_path / "peer"], tmp_path / "pl.json", cache_dir=tmp_path / "pc").start()
    central = ServerThread([], tmp_path / "cl.json", peers=[peer.url], cache_dir=tmp_path / "cc").start()
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(b"x" * size)  # the announced size, other bytes: reached only through a link
    try:
        media = central.url + "/media/vm/point/v/0/top"
        assert md5(httpx.get(media, timeout=60).content) == video
        [entry] = cached_videos(tmp_path / "cc")
        entry.write_bytes(b"truncated")  # another size than the peer announced
        assert md5(httpx.get(media, timeout=60).content) == video
        entry.unlink()
        entry.symlink_to(outside)  # a link in its place
        got = httpx.get(media, timeout=60)
        assert got.status_code == 200 and md5(got.content) == video
        assert not entry.is_symlink() and outside.read_bytes() == b"x" * size  # replaced, the target untouched
    finally:
        central.stop()
        peer.stop()


def listing(episodes: int, size: int | None = None, host: str = "h") -> bytes:
    run = peer_run(host=host, episodes=episodes)
    for ep in run["episodes"]:
        ep["videos"] = {"top": {"url": "/x", "ready": True, "from_s": 0.0, "to_s": 1.0, "size": size}}
    return json.dumps({"runs": [run]}).encode()


def test_a_video_of_another_size_than_the_listing_announced_is_a_502_and_nothing_is_kept(tmp_path: Path) -> None:
    with fake_peer(b"V" * 450, runs_listing=listing(1, size=10)) as url:
        central = ServerThread([], tmp_path / "cl.json", peers=[url], cache_dir=tmp_path / "cc").start()
        try:
            got = httpx.get(central.url + "/media/h/r/n/0/top", timeout=60)
        finally:
            central.stop()
    assert got.status_code == 502 and "450 bytes, not the 10 its listing announced" in got.text
    assert [p for p in (tmp_path / "cc").rglob("*") if p.is_file()] == []


def test_the_cache_keeps_at_most_its_bound_of_videos_the_least_recently_used_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(media_cache, "MAX_CACHED_VIDEOS", 2)
    with fake_peer(b"V" * 450, runs_listing=listing(3)) as url:
        central = ServerThread([], tmp_path / "cl.json", peers=[url], cache_dir=tmp_path / "cc").start()
        try:
            for e in (0, 1, 0, 2):  # episode 0 is used again after 1: episode 1 is the least recently used
                assert httpx.get(f"{central.url}/media/h/r/n/{e}/top", timeout=60).status_code == 200
                time.sleep(0.05)  # distinct mtimes
        finally:
            central.stop()
    peer_dir = tmp_path / "cc" / "peer-media" / hashlib.sha256(url.encode()).hexdigest()[:16]
    kept = sorted(str(p.relative_to(peer_dir).parent) for p in cached_videos(tmp_path / "cc"))
    assert kept == ["h/r/n/0/top", "h/r/n/2/top"]
    assert not (peer_dir / "h/r/n/1").exists()  # its emptied directories removed too
    assert sorted(os.listdir(tmp_path / "cc")) == ["peer-media"]


@pytest.mark.slow
def test_slow_peer_downloads_are_bounded_and_the_central_pages_answer_while_they_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile round 16, F5: before, every /media request for a dripping peer's video held a worker thread for up to
    60 s and ~60 of them stalled the central dashboard's own pages. Now at most MAX_DOWNLOADS_PER_PEER (2) downloads
    per peer and MAX_DOWNLOADS in all are in flight, one per video; a request past them is a 503 at once, and the
    pages answer while the downloads run; the downloads themselves still complete with the peer's bytes."""
    monkeypatch.setattr(media_cache, "MAX_DOWNLOADS", 3)
    body = bytes(range(100))  # one byte every 0.2 s until the test has looked (then the rest): within the 60 s bound
    gate = threading.Event()
    with (
        fake_peer(body, drip_s=0.2, runs_listing=listing(3), gate=gate) as a,
        fake_peer(body, drip_s=0.2, runs_listing=listing(3, host="g"), gate=gate) as b,
    ):
        central = ServerThread([], tmp_path / "cl.json", peers=[a, b], cache_dir=tmp_path / "cc").start()
        try:
            keys = {r["key"] for r in httpx.get(central.url + "/api/runs", timeout=60).json()["runs"]}
            assert keys == {"h/r/n", "g/r/n"}
            slow = ["/media/h/r/n/0/top", "/media/h/r/n/1/top", "/media/g/r/n/0/top"]
            with ThreadPoolExecutor(len(slow)) as pool:
                downloads = [pool.submit(httpx.get, central.url + p, timeout=120) for p in slow]
                deadline = time.monotonic() + 60
                while len(media_cache._DOWNLOADS) < len(slow):  # all three reached the peers (white-box wait only)
                    assert time.monotonic() < deadline and not any(f.done() for f in downloads)
                    time.sleep(0.1)
                over = {p: httpx.get(central.url + p, timeout=60) for p in
                        ("/media/h/r/n/2/top", "/media/g/r/n/1/top", "/media/h/r/n/0/top")}  # fmt: skip
                pages = [httpx.get(central.url + p, timeout=60) for p in ("/", "/api/runs")]
                in_flight = not any(f.done() for f in downloads)
                gate.set()
                done = [f.result() for f in downloads]
            again = httpx.get(central.url + "/media/g/r/n/1/top", timeout=120)  # its slot was given back
        finally:
            central.stop()
    assert [r.status_code for r in over.values()] == [503, 503, 503]
    per_peer, in_all, same = (r.json()["error"] for r in over.values())
    assert (
        per_peer == f"peer {a}: 2 of its videos are being fetched (at most 2 per peer at once); retry in a few seconds"
    )
    assert in_all == f"peer {b}: 3 peer videos are being fetched (at most 3 at once); retry in a few seconds"
    assert same == f"peer {a}: this video is being fetched by another request; retry in a few seconds"
    assert [r.status_code for r in pages] == [200, 200] and in_flight
    assert [(r.status_code, r.content) for r in done] == [(200, body)] * 3
    assert (again.status_code, again.content) == (200, body)
