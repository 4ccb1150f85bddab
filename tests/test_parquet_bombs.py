"""A parquet decompression bomb in a handed-over run (a file of a few KiB that decodes to GiBs: a column of zeros
compressed with zstd, a long run of dictionary-encoded repeats) is refused from its footer and page headers before
any value is decoded: grade names it with its size and what it decodes to, a resume and a release refuse it, and
memory stays what grading a sound run takes. A footer that understates its pages is caught by the page headers;
DuckDB's memory limit is the line behind both (a file, or files together, it cannot load within it are named).

Oracles: bombs written with pyarrow's ``ParquetWriter`` a row group at a time (rows repeated, so the schema is the
run's own); what a file decodes to by docs/design.md's model, summed here from the footer pyarrow reads back
(:func:`_modelled`); the refusal lines written out by hand; pyarrow's own reading of a forged file (the lie is real:
pyarrow trusts the pages); memory as the child process's own peak resident size (``VmHWM``) under an ``RLIMIT_AS``.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from caged_grade import grade_in_a_cage
from cli_in_process import invoke
from dashboard_support import listed_by_a_dashboard
from file_trees import tree_hash
from rollbench.api import evaluate, grade
from rollbench.grading import tables
from rollbench.record import parquet_bounds
from rollbench.record.files import read_parquet
from rollbench.record.parquet_pages import HeaderBudget, PageHeaderError, read_page_header
from rollbench.record.safe_files import UnsafeFile

DATA = "data/chunk-000/file-001.parquet"
ROW = "meta/episodes/chunk-000/file-001.parquet"
WHAT = {DATA: "data file", ROW: "episode row file"}
MiB = 1 << 20


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reach") / "run"
    evaluate(env="scripted/reach", policy="random", episodes=3, max_steps=6, seed=1, out=out)
    assert grade(out).violations == []
    return out


def _copy(run: Path, to: Path) -> Path:
    return Path(shutil.copytree(run, to))


def _repeat_first_row(path: Path, rows: int, *, dictionary: bool = False, batch: int = 4096, **columns: str) -> None:
    """Rewrite parquet file ``path`` as its first row repeated ``rows`` times (its own schema; ``columns``: string
    columns given this value instead), zstd-compressed, a row group of at most ``batch`` rows at a time (memory:
    one row group)."""
    first = pq.read_table(path).slice(0, 1)
    block = first.take(np.zeros(min(rows, batch), dtype=np.int64))
    for name, value in columns.items():
        i = block.schema.get_field_index(name)
        block = block.set_column(i, block.schema.field(i), pa.array([value] * block.num_rows, pa.string()))
    tmp = path.with_suffix(".new")
    with pq.ParquetWriter(tmp, block.schema, compression="zstd", use_dictionary=dictionary) as w:
        for start in range(0, rows, batch):
            w.write_table(block.slice(0, min(batch, rows - start)))
    os.replace(tmp, path)


_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 8}


def _modelled(path: Path) -> int:
    """What ``path`` decodes to by docs/design.md's model, for a file whose footer is honest and whose strings are
    stored plainly: each chunk's uncompressed pages, its values at their decoded width (the row count for a flat
    column, the footer's value count for a list) and a string column's bytes (its pages again)."""
    md = pq.read_metadata(path)
    total = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for i in range(md.num_columns):
            c = rg.column(i)
            n = c.num_values if md.schema.column(i).max_repetition_level else rg.num_rows
            strings = c.total_uncompressed_size if c.physical_type == "BYTE_ARRAY" else 0
            total += c.total_uncompressed_size + n * _WIDTH[c.physical_type] + strings
    return total


def _refusal(path: Path, bound: int) -> str:
    return f"{path.stat().st_size:,} bytes that decode to {_modelled(path):,}, over the {bound:,} rollbench decodes"


def test_the_files_of_a_recorded_run_are_modelled_at_no_less_than_pyarrow_holds(recorded: Path) -> None:
    """The model is not below what pyarrow itself holds for each file it reads whole (``Table.nbytes``)."""
    files = sorted(recorded.glob("data/chunk-*/*.parquet")) + sorted(recorded.glob("meta/**/*.parquet"))
    assert len(files) == 7
    for f in files:
        with open(f, "rb") as raw:
            modelled = parquet_bounds.decoded_bytes(pq.ParquetFile(raw), raw, f)
        assert pq.read_table(f).nbytes <= modelled < 256 << 10, f


@pytest.mark.parametrize("rel", [DATA, ROW])
def test_a_bomb_in_a_recorded_run_is_named_by_grade_and_refused_by_resume_and_release(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str
) -> None:
    """20,000 copies of a real row, zstd: a few KiB that decode past a bound of 1 MiB (set down in this process)."""
    run = _copy(recorded, tmp_path / "run")
    bomb = run / rel
    _repeat_first_row(bomb, 20_000)
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", MiB)
    said = _refusal(bomb, MiB)
    assert bomb.stat().st_size < 128 << 10 and _modelled(bomb) > 2 * MiB
    assert f"file {bomb} is not read ({said})" in grade(run).violations
    r = invoke("grade", run)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert f"file {bomb} is not read ({said})" in " ".join(r.stdout.split())

    before = tree_hash(run)
    r = invoke("eval", "--resume", run)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        f"error: {run} is damaged and cannot be resumed: {WHAT[rel]} {rel} is not read ({said}); nothing was "
        f"changed (`rollbench grade {run}` reports every problem)\n"
    )
    assert tree_hash(run) == before

    r = invoke("release", run, "--out", tmp_path / "out")
    assert r.returncode == 2 and f"{run} fails rollbench grade: file {bomb} is not read ({said})" in r.stderr
    r = invoke("release", run, "--out", tmp_path / "out", "--allow-violations")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"error: cannot read a file to release: {bomb} is {said}; not read\n"
    assert not (tmp_path / "out").exists() and tree_hash(run) == before


def test_every_other_run_still_lists_beside_a_run_with_a_bomb(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runs --grade``, ``summarize --allow-damaged`` and the dashboard's listing, with the bomb's run among them."""
    root = tmp_path / "root"
    _copy(recorded, root / "good")
    bomb = _copy(recorded, root / "bad") / ROW
    _repeat_first_row(bomb, 20_000)
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", MiB)
    r = invoke("runs", root, "--grade")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert [ln.split("│")[1].strip() for ln in r.stdout.splitlines() if ln.startswith("│")] == ["bad", "good"]
    assert f"file {bomb} is not read ({_refusal(bomb, MiB)})" in " ".join(r.stdout.split())
    r = invoke("summarize", root, "--allow-damaged")
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert listed_by_a_dashboard(root, tmp_path) == ["bad", "good"]


