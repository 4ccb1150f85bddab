"""``rollbench release`` redacts the values of the releasing process's secret environment variables (a bare copy of
``$ROLLBENCH_SERVER_TOKEN`` a server echoed into an error) and hex tokens (``openssl rand -hex 24``) in free text,
while rollbench's own digests (``provenance.git_commit``, a transcript frame's ``sha256``) stay as recorded
(hostile round 3, F6).

Oracle: the planted strings themselves, searched for in every released file's bytes and name; the grade of the
source run with each planted string swapped for its placeholder; the names and digests a hand-written table lists.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rollbench
from agent_double import serve_as_provider
from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.release.manifest import filters
from rollbench.release.redact import Releaser
from rollbench.release.rules import Scanner, environment_secrets

SERVER_TOKEN = "Zebra-Quartz-77-lantern"  # neither hex nor after "Bearer": only its exact value can find it
HEX = "3f9a0c7be41d58a296f07c3b1e8d4a65c2f90b7e13d8a4f6"  # 48 hex digits, as `openssl rand -hex 24` prints
SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
COMMIT = "80d58e93b4fd201f0bb57ec9986eec2694306e9d"
DATE = "2026-01-01"


class EchoingServer:
    """A policy whose server echoes the client's token back in its error reply (as a careless server does)."""

    def __init__(self) -> None:
        self.info = rollbench.PolicyInfo(name="echoing", chunk_size=1, tasks=("scripted/*",))

    def reset(self, task: rollbench.TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: rollbench.Observation, instruction: str) -> np.ndarray:
        raise RuntimeError(f"HTTP 401 from the policy server: token {SERVER_TOKEN} is not accepted")

    def close(self) -> None:
        pass


def _plant_hex_in_error(run: Path) -> None:
    """The first episode's ``rollbench/error`` with a hex request id appended (pyarrow, schema kept)."""
    f = run / "meta/episodes/chunk-000/file-000.parquet"
    t = pq.read_table(f)
    i = t.column_names.index("rollbench/error")
    errors = t.column(i).to_pylist()
    errors[0] = f"{errors[0]} (request {HEX})"
    pq.write_table(t.set_column(i, t.schema.field(i), pa.array(errors, t.schema.field(i).type)), f)


