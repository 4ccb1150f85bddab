"""Release leaks (issue 42): every string a parquet file carries, file and run names, a label's annotator; runs
nested inside a run, hard links to files outside it and files over the stated bound are refused. The oracle: the
planted secret's bytes, searched for in every released file (and MANIFEST.json) byte for byte."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError
from rollbench.release.copy import build_release
from rollbench.release.rules import Scanner
from rollbench.release.sources import MAX_FILE_BYTES

SECRET = "sk-proj-Zq8xW3vB7nM2kL5pR9tY1uI4oP6aS0dF"  # an OpenAI-form key
EMAIL = "carol.jones@example.org"
DATE = "2026-01-01"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rel") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1)
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    return out


def leaked(out: Path, *needles: str) -> list[str]:
    """Every released file (path relative to ``out``) whose name or bytes hold one of ``needles``."""
    found = []
    for p in sorted(out.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if any(n.encode() in data or n in str(p.relative_to(out)) for n in needles):
                found.append(str(p.relative_to(out)))
    return found


def _rewrite_rows(run: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    f = run / "meta/episodes/chunk-000/file-000.parquet"
    pq.write_table(change(pq.read_table(f)), f)


PARQUET_PLANTS: dict[str, Callable[[pa.Table], pa.Table]] = {
    "schema key-value metadata": lambda t: t.replace_schema_metadata(
        {**(t.schema.metadata or {}), b"note": SECRET.encode()}
    ),
    "a metadata key": lambda t: t.replace_schema_metadata({EMAIL.encode(): b"x"}),
    "field metadata": lambda t: t.cast(
        pa.schema([f.with_metadata({b"k": SECRET.encode()}) if i == 0 else f for i, f in enumerate(t.schema)])
    ),
    "a dictionary-encoded column": lambda t: t.append_column("note", pa.array([SECRET]).dictionary_encode()),
    "a binary column": lambda t: t.append_column("blob", pa.array([b"\xff\x00key=" + SECRET.encode()], pa.binary())),
    "a struct column": lambda t: t.append_column(
        "extra", pa.array([{"who": EMAIL, "n": 1}], pa.struct([("who", pa.string()), ("n", pa.int64())]))
    ),
    "a struct field name": lambda t: t.append_column("extra", pa.array([{EMAIL: 1}], pa.struct([(EMAIL, pa.int64())]))),
    "a column name": lambda t: t.append_column(f"by {EMAIL}", pa.array([1])),
    "a large string list": lambda t: t.append_column("notes", pa.array([["ok", SECRET]], pa.list_(pa.large_string()))),
    "a map column": lambda t: t.append_column("m", pa.array([[("k", SECRET)]], pa.map_(pa.string(), pa.string()))),
}


@pytest.mark.parametrize("case", sorted(PARQUET_PLANTS))
def test_a_secret_anywhere_in_a_parquet_file_is_redacted(run: Path, tmp_path: Path, case: str) -> None:
    _rewrite_rows(run, PARQUET_PLANTS[case])
    doc = build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", SECRET, EMAIL) == []
    assert any(r["file"] == "run/meta/episodes/chunk-000/file-000.parquet" for r in doc["redactions"])
    assert pq.read_table(tmp_path / "rel/run/meta/episodes/chunk-000/file-000.parquet").num_rows == 1


def test_a_clean_parquet_file_is_copied_byte_for_byte(run: Path, tmp_path: Path) -> None:
    build_release([run], tmp_path / "rel", date=DATE)
    for rel in ("meta/episodes/chunk-000/file-001.parquet", "data/chunk-000/file-000.parquet", "meta/tasks.parquet"):
        assert (tmp_path / "rel/run" / rel).read_bytes() == (run / rel).read_bytes()


@pytest.mark.parametrize("name", [f"notes/{EMAIL}.txt", f"{SECRET}.md", f"from-{EMAIL}/readme.txt"])
def test_a_secret_in_a_file_name_is_redacted_there_and_in_the_manifest(run: Path, tmp_path: Path, name: str) -> None:
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    (run / name).write_text("nothing secret\n")
    build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", SECRET, EMAIL) == []
    released = [p for p in (tmp_path / "rel/run").rglob("*") if p.is_file() and p.read_bytes() == b"nothing secret\n"]
    assert len(released) == 1  # the file itself is released, under its redacted name


def test_a_run_named_after_an_address_is_released_under_a_placeholder(recorded: Path, tmp_path: Path) -> None:
    run = tmp_path / "src" / EMAIL
    shutil.copytree(recorded, run)
    doc = build_release([run], tmp_path / "rel", date=DATE)
    assert leaked(tmp_path / "rel", EMAIL) == [] and EMAIL not in json.dumps(doc)
    (released,) = [p for p in (tmp_path / "rel").iterdir() if p.is_dir()]
    assert grade(released).episodes_recorded == 2


@pytest.mark.parametrize("annotator", ["Jane Doe", "reviewer-7", "x"])
def test_any_annotator_name_in_labels_is_redacted(run: Path, tmp_path: Path, annotator: str) -> None:
    ident = json.loads((run / "run.json").read_text())["identity"]
    labels = tmp_path / "labels.jsonl"
    key = f"{ident['host']}/{ident['robot']}/{ident['name']}/0"
    labels.write_text(json.dumps({"episode": key, "label": "good", "annotator": annotator}) + "\n")
    build_release([run], tmp_path / "rel", labels=[labels], date=DATE)
    (entry,) = [json.loads(ln) for ln in (tmp_path / "rel/labels/labels.jsonl").read_text().splitlines()]
    assert entry["annotator"] != annotator and entry["annotator"].startswith("<REDACTED:user_name:")


@pytest.mark.parametrize("where", ["notes/inner", "meta/old", "data/chunk-000/x"])
def test_a_run_nested_inside_the_run_is_refused(run: Path, recorded: Path, tmp_path: Path, where: str) -> None:
    shutil.copytree(recorded, run / where)
    with pytest.raises(ConfigError, match="holds another run"):
        build_release([run], tmp_path / "rel", date=DATE)
    r = invoke("release", run, "--out", tmp_path / "rel2", "--date", DATE)
    assert r.returncode == 2 and "holds another run" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "rel").exists() and not (tmp_path / "rel2").exists()


@pytest.mark.parametrize("rel", ["notes.txt", "meta/info.json", "data/chunk-000/file-001.parquet"])
def test_a_hard_link_to_a_file_outside_the_run_is_refused(run: Path, tmp_path: Path, rel: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(f"private {SECRET}")
    (run / rel).unlink(missing_ok=True)
    os.link(outside, run / rel)
    with pytest.raises(ConfigError, match="names, some outside the run"):
        build_release([run], tmp_path / "rel", date=DATE)
    assert not (tmp_path / "rel").exists()


def test_two_names_inside_the_run_are_not_a_hard_link_out(run: Path, tmp_path: Path) -> None:
    os.link(run / "meta/info.json", run / "info-copy.json")
    build_release([run], tmp_path / "rel", date=DATE)
    assert (tmp_path / "rel/run/meta/info.json").is_file()


def test_a_sparse_file_over_the_bound_is_refused_before_it_is_read(run: Path, tmp_path: Path) -> None:
    big = run / "notes" / "huge.bin"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used, and nothing of it may be read
    with pytest.raises(ConfigError, match=f"over the {MAX_FILE_BYTES:,} bytes a release reads per file"):
        build_release([run], tmp_path / "rel", date=DATE)
    assert not (tmp_path / "rel").exists()


HOST = "gpu-node-17.corp"
MAP = pa.map_(pa.string(), pa.string())
HOST_PLANTS: dict[str, Callable[[pa.Table], pa.Table]] = {
    "a schema metadata key": lambda t: t.replace_schema_metadata({**(t.schema.metadata or {}), f"note-{HOST}": "x"}),
    "a field metadata key": lambda t: pa.Table.from_arrays(
        t.columns,
        schema=pa.schema(
            [f.with_metadata({f"k-{HOST}": "x"}) if i == 0 else f for i, f in enumerate(t.schema)], t.schema.metadata
        ),
    ),
    "a map column": lambda t: t.append_column("m", pa.array([[(f"k-{HOST}", f"v-{HOST}")]] * t.num_rows, MAP)),
    "a map in a list": lambda t: t.append_column("lm", pa.array([[[(f"k-{HOST}", "v")]]] * t.num_rows, pa.list_(MAP))),
    "a map in a struct": lambda t: t.append_column(
        "sm", pa.array([{"m": [("k", f"v-{HOST}")]}] * t.num_rows, pa.struct([("m", MAP)]))
    ),
}


@pytest.mark.parametrize("case", sorted(HOST_PLANTS))
def test_a_recorded_host_in_metadata_keys_and_map_columns_is_redacted(run: Path, tmp_path: Path, case: str) -> None:
    doc = json.loads((run / "run.json").read_text())
    doc["identity"]["host"] = HOST
    (run / "run.json").write_text(json.dumps(doc, indent=2))
    for rel in ("data/chunk-000/file-000.parquet", "meta/episodes/chunk-000/file-000.parquet"):
        pq.write_table(HOST_PLANTS[case](pq.read_table(run / rel)), run / rel)
        assert _carries(run / rel)  # the plant is there before the release
    build_release([run], tmp_path / "rel", date=DATE, allow_violations=True)
    assert leaked(tmp_path / "rel", HOST) == []
    assert [p for p in (tmp_path / "rel").rglob("*.parquet") if _carries(p)] == []


def _carries(path: Path) -> bool:
    """``HOST`` in the file's raw bytes, or in its fields' metadata (parquet stores that inside the base64-encoded
    arrow schema, where a byte search cannot see it)."""
    fields = [str(f.metadata) for f in pq.read_schema(path)]
    return HOST.encode() in path.read_bytes() or any(HOST in m for m in fields)


def test_a_copied_run_left_running_is_refused_unless_violations_are_allowed(run: Path, tmp_path: Path) -> None:
    doc = json.loads((run / "run.json").read_text())
    doc["status"] = "RUNNING"  # a copy taken mid-run: no writer holds its lock
    (run / "run.json").write_text(json.dumps(doc, indent=2))
    r = invoke("release", run, "--out", tmp_path / "rel", "--date", DATE)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: {run} is still RUNNING or was interrupted; resume or grade it first"
    ]
    assert not (tmp_path / "rel").exists()
    build_release([run], tmp_path / "rel2", date=DATE, allow_violations=True)
    assert (tmp_path / "rel2/run/run.json").is_file()


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
# hostile round 14 (F3, F4): each string as a fresh scanner releases it, written by hand
RELEASED_AS = [
    ("files in /home/jürgen/secret", "files in <REDACTED:private_path:1>/secret"),
    ("see /Users/José.Núñez/x", "see <REDACTED:private_path:1>/x"),
    (r"C:\Users\Zoë\Desktop", r"<REDACTED:private_path:1>\Desktop"),
    ("mail jürgen.müller@firma-geheim.de now", "mail <REDACTED:email:1> now"),
    ("or dörte@例え.jp", "or <REDACTED:email:1>"),
    ("„jürgen@firma.de“, user@пример.рф.", "„<REDACTED:email:1>“, <REDACTED:email:2>."),
    ("push with glpat-abcdefghij1234567890", "push with <REDACTED:api_key:1>"),
    (
        "deploy gldt-AbCdEfGhIjKlMnOpQrSt12 runner glrt-t1_AbCdEfGhIjKlMnOpQrStU",
        "deploy <REDACTED:api_key:1> runner <REDACTED:api_key:2>",
    ),
    ("trigger glptt-0123456789abcdefABCDEF01 ok", "trigger <REDACTED:api_key:1> ok"),
    (f"token {JWT} end", "token <REDACTED:token:1> end"),
    ("unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0. end", "unsigned <REDACTED:token:1> end"),
    # ordinary text stays as it is: words of any script, "eyJ" inside words, an address-like word with no domain
    ("Öffne die Schublade, greife den Würfel (Größe 5 cm) – „schnell“!", None),
    ("把红色的方块放进盒子里。", None),
    ("HeyJude, monkeyJump and theyJoined; eyJx.eyJy. is too short", None),
    ("Zoë@home put the cube in /homework/ and /Usersguide", None),
]


@pytest.mark.parametrize(("text", "expected"), RELEASED_AS)
def test_non_ascii_names_addresses_gitlab_tokens_and_whole_jwts_are_redacted(text: str, expected: str | None) -> None:
    assert Scanner(set(), set(), environ={}).redact(text)[0] == (text if expected is None else expected)


def test_a_non_ascii_name_or_a_gitlab_token_in_the_instruction_leaves_no_part_in_the_release(tmp_path: Path) -> None:
    instruction = (
        "files in /home/jürgen/secret and /Users/José.Núñez/x, mail jürgen.müller@firma-geheim.de or dörte@例え.jp; "
        f"push with glpat-abcdefghij1234567890 and {JWT}"
    )
    evaluate(
        out=tmp_path / "run", env="scripted/reach", policy="zero", episodes=2, max_steps=3, instruction=instruction
    )
    build_release([tmp_path / "run"], tmp_path / "rel", date=DATE)
    assert json.loads((tmp_path / "rel/run/run.json").read_text())["spec"]["instruction"] == (
        "files in <REDACTED:private_path:1>/secret and <REDACTED:private_path:2>/x, mail <REDACTED:email:1> or "
        "<REDACTED:email:2>; push with <REDACTED:api_key:1> and <REDACTED:token:1>"
    )
    pieces = ["ürgen", "Núñez", "müller", "dörte", "例え", "glpat-", "abcdefghij1234567890", JWT[:8], JWT[-12:]]
    assert leaked(tmp_path / "rel", *pieces) == []
    tables = sorted((tmp_path / "rel").rglob("*.parquet"))
    assert tables and [p.name for p in tables if any(w in str(pq.read_table(p).to_pylist()) for w in pieces)] == []
