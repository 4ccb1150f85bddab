"""hostile24a F1: what a parquet file carries where release does not decode it (the footer's ``created_by``, the raw
bytes of a number column) is searched for provider keys and named credentials, as a video's bytes are: a match
refuses the release, exit 1, one line naming the file and the rule, nothing written. The file's own redacted JSON
metadata (``"cookies": {"sid": "<REDACTED:credential:1>"}``) is no such match."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke

GH = "ghp_" + "R8x2kQ7mZ4vN1pL6tY9wB3cD5fH0jS2aE4gU"  # a GitHub token
ANT = "sk-ant-api03-" + "R8x2kQ7mZ4vN1pL6tY9wB3cD5fH0jS2aE4gU7hK1mP3qR5tV8xZ0bN2cD4fG6hJ8kL0mN2pQ4rS6tU8vW0xY2zA4bC6d"


@pytest.fixture
def run(notes_run: Path) -> Path:
    return notes_run


def with_created_by(text: str) -> bytes:
    """A one-row parquet file whose footer's ``created_by`` is ``text`` (under 128 bytes: one length byte)."""
    sink = io.BytesIO()
    pq.write_table(pa.table({"note": ["calibration ok"]}), sink)
    raw = sink.getvalue()
    size = struct.unpack("<I", raw[-8:-4])[0]
    footer = raw[-8 - size : -8]
    old = pq.ParquetFile(io.BytesIO(raw)).metadata.created_by.encode()
    at = footer.index(old)
    assert footer[at - 1] == len(old)  # the compact protocol's varint length, one byte
    new = footer[: at - 1] + bytes([len(text)]) + text.encode() + footer[at + len(old) :]
    out = raw[: -8 - size] + new + struct.pack("<I", len(new)) + b"PAR1"
    assert pq.ParquetFile(io.BytesIO(out)).metadata.created_by == text
    return out


def release(run: Path, out: Path) -> tuple[int, list[str]]:
    r = invoke("release", str(run), "--out", str(out), "--date", "2026-01-01")
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stderr.strip().splitlines()


@pytest.mark.parametrize(
    ("created_by", "rule"),
    [
        (GH, "github_token"),
        (f"parquet-cpp token={GH[4:30]}", "secret_field"),
        ("built with password: Hunter2Hunter2xyz", "secret_field"),
    ],
)
def test_a_key_or_named_credential_in_a_parquet_footer_refuses_the_release(
    run: Path, tmp_path: Path, created_by: str, rule: str
) -> None:
    (run / "notes/calib.parquet").write_bytes(with_created_by(created_by))
    code, err = release(run, tmp_path / "rel")
    assert code == 1
    assert len(err) == 1 and err[0].startswith("error: run/notes/calib.parquet: ") and f"rule {rule} " in err[0]
    assert not (tmp_path / "rel").exists()


def test_a_provider_key_in_a_number_columns_raw_bytes_refuses_the_release(run: Path, tmp_path: Path) -> None:
    data = ANT.encode() + b" " * (-len(ANT) % 8)
    values = [struct.unpack("<q", data[i : i + 8])[0] for i in range(0, len(data), 8)]
    table = pa.table({"counts": pa.array(values, pa.int64())})
    pq.write_table(table, run / "notes/counts.parquet", compression="none", use_dictionary=False)
    assert ANT.encode() in (run / "notes/counts.parquet").read_bytes()  # planted where no string column is
    code, err = release(run, tmp_path / "rel")
    assert code == 1 and len(err) == 1
    assert err[0].startswith("error: run/notes/counts.parquet: ") and "rule anthropic_key " in err[0]
    assert not (tmp_path / "rel").exists()


def test_redacted_json_metadata_in_a_parquet_file_is_released(run: Path, tmp_path: Path) -> None:
    spec = {"policy_options": {"cookies": {"sid": "ck5Sess9x"}, "headers": {"X-Auth": "hdrS3cretValue"}}}
    table = pa.table({"note": ["ok"]}).replace_schema_metadata({"spec": json.dumps(spec)})
    pq.write_table(table, run / "notes/spec.parquet")
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    meta = json.loads(pq.read_schema(tmp_path / "rel/run/notes/spec.parquet").metadata[b"spec"])
    assert meta["policy_options"]["cookies"]["sid"].startswith("<REDACTED:")
    assert meta["policy_options"]["headers"]["X-Auth"].startswith("<REDACTED:")
