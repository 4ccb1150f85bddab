"""One bad peer costs only itself (issue 42, item 11): a peer that drips its answer is cut off at a total deadline
(not per read), one that answers too much is cut off at a size bound, and one whose listing has odd types or
missing keys is marked bad; the central dashboard's listing still answers 200 with its own runs. Oracles: the
served bytes themselves and the central listing's status and rows."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard_support import ServerThread, fake_peer, peer_run
from raw_servers import raw_server
from rollbench.api import evaluate
from rollbench.dashboard import peers
from rollbench.dashboard.peers import Peer

GOOD_RUN = peer_run()


def _refreshed(url: str) -> Peer:
    p = Peer(url, None)
    p.refresh(force=True)
    return p


def test_a_good_peer_listing_is_taken() -> None:
    with fake_peer(json.dumps({"runs": [GOOD_RUN]}).encode()) as url:
        p = _refreshed(url)
    assert p.error is None and [r["key"] for r in p.runs] == ["h/r/n"]


def test_a_dripping_peer_is_cut_off_at_the_total_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "TOTAL_S", 1.0)
    body = json.dumps({"runs": [GOOD_RUN]}).encode()
    with fake_peer(body, drip_s=0.2) as url:  # each read well inside the per-read timeout; the whole far beyond
        started = time.monotonic()
        p = _refreshed(url)
        took = time.monotonic() - started
    assert p.error is not None and "took over 1 s" in p.error and p.runs == []
    assert took < len(body) * 0.2 / 2  # cut off, not read to the end (generous: a loaded machine)


def test_a_peer_answering_too_much_is_cut_off_at_the_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "MAX_ANSWER_BYTES", 1000)
    with fake_peer(json.dumps({"runs": [GOOD_RUN] * 100}).encode()) as url:
        p = _refreshed(url)
    assert p.error is not None and "over 1,000 bytes" in p.error


EP0 = GOOD_RUN["episodes"][0]
NOT_LISTING = "PeerError: its answer is not an object with a list of runs"
NO_IDENTITY = "PeerError: runs[0] has no valid host, robot, name and key"
NO_EPISODES = "PeerError: runs[0] has no list of episodes with a key and a success"


def _without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != key}


def _episode(**change: Any) -> dict[str, Any]:
    return {"runs": [{**GOOD_RUN, "episodes": [{**EP0, **change}]}]}


def _field(name: str, where: str = "runs[0]") -> str:
    return f"PeerError: {where} has no {name} of the type a dashboard serves"


# (listing, the peer's error as the central dashboard names it: written by hand)
BAD_LISTINGS: dict[str, tuple[Any, str]] = {
    "a list": ([GOOD_RUN], NOT_LISTING),
    "runs an object": ({"runs": {"a": 1}}, NOT_LISTING),
    "a run a string": ({"runs": ["x"]}, "PeerError: runs[0] is not an object"),
    "a run without a key": ({"runs": [_without(GOOD_RUN, "key")]}, NO_IDENTITY),
    "a key of another run": ({"runs": [{**GOOD_RUN, "key": "x/y/z"}]}, NO_IDENTITY),
    "episodes a number": ({"runs": [{**GOOD_RUN, "episodes": 3}]}, NO_EPISODES),
    "an episode without a key": (_episode(key=None), NO_EPISODES),
    "success a string": (_episode(success="yes"), NO_EPISODES),
    "a host that is not a segment": ({"runs": [{**GOOD_RUN, "host": "../x", "key": "../x/r/n"}]}, NO_IDENTITY),
    "a number for the name": ({"runs": [{**GOOD_RUN, "name": 5}]}, NO_IDENTITY),
    # hostile round 6, F6: fields the pages read (a KeyError and a 500 before)
    "no model": ({"runs": [_without(GOOD_RUN, "model")]}, _field("model")),
    "fps a string": ({"runs": [{**GOOD_RUN, "fps": "10"}]}, _field("fps")),
    "a boolean success rate": ({"runs": [{**GOOD_RUN, "success_rate": True}]}, _field("success_rate")),
    "tasks a string": ({"runs": [{**GOOD_RUN, "tasks": "scripted/reach"}]}, _field("tasks")),
    "an episode without an index": (
        {"runs": [{**GOOD_RUN, "episodes": [_without(EP0, "episode_index")]}]},
        _field("episode_index", "runs[0].episodes[0]"),
    ),
    "an episode index a boolean": (_episode(episode_index=True), _field("episode_index", "runs[0].episodes[0]")),
    "a return a string": (_episode(**{"return": "1.0"}), _field("return", "runs[0].episodes[0]")),
    # hostile round 7, F3: a peer's video names become the central's /media routes
    "a camera name that is not a segment": (
        _episode(videos={"../x": {"ready": True}}),
        "PeerError: runs[0].episodes[0] has a camera name that is not a path segment",
    ),
    "a video that is not an object": (
        _episode(videos={"front": "javascript:x"}),
        "PeerError: runs[0].episodes[0] has a video that is not an object",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_LISTINGS))
@pytest.mark.slow
def test_a_malformed_peer_listing_marks_only_that_peer_bad_and_names_why(case: str) -> None:
    listing, error = BAD_LISTINGS[case]
    with fake_peer(json.dumps(listing).encode()) as url:
        p = _refreshed(url)
    assert p.error == error and p.runs == []


@pytest.mark.slow
def test_the_central_listing_answers_with_its_own_runs_beside_bad_peers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peers, "TOTAL_S", 1.0)
    monkeypatch.setattr(peers, "WAIT_S", 60.0)  # the first listing waits for both peers' reads to end (within 1 s)
    evaluate(out=tmp_path / "runs" / "mine", env="scripted/reach", policy="zero", episodes=1, max_steps=2, seed=1)
    odd = json.dumps({"runs": [{**GOOD_RUN, "episodes": 3}]}).encode()
    with fake_peer(odd) as bad1, fake_peer(json.dumps({"runs": [GOOD_RUN]}).encode(), drip_s=0.2) as bad2:
        srv = ServerThread([tmp_path / "runs"], tmp_path / "labels.json", cache_dir=tmp_path / "c", peers=[bad1, bad2])
        srv.start()
        try:
            r = httpx.get(srv.url + "/api/runs", timeout=120)
        finally:
            srv.stop()
    assert r.status_code == 200
    doc = r.json()
    assert [row["key"].rsplit("/", 1)[-1] for row in doc["runs"]] == ["mine"]
    assert sum(1 for h in doc["hosts"] if h.get("error")) == 2


def _drip(conn: socket.socket, _: bytes) -> None:
    """A peer that answers 200 at once, then one byte of its body every 0.5 s (hostile round 7 F4's mode ``drip``)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(1000):
        conn.sendall(b" ")
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_dripping_peer_never_holds_up_the_central_dashboards_requests(tmp_path: Path) -> None:
    """Hostile round 7 F4: before, every request waited out the peer's 10 s read and parallel ones queued (10, 20,
    30... s). Now 8 parallel requests to the pages and APIs that list peers all answer within 8 s of being sent
    (a request waits at most WAIT_S = 1 s on a read in flight; the peer's read itself takes TOTAL_S = 10 s), only
    one read reaches the peer, and once it is cut off the peer is named bad in rollbench's words."""
    paths = ["/", "/api/runs", "/api/labels", "/disagreements"] * 2
    with raw_server(_drip) as (port, seen):
        url = f"http://127.0.0.1:{port}"
        srv = ServerThread([], tmp_path / "labels.json", cache_dir=tmp_path / "c", peers=[url]).start()
        try:
            with ThreadPoolExecutor(len(paths)) as pool:
                got = list(pool.map(lambda p: httpx.get(srv.url + p, timeout=8), paths))
            assert [r.status_code for r in got] == [200] * len(paths)
            deadline = time.monotonic() + 60
            while (host := httpx.get(srv.url + "/api/runs", timeout=8).json()["hosts"][0])["error"] is None:
                assert time.monotonic() < deadline
                time.sleep(0.5)
            reads = len(seen)
        finally:
            srv.stop()
    assert host["source"] == url and host["error"] == "PeerError: its answer took over 10 s"
    assert reads == 1
