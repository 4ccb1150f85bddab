"""One bad peer costs only itself (issue 42, item 11): a peer that drips its answer is cut off at a total deadline
(not per read), one that answers too much is cut off at a size bound, and one whose listing has odd types or
missing keys is marked bad; the central dashboard's listing still answers 200 with its own runs. Oracles: the
served bytes themselves and the central listing's status and rows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from dashboard_support import fake_peer
from rollbench.api import evaluate
from rollbench.dashboard import peers
from rollbench.dashboard.peers import Peer

GOOD_RUN = {
    "source": "local",
    "host": "h",
    "robot": "r",
    "name": "n",
    "key": "h/r/n",
    "episodes": [{"key": "h/r/n/0", "success": True}],
}


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


BAD_LISTINGS = {
    "a list": [GOOD_RUN],
    "runs an object": {"runs": {"a": 1}},
    "a run a string": {"runs": ["x"]},
    "a run without a key": {"runs": [{k: v for k, v in GOOD_RUN.items() if k != "key"}]},
    "a key of another run": {"runs": [{**GOOD_RUN, "key": "x/y/z"}]},
    "episodes a number": {"runs": [{**GOOD_RUN, "episodes": 3}]},
    "an episode without a key": {"runs": [{**GOOD_RUN, "episodes": [{"success": True}]}]},
    "success a string": {"runs": [{**GOOD_RUN, "episodes": [{"key": "h/r/n/0", "success": "yes"}]}]},
    "a host that is not a segment": {"runs": [{**GOOD_RUN, "host": "../x", "key": "../x/r/n"}]},
    "a number for the name": {"runs": [{**GOOD_RUN, "name": 5}]},
}


@pytest.mark.parametrize("case", sorted(BAD_LISTINGS))
@pytest.mark.slow
def test_a_malformed_peer_listing_marks_only_that_peer_bad(case: str) -> None:
    with fake_peer(json.dumps(BAD_LISTINGS[case]).encode()) as url:
        p = _refreshed(url)
    assert p.error is not None and p.runs == []


@pytest.mark.slow
def test_the_central_listing_answers_with_its_own_runs_beside_bad_peers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard_support import ServerThread, fake_peer

    monkeypatch.setattr(peers, "TOTAL_S", 1.0)
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
