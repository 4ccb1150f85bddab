"""A central dashboard over two peer dashboards (three real uvicorn servers on loopback ports), one of which is
stopped mid-test: runs listed under their identities, media fetched and cached, labels kept centrally, and a down
peer shown as an error with stale_since while the pages keep working."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dashboard_support import ServerThread, record_run


@pytest.mark.slow
def test_central_dashboard_lists_two_peers_and_survives_one_going_down(tmp_path: Path):
    record_run(tmp_path / "a" / "run-a", "hostA", policy="random", episodes=1)
    record_run(tmp_path / "b" / "run-b", "hostB", policy="scripted-expert", episodes=1)
    peer_a = ServerThread([tmp_path / "a"], tmp_path / "a-labels.json", cache_dir=tmp_path / "ca").start()
    peer_b = ServerThread(
        [tmp_path / "b"], tmp_path / "b-labels.json", token="tok-b-0123456789abcdef", cache_dir=tmp_path / "cb"
    ).start()
    central = ServerThread(
        [],
        tmp_path / "central-labels.json",
        peers=[peer_a.url, f"{peer_b.url}#tok-b-0123456789abcdef"],
        cache_dir=tmp_path / "central-cache",
        peer_refresh_s=0,
        annotator="lead",
    ).start()
    try:
        doc = httpx.get(central.url + "/api/runs").json()
        assert {r["key"]: r["source"] for r in doc["runs"]} == {
            "hostA/point/run-a": peer_a.url,
            "hostB/point/run-b": peer_b.url,
        }
        assert {(h["host"], h["source"], h["error"]) for h in doc["hosts"]} == {
            ("hostA", peer_a.url, None),
            ("hostB", peer_b.url, None),
        }
        # media of a peer's episode: fetched through the central dashboard (range requests work) and cached
        video = (tmp_path / "b/run-b/videos/observation.images.top/chunk-000/file-000.mp4").read_bytes()
        got = httpx.get(central.url + "/media/hostB/point/run-b/0/top")
        assert got.status_code == 200 and got.content == video
        assert (
            httpx.get(central.url + "/media/hostB/point/run-b/0/top", headers={"Range": "bytes=0-9"}).content
            == video[:10]
        )
        [cached] = (tmp_path / "central-cache/peer-media").rglob("*.mp4")  # keyed by peer and recording
        assert cached.read_bytes() == video and cached.parent.parts[-5:] == ("hostB", "point", "run-b", "0", "top")
        # the episode page of a peer's run (timeline fetched from the peer) and a label kept centrally
        page = httpx.get(central.url + "/episode/hostB/point/run-b/0")
        assert page.status_code == 200 and "timeline" in page.text
        r = httpx.post(central.url + "/api/label/hostB/point/run-b/0", json={"label": "succeeded", "note": "ok"})
        assert r.status_code == 200 and r.json()["entry"]["annotator"] == "lead"
        assert r.json()["entry"]["policy"] == "scripted-expert"
        assert not (tmp_path / "b-labels.json").exists()
        assert "hostB/point/run-b/0" in (tmp_path / "central-labels.json").read_text()

        peer_b.stop()  # host B goes down
        doc = httpx.get(central.url + "/api/runs").json()
        down = next(h for h in doc["hosts"] if h["source"] == peer_b.url)
        assert down["error"] and down["stale_since"] and down["host"] == "hostB"
        run_b = next(r for r in doc["runs"] if r["key"] == "hostB/point/run-b")
        assert run_b["stale"] is True and run_b["episodes"][0]["label"] == "succeeded"
        assert next(h for h in doc["hosts"] if h["source"] == peer_a.url)["error"] is None
        index = httpx.get(central.url + "/")
        assert index.status_code == 200 and "stale (peer down)" in index.text
        # the cached video still plays; an uncached one of the down peer is a 502, not a crash
        assert httpx.get(central.url + "/media/hostB/point/run-b/0/top").content == video
        assert httpx.get(central.url + "/media/hostB/point/run-b/0/side").status_code == 502
        assert httpx.get(central.url + "/episode/hostB/point/run-b/0").status_code == 200
    finally:
        central.stop()
        peer_a.stop()
        peer_b.stop()
