"""Credentials that are known by where they stand (issue 42, the last three LOW leaks): nested header values and
secret-named keys in policy options and a policy's provenance, ``Cookie:`` / ``Set-Cookie:`` header text, and
secrets in a policy URL's path or fragment. A run recorded with them (by a policy that really took the options;
the URLs planted as an older version recorded them) is released with none of their bytes in any released file,
parquet included. Oracles: the planted secrets' bytes (short, so no format or entropy rule could catch them),
searched for in every released file; the kept values written by hand."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rollbench.api import evaluate
from rollbench.core.contracts import RollbenchError
from rollbench.core.spec import EvalSpec
from rollbench.policies.basic import make_zero
from rollbench.release.copy import build_release

DATE = "2026-01-01"
HDR = "hdrS3cret"  # X-Auth's value
BEARER = "brr7Tk"  # too short for the bearer_token rule: caught only as a header value
CUSTOM = "cst9Val"  # a header with an ordinary name: caught because it is under "headers"
APIKEY = "ak4Qz"
PASSWORD = "pw8Zx"
COOKIE = "ck5Sess"
SET_COOKIE = "sc6Id"
FRAG = "fr4Tok9x"
PATH_TOKEN = "pth7Tok3n"
PATH_PAIR = "pp2Key"
PIN = 731904265  # a number under a header container
SECRETS = (HDR, BEARER, CUSTOM, APIKEY, PASSWORD, COOKIE, SET_COOKIE, FRAG, PATH_TOKEN, PATH_PAIR, str(PIN))
OPTIONS: dict[str, Any] = {
    "headers": {"X-Auth": HDR, "Authorization": f"Bearer {BEARER}", "X-Custom": CUSTOM, "X-Pin": PIN},
    "client": {"xApiKey": APIKEY, "retries": 3, "nested": [{"Password": PASSWORD}]},
    "note": f"last request sent Cookie: session={COOKIE}; theme=dark",
    "mode": "fast",
}


def headered(name: str, options: Mapping[str, Any]) -> Any:
    """The zero policy recording its options in its provenance (as a client recording its request options would)."""
    policy = make_zero("zero", {})
    policy.info = dataclasses.replace(policy.info, provenance={"request": dict(options)})
    return policy


def leaked(out: Path, *needles: str) -> list[str]:
    """Every released file whose name or bytes hold one of ``needles``."""
    return [
        str(p.relative_to(out))
        for p in sorted(out.rglob("*"))
        if p.is_file() and any(n.encode() in p.read_bytes() or n in str(p) for n in needles)
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hdr") / "run"
    evaluate(out=out, env="scripted/reach", policy=f"{__name__}:headered", policy_options=OPTIONS, episodes=1,
             max_steps=2, seed=1)  # fmt: skip
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    return out


def test_the_run_really_recorded_the_planted_secrets(recorded: Path) -> None:
    text = (recorded / "run.json").read_text()
    assert all(s in text for s in (HDR, BEARER, CUSTOM, APIKEY, PASSWORD, COOKIE))


def test_nested_header_values_and_secret_named_keys_are_redacted_in_spec_and_plan(run: Path, tmp_path: Path) -> None:
    doc = build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", *SECRETS) == []
    log = json.loads((tmp_path / "rel/run/run.json").read_text())
    for opts in (log["spec"]["policy_options"], log["plan"]["policy"]["provenance"]["request"]):
        assert opts["headers"]["X-Auth"].startswith("<REDACTED:credential:")
        assert opts["headers"]["X-Custom"].startswith("<REDACTED:credential:")
        assert opts["headers"]["X-Pin"].startswith("<REDACTED:credential:")
        assert opts["headers"]["Authorization"].startswith("Bearer <REDACTED:token:")
        assert opts["client"]["xApiKey"].startswith("<REDACTED:credential:")
        assert opts["client"]["nested"][0]["Password"].startswith("<REDACTED:credential:")
        assert opts["client"]["retries"] == 3 and opts["mode"] == "fast"  # ordinary values kept
        assert opts["note"].startswith("last request sent Cookie: <REDACTED:credential:")
    fields = {r["field"] for r in doc["redactions"] if r["file"] == "run/run.json"}
    assert "spec.policy_options.headers.X-Auth" in fields


@pytest.mark.parametrize(
    "text",
    [
        f"upstream answered 401 to Cookie: session={COOKIE}; theme=dark",
        f'Set-Cookie: id="{SET_COOKIE}"; Path=/; HttpOnly',
        f"set-cookie={SET_COOKIE}",
        f"curl -H 'X-Auth: {HDR}' http://127.0.0.1:9/act",
    ],
)
def test_cookie_and_header_text_in_a_reason_a_column_and_notes_is_redacted(
    run: Path, tmp_path: Path, text: str
) -> None:
    log = json.loads((run / "run.json").read_text())
    log["warnings"] = [text]
    (run / "run.json").write_text(json.dumps(log, indent=2))
    (run / "notes.txt").write_text(text + "\n")
    f = run / "meta/episodes/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(f).append_column("reason_text", pa.array([text])), f)
    build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", *SECRETS) == []
    assert "<REDACTED:credential:" in (tmp_path / "rel/run/notes.txt").read_text()


def test_header_values_in_parquet_structs_maps_and_json_metadata_are_redacted(run: Path, tmp_path: Path) -> None:
    f = run / "meta/episodes/chunk-000/file-000.parquet"
    t = pq.read_table(f)
    hdr = pa.struct([("headers", pa.struct([("X-Custom", pa.string())]))])
    t = t.append_column("req", pa.array([{"headers": {"X-Custom": CUSTOM}}], hdr))
    t = t.append_column("opts", pa.array([[("X-Auth", HDR)]], pa.map_(pa.string(), pa.string())))
    spec = json.dumps({"policy_options": {"headers": {"X-Custom": CUSTOM}, "cookies": {"sid": COOKIE}}})
    pq.write_table(t.replace_schema_metadata({**(t.schema.metadata or {}), b"spec": spec.encode()}), f)
    build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", *SECRETS) == []
    released = pq.read_table(tmp_path / "rel/run/meta/episodes/chunk-000/file-000.parquet")
    meta = json.loads(released.schema.metadata[b"spec"])
    assert meta["policy_options"]["headers"]["X-Custom"].startswith("<REDACTED:credential:")
    assert released.num_rows == 1


URLS = [
    f"http://127.0.0.1:18521/act#tok={FRAG}",
    f"http://127.0.0.1:18521/act#access_token={FRAG}",
    f"http://127.0.0.1:18521/act/token/{PATH_TOKEN}",
    f"http://127.0.0.1:18521/api_key={PATH_PAIR}/act",
    f"ws://127.0.0.1:18521/v1;secret={PATH_PAIR}",
]


@pytest.mark.parametrize("url", URLS)
def test_a_recorded_policy_url_with_a_secret_in_path_or_fragment_is_redacted(
    run: Path, tmp_path: Path, url: str
) -> None:
    log = json.loads((run / "run.json").read_text())
    log["spec"].update(policy=url, policy_options={"inner": url})
    log["plan"]["policy"]["name"] = url
    log["spec_identity"] = EvalSpec(**log["spec"]).identity()  # what an older version recorded
    (run / "run.json").write_text(json.dumps(log, indent=2))
    (run / "notes.txt").write_text(f"served at {url}\n")
    build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", *SECRETS) == []
    policy = json.loads((tmp_path / "rel/run/run.json").read_text())["spec"]["policy"]
    assert policy.startswith("http://127.0.0.1:18521/") or policy.startswith("ws://127.0.0.1:18521/")
    assert "<REDACTED:credential:" in policy


def test_a_number_under_a_credential_key_in_a_foreign_json_file_refuses_the_release(run: Path, tmp_path: Path) -> None:
    (run / "client.json").write_text('{"headers":  {"X-Pin": 731904265}}')  # not a style rollbench writes
    with pytest.raises(RollbenchError, match=r"client.json: a number at headers.X-Pin is under a credential key"):
        build_release([run], tmp_path / "rel", date=DATE)
    assert not (tmp_path / "rel").exists()


def test_ordinary_policy_urls_and_paths_are_released_unchanged(run: Path, tmp_path: Path) -> None:
    urls = ["http://127.0.0.1:18521/act", "http://h:1/v1/act", "ws://h:2/policy/pi0", "http://h/token/short"]
    (run / "notes.txt").write_text("\n".join(urls) + "\n")
    build_release([run], tmp_path / "rel", date=DATE)
    assert (tmp_path / "rel/run/notes.txt").read_text() == "\n".join(urls) + "\n"
