"""The page headers of a parquet column chunk, read without decompressing a page: each header's sizes and value
count, what the file's footer only sums (and may misstate). A header is a Thrift compact-protocol ``PageHeader``
(apache/parquet-format, ``parquet.thrift``): field 1 the page type, 2 the uncompressed size, 3 the compressed size,
5 (a data page) or 8 (a data page, version 2) a struct whose field 1 is its value count, counted only on a page of
that type (any other, or both, is damage); every other field is skipped by its type.

Bounds, each a :class:`PageHeaderError`: a header of at most :data:`MAX_HEADER_BYTES`, structs nested at most
:data:`MAX_DEPTH` deep, and per :class:`HeaderBudget` (one per file) at most :data:`MAX_PAGES` headers and
:data:`MAX_HEADER_BYTES_READ` bytes parsed for them (so a file of a million tiny pages is refused after 65,536
headers, ~1 s at ~12 us each, and no header's lists make it parse more than 4 MiB).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_HEADER_BYTES = 64 << 10  # rollbench's are ~50 bytes; pyarrow's statistics hold at most 4 KiB of min/max values
MAX_DEPTH = 16  # a PageHeader's structs nest 3 deep
MAX_PAGES = 1 << 16  # headers read per file: rollbench writes a page per chunk; 1 MiB pages would make 64 GiB
MAX_HEADER_BYTES_READ = 4 << 20  # header bytes parsed per file (~50 bytes each; a retry parses 4x more again)
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)


class PageHeaderError(ValueError):
    """A page header that does not read (damage: a cut, an unknown type), or with ``bound`` True one past a bound of
    this module; the text says what (no file name)."""

    def __init__(self, why: str, bound: bool = False) -> None:
        super().__init__(why)
        self.bound = bound


@dataclass(frozen=True)
class PageHeader:
    """One page: ``size`` bytes of header, then ``compressed`` bytes that decompress to ``uncompressed``; ``values``
    its value count (levels included) for a data page, 0 for a dictionary or index page."""

    size: int
    uncompressed: int
    compressed: int
    values: int


@dataclass
class HeaderBudget:
    """What may still be read of one file's page headers: :data:`MAX_PAGES` headers, :data:`MAX_HEADER_BYTES_READ`
    bytes parsed (a header's own, and all of each shorter read it outgrew)."""

    pages: int = MAX_PAGES
    bytes: int = MAX_HEADER_BYTES_READ

    def take(self, pages: int, n: int) -> None:
        self.pages -= pages
        self.bytes -= n
        if self.pages < 0 or self.bytes < 0:
            raise PageHeaderError(
                f"over the {MAX_PAGES:,} page headers or {MAX_HEADER_BYTES_READ:,} bytes of them rollbench reads "
                "of a file",
                bound=True,
            )


def read_page_header(source: Any, pos: int, budget: HeaderBudget) -> PageHeader:
    """The page header at byte ``pos`` of ``source`` (a binary file or ``pa.BufferReader``: ``seek`` and ``read``);
    PageHeaderError when it does not read (cut, damaged, a negative size) or is past a bound."""
    n = 256
    budget.take(1, 0)
    while True:
        source.seek(pos)
        buf = source.read(n)
        try:
            header = _parse(bytes(buf))
            budget.take(0, header.size)  # the bytes parsed: what the work is proportional to
            return header
        except IndexError:
            budget.take(0, len(buf))  # parsed to its end, then parsed again from the start with more
            if len(buf) < n:
                raise PageHeaderError("cut short by the end of the file") from None
            if n >= MAX_HEADER_BYTES:
                raise PageHeaderError(f"over {MAX_HEADER_BYTES:,} bytes", bound=True) from None
            n *= 4


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it (IndexError past the end: the caller reads more)."""
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise PageHeaderError("a number longer than 64 bits")


def _field(buf: bytes, pos: int, last: int) -> tuple[int, int, int]:
    """``(field id, type, position after the field header)`` of the field header at ``pos`` (type 0: the struct's
    stop byte), ``last`` the struct's previous field id."""
    head = buf[pos]
    if head == _STOP:
        return 0, _STOP, pos + 1
    if head >> 4:
        return last + (head >> 4), head & 15, pos + 1
    v, pos = _varint(buf, pos + 1)
    return (v >> 1) ^ -(v & 1), head & 15, pos


def _skip(buf: bytes, pos: int, kind: int, depth: int) -> int:
    """The position after a value of type ``kind`` at ``pos``."""
    if depth > MAX_DEPTH:
        raise PageHeaderError(f"structs nested over {MAX_DEPTH} deep", bound=True)
    if kind in (_TRUE, _FALSE):
        return pos
    if kind in (_I16, _I32, _I64):
        return _varint(buf, pos)[1]
    if kind in (_BYTE, _DOUBLE):
        return pos + (1 if kind == _BYTE else 8)
    if kind == _BINARY:
        length, pos = _varint(buf, pos)
        return pos + length
    if kind in (_LIST, _SET):
        head = buf[pos]
        count, pos = (head >> 4, pos + 1) if head >> 4 != 15 else _varint(buf, pos + 1)
        for _ in range(count):  # each element takes a byte at least: the buffer's end stops a false count
            pos = pos + 1 if head & 15 in (_TRUE, _FALSE) else _skip(buf, pos, head & 15, depth + 1)
        return pos
    if kind == _MAP:
        count, pos = _varint(buf, pos)
        types = buf[pos] if count else 0
        pos += 1 if count else 0
        for _ in range(count):
            pos = _skip(buf, _skip(buf, pos, types >> 4, depth + 1), types & 15, depth + 1)
        return pos
    if kind == _STRUCT:
        fid, inner, pos = _field(buf, pos, 0)
        while inner != _STOP:
            pos = _skip(buf, pos, inner, depth + 1)
            fid, inner, pos = _field(buf, pos, fid)
        return pos
    raise PageHeaderError(f"a field of unknown type {kind}")


_DATA_PAGE_FIELD = {0: 5, 3: 8}  # page type (DATA_PAGE, DATA_PAGE_V2) -> the field of its header struct


def _parse(buf: bytes) -> PageHeader:
    ints = {1: -1, 2: -1, 3: -1}  # the page type, the uncompressed and the compressed sizes
    counted: dict[int, int] = {}  # 5 or 8 -> the value count of that data page header
    fid, kind, pos = _field(buf, 0, 0)
    while kind != _STOP:
        if fid in ints and kind == _I32:
            v, pos = _varint(buf, pos)
            ints[fid] = (v >> 1) ^ -(v & 1)
        elif fid in (5, 8) and kind == _STRUCT:  # DataPageHeader, DataPageHeaderV2: field 1 is num_values
            counted[fid] = 0
            inner, inner_kind, pos = _field(buf, pos, 0)
            while inner_kind != _STOP:
                if inner == 1 and inner_kind == _I32:
                    v, pos = _varint(buf, pos)
                    counted[fid] = (v >> 1) ^ -(v & 1)
                else:
                    pos = _skip(buf, pos, inner_kind, 1)
                inner, inner_kind, pos = _field(buf, pos, inner)
        else:
            pos = _skip(buf, pos, kind, 0)
        fid, kind, pos = _field(buf, pos, fid)
    if pos > len(buf):
        raise IndexError("past the end")  # a skipped binary or double ran past what was read
    if min(ints.values()) < 0 or any(v < 0 for v in counted.values()):
        raise PageHeaderError("no page type or sizes, or a negative size or value count")
    # a reader counts a page's values by its type alone (DuckDB, pyarrow): a value count on a page of another type,
    # or two of them, would make the chunk's pages seem to add up while the reader reads on past them (hostile 23a)
    own = _DATA_PAGE_FIELD.get(ints[1])
    if set(counted) - {own}:
        raise PageHeaderError(f"a page of type {ints[1]} holding the header of a data page of another kind")
    return PageHeader(pos, ints[2], ints[3], counted.get(own, 0) if own is not None else 0)


__all__ = ["HeaderBudget", "PageHeader", "PageHeaderError", "read_page_header"]
