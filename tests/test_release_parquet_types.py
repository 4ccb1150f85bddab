"""Release and parquet column types (hostile round 17, F1, F2, F4): view types and extension types (``arrow.json``)
are read and redacted, a type release cannot read refuses the file, dictionary entries no row uses are dropped,
bytes release does not read (page statistics) are searched, and an environment secret a list, struct or map holds
only as a whole is replaced (strings) or refuses the file (numbers). Oracles: the planted values searched for in
every released file's bytes in any letter case, and the released files read back with pyarrow."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.release import redact
from rollbench.release.parquet_text import UnscannableType, map_table
from rollbench.release.redact import Releaser
from rollbench.release.rules import Scanner

TOKEN = "Zq7vK2mP9xR4tL8wN3bF"  # the value of MY_SERVICE_TOKEN, an environment secret release is told about
ENV = {"MY_SERVICE_TOKEN": TOKEN}
EMAIL = "alice@secret-corp.example"
PASSWORD = "hunter2hunter"
DATE = "2026-01-01"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("parquet_types") / "run"
    evaluate(env="scripted/reach", policy="scripted-expert", episodes=1, max_steps=3, out=out)
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    (out / "notes").mkdir()
    return out


def _release(run: Path, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[object, Path]:
    rel = tmp_path / "rel"
    return invoke("release", run, "--out", rel, "--date", DATE, env=env or ENV), rel


def _holding(rel: Path, *values: str) -> list[str]:
    """Released files whose bytes hold one of ``values`` in any letter case."""
    return sorted(
        p.relative_to(rel).as_posix()
        for p in rel.rglob("*")
        if p.is_file() and any(v.lower().encode() in p.read_bytes().lower() for v in values)
    )


def _manifest_file(rel: Path, path: str) -> dict[str, object]:
    files = json.loads((rel / "MANIFEST.json").read_text())["files"]
    return next(f for f in files if f["path"] == path)


def test_string_view_binary_view_and_json_columns_are_read_and_redacted(run: Path, tmp_path: Path) -> None:
    notes = run / "notes"
    pq.write_table(pa.table({"who": pa.array([EMAIL], pa.string_view())}), notes / "a.parquet")
    pq.write_table(pa.table({"who": pa.array([EMAIL.encode()], pa.binary_view())}), notes / "b.parquet")
    cfg = json.dumps({"password": PASSWORD, "by": EMAIL})
    pq.write_table(pa.table({"cfg": pa.array([cfg], pa.json_())}), notes / "c.parquet")
    result, rel = _release(run, tmp_path)
    assert result.returncode == 0, result.stderr
    assert _holding(rel, EMAIL, PASSWORD) == []
    a, b, c = (pq.read_table(rel / "run" / "notes" / n) for n in ("a.parquet", "b.parquet", "c.parquet"))
    assert (a.schema.field("who").type, a.column("who").to_pylist()) == (pa.string_view(), ["<REDACTED:email:1>"])
    assert (b.schema.field("who").type, b.column("who").to_pylist()) == (pa.binary_view(), [b"<REDACTED:email:1>"])
    assert c.schema.field("cfg").type == pa.json_()  # the extension type is kept: its storage did not change
    assert json.loads(c.column("cfg").to_pylist()[0]) == {
        "password": "<REDACTED:credential:1>",
        "by": "<REDACTED:email:1>",
    }
    assert _manifest_file(rel, "run/notes/a.parquet")["unchanged"] is False


def test_an_extension_column_whose_storage_changes_is_released_as_its_storage_type(run: Path, tmp_path: Path) -> None:
    uid = TOKEN[:16].encode()  # a uuid column whose 16 bytes are the start of an environment secret
    pq.write_table(pa.table({"id": pa.array([uid], pa.binary(16)).cast(pa.uuid())}), run / "notes" / "u.parquet")
    result, rel = _release(run, tmp_path)
    assert result.returncode == 0, result.stderr
    back = pq.read_table(rel / "run" / "notes" / "u.parquet")
    assert back.schema.field("id").type == pa.binary()  # a placeholder is not 16 bytes
    assert back.column("id").to_pylist() == [b"<REDACTED:env_secret:1>"]
    assert _holding(rel, TOKEN[:16]) == []


def test_a_column_type_release_cannot_read_refuses_the_file_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # parquet cannot store a union today; any type not on the text-free allow-list and not readable is refused
    union = pa.UnionArray.from_sparse(pa.array([0], pa.int8()), [pa.array([EMAIL]), pa.array([1])])
    table = pa.table({"n": [1], "mixed": union})
    with pytest.raises(UnscannableType) as exc:
        map_table(table, lambda s, f, w: s)
    assert exc.value.column == "mixed"
    monkeypatch.setattr(redact, "pq", SimpleNamespace(read_table=lambda _src: table, write_table=pq.write_table))
    with pytest.raises(ConfigError) as refused:
        Releaser(Scanner(set(), set(), environ={})).file("run/notes/u.parquet", b"PAR1", "parquet")
    assert str(refused.value).startswith(
        "run/notes/u.parquet: column 'mixed' is of type sparse_union<0: string=0, 1: int64=1>, which release cannot "
        "read for secrets"
    )


def test_numbers_times_and_their_lists_are_read_for_nothing_and_copied_byte_for_byte(run: Path, tmp_path: Path) -> None:
    table = pa.table(
        {
            "x": pa.array([1.5, 2.25]),
            "t": pa.array([0, 1], pa.timestamp("ms")),
            "d": pa.array([1, 2], pa.decimal128(5, 2)),
            "state": pa.array([[0.1, 0.2], [0.3, 0.4]], pa.list_(pa.float32(), 2)),
            "flags": pa.array([[True], [False]]),
        }
    )
    pq.write_table(table, run / "notes" / "n.parquet")
    result, rel = _release(run, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (rel / "run" / "notes" / "n.parquet").read_bytes() == (run / "notes" / "n.parquet").read_bytes()
    data = [f for f in json.loads((rel / "MANIFEST.json").read_text())["files"] if f["path"].startswith("run/data/")]
    assert data and all(f["unchanged"] for f in data)  # the run's own data files: lists of floats, kept


def test_dictionary_entries_no_row_uses_are_dropped(run: Path, tmp_path: Path) -> None:
    col = pa.DictionaryArray.from_arrays(pa.array([0, 0], pa.int32()), pa.array(["ok", EMAIL, TOKEN]))
    pq.write_table(pa.table({"note": col}), run / "notes" / "review.parquet")
    assert EMAIL.encode() in (run / "notes" / "review.parquet").read_bytes()
    result, rel = _release(run, tmp_path)
    assert result.returncode == 0, result.stderr
    assert _holding(rel, EMAIL, TOKEN) == []
    back = pq.read_table(rel / "run" / "notes" / "review.parquet").column("note")
    assert back.to_pylist() == ["ok", "ok"]
    assert back.chunk(0).dictionary.to_pylist() == ["ok"]
    assert _manifest_file(rel, "run/notes/review.parquet")["unchanged"] is False


def _with_statistics(path: Path, planted: str) -> None:
    """A parquet file whose one row reads ``m`` * len(planted) while its page and column statistics hold
    ``planted`` (written over them in place, same length): a place release does not read."""
    filler = "m" * len(planted)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"note": [filler, "zz"]}), sink, compression="none", use_dictionary=False)
    raw = bytearray(sink.getvalue().to_pybytes())
    at = [m.start() for m in re.finditer(filler.encode(), raw)]
    assert len(at) == 3  # the page header's statistics, the value, the footer's statistics
    for i in (at[0], at[2]):
        raw[i : i + len(planted)] = planted.encode()
    path.write_bytes(bytes(raw))
    assert pq.read_table(path).column("note").to_pylist() == [filler, "zz"]


@pytest.mark.parametrize(("planted", "rule"), [(TOKEN.upper(), "environment:MY_SERVICE_TOKEN"), (EMAIL, "email")])
def test_a_secret_in_page_statistics_refuses_the_release(run: Path, tmp_path: Path, planted: str, rule: str) -> None:
    _with_statistics(run / "notes" / "stats.parquet", planted)
    result, rel = _release(run, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: run/notes/stats.parquet: the parquet file's bytes hold a match of rule {rule} in its bytes"
    )
    assert not rel.exists() or not any(rel.iterdir())


def test_a_secret_split_over_string_lists_structs_and_maps_becomes_their_placeholder(run: Path, tmp_path: Path) -> None:
    parts = [TOKEN[i : i + 5] for i in range(0, len(TOKEN), 5)]  # four parts, each shorter than a piece
    table = pa.table(
        {
            "chars": pa.array([list(TOKEN), ["a", "b"]]),
            "parts": pa.array([{f"p{i}": p for i, p in enumerate(parts)}, {f"p{i}": "x" for i in range(4)}]),
            "named": pa.array(
                [list(zip(["k0", "k1", "k2", "k3"], parts, strict=True)), [("k", "v")]],
                pa.map_(pa.string(), pa.string()),
            ),
        }
    )
    pq.write_table(table, run / "notes" / "split.parquet")
    (run / "notes" / "split.json").write_text(json.dumps({"chars": list(TOKEN)}, indent=2))
    result, rel = _release(run, tmp_path)
    assert result.returncode == 0, result.stderr
    ph = json.loads((rel / "run" / "notes" / "split.json").read_text())["chars"]  # what the same list in JSON gets
    assert re.fullmatch(r"<REDACTED:env_secret:\d+>", ph)
    rows = pq.read_table(rel / "run" / "notes" / "split.parquet").to_pylist()
    assert rows[0]["chars"] == [ph] * len(TOKEN)
    assert rows[1] == {"chars": ["a", "b"], "parts": {f"p{i}": "x" for i in range(4)}, "named": [("k", "v")]}
    placeholders = set(rows[0]["parts"].values()) | {x for pair in rows[0]["named"] for x in pair}  # map keys too
    assert len(placeholders) == 2 and all(re.fullmatch(r"<REDACTED:env_secret:\d+>", x) for x in placeholders)
    assert len(set(rows[0]["parts"].values())) == 1 and len(rows[0]["named"]) == 4
    fields = {r["field"] for r in json.loads((rel / "MANIFEST.json").read_text())["redactions"]}
    assert {"chars[0]", "parts[0]", "named[0]"} <= fields


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("codes", pa.array([list(TOKEN.encode())], pa.list_(pa.int64()))),
        ("points", pa.array([[float(ord(c)) for c in TOKEN]], pa.large_list(pa.float64()))),
    ],
)
def test_a_secret_held_by_a_list_of_numbers_refuses_the_file(
    run: Path, tmp_path: Path, column: str, values: pa.Array
) -> None:
    pq.write_table(pa.table({column: values}), run / "notes" / "split.parquet")
    result, rel = _release(run, tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: run/notes/split.parquet: {column}[0] holds an environment secret in the numbers of a list, struct or "
        "map, which cannot be redacted in place (a number cannot become its placeholder); edit it out of the run "
        "(nothing was written)"
    )
    assert not rel.exists() or not any(rel.iterdir())
    unset = invoke("release", run, "--out", tmp_path / "rel2", "--date", DATE, env={"MY_SERVICE_TOKEN": None})
    assert unset.returncode == 0, unset.stderr  # without the variable set, nothing names the numbers a secret