def _plant_hex_in_transcript(run: Path) -> None:
    tr = run / "transcripts/chunk-000/file-000.jsonl"
    lines = tr.read_text().splitlines(keepends=True)
    note = {"type": "message", "t_s": 0.5, "message": {"role": "user", "content": f"the key is {HEX}, keep it"}}
    tr.write_text("".join([lines[0], json.dumps(note) + "\n", *lines[1:]]))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An errored run whose reasons hold the server token (real writer) and whose error column holds a hex token
    (pyarrow), and an agent run whose transcript holds the hex token."""
    root = tmp_path_factory.mktemp("env-hex")
    errored = root / "errored"
    evaluate(env="scripted/reach", policy=EchoingServer(), episodes=2, max_steps=3, out=errored)
    _plant_hex_in_error(errored)
    with serve_as_provider():
        evaluate(env="scripted/reach", policy="agent:local/solver", episodes=1, out=root / "agent")
    _plant_hex_in_transcript(root / "agent")
    return errored, root / "agent"


def _everything(out: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(out).as_posix(), p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()]


def test_a_server_token_from_the_environment_and_hex_tokens_leave_no_trace_and_the_runs_grade_the_same(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    errored, agent = recorded
    src = tmp_path / "src"
    shutil.copytree(errored, src / "errored")
    shutil.copytree(agent, src / "agent")
    # the planted strings are where the oracle says (so a clean release below is not vacuous)
    assert SERVER_TOKEN in (src / "errored/run.json").read_text()
    assert HEX.encode() in (src / "errored/meta/episodes/chunk-000/file-000.parquet").read_bytes()
    assert HEX in (src / "agent/transcripts/chunk-000/file-000.jsonl").read_text()
    out = tmp_path / "rel"
    proc = invoke(
        "release", src / "errored", src / "agent", "--out", out, "--date", DATE,
        env={"ROLLBENCH_SERVER_TOKEN": SERVER_TOKEN},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for rel, data in _everything(out):
        for secret in (SERVER_TOKEN, HEX, HEX.upper()):
            assert secret.encode() not in data and secret not in rel, f"{secret} left in {rel}"
    assert SERVER_TOKEN not in proc.stdout + proc.stderr and HEX not in proc.stdout + proc.stderr
    # the report line counts the values of each kind: one server token, one hex token (the same in both runs)
    assert "env_secret 1 value in " in proc.stdout and "hex_token 1 value in " in proc.stdout
    doc = json.loads((out / "MANIFEST.json").read_text())
    assert doc["distinct_counts"]["env_secret"] == 1 and doc["distinct_counts"]["hex_token"] == 1
    assert "ROLLBENCH_SERVER_TOKEN" in doc["filters"]["environment"]["variables"]
    where = {(r["file"], r["rule"]) for r in doc["redactions"]}
    assert ("errored/run.json", "environment:ROLLBENCH_SERVER_TOKEN") in where
    assert ("errored/meta/episodes/chunk-000/file-000.parquet", "hex_string") in where
    assert ("agent/transcripts/chunk-000/file-000.jsonl", "hex_string") in where
    env_ph = {r["placeholder"] for r in doc["redactions"] if r["category"] == "env_secret"}
    hex_ph = {r["placeholder"] for r in doc["redactions"] if r["category"] == "hex_token"}
    assert env_ph == {"<REDACTED:env_secret:1>"} and hex_ph == {"<REDACTED:hex_token:1>"}
    for name in ("errored", "agent"):
        before, after = grade(src / name), grade(out / name)
        assert after.violations == []
        expected = json.dumps(before.to_json()).replace(SERVER_TOKEN, "<REDACTED:env_secret:1>")
        assert json.dumps(after.to_json()) == expected.replace(HEX, "<REDACTED:hex_token:1>"), name
        log, released = (json.loads((d / name / "run.json").read_text()) for d in (src, out))
        assert released["spec_identity"] == log["spec_identity"]
        assert [released["identity"][k] for k in ("robot", "name")] == [log["identity"][k] for k in ("robot", "name")]
        # rollbench's own digest is kept where it is recorded
        assert released["provenance"]["git_commit"] == log["provenance"]["git_commit"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("provenance.git_commit", COMMIT),
        ("line 4: frames[0].sha256", SHA256),  # an agent transcript's frame digest
        ("plan.policy.provenance.weights_sha256", SHA256),
        ("plan.env.assets_hash", "sha256:" + SHA256),
        ("plan.policy.provenance.revision", COMMIT),
        ("plan.policy.provenance.requested_revision", COMMIT),
    ],
)
def test_a_digest_is_kept_in_its_own_field_and_redacted_in_free_text(field: str, value: str) -> None:
    scanner = Scanner(set(), set(), environ={})
    assert scanner.find(value, field) == []
    assert [f.rule for f in scanner.find(f"error: {value} went wrong")] == ["hex_string"]
    assert [f.rule for f in scanner.find(value, "rollbench/error")] == ["hex_string"]


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("provenance.git_commit", HEX, "malformed_hash"),  # 48 digits where a commit has 40
        ("provenance.git_commit", COMMIT.upper(), "malformed_hash"),
        ("line 2: frames[0].sha256", "not-a-digest", "malformed_hash"),
        ("plan.env.assets_hash", SHA256, "malformed_hash"),  # without its "sha256:" prefix
        ("plan.policy.provenance.requested_revision", HEX, "hex_string"),  # a branch name may stand there
    ],
)
def test_a_digest_field_whose_value_is_not_a_well_formed_digest_is_redacted(field: str, value: str, rule: str) -> None:
    found = Scanner(set(), set(), environ={}).find(value, field)
    assert [(f.rule, f.value) for f in found] == [(rule, value)]


@pytest.mark.parametrize(
    "text",
    [
        "0" * 64,  # zero padding
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",  # base64 of zero bytes
        "1234567890" * 4,  # a long decimal number
        "deadbeef" * 5,  # no digit, few distinct digits: not a random token
        "data:image/png;base64,iVBORw0KGgo" + "0123456789abcdef" * 4 + "AAA=",  # inside a data URL
        "scripted_reach-agent_local_solver-20261201T000912Z",
        "plan main, requested_revision main",
    ],
)
def test_hex_like_text_that_is_not_a_token_is_kept(text: str) -> None:
    assert Scanner(set(), set(), environ={}).find(text) == []


def test_the_secret_variables_of_the_environment_are_chosen_by_name_and_length() -> None:
    environ = {
        "ROLLBENCH_SERVER_TOKEN": "abcdefgh",
        "ROLLBENCH_MCP_TOKEN": "0123456789abcdef0123",
        "HF_TOKEN": "hf_aaaaaaaaaaaaaaaa",
        "OPENAI_API_KEY": "sk-zzzzzzzzzzzzzz",
        "anthropic_api_key": "lowercase-name-1",
        "DB_PASSWORD": "hunter22",
        "SMTP_PASSWD": "hunter333",
        "GOOGLE_APPLICATION_CREDENTIALS": "/etc/creds.json",
        "CLIENT_SECRET": "s3cr3t-value",
        "PROXY_AUTH": "user:pass1234",
        "SHORT_TOKEN": "1234567",  # 7 characters: too short to look for
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/home/somebody",
    }
    assert sorted(environment_secrets(environ)) == [
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "PROXY_AUTH",
        "ROLLBENCH_MCP_TOKEN",
        "ROLLBENCH_SERVER_TOKEN",
        "SMTP_PASSWD",
        "anthropic_api_key",
    ]


def test_a_secret_value_is_found_inside_a_longer_word_and_never_shown_in_the_filters() -> None:
    scanner = Scanner(set(), set(), environ={"HF_TOKEN": SERVER_TOKEN})
    text = f"prefix{SERVER_TOKEN}suffix"
    found = scanner.find(text)
    assert [(f.rule, f.category, text[f.start : f.end]) for f in found] == [
        ("environment:HF_TOKEN", "env_secret", SERVER_TOKEN)
    ]
    assert scanner.redact(text)[0] == "prefix<REDACTED:env_secret:1>suffix"
    described = json.dumps(filters(scanner))
    assert SERVER_TOKEN not in described and "HF_TOKEN" in described


def test_overlapping_findings_are_redacted_as_one_span_leaving_no_part_of_either() -> None:
    token = "key-0123456789abcdef"  # an environment value whose end starts a longer hex run
    text = f"id {token}0123456789abcdef0123 end"
    redacted, pairs = Scanner(set(), set(), environ={"API_KEY": token}).redact(text)
    assert redacted == "id <REDACTED:env_secret:1> end"
    assert [f.value for f, _ in pairs] == [f"{token}0123456789abcdef0123"]


def _foreign_json(value: Any) -> bytes:
    return ('{ "note" :  "' + value + '" }\n').encode()  # not a style rollbench writes: replaced in the text


def test_a_secret_inside_a_word_of_a_json_file_rollbench_did_not_write_is_replaced_in_place() -> None:
    releaser = Releaser(Scanner(set(), set(), environ={"ROLLBENCH_SERVER_TOKEN": SERVER_TOKEN}))
    got = releaser.json_file("notes.json", _foreign_json(f"x{SERVER_TOKEN}y and qq{HEX}"), lines=False)
    assert got.data == _foreign_json("x<REDACTED:env_secret:1>y and qq<REDACTED:hex_token:1>")


def test_an_upper_cased_api_key_from_the_environment_leaves_no_trace(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    # a random-looking key (as providers issue them) that a model's reply repeats in capitals and in mixed case
    key = "sk-proj-q7Rw2Lk9Zt4Xb8Nc1Vm6Hd3Jf5Gs0Pa7Ye2Uo9Ti4We1Qr8Mn3Bv6Cx"
    planted = [key.upper(), key.swapcase(), key.lower(), "Qx7Lm2Vb9Rt4Ks8Wd1Zp6Hn3Jf5Cy0GaE4"]  # + a secret
    src = tmp_path / "src" / "agent"
    shutil.copytree(recorded[1], src)
    tr = src / "transcripts/chunk-000/file-000.jsonl"
    lines = tr.read_text().splitlines(keepends=True)
    note = {"type": "message", "t_s": 0.5, "message": {"role": "assistant", "content": " | ".join(planted)}}
    tr.write_text("".join([lines[0], json.dumps(note) + "\n", *lines[1:]]))
    assert all(p in tr.read_text() for p in planted)  # where the oracle says (a clean release is not vacuous)
    out = tmp_path / "rel"
    proc = invoke("release", src, "--out", out, "--date", DATE, env={"OPENAI_API_KEY": key})
    assert proc.returncode == 0, proc.stderr
    for rel, data in _everything(out):
        for secret in planted:
            assert secret.encode() not in data and secret not in rel, f"a form of the key is left in {rel}"
            assert secret.lower().encode() not in data.lower(), f"a form of the key is left in {rel}"
    doc = json.loads((out / "MANIFEST.json").read_text())
    rules = {r["rule"] for r in doc["redactions"] if r["file"].endswith("transcripts/chunk-000/file-000.jsonl")}
    assert "environment:OPENAI_API_KEY" in rules
    assert key.lower() not in (proc.stdout + proc.stderr).lower()
    # every redaction is listed with its placeholder exactly as the files hold it (no emoji for ":secret:")
    for r in doc["redactions"]:
        assert f"{r['file']}  {r['field']}  {r['rule']} -> {r['placeholder']}" in proc.stdout
    assert any(r["placeholder"].startswith("<REDACTED:secret:") for r in doc["redactions"])
