"""Credentials known by where they stand, in free text and everywhere else (hostile round 17, F3 and F6).

F3: ``HF_TOKEN=…``, ``export DB_PASSWORD=…`` and the other environment-variable spellings of a credential pair in
free text were released, because the free-text rule wanted a word boundary before the secret word; the name is now
decided by its words, as a JSON key is. F6: a value release redacted as a credential in one place (a secret-named
field, a ``token=`` pair) was kept verbatim in every other file, field and line; a first pass now learns it, and it
gets the same placeholder everywhere. Oracles: the released texts written by hand, and a search of every released
file's bytes for the planted values."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.cli_in_process import invoke

from rollbench.api import evaluate
from rollbench.release.copy import build_release
from rollbench.release.rules import Scanner

DATE = "2026-01-01"
UNSET = {n: None for n in ("HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN")}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("src") / "run"
    evaluate(env="scripted/reach", policy="scripted-expert", episodes=1, max_steps=3, out=run)
    return run


def run_with(recorded: Path, tmp_path: Path, notes: dict[str, str | bytes]) -> Path:
    """A copy of the recorded run with ``notes/NAME`` files added."""
    import shutil

    run = tmp_path / "src" / "run"
    shutil.copytree(recorded, run)
    (run / "notes").mkdir()
    for name, body in notes.items():
        path = run / "notes" / name
        path.write_bytes(body) if isinstance(body, bytes) else path.write_text(body)
    return run


def release(run: Path, rel: Path) -> dict[str, object]:
    done = invoke("release", run, "--out", rel, "--date", DATE, env=UNSET)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((rel / "MANIFEST.json").read_text())


def holding(rel: Path, needle: str) -> list[str]:
    """Every released file whose bytes hold ``needle`` (in any letter case)."""
    return sorted(
        str(p.relative_to(rel))
        for p in rel.rglob("*")
        if p.is_file() and needle.lower().encode() in p.read_bytes().lower()
    )


def notes_redactions(doc: dict[str, object]) -> list[tuple[str, str, str, str]]:
    rows = doc["redactions"]
    assert isinstance(rows, list)
    return [(r["file"], r["field"], r["rule"], r["placeholder"]) for r in rows if "/notes/" in r["file"]]


SETUP = """How this run was made:
    export HF_TOKEN=Zq7vK2mP9xR4tL8wN3bF
    export OPENAI_API_KEY=my-proxy-key-2024
    DB_PASSWORD=hunter2hunter psql -h db
    AWS_SECRET_ACCESS_KEY=abcDEF123ghiJKL456
    GITHUB_TOKEN=abcdef123456 ./push.sh
