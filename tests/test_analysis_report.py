"""rollbench report: the HTML file rendered from two real MetaWorld runs and opened in headless Chromium (Debian's
/usr/bin/chromium driven by Playwright): no console error, every image loads, no request leaves the file."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from cli_in_process import invoke  # `report` in the test process: what it writes and refuses
from rollbench.api import evaluate, grade

pytest.importorskip("metaworld")
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.sim]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-runs")
    for policy in ("metaworld-expert", "zero"):
        evaluate(
            out=root / policy, env="metaworld/reach-v3,metaworld/button-press-v3", policy=policy, episodes=3,
            max_steps=50, seed=0, video=True, image_size=(48, 48), host_label="lab",
        )  # fmt: skip
    return root


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (scripts/install.sh --dev)")
def test_report_is_one_offline_file_that_chromium_renders_with_every_image(root: Path, tmp_path: Path) -> None:
    out, plots = tmp_path / "report.html", tmp_path / "plots"
    proc = invoke("report", root, "--out", out, "--plots", plots, "--dashboard-url", "http://127.0.0.1:8301")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "<script" not in text and 'src="http' not in text and "<link" not in text  # self-contained, offline
    assert "McNemar p" in text and "hostA" not in text and "lab/sawyer/zero" in text
    assert 'href="http://127.0.0.1:8301/episode/lab/sawyer/zero/0"' in text
    for policy in ("metaworld-expert", "zero"):  # each task row's rate and interval are grade's, as recorded
        for task, t in grade(root / policy, check_videos=False).tasks.items():
            row = f"<tr><td>{task}</td><td>{policy}</td>"
            rate, ci = f"{100 * t.success_rate:.1f}%", f"{100 * t.ci95_low:.1f}% – {100 * t.ci95_high:.1f}%"
            end = f"<td class=n>{rate}</td><td class=n>{ci}</td></tr>"
            assert re.search(re.escape(row) + r"(?:(?!</tr>).)*" + re.escape(end), text), (task, policy)
    assert 'href="http://127.0.0.1:8301/media/lab/sawyer/zero/0/' in text
    names = {"success_rate", "difference_1", "episode_length", "latency"}
    assert {p.name for p in plots.iterdir()} == {f"{n}.{ext}" for n in names for ext in ("png", "svg")}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(out.as_uri())
        images = page.evaluate("[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert errors == []
    assert len(images) == 4 and all(ok and w > 100 and h > 100 for ok, w, h in images)
    assert all(u.startswith(("file:", "data:")) for u in requests)
    if os.environ.get("ROLLBENCH_TEST_ARTIFACTS"):  # keep the screenshot (CI artifact)
        shutil.copy(shot, Path(os.environ["ROLLBENCH_TEST_ARTIFACTS"]) / "analysis-report.png")


def test_report_refuses_a_bad_dashboard_url_and_writes_nothing(root: Path, tmp_path: Path) -> None:
    proc = invoke("report", root, "--out", tmp_path / "r.html", "--dashboard-url", "ftp://x")
    assert proc.returncode == 2 and "--dashboard-url" in proc.stderr
    assert not (tmp_path / "r.html").exists()
