"""What reading a run's parquet file may cost in memory, known before any value is decoded: a parquet decompression
bomb (a file of a few KiB whose column of zeros, compressed with zstd, or whose long run of dictionary-encoded
repeats, decodes to GiBs) is refused by :func:`check_decoded` before pyarrow or DuckDB decodes it.

Model: reading a file holds its pages decompressed and the arrays decoded from them, so each column chunk costs

* ``U``, the bytes of its pages decompressed (its page headers' sizes, as the footer's ``total_uncompressed_size``);
* ``n x w``: its values at their decoded width (``w``: 1 byte for a bool, 4 or 8 for a number, the declared length
  of a fixed-length byte array, 8 for a string's offset), ``n`` the row group's row count for a flat column (a
  reader decodes that many records, whatever the pages hold) and the values of its pages for a repeated one (a
  list: values per row are not bounded by the rows);
* for a string column, its bytes: at most ``U`` when its pages store them plainly; the sum of each value's length
  when dictionary-encoded (one long entry repeated ``n`` times decodes to ``n`` times its length: measured by
  reading the column as a dictionary, which costs ``n`` indices and the dictionary); ``n x U`` at most when
  prefix-encoded (``DELTA_BYTE_ARRAY``, which rollbench never writes).

A file is read only when the sum over its chunks is at most :data:`MAX_DECODED_BYTES` (the sum is a model of what
a reader holds at once, not an exact count: levels and a builder's spare capacity are left out). A footer may lie
(its sizes are written by whoever wrote the file), so every chunk's page headers are read (:func:`_scan`, the
headers only: a few bytes per page, within :mod:`rollbench.record.parquet_pages`' bounds) and their sizes and value
counts are taken instead, over the span every reader reads: from the dictionary page's offset when the footer sets
one (it must lie before the data page's: pyarrow starts at the smaller, DuckDB at the dictionary's) for the
chunk's compressed size, whose pages must end exactly at the span's end and hold the chunk's value count (DuckDB
reads pages past the span until it has them; hostile round 22, F1 and F2). A chunk whose span lies outside the
file's body or overlaps another chunk's, or whose pages do not add up, is damage (an OSError naming it, as a
damaged page). Measured: a 152 KB file whose footer says 100 bytes per column and whose pages hold 1.15 GB of
strings is refused at 2.3 GB, where pyarrow alone reads it to 2.2 GiB of memory.

The footer itself is bounded before pyarrow parses it (:func:`open_bounded`): at most :data:`MAX_FOOTER_BYTES`
(read from the 4 bytes before the trailing ``PAR1``; pyarrow holds ~65 bytes and DuckDB ~160 per footer byte), its
Thrift strings and containers within the same bound (pyarrow's ``thrift_*_size_limit``), and at most
:data:`MAX_COLUMN_CHUNKS` column chunks (row groups x columns), checked before a Python object is built per chunk. Cost on rollbench's own files (11 column chunks, ~36
page headers a file): ~0.35 ms a file, ~20 us a header; grading a 20-episode run took 132.5 ms against 126.6 ms
when only list columns were scanned (median of 5 x 21 grades, the shared 2-core machine).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.record.parquet_pages import MAX_PAGES, HeaderBudget, PageHeaderError, read_page_header
from rollbench.record.safe_files import UnsafeFile

MAX_DECODED_BYTES = 1 << 30  # 1 GiB: a run's parquet file (an episode's steps or row; tasks) decodes to KBs to MBs
MAX_FOOTER_BYTES = 1 << 20  # rollbench's footers are 1.5-6.4 KiB (a string column's statistics at most 8 KiB more)
MAX_COLUMN_CHUNKS = MAX_PAGES  # every chunk's page headers are read, at least one each (rollbench's: ~20 a file)
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 8}
_PLAIN = {"PLAIN", "RLE", "BIT_PACKED", "DELTA_LENGTH_BYTE_ARRAY"}  # a string's bytes stored once each
_DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
_DELTA = "DELTA_BYTE_ARRAY"


@dataclass(slots=True)
class _Chunk:
    """One column chunk as the footer states it (``meta``: pyarrow's ``ColumnChunkMetaData``, ``group`` its row
    group); ``pages`` and ``values`` are the page headers' sums once read (:func:`_scan`), ``encodings`` are read
    when the bound needs them, ``strings`` is the measured string bytes of a dictionary-encoded column."""

    meta: Any
    group: int
    width: int
    text: bool  # a byte-array (string) column
    repeated: bool
    rows: int
    start: int = 0  # where a reader starts reading its pages (:func:`_spans`)
    pages: int = 0
    values: int = 0
    encodings: frozenset[str] | None = None
    strings: int | None = None

    def cost(self) -> float:
        """Bytes this chunk holds when read (the module docstring's model), once scanned."""
        pages = self.pages
        n = self.values if self.repeated else self.rows
        if not self.text:
            return pages + n * self.width
        text: float
        if self.strings is not None:
            text = self.strings
        elif self.encodings is not None and self.encodings <= _PLAIN:
            text = pages
        else:
            text = n * pages  # every value as long as the pages (a dictionary entry repeated, a shared prefix)
        return pages + n * self.width + text


def _chunks(md: pq.FileMetaData) -> list[_Chunk]:
    """Every column chunk of ``md``, with only what the first estimate needs read (~1 us an attribute)."""
    schema = md.schema
    leaves = []
    for i in range(md.num_columns):
        col = schema.column(i)
        kind = col.physical_type
        width = col.length if kind == "FIXED_LEN_BYTE_ARRAY" else _WIDTH.get(kind, 8)
        leaves.append((width, kind == "BYTE_ARRAY", col.max_repetition_level > 0))
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        rows = rg.num_rows
        out += [
            _Chunk(rg.column(i), g, width, text, repeated, rows) for i, (width, text, repeated) in enumerate(leaves)
        ]
    return out


def decoded_bytes(pf: pq.ParquetFile, source: Any, path: Path | str) -> int:
    """What reading parquet file ``pf`` (opened on ``source``, a binary file or ``pa.BufferReader``; ``path`` names
    it in errors) holds in memory by the module docstring's model, its page headers read where its footer cannot
    be taken at its word, its dictionary-encoded strings measured only where the bound needs them (a file over the
    bound without them is given without them: at least that much). OSError for a page header that does not read,
    UnsafeFile for one past :mod:`rollbench.record.parquet_pages`' bounds or :data:`MAX_COLUMN_CHUNKS`; OSError
    for a chunk whose span or pages do not add up (:func:`_spans`, :func:`_scan`: damage)."""
    md = pf.metadata
    if md.num_row_groups * md.num_columns > MAX_COLUMN_CHUNKS:
        size = source.seek(0, 2)
        raise UnsafeFile(
            f"{path} is {size:,} bytes of {md.num_row_groups * md.num_columns:,} column chunks, over the "
            f"{MAX_COLUMN_CHUNKS:,} rollbench reads; not read"
        )
    chunks = _chunks(md)
    _spans(chunks, source, path)
    budget = HeaderBudget()
    for c in chunks:
        _scan(c, source, path, budget)
    total = _total(chunks)
    if total <= MAX_DECODED_BYTES:
        return int(total)
    for c in chunks:  # over at first sight: every string column's encodings
        if c.text:
            c.encodings = frozenset(c.meta.encodings)
    total = _total(chunks)
    dictionary = [c for c in chunks if c.encodings and c.encodings & _DICTIONARY and _DELTA not in c.encodings]
    if total > MAX_DECODED_BYTES and dictionary:
        for c in dictionary:
            c.strings = 0
        if _total(chunks) <= MAX_DECODED_BYTES:  # the indices and dictionaries fit: measure what they decode to
            _measure(pf, source, dictionary)
        total = _total(chunks)  # else over without its strings: that much at least
    return int(total)


def _total(chunks: Iterable[_Chunk]) -> float:
    return sum(c.cost() for c in chunks)


def check_decoded(pf: pq.ParquetFile, source: Any, path: Path | str) -> None:
    """UnsafeFile naming ``path``, its size and what it decodes to when parquet file ``pf`` (opened on ``source``)
    decodes to more than :data:`MAX_DECODED_BYTES` (:func:`decoded_bytes`); nothing otherwise."""
    decoded = decoded_bytes(pf, source, path)
    if decoded > MAX_DECODED_BYTES:
        size = source.seek(0, 2)
        raise UnsafeFile(
            f"{path} is {size:,} bytes that decode to {decoded:,}, over the {MAX_DECODED_BYTES:,} rollbench decodes; "
            "not read"
        )


def _measure(pf: pq.ParquetFile, source: Any, chunks: list[_Chunk]) -> None:
    """Set ``strings`` of ``chunks`` (dictionary-encoded string columns) to the bytes their values decode to: each
    column read as a dictionary (indices and entries only), each index's entry length summed."""
    paths = sorted({c.meta.path_in_schema for c in chunks})
    reader = pq.ParquetFile(source, metadata=pf.metadata, read_dictionary=paths)
    table = reader.read(columns=paths, use_threads=False)
    for c in chunks:
        c.strings = 0
    chunks[0].strings = sum(_dictionary_bytes(column) for column in table.columns)  # the total, counted once


def _dictionary_bytes(arr: Any) -> int:
    """The bytes of the strings ``arr``'s dictionary-encoded values decode to (lists, structs and maps walked)."""
    import pyarrow.compute as pc  # ~30 ms to import: only for a file over the bound at first sight

    if isinstance(arr, pa.ChunkedArray):
        return sum(_dictionary_bytes(a) for a in arr.chunks)
    kind = arr.type
    if pa.types.is_dictionary(kind):
        total = pc.sum(pc.take(pc.binary_length(arr.dictionary), arr.indices)).as_py()
        return int(total or 0)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _dictionary_bytes(arr.flatten())
    if pa.types.is_struct(kind):
        return sum(_dictionary_bytes(arr.field(i)) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _dictionary_bytes(arr.keys) + _dictionary_bytes(arr.items)
    return 0


def _name(c: _Chunk) -> str:
    return f"column chunk {c.meta.path_in_schema} of row group {c.group}"


def _spans(chunks: list[_Chunk], source: Any, path: Path | str) -> None:
    """Set each chunk's ``start``, where both pyarrow and DuckDB start reading it: its dictionary page offset when
    the footer sets one above 0 (which must then be at least 4 and before the data page offset: pyarrow starts at
    the smaller, DuckDB at the dictionary's), else its data page offset. OSError naming ``path`` and the chunk
    (damage) for a dictionary offset not before the data offset, a span (``start`` for the chunk's compressed size)
    outside the file's body (after the leading ``PAR1``, before the footer) or overlapping another chunk's."""
    size = source.seek(0, 2)
    source.seek(size - 8)
    body = size - 8 - int.from_bytes(source.read(4), "little")
    spans = []
    for c in chunks:
        m = c.meta
        data, dictionary = m.data_page_offset, m.dictionary_page_offset if m.has_dictionary_page else 0
        if dictionary and not 4 <= dictionary < data:
            raise OSError(
                f"{path} has a {_name(c)} whose dictionary page offset {dictionary:,} is not before its data page "
                f"offset {data:,} (damaged)"
            )
        c.start = dictionary or data
        end = c.start + m.total_compressed_size
        if c.start < 4 or m.total_compressed_size < 0 or end > body:
            raise OSError(
                f"{path} has a {_name(c)} whose pages (bytes {c.start:,} to {end:,}) are not within the file's "
                f"{body:,} bytes before its footer (damaged)"
            )
        spans.append((c.start, end, c))
    spans.sort(key=lambda s: (s[0], s[1]))
    for (_, end, _), (start, _, c) in itertools.pairwise(spans):
        if start < end:
            raise OSError(f"{path} has a {_name(c)} whose pages overlap another column chunk's (damaged)")


def _scan(c: _Chunk, source: Any, path: Path | str, budget: HeaderBudget) -> None:
    """Set ``c``'s pages and values to the sums of its page headers' (every header in its span, from ``start`` for
    its compressed size: the headers' own bytes counted, as the footer's ``total_uncompressed_size`` counts them);
    naming ``path`` and the byte, OSError for a header that does not read (damage, as pyarrow would find it),
    UnsafeFile for one past a bound of :mod:`rollbench.record.parquet_pages`; OSError (damage) for pages that run
    past the span or whose values are not the chunk's value count (the row group's rows for a flat column): DuckDB
    reads on past the span until it has them."""
    pages = values = 0
    pos = c.start
    end = pos + c.meta.total_compressed_size
    while pos < end:
        try:
            h = read_page_header(source, pos, budget)
        except PageHeaderError as exc:
            if exc.bound:
                raise UnsafeFile(f"{path} has a page header at byte {pos:,} past a bound ({exc}); not read") from None
            raise OSError(f"{path} has a page header at byte {pos:,} that does not read ({exc})") from None
        pages, values, pos = pages + h.size + h.uncompressed, values + h.values, pos + h.size + h.compressed
    stated = c.meta.num_values
    if pos > end or values != stated or (not c.repeated and stated != c.rows):
        raise OSError(
            f"{path} has a {_name(c)} whose pages (bytes {c.start:,} to {pos:,}, {values:,} values) are not the "
            f"{c.meta.total_compressed_size:,} bytes and {stated:,} values its footer states"
            + ("" if c.repeated or stated == c.rows else f" ({c.rows:,} rows)")
            + " (damaged)"
        )
    c.pages, c.values = pages, values


def check_footer(source: Any, path: Path | str) -> None:
    """UnsafeFile naming ``path`` when parquet file ``source`` (a binary file or ``pa.BufferReader``) states a footer
    over :data:`MAX_FOOTER_BYTES` (the 4 bytes before its trailing ``PAR1``), read before any parser sees it;
    nothing otherwise (a file too short or without ``PAR1`` is left to the parser, which names it damaged)."""
    size = source.seek(0, 2)
    if size < 12:
        return
    source.seek(size - 8)
    tail = bytes(source.read(8))
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] == b"PAR1" and footer > MAX_FOOTER_BYTES:
        raise UnsafeFile(
            f"{path} is {size:,} bytes whose footer is {footer:,}, over the {MAX_FOOTER_BYTES:,} bytes of footer "
            "rollbench reads; not read"
        )


def open_bounded(source: Any, path: Path | str) -> pq.ParquetFile:
    """``pq.ParquetFile`` of ``source`` (a binary file or ``pa.BufferReader``; ``path`` names it) after
    :func:`check_footer`, its footer parsed with Thrift strings and containers at most :data:`MAX_FOOTER_BYTES`
    long (an element takes a byte at least). UnsafeFile over a bound; what pyarrow raises for a footer that does not read."""
    check_footer(source, path)
    source.seek(0)
    return pq.ParquetFile(
        source, thrift_string_size_limit=MAX_FOOTER_BYTES, thrift_container_size_limit=MAX_FOOTER_BYTES
    )


def check_parquet_bytes(raw: bytes, path: Path | str) -> None:
    """:func:`check_footer` and :func:`check_decoded` of a parquet file held as bytes (``release`` reads each file
    once, then parses its bytes); UnsafeFile naming ``path`` when over a bound, OSError for a chunk that does not
    add up (damage). A footer that does not read passes: the reader that parses it names it."""
    source = pa.BufferReader(raw)
    try:
        pf = open_bounded(source, path)
    except (pa.ArrowException, ValueError):
        return
    check_decoded(pf, source, path)
