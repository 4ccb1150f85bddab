"""Credentials inside a policy URL (hostile finding N1): refused with one line wherever a policy URL enters (eval,
nested policy options, the API with a built spec, mcp --allow-policy, serve-policy), never echoed; and ``release``
of a run recorded before the refusal leaves no byte of them. Oracles: the planted secrets' bytes, searched for in
stderr and in every released file; the masked URLs written by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_in_process import invoke
from conftest import run_cli
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.core.spec import EvalSpec
from rollbench.core.urlcreds import masked_credentials
from rollbench.release.copy import build_release
from served_policy import served

PASSWORD = "Pa55wordXyz9"
KEY = "qQ7rT2mZ9xV4"
SIG = "Zk3Lw8Pn1Rb6"
URLS = {  # the URL as typed, the one line names it as
    "password": (f"http://alice:{PASSWORD}@127.0.0.1:18520/act", "http://***@127.0.0.1:18520/act"),
    "bare user": (f"ws://{PASSWORD}@127.0.0.1:18520", "ws://***@127.0.0.1:18520"),
    "api_key": (f"ws://127.0.0.1:18520/?api_key={KEY}&x=1", "ws://127.0.0.1:18520/?api_key=***&x=1"),
    "access_token": (f"http://h:1/act?ACCESS_TOKEN={KEY}", "http://h:1/act?ACCESS_TOKEN=***"),
    "sig": (f"https://h/act?v=2&sig={SIG}#f", "https://h/act?v=2&sig=***#***"),
    "token": (f"http://h:1/act?Token={KEY}", "http://h:1/act?Token=***"),
    # issue 42: a fragment is never sent to a server (only recorded); a secret in the path
    "fragment": (f"http://127.0.0.1:18520/act#tok={KEY}", "http://127.0.0.1:18520/act#***"),
    "fragment access_token": (f"ws://h:1/#access_token={KEY}", "ws://h:1/#***"),
    "path after token": (f"http://h/act/token/{KEY}", "http://h/act/token/***"),
    "path after API-KEY": (f"http://h/API-KEY/{KEY}/act", "http://h/API-KEY/***/act"),
    "path pair": (f"http://h/api_key={KEY}/act", "http://h/api_key=***/act"),
    "path parameter": (f"ws://h:1/v1;Secret={KEY}", "ws://h:1/v1;Secret=***"),
}
FRAGMENT_ONLY = ("fragment", "fragment access_token")


def rb(*args: object) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` in the test process (tests/cli_in_process.py): the claims are what a command refuses and
    prints, not the process boundary. A command that serves until stopped runs as a process of its own (a refusal
    of its that regressed would serve forever in the test process)."""
    if str(args[0]) in ("serve-policy", "mcp", "dashboard"):
        return run_cli(*args)
    return invoke(*args)


def refusal(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.returncode, r.stderr)
    for secret in (PASSWORD, KEY, SIG):
        assert secret not in r.stdout + r.stderr
    return lines[0]


@pytest.mark.parametrize("case", URLS)
def test_masked_credentials_replaces_only_the_secret(case: str) -> None:
    url, masked = URLS[case]
    assert masked_credentials(url) == masked


@pytest.mark.parametrize(
    "plain",
    [
        "http://127.0.0.1:18520/act", "ws://h:8000/?seed=3", "zero", "agent:openai/gpt", "http://h/v1/act",
        "ws://h:1/policy/pi0", "http://h/token/short", "http://h/keys/abc12345xyz", "http://h/act#",
    ],
)  # fmt: skip
def test_a_url_without_credentials_is_not_touched(plain: str) -> None:
    assert masked_credentials(plain) is None


@pytest.mark.parametrize("case", ["password", "api_key", "sig"])
@pytest.mark.slow
def test_eval_with_credentials_in_the_policy_url_exits_2_before_anything_runs(case: str, tmp_path: Path) -> None:
    url, masked = URLS[case]
    r = rb("eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--out", tmp_path / "run")
    line = refusal(r)
    assert f"policy {masked} carries credentials" in line and "ROLLBENCH_SERVER_TOKEN" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("case", [c for c in URLS if c.startswith(("fragment", "path"))])
