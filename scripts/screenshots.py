"""Regenerate the documentation's screenshots from the real pages: ``rollbench dashboard`` started as a user starts
it, driven by Debian's headless Chromium through playwright (``/usr/bin/chromium``; ``playwright install`` is never
run), following the README's tour step 4: open an episode of the random run and press ``3`` to label it ``failed``.

    .venv/bin/python scripts/screenshots.py                    # records the tour's run, writes docs/dashboard-episode.png
    .venv/bin/python scripts/screenshots.py --runs runs --run pick-place-random --out /tmp/shots

Without ``--runs``, the README's tour command that records the random run with video (step 2) is run as written into a
temporary directory. Labels go to a temporary file, never into ``--runs``. Exit 0 when every picture was written,
1 (one line on stderr) when the page did not behave as the tour says. tests/test_docs_examples.py runs this script.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
VIEWPORT = {"width": 1280, "height": 800}


def rollbench() -> str:
    """The ``rollbench`` beside this interpreter (a venv's), else the one on PATH."""
    exe = Path(sys.executable).with_name("rollbench")
    return str(exe) if exe.exists() else "rollbench"


def tour_command() -> list[str]:
    """The README's tour command that records the random run with video, as an argument list."""
    text = (REPO / "README.md").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith(".venv/bin/rollbench eval") and "--video" in ln]
    return [rollbench(), *shlex.split(line)[1:]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"rollbench dashboard exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/static/dashboard.css", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("rollbench dashboard did not start within 60 s")


def shoot(runs: Path, run: str, out: Path, work: Path) -> list[Path]:
    """The episode page of episode 0 of ``runs/run``, labelled ``failed`` with the key ``3``, as out/dashboard-episode.png."""
    from playwright.sync_api import sync_playwright

    identity = json.loads((runs / run / "run.json").read_text())["identity"]
    key = f"{identity['host']}/{identity['robot']}/{identity['name']}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [rollbench(), "dashboard", "--root", str(runs), "--port", str(port)]
    cmd += ["--labels", str(work / "labels.json"), "--cache-dir", str(work / "cache"), "--annotator", "docs"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    written = []
    try:
        wait_up(url, proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url + "/")
            page.click(f"text={key}")
            page.wait_for_url(f"**/run/{key}")
            page.goto(f"{url}/episode/{key}/0")
            page.wait_for_function("document.querySelector('video').readyState >= 2")
            page.evaluate("document.querySelectorAll('video').forEach(v => { v.currentTime = v.duration / 2; })")
            page.keyboard.press("3")
            page.wait_for_selector("#label-status.ok")
            page.reload()
            page.wait_for_function("document.querySelector('video').readyState >= 2")
            page.evaluate("document.querySelectorAll('video').forEach(v => { v.currentTime = v.duration / 2; })")
            page.wait_for_timeout(500)
            label = page.inner_text("#current-label")
            if label != "failed":
                raise RuntimeError(f"the episode's label after pressing 3 is {label!r}, not 'failed'")
            out.mkdir(parents=True, exist_ok=True)
            path = out / "dashboard-episode.png"
            page.screenshot(path=str(path))
            written.append(path)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, help="A runs root holding --run (default: record the tour's run)")
    parser.add_argument("--run", default=None, help="The run's directory name under --runs (default: the tour's)")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="Where the pictures go (default: docs/)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if not Path(CHROMIUM).exists():
        print(
            f"error: {CHROMIUM} is missing (bash scripts/install.sh --dev installs Debian's chromium)", file=sys.stderr
        )
        return 1
    with tempfile.TemporaryDirectory(prefix="rollbench-shots-") as tmp:
        work = Path(tmp)
        runs, run = args.runs, args.run
        if runs is None:
            cmd = tour_command()
            subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL)
            out_dir = Path(cmd[cmd.index("--out") + 1])
            runs, run = work / out_dir.parent, run or out_dir.name
        if run is None:
            parser.error("--run is required with --runs")
        try:
            written = shoot(runs.resolve(), run, args.out, work)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    for path in written:
        print(re.sub(r"^" + re.escape(str(REPO)) + "/", "", str(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
