"""The review dashboard in a real browser: Playwright driving Debian's Chromium, headless, against a real uvicorn
server over a real recorded run. Screenshots go to ``$ROLLBENCH_TEST_ARTIFACTS`` (default ``test-artifacts/``)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import httpx
import pytest

from conftest import REPO
from dashboard_support import ServerThread, record_run

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (install.sh --dev)")


def test_review_an_episode_with_the_keyboard_and_export_the_label(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    artifacts = Path(os.environ.get("ROLLBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    record_run(tmp_path / "runs" / "reach-random", "lab1", policy="random", episodes=2)
    srv = ServerThread([tmp_path / "runs"], tmp_path / "labels.json", annotator="ana", cache_dir=tmp_path / "c").start()
    requests: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.on("request", lambda req: requests.append(req.url))
            page.goto(srv.url + "/")
            page.click("text=lab1/point/reach-random")
            page.wait_for_url("**/run/lab1/point/reach-random")
            page.click("table.sortable >> text=1")
            page.wait_for_url("**/episode/lab1/point/reach-random/1")
            page.wait_for_function("document.querySelector('video').readyState >= 2")
            page.keyboard.press(" ")
            page.wait_for_function("document.querySelector('video').currentTime > 0.5", timeout=10_000)
            page.keyboard.press(" ")
            paused_at = page.evaluate("document.querySelector('video').currentTime")
            page.keyboard.press("ArrowRight")
            page.wait_for_function(f"Math.abs(document.querySelector('video').currentTime - {paused_at + 1}) < 0.05")
            page.keyboard.press("2")
            page.wait_for_selector("#label-status.ok")
            page.reload()
            assert page.inner_text("#current-label") == "partial"
            assert page.get_attribute(".label-btn.active", "data-label") == "partial"
            page.screenshot(path=str(artifacts / "dashboard-episode.png"))
            page.keyboard.press("n")  # the next unlabelled episode of the run is episode 0
            page.wait_for_url("**/episode/lab1/point/reach-random/0")
            page.goto(srv.url + "/")
            page.screenshot(path=str(artifacts / "dashboard-runs.png"))
            browser.close()
        rows = list(csv.DictReader(io.StringIO(httpx.get(srv.url + "/api/labels.csv").text)))
        assert [(r["key"], r["label"], r["annotator"]) for r in rows] == [
            ("lab1/point/reach-random/1", "partial", "ana")
        ]
        assert all(u.startswith(srv.url) for u in requests), [u for u in requests if not u.startswith(srv.url)]
    finally:
        srv.stop()


@pytest.mark.sim
def test_every_recorded_camera_plays_in_sync(tmp_path: Path):
    """A MetaWorld run recorded with two cameras: playing, seeking and stepping keep both videos at one time."""
    pytest.importorskip("metaworld")
    from playwright.sync_api import sync_playwright

    from rollbench.api import evaluate

    evaluate(
        env="metaworld/reach-v3",
        policy="random",
        episodes=1,
        max_steps=120,
        video=True,
        cameras=("corner", "gripperPOV"),
        image_size=(64, 64),
        out=tmp_path / "runs" / "two-cams",
        host_label="lab1",
    )
    srv = ServerThread([tmp_path / "runs"], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    spread = (
        "(() => { const t = Array.from(document.querySelectorAll('video')).map(v => v.currentTime);"
        " return Math.max(...t) - Math.min(...t); })()"
    )
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            page.goto(srv.url + "/episode/lab1/sawyer/two-cams/0")
            assert page.eval_on_selector_all("video", "vs => vs.length") == 2
            page.wait_for_function("Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 2)")
            page.select_option("#speed", "0.25")
            page.keyboard.press(" ")
            page.wait_for_function("document.querySelector('video').currentTime > 0.3", timeout=10_000)
            page.keyboard.press(" ")
            page.wait_for_timeout(200)
            assert page.evaluate(spread) < 0.1
            page.keyboard.press(".")
            page.wait_for_timeout(200)
            assert page.evaluate(spread) < 0.02
            browser.close()
    finally:
        srv.stop()
