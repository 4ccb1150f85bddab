"""The review dashboard in a real browser: Playwright driving Debian's Chromium, headless, against a real uvicorn
server over a real recorded run. Screenshots go to ``$ROLLBENCH_TEST_ARTIFACTS`` (default ``test-artifacts/``)."""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path
from typing import Any

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

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (install.sh --dev)"),
]


def _wait(page: Any, expression: str, timeout: float = 30_000) -> None:
    """Poll ``expression`` in the page until it is truthy (``timeout`` ms). Playwright's ``wait_for_function``
    evaluates its predicate with ``eval`` inside the page, which the dashboard's Content-Security-Policy refuses (no
    'unsafe-eval'); ``page.evaluate`` runs through the DevTools protocol, outside the page's policy."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    end = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > end:
            raise PlaywrightTimeout(f"not true within {timeout / 1000:g} s: {expression}")
        time.sleep(0.05)


def test_review_an_episode_with_the_keyboard_and_export_the_label(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    artifacts = Path(os.environ.get("ROLLBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    record_run(tmp_path / "runs" / "reach-random", "lab1", policy="random", episodes=2)
    srv = ServerThread([tmp_path / "runs"], tmp_path / "labels.json", annotator="ana", cache_dir=tmp_path / "c").start()
    requests: list[str] = []
    refused: list[str] = []  # the browser's reports of what the dashboard's Content-Security-Policy blocked
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.on("request", lambda req: requests.append(req.url))
            page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
            page.goto(srv.url + "/")
            page.click("text=lab1/point/reach-random")
            page.wait_for_url("**/run/lab1/point/reach-random")
            page.click("table.sortable >> text=1")
            page.wait_for_url("**/episode/lab1/point/reach-random/1")
            _wait(page, "document.querySelector('video').readyState >= 2")
            page.keyboard.press(" ")
            _wait(page, "document.querySelector('video').currentTime > 0.5", timeout=10_000)
            page.keyboard.press(" ")
            paused_at = page.evaluate("document.querySelector('video').currentTime")
            page.keyboard.press("ArrowRight")  # 50 steps at 10 fps: 10% of the episode is 0.5 s
            _wait(page, f"Math.abs(document.querySelector('video').currentTime - {paused_at + 0.5}) < 0.05")
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
        assert refused == []  # the pages' scripts, styles, videos and onsubmit all run under the policy
    finally:
        srv.stop()


def test_a_short_episode_steps_a_tenth_links_its_video_and_no_request_fails(tmp_path: Path):
    """A 1.9 s episode (19 steps at 10 fps, as short as a MetaWorld one): the run page links the episode's video
    cell to its review page, ← → step 0.2 s (10% of 1.9 s is 1.9 frames, rounded to 2 frames), the icon is served,
    the playhead at the end leaves the timeline's end labels uncovered, and no request or console message fails."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from rollbench.api import evaluate, grade

    artifacts = Path(os.environ.get("ROLLBENCH_TEST_ARTIFACTS", REPO / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "runs" / "short"
    evaluate(
        env="scripted/reach", policy="zero", episodes=1, max_steps=19, video=True, image_size=(64, 64), out=out,
        host_label="lab1",
    )  # fmt: skip
    assert grade(out, check_videos=False).tasks["scripted/reach"].mean_length == 19
    srv = ServerThread([tmp_path / "runs"], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    problems: list[str] = []
    time_now = "document.querySelector('video').currentTime"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
            page.on("response", lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
            page.goto(srv.url + "/run/lab1/point/short")
            links = page.eval_on_selector_all(
                "table.sortable tbody tr", "rows => rows.map(r => r.cells[r.cells.length - 1].innerHTML)"
            )
            assert links == ['<a href="/episode/lab1/point/short/0">video</a>']
            icon = page.get_attribute("link[rel=icon]", "href")
            assert icon == "/static/favicon.svg"
            assert page.evaluate(f"fetch('{icon}').then(r => r.status)") == 200
            page.screenshot(path=str(artifacts / "dashboard-run-short.png"), full_page=True)
            page.click("text=video")
            page.wait_for_url("**/episode/lab1/point/short/0")
            _wait(page, "document.querySelector('video').readyState >= 2")
            assert page.inner_text("#seek-help") == "← → 0.20 s"
            assert page.evaluate(time_now) == 0
            page.keyboard.press("ArrowRight")
            _wait(page, f"Math.abs({time_now} - 0.2) < 0.01")
            page.keyboard.press("ArrowRight")
            _wait(page, f"Math.abs({time_now} - 0.4) < 0.01")
            page.keyboard.press("ArrowLeft")
            _wait(page, f"Math.abs({time_now} - 0.2) < 0.01")
            # play to the end from 0.3 s before it (a loaded machine's software decoder can stall a longer playback):
            # the playhead stops at the right edge of the tracks
            page.evaluate("(() => { const v = document.querySelector('video'); v.currentTime = v.duration - 0.3; })()")
            _wait(page, f"{time_now} > 1.5 && document.querySelector('video').readyState >= 2")
            page.keyboard.press(" ")
            try:  # real-time playback of 0.3 s; the bound is for a machine shared with other jobs
                _wait(page, "document.querySelector('video').ended", timeout=60_000)
            except PlaywrightTimeout:
                state = page.evaluate(
                    "(() => { const v = document.querySelector('video'); return {t: v.currentTime, d: v.duration,"
                    " paused: v.paused, ready: v.readyState, error: v.error && v.error.code}; })()"
                )
                raise AssertionError(f"the video did not play to its end within 60 s: {state}") from None
            page.wait_for_timeout(100)
            overlaps = page.evaluate(
                """() => { const h = document.getElementById('playhead').getBBox();
                const x = Number(document.getElementById('playhead').getAttribute('x1'));
                return [x, ...Array.from(document.querySelectorAll('#timeline text')).map(t => t.getBBox())
                  .filter(b => b.x <= x + 1 && b.x + b.width >= x - 1 && b.y < h.y + h.height && b.y + b.height > h.y)
                  .map(b => [b.x, b.y])]; }"""
            )
            assert overlaps == [630]  # the playhead at x0 + w = 60 + 570, crossing no label
            page.locator("#timeline").screenshot(path=str(artifacts / "dashboard-timeline-end.png"))
            page.screenshot(path=str(artifacts / "dashboard-short-episode.png"))
            response = page.goto(srv.url + "/favicon.ico")
            assert response is not None and response.status == 200
            assert response.headers["content-type"] == "image/svg+xml"
            browser.close()
        assert problems == []
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
            _wait(page, "Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 2)")
            page.select_option("#speed", "0.25")
            page.keyboard.press(" ")
            _wait(page, "document.querySelector('video').currentTime > 0.3", timeout=10_000)
            page.keyboard.press(" ")
            page.wait_for_timeout(200)
            assert page.evaluate(spread) < 0.1
            page.keyboard.press(".")
            page.wait_for_timeout(200)
            assert page.evaluate(spread) < 0.02
            browser.close()
    finally:
        srv.stop()