Control (caught): token=Zq7vK2mP9xR4tL8wN3bF password=hunter2hunter my-token=abcdef123456
"""


def test_environment_variable_spellings_of_credential_pairs_in_free_text_are_replaced(
    recorded: Path, tmp_path: Path
) -> None:
    env_json = '{"HF_TOKEN": "Zq7vK2mP9xR4tL8wN3bF", "note": "HF_TOKEN=Zq7vK2mP9xR4tL8wN3bF"}\n'
    run = run_with(recorded, tmp_path, {"setup.md": SETUP, "env.json": env_json})
    rel = tmp_path / "rel"
    release(run, rel)
    # env.json comes first (files in path order): its field teaches credential:1
    assert (rel / "run/notes/env.json").read_text() == (
        '{"HF_TOKEN": "<REDACTED:credential:1>", "note": "HF_TOKEN=<REDACTED:credential:1>"}\n'
    )
    assert (rel / "run/notes/setup.md").read_text() == (
        "How this run was made:\n"
        "    export HF_TOKEN=<REDACTED:credential:1>\n"
        "    export OPENAI_API_KEY=<REDACTED:credential:2>\n"
        "    DB_PASSWORD=<REDACTED:credential:3> psql -h db\n"
        "    AWS_SECRET_ACCESS_KEY=<REDACTED:credential:4>\n"
        "    GITHUB_TOKEN=<REDACTED:credential:5> ./push.sh\n"
        "Control (caught): token=<REDACTED:credential:1> password=<REDACTED:credential:3> "
        "my-token=<REDACTED:credential:5>\n"
    )
    for value in ("Zq7vK2mP9xR4tL8wN3bF", "my-proxy-key-2024", "hunter2hunter", "abcDEF123ghiJKL456", "abcdef123456"):
        assert holding(rel, value) == []


@pytest.mark.parametrize(
    ("text", "released"),
    [
        ("export X_AUTH_TOKEN=tok9abc", "export X_AUTH_TOKEN=<REDACTED:credential:1>"),
        ('KEY_TOKEN="value with spaces" ok', 'KEY_TOKEN="<REDACTED:credential:1>" ok'),
        ("db.password='v' ok", "db.password='<REDACTED:credential:1>' ok"),
        ('{"Password": "short"}', '{"Password": "<REDACTED:credential:1>"}'),
        ("note:password=hunter2hunter", "note:password=<REDACTED:credential:1>"),  # after a name that is not secret
        ("X-Custom-Key: abcdef1", "X-Custom-Key: <REDACTED:credential:1>"),
        ("--client-secret=abcdef1 run", "--client-secret=<REDACTED:credential:1> run"),
        ("apiKey: abcdef1", "apiKey: <REDACTED:credential:1>"),
        ("token: Bearer abcdefgh", "token: Bearer <REDACTED:token:1>"),  # the scheme word stays, as in a field
        ("export MY_SERVICE_KEY=hunter2hunter", "export MY_SERVICE_KEY=<REDACTED:credential:1>"),  # *_KEY variable
        ("STRIPE_KEY: abcdef1 ok", "STRIPE_KEY: <REDACTED:credential:1> ok"),
        # kept: names of where a secret is or what kind (as JSON keys), headers' container, too short a bare value
        ("api_key_env=OPENAI_API_KEY token_type: bearer", "api_key_env=OPENAI_API_KEY token_type: bearer"),
        ("headers: Content-Type", "headers: Content-Type"),
        ("PASS_WORD=abcdef1 tokenizer=gpt2-large", "PASS_WORD=abcdef1 tokenizer=gpt2-large"),
        ("DB_PASSWORD=abc", "DB_PASSWORD=abc"),
        ("sort_key: timestamp KEY=abcdefgh", "sort_key: timestamp KEY=abcdefgh"),  # not a variable's *_KEY
        ('token=""', 'token=""'),
        ("see <REDACTED:credential:7>:abcdef12", "see <REDACTED:credential:7>:abcdef12"),  # a category, not a name
    ],
)
def test_a_free_text_pair_is_secret_by_the_words_of_its_name(text: str, released: str) -> None:
    assert Scanner(set(), set(), environ={}).redact(text)[0] == released


def test_a_value_redacted_as_a_credential_gets_its_placeholder_in_every_file(recorded: Path, tmp_path: Path) -> None:
    notes = {
        "config.json": '{"db": {"user": "bench", "password": "Blue-Falcon-77"}}\n',
        "log.txt": "connecting to db as bench with Blue-Falcon-77 ... ok\nretry with BLUE-FALCON-77\n",
        "meta.json": '{"last_login_pw": "Blue-Falcon-77", "echo": "pw=xBlue-Falcon-77y"}\n',
    }
    run = run_with(recorded, tmp_path, notes)
    rel = tmp_path / "rel"
    doc = release(run, rel)
    assert (rel / "run/notes/config.json").read_text() == (
        '{"db": {"user": "bench", "password": "<REDACTED:credential:1>"}}\n'
    )
    assert (rel / "run/notes/log.txt").read_text() == (
        "connecting to db as bench with <REDACTED:credential:1> ... ok\nretry with <REDACTED:credential:1>\n"
    )
    assert (rel / "run/notes/meta.json").read_text() == (
        '{"last_login_pw": "<REDACTED:credential:1>", "echo": "pw=x<REDACTED:credential:1>y"}\n'
    )
    assert holding(rel, "Blue-Falcon-77") == []
    c1 = "<REDACTED:credential:1>"
    assert notes_redactions(doc) == [
        ("run/notes/config.json", "db.password", "secret_field", c1),
        ("run/notes/log.txt", "line 1", "learnt:secret_field", c1),
        ("run/notes/log.txt", "line 2", "learnt:secret_field", c1),
        ("run/notes/meta.json", "last_login_pw", "learnt:secret_field", c1),
        ("run/notes/meta.json", "echo", "learnt:secret_field", c1),
    ]
    filters = doc["filters"]
    assert isinstance(filters, dict)
    assert filters["learnt_values"] == {
        "rules": [
            "secret_field", "bearer_token", "authorization", "cookie", "url_credential", "url_path_credential",
            "url_fragment", "malformed_hash",
        ],
        "min_length": 8,
        "max_length": 256,
        "used": 1,
        "not_used": 0,
        "values": "never shown",
    }  # fmt: skip


def test_placeholders_are_numbered_where_values_are_first_met_and_the_release_repeats(
    recorded: Path, tmp_path: Path
) -> None:
    notes = {  # a.txt comes first and holds both values before the files that teach them
        "a.txt": "uses Zebra-Quartz-42 then Blue-Falcon-77\n",
        "b.json": '{"password": "Blue-Falcon-77"}\n',
        "c.log": "token=Zebra-Quartz-42\n",
    }
    run = run_with(recorded, tmp_path, notes)
    doc = release(run, tmp_path / "rel")
    out = tmp_path / "rel" / "run" / "notes"
    assert (out / "a.txt").read_text() == "uses <REDACTED:credential:1> then <REDACTED:credential:2>\n"
    assert (out / "b.json").read_text() == '{"password": "<REDACTED:credential:2>"}\n'
    assert (out / "c.log").read_text() == "token=<REDACTED:credential:1>\n"
    assert notes_redactions(doc) == [
        ("run/notes/a.txt", "line 1", "learnt:secret_field", "<REDACTED:credential:1>"),
        ("run/notes/a.txt", "line 1", "learnt:secret_field", "<REDACTED:credential:2>"),
        ("run/notes/b.json", "password", "secret_field", "<REDACTED:credential:2>"),
        ("run/notes/c.log", "line 1", "secret_field", "<REDACTED:credential:1>"),
    ]
    again = release(run, tmp_path / "again")
    assert again == doc
    for f in sorted(p for p in (tmp_path / "rel").rglob("*") if p.is_file()):
        assert f.read_bytes() == (tmp_path / "again" / f.relative_to(tmp_path / "rel")).read_bytes()
    dry = build_release([run], tmp_path / "dry", date=DATE, dry_run=True)
    assert not (tmp_path / "dry").exists()
    assert json.loads(json.dumps(dry)) == doc


def test_values_are_learnt_from_and_replaced_in_parquet_and_authorization_pieces(
    recorded: Path, tmp_path: Path
) -> None:
    table = pa.table(
        {
            "request": pa.array([{"user": "bench", "auth_token": "Pq-Token-4455"}], pa.struct(
                [("user", pa.string()), ("auth_token", pa.string())]
            )),
            "message": ["sent dXNlcjpodW50ZXIy to the server"],
        }
    )  # fmt: skip
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    notes = {
        "calls.parquet": sink.getvalue().to_pybytes(),
        "wire.txt": "Authorization: Basic dXNlcjpodW50ZXIy\nthen Pq-Token-4455 again\n",
    }
    run = run_with(recorded, tmp_path, notes)
    rel = tmp_path / "rel"
    release(run, rel)
    back = pq.read_table(rel / "run/notes/calls.parquet").to_pylist()
    assert back == [
        {"request": {"user": "bench", "auth_token": "<REDACTED:credential:1>"}, "message": "sent <REDACTED:credential:2> to the server"}
    ]  # fmt: skip
    assert (rel / "run/notes/wire.txt").read_text() == (
        "Authorization: <REDACTED:credential:3>\nthen <REDACTED:credential:1> again\n"
    )
    assert holding(rel, "Pq-Token-4455") == holding(rel, "dXNlcjpodW50ZXIy") == []


def test_an_ordinary_word_redacted_as_a_credential_is_not_looked_for_elsewhere(recorded: Path, tmp_path: Path) -> None:
    notes = {
        "request.json": '{"headers": {"X-Client": "harmonica"}}\n',
        "readme.txt": "the harmonica plays\n",
    }
    run = run_with(recorded, tmp_path, notes)
    rel = tmp_path / "rel"
    done = invoke("release", run, "--out", rel, "--date", DATE, env=UNSET)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (rel / "run/notes/request.json").read_text() == '{"headers": {"X-Client": "<REDACTED:credential:1>"}}\n'
    assert (rel / "run/notes/readme.txt").read_text() == "the harmonica plays\n"
    doc = json.loads((rel / "MANIFEST.json").read_text())
    assert (doc["filters"]["learnt_values"]["used"], doc["filters"]["learnt_values"]["not_used"]) == (0, 1)
    line = (
        "1 values found as credentials are redacted only where found (ordinary words, run names or over 256 "
        "characters: docs/release.md)"
    )
    assert line in doc["warnings"]
    assert line in done.stdout + done.stderr
