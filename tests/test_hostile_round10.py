"""Hostile round 10 (issue 42): a number rollbench reads from a URL segment, a header, a folder name or an environment
variable is ASCII digits only (``str.isdigit`` accepts ``²``, ``①`` and other scripts' digits, which ``int()``
refuses or reads as another number), so such a value is a 400 or a refusal, never a 500, a traceback or an alias.

Oracles: the status codes the dashboard's docs state (400 for a malformed episode index), the episodes recorded
here, and a command run with and without the odd environment variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


# ---- F5: a policy's os.chdir never moves where rollbench writes ------------------------------------------------------
def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_policy_that_changes_directory_errors_its_episodes_and_writes_nothing_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.api import evaluate

    other, work = tmp_path / "other", tmp_path / "work"
    work.mkdir()
    evaluate(env="scripted/reach", policy="random", episodes=2, max_steps=3, out=other / "nm")
    before = _files(other / "nm")
    monkeypatch.chdir(work)
    got = evaluate(env="scripted/reach", policy="misbehaving_policies:in_act", policy_options={"to": str(other)},
                   episodes=2, max_steps=3, out="nm")  # fmt: skip
    assert os.getcwd() == str(work)
    assert _files(other / "nm") == before  # the other run, byte for byte
    assert got.episodes_recorded == 2 and [e.error_fault for e in got.episodes] == ["policy", "policy"]
    said = "policy.act changed rollbench's working directory (os.chdir to "
    assert all(said in (e.error or "") and repr(str(other)) in (e.error or "") for e in got.episodes)
    assert sorted(p.name for p in (work / "nm/data/chunk-000").iterdir()) == ["file-000.parquet", "file-001.parquet"]


def test_a_policy_factory_that_changes_directory_is_refused_and_the_directory_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollbench.core.registry import make_policy

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        make_policy("misbehaving_policies:in_factory", {"to": "/"})
    assert str(caught.value) == (
        "policy 'misbehaving_policies:in_factory''s factory changed rollbench's working directory (os.chdir to '/'); "
        "rollbench changed it back: a policy must not change the working directory (use absolute paths)"
    )
    assert os.getcwd() == str(tmp_path)


# ---- F6: a policy's close() has the policy deadline ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_policy_whose_close_never_returns_costs_the_deadline_not_the_run(tmp_path: Path, workers: int) -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:close_hangs", "--episodes", "2",
            "--max-steps", "3", "--policy-timeout", "2", "--workers", str(workers), "--out", str(tmp_path / "r"),
            "--json"]  # fmt: skip
    got = subprocess.run([sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True,
                         timeout=240)  # fmt: skip
    assert got.returncode == 0, got.stderr[-800:]
    doc = json.loads(got.stdout)
    assert (doc["status"], doc["episodes_recorded"]) == ("OK", 2)
    warned = "close() did not return within --policy-timeout 2 s; rollbench went on without it"
    assert f"warning: policy misbehaving_policies:close_hangs: {warned}" in got.stderr
