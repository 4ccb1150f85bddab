"""The wrong URL scheme for a policy server is answered with the fix: ``--policy http://`` against a websocket server
says "use ws://HOST:PORT", ``--policy ws://`` against an HTTP /act server says "use http://HOST:PORT". Real
``rollbench serve-policy`` servers on loopback, the real CLI; exit 2, one line, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from served_policy import ROLLBENCH, served


@pytest.mark.parametrize(
    ("served_as", "asked_as", "hint"),
    [("ws", "http", "use --policy ws://"), ("http", "ws", "use --policy http://")],
)
@pytest.mark.slow
def test_wrong_scheme_names_the_right_one(served_as: str, asked_as: str, hint: str, tmp_path: Path) -> None:
    with served(tmp_path, "zero", served_as) as (url, _, _):
        netloc = urlsplit(url).netloc
        out = tmp_path / "run"
        r = subprocess.run(
            [ROLLBENCH, "eval", "--env", "scripted/reach", "--policy", f"{asked_as}://{netloc}", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{hint}{netloc}" in lines[0], r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