def test_eval_refuses_a_policy_url_with_a_fragment_or_a_secret_path_segment(case: str, tmp_path: Path) -> None:
    url, masked = URLS[case]
    line = refusal(rb("eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--out", tmp_path / "r"))
    if case in FRAGMENT_ONLY:
        assert line == (
            f"error: policy {masked} has a fragment (#...), which is never sent to a server but would be recorded "
            "in run.json; drop it (a token goes in ROLLBENCH_SERVER_TOKEN, sent as Authorization: Bearer, never "
            "recorded)"
        )
    else:
        assert f"policy {masked} carries credentials" in line and "ROLLBENCH_SERVER_TOKEN" in line
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("path", ["/v1/act", "/policy/pi0"])
@pytest.mark.slow
def test_a_policy_served_at_an_ordinary_path_is_still_evaluated(path: str, tmp_path: Path) -> None:
    with served(tmp_path, "scripted-expert", "http", "--path", path) as (url, _, _):
        assert url.endswith(path)
        r = rb("eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "run/run.json").read_text())["spec"]["policy"] == url


def test_credentials_in_a_url_nested_in_the_policy_options_are_refused_too(tmp_path: Path) -> None:
    options = json.dumps({"wrap": [{"inner": URLS["bare user"][0]}]})
    r = rb("eval", "--env", "scripted/reach", "--policy", "gpu-standin", "--policy-options", options, "--out", tmp_path)
    assert "policy_options.wrap[0].inner ws://***@127.0.0.1:18520 carries credentials" in refusal(r)


@pytest.mark.slow
def test_mcp_refuses_an_allowed_policy_url_with_credentials_at_start_up(tmp_path: Path) -> None:
    r = rb("mcp", "--root", tmp_path / "root", "--allow-policy", URLS["api_key"][0])
    assert "--allow-policy ws://127.0.0.1:18520/?api_key=***&x=1 carries credentials" in refusal(r)
    assert not (tmp_path / "root").exists()


def test_serve_policy_refuses_an_upstream_url_with_credentials() -> None:
    assert "carries credentials" in refusal(rb("serve-policy", "--policy", URLS["password"][0], "--port", "1"))


@pytest.mark.parametrize("built", [False, True])
def test_api_evaluate_raises_config_error_for_credentials_in_the_url(built: bool, tmp_path: Path) -> None:
    fields = {"env": "scripted/reach", "policy": URLS["access_token"][0], "episodes": 1}
    with pytest.raises(ConfigError, match="carries credentials") as err:
        if built:  # an EvalSpec made directly skips build_spec: the run's preparation refuses it
            evaluate(EvalSpec(**fields), out=tmp_path / "run")
        else:
            evaluate(out=tmp_path / "run", **fields)
    assert KEY not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_release_of_a_run_recorded_before_the_refusal_keeps_no_byte_of_the_credentials(tmp_path: Path) -> None:
    run = tmp_path / "src" / "run"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=1, max_steps=2)
    log = json.loads((run / "run.json").read_text())
    # (api_key= / access_token= text is also the secret_field rule's: its placeholder trips release's re-scan, N3)
    options = {"inner": URLS["token"][0], "more": [URLS["sig"][0]]}
    log["spec"].update(policy=URLS["password"][0], policy_options=options)
    log["spec_identity"] = EvalSpec(**log["spec"]).identity()  # what an old version recorded
    (run / "run.json").write_text(json.dumps(log, indent=2))
    shutil.copy(run / "run.json", run / "notes.txt")  # free text too
    build_release([run], tmp_path / "rel", date="2026-01-01")
    files = [p for p in (tmp_path / "rel").rglob("*") if p.is_file()]
    assert any(p.name == "run.json" for p in files)
    for p in files:
        data = p.read_bytes()
        for secret in (PASSWORD, KEY, SIG):
            assert secret.encode() not in data, (p, secret)
    released = json.loads(next(p for p in files if p.name == "run.json").read_text())
    assert released["spec"]["policy"].startswith("http://alice:<REDACTED:credential:")
    assert released["spec"]["policy"].endswith("@127.0.0.1:18520/act")
