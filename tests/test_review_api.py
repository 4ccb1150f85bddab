"""The review dashboard's HTTP API against a real uvicorn server on loopback, over real recorded runs (scripted env
with video): every endpoint, every refusal, and that nothing is written inside run directories."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from dashboard_support import ServerThread, record_run
from rollbench.grading.grade import grade


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    record_run(root / "rand", "hostA", policy="random", episodes=2)
    record_run(root / "expert", "hostA", policy="scripted-expert", episodes=2)
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("SECRET-BYTES")
    # a copy whose episode rows name transcripts: one inside the run, one escaping it, and a symlinked video
    tr = root / "transcripts"
    shutil.copytree(root / "rand", tr)
    (tr / "transcripts").mkdir()
    (tr / "transcripts" / "ep0.txt").write_text("agent: moving to the goal")
    meta = tr / "meta/episodes/chunk-000"
    for f, value in (("file-000.parquet", "transcripts/ep0.txt"), ("file-001.parquet", "../../outside/secret.txt")):
        t = pq.read_table(meta / f)
        pq.write_table(t.append_column("rollbench/transcript", pa.array([value], pa.string())), meta / f)
    video = tr / "videos/observation.images.top/chunk-000/file-001.mp4"
    video.unlink()
    video.symlink_to(outside)
    return root


@pytest.fixture(scope="module")
def server(runs_root: Path, tmp_path_factory: pytest.TempPathFactory):
    labels = tmp_path_factory.mktemp("labels") / "labels.json"
    srv = ServerThread([runs_root], labels, annotator="ana", cache_dir=labels.parent / "cache").start()
    yield srv
    srv.stop()


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.lstat().st_mtime_ns, p.lstat().st_size) for p in sorted(root.rglob("*"))}


def test_runs_lists_every_run_under_its_identity_with_episode_urls(server: ServerThread, runs_root: Path):
    doc = httpx.get(server.url + "/api/runs").json()
    assert {r["key"] for r in doc["runs"]} == {"hostA/point/rand", "hostA/point/expert", "hostA/point/transcripts"}
    assert doc["generated_at"].endswith("Z") and doc["rubric"]["id"] == "outcome-v1"
    assert doc["hosts"] == [{"host": "hostA", "source": "local", "runs": 3, "error": None, "stale_since": None}]
    rand = next(r for r in doc["runs"] if r["name"] == "rand")
    graded = grade(runs_root / "rand", check_videos=False)
    assert rand["status"] == graded.status and rand["successes"] == graded.overall.successes
    ep = rand["episodes"][1]
    assert ep["key"] == "hostA/point/rand/1" and ep["video_ready"] is True
    assert ep["videos"]["top"]["url"] == "/media/hostA/point/rand/1/top"
    assert ep["urls"] == {"review": "/episode/hostA/point/rand/1", "transcript": None}
    assert ep["label"] is None and rand["labeled"] == 0


def test_run_detail_numbers_are_the_graded_ones(server: ServerThread, runs_root: Path):
    d = httpx.get(server.url + "/api/run/hostA/point/expert").json()
    graded = grade(runs_root / "expert", check_videos=False).to_json()
    assert d["results"]["tasks"] == json.loads(json.dumps(graded["tasks"]))
    assert d["results"]["overall"] == graded["overall"] and len(d["episodes"]) == 2


@pytest.mark.parametrize(
    "path, status",
    [
        ("/api/run/hostA/point/nope", 404),
        ("/api/run/hostA/point/..", 404),
        ("/api/run/hostA/.point/rand", 400),
        ("/api/run/hostA/point/rand%2F..%2F..", 404),
        ("/api/episode/hostA/point/rand/99", 404),
        ("/api/episode/hostA/point/rand/-1", 400),
        ("/api/label/hostA/point/rand/7", 404),
    ],
)
def test_bad_or_unknown_identities_are_refused(server: ServerThread, path: str, status: int):
    resp = httpx.get(server.url + path)
    assert resp.status_code == status and "error" in resp.json()


def test_episode_detail_has_the_timeline_from_the_data_file(server: ServerThread, runs_root: Path):
    d = httpx.get(server.url + "/api/episode/hostA/point/rand/0").json()
    rows = pq.read_table(runs_root / "rand/data/chunk-000/file-000.parquet").to_pylist()
    assert d["steps"]["reward"] == [r["next.reward"] for r in rows]
    assert d["steps"]["action"] == [r["action"] for r in rows]
    assert d["episode"]["seed"] == 0 and d["nav"]["next"] == "/episode/hostA/point/rand/1"


def test_label_set_relabel_clear_and_its_errors(server: ServerThread):
    url = server.url + "/api/label/hostA/point/expert/0"
    r = httpx.post(url, json={"label": "failed", "note": "arm froze"})
    assert r.status_code == 200 and r.json()["entry"]["annotator"] == "ana"
    assert r.json()["entry"]["status"] == "success" and r.json()["entry"]["task"] == "scripted/reach"
    httpx.post(url, json={"label": "succeeded", "note": ""})
    entry = httpx.get(url).json()["entry"]
    assert entry["label"] == "succeeded" and [h["label"] for h in entry["history"]] == ["failed"]
    bad = httpx.post(url, json={"label": "great"})
    assert bad.status_code == 400 and "succeeded, partial, failed, no_attempt, invalid" in bad.json()["error"]
    assert httpx.post(url, content=b"x" * 70_000, headers={"Content-Type": "application/json"}).status_code == 413
    assert httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"}).status_code == 400
    deep = httpx.post(url, content=b"[" * 30_000 + b"]" * 30_000, headers={"Content-Type": "application/json"})
    assert (deep.status_code, deep.json()) == (
        400,
        {"error": "the body is not JSON (UTF-8, finite numbers, each key once, at most 32 deep)"},
    )  # not a plain-text 500
    assert httpx.post(url, json={"label": "failed", "colour": 1}).status_code == 400
    assert httpx.post(url, data={"label": "failed"}).status_code == 415  # an HTML form cannot write
    cross = httpx.post(url, json={"label": "failed"}, headers={"Origin": "http://evil.example"})
    assert cross.status_code == 403
    assert httpx.post(server.url + "/api/label/hostA/point/expert/9", json={"label": "failed"}).status_code == 404
    assert httpx.get(url).json()["entry"]["label"] == "succeeded"  # none of the refused writes landed
    r = httpx.post(url, json={"label": None})
    assert r.status_code == 200 and httpx.get(url).json()["entry"]["label"] is None


def test_labels_totals_csv_quoting_and_formula_neutralising(server: ServerThread):
    note = 'says "done", then\nmoves on'
    httpx.post(server.url + "/api/label/hostA/point/rand/0", json={"label": "succeeded", "note": note})
    httpx.post(server.url + "/api/label/hostA/point/rand/1", json={"label": "partial", "note": "=HYPERLINK(1)"})
    totals = httpx.get(server.url + "/api/labels").json()
    assert totals["per_label"]["succeeded"] >= 1 and totals["per_task"]["scripted/reach"]["partial"] == 1
    assert "random" in totals["per_model"]
    assert {
        "key": "hostA/point/rand/0",
        "label": "succeeded",
        "success": False,
        "termination_reason": "max_steps",
        "task": "scripted/reach",
        "policy": "random",
        "review_url": "/episode/hostA/point/rand/0",
    } in totals["disagreements"]
    resp = httpx.get(server.url + "/api/labels.csv")
    assert resp.headers["content-type"].startswith("text/csv")
    rows = {r["key"]: r for r in csv.DictReader(io.StringIO(resp.text))}
    assert rows["hostA/point/rand/0"]["note"] == note
    assert rows["hostA/point/rand/1"]["note"] == "'=HYPERLINK(1)"
    assert rows["hostA/point/rand/1"]["status"] == "failure" and rows["hostA/point/rand/1"]["annotator"] == "ana"
    runs = httpx.get(server.url + "/api/runs").json()
    assert any(d["key"] == "hostA/point/rand/0" for d in runs["disagreements"])


def test_media_supports_range_requests(server: ServerThread, runs_root: Path):
    url = server.url + "/media/hostA/point/rand/0/top"
    data = (runs_root / "rand/videos/observation.images.top/chunk-000/file-000.mp4").read_bytes()
    full = httpx.get(url)
    assert full.status_code == 200 and full.content == data and full.headers["content-type"] == "video/mp4"
    part = httpx.get(url, headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == data[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{len(data)}"
    assert httpx.get(url, headers={"Range": f"bytes={len(data) + 10}-"}).status_code == 416


@pytest.mark.parametrize(
    "path",
    [
        "/media/hostA/point/transcripts/1/top",  # a recorded video that is a symlink out of the root
        "/transcript/hostA/point/transcripts/1",  # a recorded transcript path escaping the run directory
        "/media/hostA/point/rand/0/..%2F..%2F..%2Fetc%2Fpasswd",
        "/media/hostA/point/rand/0/%2Fetc%2Fpasswd",
        "/media/..%2F..%2F/point/rand/0/top",
        "/media/hostA/point/rand/0/..",
        "/static/..%2F..%2Fcatalog.py",
        "/static/%2Fetc%2Fpasswd",
    ],
)
def test_traversal_and_escaping_paths_are_refused_without_bytes(server: ServerThread, path: str):
    resp = httpx.get(server.url + path)
    assert 400 <= resp.status_code < 500
    assert b"SECRET-BYTES" not in resp.content and b"root:" not in resp.content and b"import" not in resp.content


def test_a_recorded_transcript_is_served_and_linked(server: ServerThread):
    ep = httpx.get(server.url + "/api/episode/hostA/point/transcripts/0").json()["episode"]
    assert ep["urls"]["transcript"] == "/transcript/hostA/point/transcripts/0"
    assert httpx.get(server.url + ep["urls"]["transcript"]).text == "agent: moving to the goal"


def test_a_sparse_transcript_is_not_served_and_the_answer_says_why(runs_root: Path, server: ServerThread):
    """A 20 GiB transcript of one hole was streamed whole to whoever asked (hostile round 19's left-over)."""
    path = runs_root / "transcripts/transcripts/ep0.txt"
    text = path.read_text()
    try:
        os.truncate(path, 20 << 30)
        resp = httpx.get(server.url + "/transcript/hostA/point/transcripts/0")
        assert resp.status_code == 422
        assert resp.json()["error"].startswith(
            "the transcript of hostA/point/transcripts/0 is not served (21,474,836,480 bytes, over the 268,435,456"
        )
    finally:
        path.write_text(text)
    assert httpx.get(server.url + "/transcript/hostA/point/transcripts/0").text == text


def test_pages_render(server: ServerThread):
    for path in ("/", "/run/hostA/point/rand", "/episode/hostA/point/rand/1", "/disagreements"):
        resp = httpx.get(server.url + path)
        assert resp.status_code == 200 and "<html" in resp.text and "https://" not in resp.text


def test_dashboard_never_writes_inside_run_directories(runs_root: Path, tmp_path: Path):
    before = _tree(runs_root)
    srv = ServerThread([runs_root], tmp_path / "l.json", annotator="ana", cache_dir=tmp_path / "c").start()
    try:
        for p in ("/api/runs", "/", "/episode/hostA/point/rand/0", "/media/hostA/point/rand/0/top", "/api/labels.csv"):
            httpx.get(srv.url + p)
        httpx.post(srv.url + "/api/label/hostA/point/rand/0", json={"label": "failed"})
    finally:
        srv.stop()
    assert _tree(runs_root) == before and (tmp_path / "l.json").exists()


def test_live_progress_turns_stale(runs_root: Path, tmp_path: Path):
    run = tmp_path / "root" / "live"
    shutil.copytree(runs_root / "expert", run)
    live = {"episodes_done": 1, "episodes_total": 4, "eta_s": 3.0, "updated": "x"}
    (run / "run.live.json").write_text(json.dumps(live))
    srv = ServerThread([tmp_path / "root"], tmp_path / "l.json", stale_after_s=60, cache_dir=tmp_path / "c").start()
    try:
        got = httpx.get(srv.url + "/api/runs").json()["runs"][0]["live"]
        assert (got["episodes_done"], got["episodes_total"], got["stale"]) == (1, 4, False)
        old = time.time() - 3600
        os.utime(run / "run.live.json", (old, old))
        assert httpx.get(srv.url + "/api/runs").json()["runs"][0]["live"]["stale"] is True
    finally:
        srv.stop()


def test_a_live_file_with_counts_of_another_type_shows_them_unknown_and_a_central_still_lists_the_peer(
    runs_root: Path, tmp_path: Path
):
    run = tmp_path / "root" / "live"
    shutil.copytree(runs_root / "expert", run)
    (run / "run.live.json").write_text(json.dumps({"episodes_done": "1", "episodes_total": True, "eta_s": [3]}))
    peer = ServerThread([tmp_path / "root"], tmp_path / "l.json", cache_dir=tmp_path / "c").start()
    central = ServerThread([], tmp_path / "cl.json", peers=[peer.url], cache_dir=tmp_path / "cc").start()
    try:
        got = httpx.get(peer.url + "/api/runs").json()["runs"][0]["live"]
        assert (got["episodes_done"], got["episodes_total"], got["eta_s"]) == (None, None, None)
        listing = httpx.get(central.url + "/api/runs").json()
        assert [h["error"] for h in listing["hosts"]] == [None]
        assert [r["key"] for r in listing["runs"]] == [httpx.get(peer.url + "/api/runs").json()["runs"][0]["key"]]
    finally:
        central.stop()
        peer.stop()


def test_token_is_required_from_header_or_cookie(runs_root: Path, tmp_path: Path):
    srv = ServerThread([runs_root], tmp_path / "l.json", token="s3cret-0123456789ab", cache_dir=tmp_path / "c").start()
    try:
        assert httpx.get(srv.url + "/api/runs").status_code == 401
        assert httpx.get(srv.url + "/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            httpx.get(srv.url + "/api/runs", headers={"Authorization": "Bearer s3cret-0123456789ab"}).status_code == 200
        )
        with httpx.Client(base_url=srv.url) as c:
            r = c.get("/run/hostA/point/rand?token=s3cret-0123456789ab")
            assert r.status_code == 303 and r.headers["location"] == "/run/hostA/point/rand"
            assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=strict" in r.headers["set-cookie"]
            assert c.get("/api/runs").status_code == 200  # the cookie
            assert c.post("/api/label/hostA/point/rand/0", json={"label": "failed"}).status_code == 200
        assert httpx.post(srv.url + "/api/label/hostA/point/rand/0", json={"label": "failed"}).status_code == 401
    finally:
        srv.stop()


def test_non_loopback_names_are_refused_without_a_token(server: ServerThread):
    assert httpx.get(server.url + "/api/runs", headers={"Host": "attacker.example:8301"}).status_code == 421


@pytest.mark.slow
def test_cli_refuses_a_public_address_without_token_and_bad_options(tmp_path: Path):
    r = run_cli("dashboard", "--root", tmp_path, "--labels", tmp_path / "l.json", "--host", "0.0.0.0")
    assert r.returncode == 2 and "--token" in r.stderr
    r = run_cli("dashboard", "--root", tmp_path / "nope", "--labels", tmp_path / "l.json")
    assert r.returncode == 2 and "is not a directory" in r.stderr
    r = run_cli("dashboard", "--root", tmp_path, "--labels", tmp_path / "l.json", "--rubric", "bogus")
    assert r.returncode == 2 and "outcome-v1, harm-five-class-v1" in r.stderr


def test_a_chunked_body_over_64_kb_is_refused(server: ServerThread):
    def chunks():
        for _ in range(20):
            yield b" " * 8192

    url = server.url + "/api/label/hostA/point/expert/1"
    resp = httpx.post(url, content=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 413 and httpx.get(url).json()["entry"] is None


def test_notes_are_escaped_in_pages(server: ServerThread):
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    httpx.post(server.url + "/api/label/hostA/point/expert/1", json={"label": "invalid", "note": evil})
    page = httpx.get(server.url + "/episode/hostA/point/expert/1").text
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


@pytest.mark.slow
def test_the_dashboard_command_serves_the_api_and_reports_unknown_labels(runs_root: Path, tmp_path: Path):
    import subprocess
    import sys

    from dashboard_support import free_port

    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {"hostA/point/rand/0": {"label": "meh"}}})
    )
    port = free_port()
    exe = Path(sys.executable).with_name("rollbench")
    proc = subprocess.Popen(
        [exe, "dashboard", "--root", runs_root, "--labels", labels, "--port", str(port), "--cache-dir", tmp_path / "c"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                doc = httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=30).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    proc.stderr.read().decode() if proc.stderr else ""
                )
                time.sleep(0.2)
        assert doc["unknown_labels"] == [{"key": "hostA/point/rand/0", "label": "meh"}]
        assert "hostA/point/rand" in {r["key"] for r in doc["runs"]}
        assert "is not in rubric outcome-v1" in httpx.get(f"http://127.0.0.1:{port}/").text
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_custom_rubric_file_drives_labels_and_disagreements(runs_root: Path, tmp_path: Path):
    rubric = tmp_path / "grasp.yaml"
    rubric.write_text("name: grasp\nversion: 3\nlabels:\n  - name: clean\n    implies_success: true\n  - dropped\n")
    srv = ServerThread([runs_root], tmp_path / "l.json", rubric=str(rubric), cache_dir=tmp_path / "c").start()
    try:
        assert httpx.get(srv.url + "/api/runs").json()["rubric"]["id"] == "grasp-v3"
        url = srv.url + "/api/label/hostA/point/rand/0"
        bad = httpx.post(url, json={"label": "succeeded"})
        assert bad.status_code == 400 and "valid labels: clean, dropped" in bad.json()["error"]
        assert httpx.post(url, json={"label": "clean"}).status_code == 200
        rows = httpx.get(srv.url + "/api/runs").json()["disagreements"]
        assert [r["key"] for r in rows] == ["hostA/point/rand/0"]  # "clean" implies success; the episode failed
        assert json.loads((tmp_path / "l.json").read_text())["rubric"] == "grasp-v3"
    finally:
        srv.stop()


@pytest.mark.slow
def test_a_busy_port_is_exit_2_with_one_line_before_the_dashboard_announces_itself(tmp_path: Path) -> None:
    import socket

    from conftest import run_cli

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_cli("dashboard", "--root", tmp_path, "--port", port, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use); choose another --port"
    ]


def test_labels_of_a_fresh_dashboard_name_its_rubric_and_pages_say_dashboard(runs_root: Path, tmp_path: Path):
    """Issue 30 (h-cli 4): before any label is set the sidecar records no rubric; /api/labels says the one in force
    (the built-in outcome-v1), not null. Every page's header names the dashboard (it said "rollbench review")."""
    srv = ServerThread([runs_root], tmp_path / "labels.json", annotator="ana", cache_dir=tmp_path / "cache").start()
    try:
        totals = httpx.get(srv.url + "/api/labels").json()
        assert (totals["rubric"], totals["total"], totals["per_label"]) == ("outcome-v1", 0, {})
        for path in ("/", "/run/hostA/point/rand", "/disagreements"):
            page = httpx.get(srv.url + path).text
            assert '<a class="brand" href="/">rollbench dashboard</a>' in page and "rollbench review" not in page
    finally:
        srv.stop()
