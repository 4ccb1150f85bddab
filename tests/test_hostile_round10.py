"""Hostile round 10 (issue 42): a number rollbench reads from a URL segment, a header, a folder name or an environment
variable is ASCII digits only (``str.isdigit`` accepts ``²``, ``①`` and other scripts' digits, which ``int()``
refuses or reads as another number), so such a value is a 400 or a refusal, never a 500, a traceback or an alias.

Oracles: the status codes the dashboard's docs state (400 for a malformed episode index), the episodes recorded
here, and a command run with and without the odd environment variable."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from rollbench.core.contracts import ConfigError
from rollbench.core.format import is_decimal
from rollbench.dashboard.labels import parse_episode_key

ODD_DIGITS = ["²", "①", "٣", "𝟙", "１"]  # superscript, circled, Arabic-Indic, mathematical bold, full-width


@pytest.mark.parametrize("text", [*ODD_DIGITS, "", "-1", "+1", " 1", "1 ", "1.0", "0x1"])
def test_only_ascii_digits_are_a_decimal_number(text: str) -> None:
    assert not is_decimal(text)


@pytest.mark.parametrize("text", ["0", "7", "0123", "999999999"])
def test_ascii_digits_are_a_decimal_number(text: str) -> None:
    assert is_decimal(text)


@pytest.mark.parametrize("digit", ODD_DIGITS)
def test_a_label_key_with_an_odd_digit_is_refused_by_name(digit: str) -> None:
    with pytest.raises(ConfigError, match="is not host/robot/name/episode_index"):
        parse_episode_key(f"h/point/r/{digit}")


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from dashboard_support import ServerThread, record_run

    root = tmp_path_factory.mktemp("round10")
    record_run(root / "runs" / "r", "h", episodes=2)
    server = ServerThread([root / "runs"], root / "labels.json").start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("digit", ODD_DIGITS)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/episode/h/point/r/{e}"),
        ("GET", "/episode/h/point/r/{e}"),
        ("GET", "/media/h/point/r/{e}/top"),
        ("GET", "/transcript/h/point/r/{e}"),
        ("POST", "/api/label/h/point/r/{e}"),
    ],
)
def test_an_episode_index_in_odd_digits_is_a_400_never_a_500_nor_another_episode(
    dashboard: str, method: str, path: str, digit: str
) -> None:
    url = dashboard + path.format(e=digit)
    got = httpx.request(method, url, json={"label": "failed"} if method == "POST" else None, timeout=60)
    assert got.status_code == 400, (got.status_code, got.text[:200])
    assert "is not an episode index" in got.text
    assert httpx.get(f"{dashboard}/api/episode/h/point/r/1", timeout=60).status_code == 200


@pytest.mark.parametrize(("name", "value"), [("COLUMNS", "²"), ("COLUMNS", "١٠٠"), ("LINES", "①")])
def test_an_odd_digit_terminal_size_is_ignored_as_a_non_number_is(name: str, value: str) -> None:
    env = {**os.environ, name: value}
    odd = subprocess.run([sys.executable, "-m", "rollbench", "envs", "scripted"], env=env, capture_output=True,
                         text=True, timeout=120, encoding="utf-8")  # fmt: skip
    plain = subprocess.run([sys.executable, "-m", "rollbench", "envs", "scripted"], env={**env, name: "abc"},
                           capture_output=True, text=True, timeout=120, encoding="utf-8")  # fmt: skip
    assert odd.returncode == 0 and "Traceback" not in odd.stderr, odd.stderr[-500:]
    assert (odd.stdout, odd.stderr) == (plain.stdout, plain.stderr)