def test_a_file_one_byte_over_the_bound_is_not_read_and_one_at_it_is(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "steps.parquet"
    shutil.copyfile(recorded / DATA, path)
    _repeat_first_row(path, 5_000)
    at = _modelled(path)
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", at)
    assert read_parquet(path).equals(pq.read_table(path))
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", at - 1)
    with pytest.raises(UnsafeFile) as refused:
        read_parquet(path)
    assert str(refused.value) == f"{path} is {_refusal(path, at - 1)}; not read"


def test_one_long_string_repeated_by_its_dictionary_is_measured_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 rows of one 10,000-character task: one dictionary entry, 2,000 indices; 20,000,000 bytes decoded."""
    path = tmp_path / "tasks.parquet"
    pq.write_table(pa.table({"task": ["x" * 10_000] * 2_000}), path, compression="zstd")
    chunk = pq.read_metadata(path).row_group(0).column(0)
    assert "RLE_DICTIONARY" in chunk.encodings and chunk.total_uncompressed_size < 11_000
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", 8 * MiB)
    with pytest.raises(UnsafeFile) as refused:
        read_parquet(path)
    decoded = chunk.total_uncompressed_size + 2_000 * 8 + 2_000 * 10_000  # pages, offsets, the strings
    size = path.stat().st_size
    assert str(refused.value) == f"{path} is {size:,} bytes that decode to {decoded:,}, over the {8 * MiB:,} rollbench decodes; not read"  # fmt: skip


def test_a_tasks_table_of_10000_distinct_tasks_is_read(tmp_path: Path) -> None:
    """LIBERO-Plus' size: the first estimate (every row as long as the dictionary) is 10 GB; measured, 1 MB."""
    path = tmp_path / "tasks.parquet"
    table = pa.table({"task_index": range(10_000), "task": [f"task {i:05d} " * 10 for i in range(10_000)]})
    pq.write_table(table, path)
    assert read_parquet(path).equals(table)


def _zigzag_varint(n: int, width: int) -> bytes:
    """``n`` as Thrift's compact protocol writes an integer (zigzag, then a varint), padded to ``width`` bytes with
    continuation bytes (a varint may be written longer than it needs)."""
    v, out = (n << 1) ^ (n >> 63), bytearray()
    for _ in range(width - 1):
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    assert v < 0x80
    return bytes(out + bytes([v]))


def _understated(raw: bytes, says: int) -> bytes:
    """``raw`` (one column, one row group) with its footer's ``total_uncompressed_size`` and the row group's
    ``total_byte_size`` (the same number; each an i64 field one after the field before it: header byte 0x16)
    replaced by ``says``, written in as many bytes."""
    (length,) = np.frombuffer(raw[-8:-4], dtype="<i4")
    footer = raw[-8 - int(length) : -8]
    real = pq.read_metadata(io.BytesIO(raw)).row_group(0).column(0).total_uncompressed_size
    width = -(-(2 * real).bit_length() // 7)  # the bytes of the varint pyarrow wrote (7 bits each)
    field = b"\x16" + _zigzag_varint(real, width)
    assert footer.count(field) == 2
    forged = footer.replace(field, b"\x16" + _zigzag_varint(says, width))
    return raw[: -8 - int(length)] + forged + raw[-8:]


def test_a_footer_that_understates_its_pages_is_refused_by_its_page_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = tmp_path / "honest.parquet"
    pq.write_table(pa.table({"note": ["\0" * MiB] * 8}), honest, compression="zstd", use_dictionary=False)
    forged = tmp_path / "forged.parquet"
    forged.write_bytes(_understated(honest.read_bytes(), 100))
    chunk = pq.read_metadata(forged).row_group(0).column(0)
    assert (chunk.total_uncompressed_size, pq.read_metadata(forged).row_group(0).total_byte_size) == (100, 100)
    assert pq.read_table(forged).column(0).to_pylist() == ["\0" * MiB] * 8  # pyarrow trusts the pages: 8 MiB
    monkeypatch.setattr(parquet_bounds, "MAX_DECODED_BYTES", 4 * MiB)
    with pytest.raises(UnsafeFile) as refused:
        read_parquet(forged)
    assert str(refused.value) == f"{forged} is {_refusal(honest, 4 * MiB)}; not read"  # as many pages as honest's


def test_the_page_headers_of_a_list_column_sum_to_what_its_footer_states(recorded: Path) -> None:
    """Pages with their headers (``total_uncompressed_size`` counts them) and the data pages' values."""
    md = pq.read_metadata(recorded / DATA)
    paths = [md.schema.column(i).path for i in range(md.num_columns)]
    chunk = md.row_group(0).column(paths.index("observation.state.list.element"))
    pages = values = 0
    with open(recorded / DATA, "rb") as raw:
        pos, budget = chunk.dictionary_page_offset, HeaderBudget()
        while pos < chunk.dictionary_page_offset + chunk.total_compressed_size:
            h = read_page_header(raw, pos, budget)
            pages, values, pos = pages + h.size + h.uncompressed, values + h.values, pos + h.size + h.compressed
    assert (pages, values) == (chunk.total_uncompressed_size, chunk.num_values)


def test_a_page_header_claiming_a_list_of_2_to_the_40_elements_is_refused_at_64_kib() -> None:
    header = b"\x19\xf8" + bytes([0x80] * 5) + b"\x20" + bytes(1 << 20)  # field 1: a list of 2^40 empty strings
    with pytest.raises(PageHeaderError, match=r"^over 65,536 bytes$") as refused:
        read_page_header(io.BytesIO(header), 0, HeaderBudget())
    assert refused.value.bound  # a bound (UnsafeFile, "not read"), not damage


def test_a_damaged_page_header_is_damage_named_with_its_file_and_byte(recorded: Path, tmp_path: Path) -> None:
    """A field of a type Thrift does not have (15) where observation.state's dictionary page header starts: an
    OSError, as pyarrow's own for a damaged page, so readers call the file unreadable."""
    path = tmp_path / "steps.parquet"
    data = bytearray((recorded / DATA).read_bytes())
    start = pq.read_metadata(recorded / DATA).row_group(0).column(0).dictionary_page_offset
    data[start] = 0x1F
    path.write_bytes(bytes(data))
    with pytest.raises(PageHeaderError, match=r"^a field of unknown type 15$") as damaged:
        read_page_header(io.BytesIO(bytes(data)), start, HeaderBudget())
    assert not damaged.value.bound
    with pytest.raises(OSError) as refused:
        read_parquet(path)
    assert not isinstance(refused.value, UnsafeFile)
    assert str(refused.value) == f"{path} has a page header at byte {start:,} that does not read (a field of unknown type 15)"  # fmt: skip


def test_a_file_of_more_page_headers_than_a_file_may_hold_is_refused() -> None:
    with pytest.raises(PageHeaderError, match=r"^over the 65,536 page headers or 4,194,304 bytes of them "):
        read_page_header(io.BytesIO(b"\x15\x00\x15\x02\x15\x02\x00"), 0, HeaderBudget(pages=0))


@pytest.fixture
def small_duckdb(monkeypatch: pytest.MonkeyPatch) -> int:
    """Grading's DuckDB database opened anew with a 16 MiB memory limit (the process's own one back afterwards)."""
    monkeypatch.setattr(tables, "GRADE_MEMORY_BYTES", 16 * MiB)
    monkeypatch.setattr(tables, "_database", None)
    return 16 * MiB


def test_a_step_file_duckdb_cannot_load_within_its_memory_limit_is_named(
    recorded: Path, tmp_path: Path, small_duckdb: int
) -> None:
    """400,000 rows: within the 1 GiB a file may decode to, past the 16 MiB DuckDB is given here (as a file whose
    footer and page headers understated it would be)."""
    run = _copy(recorded, tmp_path / "run")
    _repeat_first_row(run / DATA, 400_000, dictionary=True, batch=1 << 17)
    violations = grade(run).violations
    assert violations[0] == (
        f"file {run / DATA} is not read (DuckDB needs more than the {small_duckdb:,} bytes grading lets it use to "
        "read it)"
    )


def test_step_files_duckdb_can_load_one_at_a_time_but_not_together_are_named_together(
    recorded: Path, tmp_path: Path, small_duckdb: int
) -> None:
    run = _copy(recorded, tmp_path / "run")
    for e in range(3):
        _repeat_first_row(run / f"data/chunk-000/file-{e:03d}.parquet", 150_000, dictionary=True, batch=1 << 17)
    assert (
        f"the step rows (data/) are not read: together they need more than the {small_duckdb:,} bytes grading lets "
        "DuckDB use"
    ) in grade(run).violations


@pytest.mark.slow
def test_an_episode_row_file_decoding_to_1_1_gib_is_named_by_grade_in_bounded_memory(
    recorded: Path, tmp_path: Path
) -> None:
    """At the real bound: 1,100 copies of a real row whose task is a MiB of NULs, zstd (~150 KB; its footer says
    1.15 GB of pages), written 64 rows at a time. Grading it whole took 2.1 GiB before the bound, and ended in
    DuckDB's OutOfMemoryException under a 4 GiB address space."""
    run = _copy(recorded, tmp_path / "run")
    bomb = run / ROW
    _repeat_first_row(bomb, 1_100, batch=64, **{"rollbench/task": "\0" * MiB})
    assert bomb.stat().st_size < 512 << 10 and _modelled(bomb) > 2 << 30
    got = grade_in_a_cage(run)
    assert got["violations"][0] == f"file {bomb} is not read ({_refusal(bomb, 1 << 30)})"
    assert got["s"] < 30
    assert got["peak_rss_kib"] < 600 << 10  # under 600 MiB (a sound run's grade: ~200 MiB)


def _span_stated(raw: bytes, real: int, says: int) -> bytes:
    """``raw`` (one uncompressed column chunk of ``real`` bytes of pages) with its footer's ``total_compressed_size``
    replaced by ``says``, written in as many bytes: the i64 field after ``total_uncompressed_size`` (the same
    number, header byte 0x16 each; the row group's sizes follow other fields)."""
    (length,) = np.frombuffer(raw[-8:-4], dtype="<i4")
    footer = raw[-8 - int(length) : -8]
    width = -(-(2 * real).bit_length() // 7)
    pair = b"\x16" + _zigzag_varint(real, width)
    assert footer.count(pair + pair) == 1
    forged = footer.replace(pair + pair, pair + b"\x16" + _zigzag_varint(says, width))
    return raw[: -8 - int(length)] + forged + raw[-8:]


def test_a_dictionary_page_offset_after_the_data_page_offset_is_damage_and_the_resume_changes_nothing(
    recorded: Path, tmp_path: Path
) -> None:
    """Hostile round 22, F1: pyarrow reads from the smaller offset, DuckDB from the dictionary's; a footer putting
    the dictionary page after the data pages sent the bound to pages pyarrow never read. Here an episode row
    file's first dictionary-encoded chunk gets a dictionary offset one past its data offset (the footer's data and
    dictionary page offsets: fields 9 and 11, header byte 0x26 each, written in the same width)."""
    run = _copy(recorded, tmp_path / "run")
    row = run / "meta/episodes/chunk-000/file-000.parquet"
    md = pq.read_metadata(row)
    chunk = next(
        md.row_group(0).column(i) for i in range(md.num_columns) if md.row_group(0).column(i).has_dictionary_page
    )
    data, dictionary = chunk.data_page_offset, chunk.dictionary_page_offset
    raw = row.read_bytes()
    (length,) = np.frombuffer(raw[-8:-4], dtype="<i4")
    width = -(-(2 * data).bit_length() // 7)
    pair = b"\x26" + _zigzag_varint(data, width) + b"\x26" + _zigzag_varint(dictionary, width)
    assert raw[-8 - int(length) :].count(pair) == 1  # same width: both offsets of a small file
    forged = raw.replace(pair, b"\x26" + _zigzag_varint(data, width) + b"\x26" + _zigzag_varint(data + 1, width))
    row.write_bytes(forged)
    said = (
        f"{row} has a column chunk {chunk.path_in_schema} of row group 0 whose dictionary page offset {data + 1:,} "
        f"is not before its data page offset {data:,} (damaged)"
    )
    with pytest.raises(OSError) as refused:
        read_parquet(row)
    assert not isinstance(refused.value, UnsafeFile) and str(refused.value) == said
    assert f"file {row} is unreadable (OSError: {said})" in grade(run).violations

    before = tree_hash(run)
    r = invoke("eval", "--resume", run)
    assert (r.returncode, r.stdout) == (2, "")
    assert "episode row file meta/episodes/chunk-000/file-000.parquet is unreadable (OSError)" in r.stderr
    assert tree_hash(run) == before  # run.json too: the resume refused before it wrote anything


def _paged(path: Path) -> tuple[bytes, list[int]]:
    """A file of one DOUBLE column of 300 rows in pages of 100 values (uncompressed, plain), and each page's
    length (header and data, read back with the page header reader)."""
    pq.write_table(
        pa.table({"x": np.arange(300, dtype=np.float64)}),
        path,
        compression="none",
        use_dictionary=False,
        write_statistics=False,
        data_page_size=1,
        write_batch_size=100,
    )
    raw = path.read_bytes()
    chunk = pq.read_metadata(path).row_group(0).column(0)
    pos, lengths = chunk.data_page_offset, []
    while pos < chunk.data_page_offset + chunk.total_compressed_size:
        h = read_page_header(io.BytesIO(raw), pos, HeaderBudget())
        lengths.append(h.size + h.compressed)
        pos += lengths[-1]
    assert len(lengths) == 3 and sum(lengths) == chunk.total_compressed_size
    return raw, lengths


@pytest.mark.parametrize("stated", ["first page", "into the second page"])
def test_a_chunk_whose_pages_do_not_end_with_its_stated_span_is_damage(tmp_path: Path, stated: str) -> None:
    """Hostile round 22, F2: DuckDB reads page headers past a chunk's ``total_compressed_size`` (field 7, header byte
    0x16) until it has the chunk's values; a footer stating only the first page hid 199 pages of 256 MB from the
    bound. The pages in the span must hold the chunk's 300 values and end where the span ends."""
    path = tmp_path / "x.parquet"
    raw, lengths = _paged(path)
    says = lengths[0] + (0 if stated == "first page" else 1)
    path.write_bytes(_span_stated(raw, sum(lengths), says))
    start = pq.read_metadata(path).row_group(0).column(0).data_page_offset
    if stated == "first page":  # the lie is real: pyarrow stops at the span, DuckDB reads on past it
        assert pq.read_table(path).num_rows == 100
        assert duckdb.connect().execute(f"SELECT sum(x) FROM read_parquet('{path}')").fetchone() == (sum(range(300)),)
    end, values = (start + lengths[0], 100) if stated == "first page" else (start + lengths[0] + lengths[1], 200)
    with pytest.raises(OSError) as refused:
        read_parquet(path)
    assert not isinstance(refused.value, UnsafeFile)
    assert str(refused.value) == (
        f"{path} has a column chunk x of row group 0 whose pages (bytes {start:,} to {end:,}, {values:,} values) "
        f"are not the {says:,} bytes and 300 values its footer states (damaged)"
    )


def test_a_chunk_whose_span_runs_into_the_footer_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    raw, lengths = _paged(path)
    (length,) = np.frombuffer(raw[-8:-4], dtype="<i4")
    body = len(raw) - 8 - int(length)
    start = pq.read_metadata(path).row_group(0).column(0).data_page_offset
    path.write_bytes(_span_stated(raw, sum(lengths), body - start + 1))
    with pytest.raises(OSError, match=r"whose pages \(bytes 4 to ") as refused:
        read_parquet(path)
    assert str(refused.value) == (
        f"{path} has a column chunk x of row group 0 whose pages (bytes {start:,} to {body + 1:,}) are not within the "
        f"file's {body:,} bytes before its footer (damaged)"
    )


def _many_row_groups(path: Path, groups: int) -> int:
    """A file of ``groups`` one-row row groups of one int8 column; its footer's length (the 4 bytes before PAR1)."""
    pq.write_table(pa.table({"c": pa.array([1] * groups, pa.int8())}), path, row_group_size=1)
    return int(np.frombuffer(path.read_bytes()[-8:-4], dtype="<i4")[0])


def test_a_footer_over_its_bound_is_refused_before_any_parser_reads_it(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hostile round 22, F3: a 40 MB footer of repeated row groups took open_parquet's own check to 2.66 GB and
    grade to 6.46 GB. Here the bound is set down to 4 KiB and an episode row file gets a footer of 200 row groups;
    pyarrow's footer parser is made to fail the test if called on it."""
    run = _copy(recorded, tmp_path / "run")
    row = run / ROW
    footer = _many_row_groups(row, 200)
    assert footer > 4096
    monkeypatch.setattr(parquet_bounds, "MAX_FOOTER_BYTES", 4096)
    real = pq.ParquetFile

    def parse(source: object, **kwargs: object) -> pq.ParquetFile:
        assert source.seek(0, 2) != row.stat().st_size, "the footer was parsed"  # type: ignore[attr-defined]
        return real(source, **kwargs)

    monkeypatch.setattr(parquet_bounds.pq, "ParquetFile", parse)
    said = f"{row.stat().st_size:,} bytes whose footer is {footer:,}, over the 4,096 bytes of footer rollbench reads"
    with pytest.raises(UnsafeFile) as refused:
        read_parquet(row)
    assert str(refused.value) == f"{row} is {said}; not read"
    assert f"file {row} is not read ({said})" in grade(run).violations
    with pytest.raises(UnsafeFile, match=r"bytes of footer rollbench reads; not read$"):
        parquet_bounds.check_parquet_bytes(row.read_bytes(), row)


def test_a_file_of_more_column_chunks_than_its_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "many.parquet"
    _many_row_groups(path, 200)
    monkeypatch.setattr(parquet_bounds, "MAX_COLUMN_CHUNKS", 199)
    with pytest.raises(UnsafeFile) as refused:
        read_parquet(path)
    assert str(refused.value) == (
        f"{path} is {path.stat().st_size:,} bytes of 200 column chunks, over the 199 rollbench reads; not read"
    )
    monkeypatch.setattr(parquet_bounds, "MAX_COLUMN_CHUNKS", 200)
    assert read_parquet(path).num_rows == 200


def test_a_chunk_whose_pages_overlap_another_chunks_is_damage(tmp_path: Path) -> None:
    """Two equal columns, the second's data page offset (field 9 after field 7: header byte 0x26) moved to the
    first's: each span's pages add up alone, together they are one span read twice."""
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": [1.0, 2.0]}), path, compression="none", use_dictionary=False)
    md = pq.read_metadata(path)
    a, b = md.row_group(0).column(0), md.row_group(0).column(1)
    raw = path.read_bytes()
    (length,) = np.frombuffer(raw[-8:-4], dtype="<i4")
    footer = raw[-8 - int(length) : -8]
    width = -(-(2 * b.data_page_offset).bit_length() // 7)
    was = b"\x26" + _zigzag_varint(b.data_page_offset, width)
    assert footer.count(was) == 1
    forged = footer.replace(was, b"\x26" + _zigzag_varint(a.data_page_offset, width))
    path.write_bytes(raw[: -8 - int(length)] + forged + raw[-8:])
    assert pq.read_metadata(path).row_group(0).column(1).data_page_offset == a.data_page_offset
    with pytest.raises(OSError) as refused:
        read_parquet(path)
    assert str(refused.value) == (
        f"{path} has a column chunk b of row group 0 whose pages overlap another column chunk's (damaged)"
    )


def _header(page_type: int, *structs: tuple[int, int]) -> bytes:
    """A Thrift compact PageHeader written by hand (parquet.thrift): type, 10 bytes uncompressed and compressed, then
    ``(field, num_values)`` data page header structs (5: DataPageHeader, 8: DataPageHeaderV2)."""
    out, last = bytearray([0x15, page_type * 2, 0x15, 20, 0x15, 20]), 3
    for field, values in structs:
        out += bytes([((field - last) << 4) | 12, 0x15]) + bytes([(values * 2) & 0x7F | 0x80, (values * 2) >> 7, 0])
        last = field
    return bytes(out + b"\0")


@pytest.mark.parametrize(
    ("header", "values"),
    [(_header(0, (5, 99)), 99), (_header(3, (8, 99)), 99), (_header(2), 0), (_header(1), 0)],
    ids=["data-page", "data-page-v2", "dictionary-page", "index-page"],
)
def test_a_page_header_counts_the_values_of_its_own_type_only(header: bytes, values: int) -> None:
    assert read_page_header(io.BytesIO(header + b"\0" * 10), 0, HeaderBudget()).values == values


@pytest.mark.parametrize(
    "header",
    [_header(1, (5, 99)), _header(2, (8, 99)), _header(0, (5, 1), (8, 99)), _header(3, (5, 99))],
    ids=["index-page-with-values", "dictionary-page-with-v2-values", "v1-and-v2-values", "v2-page-with-v1-values"],
)
def test_a_value_count_on_a_page_of_another_type_is_damage(header: bytes) -> None:
    """Hostile round 23, a F1: an INDEX_PAGE, or a data page holding both headers, made a chunk's pages add up for
    the bound while DuckDB, counting data pages by their type, read on past the chunk's span (55 s for a 0.6 MB file)."""
    with pytest.raises(PageHeaderError, match="holding the header of a data page of another kind"):
        read_page_header(io.BytesIO(header + b"\0" * 10), 0, HeaderBudget())
