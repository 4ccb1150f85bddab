"""What reading a run's parquet file may cost in memory, known before any value is decoded: a parquet decompression
bomb (a file of a few KiB whose column of zeros, compressed with zstd, or whose long run of dictionary-encoded
repeats, decodes to GiBs) is refused by :func:`check_decoded` before pyarrow or DuckDB decodes it.

Model: reading a file holds its pages decompressed and the arrays decoded from them, so each column chunk costs

* ``U``, the bytes of its pages decompressed (the footer's ``total_uncompressed_size``);
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
(its sizes are written by whoever wrote the file): a chunk's ``U`` is taken from the footer only where its codec
cannot decompress its compressed bytes past ``U`` anyway, or the sum stays within the bound with the most its codec
could give (snappy at most 22x: a 3-byte copy element writes at most 64 bytes; gzip at most 1032x, deflate's limit;
zstd, brotli, lz4 and lzo without a stated bound); otherwise, and for every repeated column, the chunk's page
headers are read (:func:`_scan`, the headers only: a few bytes per page, within
:mod:`rollbench.record.parquet_pages`' bounds) and their sizes and value counts are taken instead. So a footer that
understates its pages does not pass: the headers pyarrow itself decompresses by are counted (measured: a 152 KB file
whose footer says 100 bytes per column and whose pages hold 1.15 GB of strings is refused at 2.3 GB, where pyarrow
alone reads it to 2.2 GiB of memory). Cost on rollbench's own files (snappy, a page per chunk): ~30-70 us for the
footer's sizes and ~12 us per page header of a list column (2 in a step file), measured on the shared 2-core
machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.record.parquet_pages import HeaderBudget, PageHeaderError, read_page_header
from rollbench.record.safe_files import UnsafeFile

MAX_DECODED_BYTES = 1 << 30  # 1 GiB: a run's parquet file (an episode's steps or row; tasks) decodes to KBs to MBs
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 8}
_RATIO = {"UNCOMPRESSED": 1, "SNAPPY": 22, "GZIP": 1032}  # the most one compressed byte decompresses to
_PLAIN = {"PLAIN", "RLE", "BIT_PACKED", "DELTA_LENGTH_BYTE_ARRAY"}  # a string's bytes stored once each
_DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
_DELTA = "DELTA_BYTE_ARRAY"


@dataclass(slots=True)
class _Chunk:
    """One column chunk as the footer states it (``meta``: pyarrow's ``ColumnChunkMetaData``); ``pages`` and
    ``values`` are the page headers' sums once read (``scanned``), ``encodings`` are read when the bound needs them,
    ``strings`` is the measured string bytes of a dictionary-encoded column."""

    meta: Any
    width: int
    text: bool  # a byte-array (string) column
    repeated: bool
    rows: int
    pages: int
    compressed: int
    ratio: float
    values: int = 0
    scanned: bool = False
    encodings: frozenset[str] | None = None
    strings: int | None = None

    def cost(self) -> float:
        """Bytes this chunk holds when read (the module docstring's model); ``inf`` when unbounded until scanned."""
        pages = self.pages if self.scanned else max(self.pages, self.compressed * self.ratio)
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
        for i, (width, text, repeated) in enumerate(leaves):
            c = rg.column(i)
            ratio = _RATIO.get(c.compression, math.inf)
            out.append(
                _Chunk(c, width, text, repeated, rows, c.total_uncompressed_size, c.total_compressed_size, ratio)
            )
    return out


def decoded_bytes(pf: pq.ParquetFile, source: Any, path: Path | str) -> int:
    """What reading parquet file ``pf`` (opened on ``source``, a binary file or ``pa.BufferReader``; ``path`` names
    it in errors) holds in memory by the module docstring's model, its page headers read where its footer cannot
    be taken at its word, its dictionary-encoded strings measured only where the bound needs them (a file over the
    bound without them is given without them: at least that much). OSError for a page header that does not read,
    UnsafeFile for one past :mod:`rollbench.record.parquet_pages`' bounds."""
    chunks = _chunks(pf.metadata)
    budget = HeaderBudget()
    for c in chunks:
        if c.repeated:
            _scan(c, source, path, budget)
    total = _total(chunks)
    if total <= MAX_DECODED_BYTES:
        return int(total)
    for c in chunks:  # over at first sight: every size the footer cannot vouch for read, every encoding
        if not c.scanned and c.compressed * c.ratio > c.pages:
            _scan(c, source, path, budget)
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


def _scan(c: _Chunk, source: Any, path: Path | str, budget: HeaderBudget) -> None:
    """Replace ``c``'s pages and values by the sums of its page headers' (every header in its compressed span, where
    a reader finds its pages; the headers' own bytes counted, as the footer's ``total_uncompressed_size`` counts
    them); naming ``path`` and the byte, OSError for a header that does not read (damage, as pyarrow would find it),
    UnsafeFile for one past a bound of :mod:`rollbench.record.parquet_pages`."""
    pages = values = 0
    pos = c.meta.dictionary_page_offset if c.meta.has_dictionary_page else c.meta.data_page_offset
    end = pos + c.compressed
    while pos < end:
        try:
            h = read_page_header(source, pos, budget)
        except PageHeaderError as exc:
            if exc.bound:
                raise UnsafeFile(f"{path} has a page header at byte {pos:,} past a bound ({exc}); not read") from None
            raise OSError(f"{path} has a page header at byte {pos:,} that does not read ({exc})") from None
        pages, values, pos = pages + h.size + h.uncompressed, values + h.values, pos + h.size + h.compressed
    c.pages, c.values, c.scanned = pages, values, True


def check_parquet_bytes(raw: bytes, path: Path | str) -> None:
    """:func:`check_decoded` of a parquet file held as bytes (``release`` reads each file once, then parses its
    bytes); UnsafeFile naming ``path`` when over the bound. A footer that does not read passes: the reader that
    parses it names it."""
    source = pa.BufferReader(raw)
    try:
        pf = pq.ParquetFile(source)
    except (pa.ArrowException, ValueError):
        return
    check_decoded(pf, source, path)
