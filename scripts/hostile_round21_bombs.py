"""Hostile round 21's parquet decompression bombs for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``;
seeded by ``r.rng``; each variant failed before the fix: grade ran out of memory, or DuckDB's OutOfMemoryException
ended it in "cannot be graded"). Every command runs under an address-space limit (:data:`AS_LIMIT`) and a deadline,
so a variant that fails costs this machine nothing. In a copy of the runner's run, a step file or an episode row
file (at random) is replaced by a file of a few hundred KiB that decodes to 1.1 to 3 GiB, of one kind (at random):

* ``zeros`` (ids ``r21-bomb-N-zeros``): its first row repeated, one string column (or for a step file every column)
  holding a long run of NULs, plain and zstd-compressed: the footer states the size honestly;
* ``dictionary``: one string column holding one entry of 64 to 512 KiB, dictionary-encoded and repeated: the
  footer states a few KiB of pages, the rows decode to GiBs;
* ``forged``: a one-column file of NUL strings whose footer's uncompressed sizes are rewritten to 100 bytes (Thrift
  varints padded to the same length): only its page headers tell.

Each must give ``grade`` exit 1 naming the file (``... is not read (N bytes that decode to M, over the
1,073,741,824 rollbench decodes)``) within the deadline, no traceback or MemoryError; ``eval --resume`` exit 2 in one
line naming it; ``release --allow-violations`` exit 2 naming it, nothing written.
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

AS_LIMIT = 4 << 30  # bytes of address space each command gets (grade of a sound run needs under 1 GiB)
DEADLINE_S = 60
MiB = 1 << 20
OVER = "over the 1,073,741,824 rollbench decodes"


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _cli(r: Any, *args: object) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` within :data:`AS_LIMIT` and :data:`DEADLINE_S` (a hang: exit -999)."""
    cmd = [r.rb, *map(str, args)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, env=r.env,
                              stdin=subprocess.DEVNULL, preexec_fn=_limited)  # fmt: skip
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -999, "", "HANG")


def _check(res: subprocess.CompletedProcess[str], exits: set[int], words: str) -> list[str]:
    both = res.stdout + res.stderr
    problems = ["hung"] * (res.returncode == -999) + ["traceback"] * ("Traceback" in both)
    problems += ["MemoryError"] * ("MemoryError" in both) + ["OutOfMemory"] * ("OutOfMemory" in both)
    problems += [f"exit {res.returncode} not in {sorted(exits)}"] * (res.returncode not in exits)
    problems += [f"{words!r} not said"] * (words not in " ".join(both.split()))
    return problems


def _zeros(path: Path, r: Any) -> None:
    """``path``'s first row repeated, its longest string column (an episode row's task) or, for a step file, every
    column as it is: 1.1 to 3 GiB of pages, written 64 MiB at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = pq.read_table(path).slice(0, 1)
    if "rollbench/task" in first.column_names:
        length = r.rng.choice([256 << 10, 1 << 20, 4 << 20])
        rows, batch = r.rng.randint(1100 << 20, 3 << 30) // length, max(1, (64 << 20) // length)
        block = first.take(np.zeros(batch, dtype=np.int64))
        i = block.schema.get_field_index("rollbench/task")
        block = block.set_column(i, block.schema.field(i), pa.array(["\0" * length] * batch, pa.string()))
    else:  # a step row is ~80 bytes
        rows, batch = r.rng.randint(14_000_000, 30_000_000), 1 << 20
        block = first.take(np.zeros(batch, dtype=np.int64))
    _write(path, block, rows, batch, use_dictionary=False)


def _dictionary(path: Path, r: Any) -> None:
    """A one-column file: one entry of 64 to 512 KiB, its dictionary index repeated to 1.1 to 16 GiB (written as
    a dictionary array, so nothing that large is built; the arrow schema not stored, so readers decode strings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    length = r.rng.randint(64 << 10, 512 << 10)  # the dictionary page within pyarrow's 1 MiB: written as indices
    rows = r.rng.randint(1100 << 20, 16 << 30) // length
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["\0" * length]))
    pq.write_table(pa.table({"rollbench/task": column}), path, compression="zstd", store_schema=False)


def _forged(path: Path, r: Any) -> None:
    """A one-column file of NUL strings (1.1 to 2 GiB in 64 MiB row groups) whose footer says each chunk's pages
    and each row group hold 100 bytes."""
    import pyarrow as pa

    length = 1 << 20
    rows = r.rng.randint(1100, 2048)
    block = pa.table({"rollbench/task": pa.array(["\0" * length] * 64, pa.string())})
    _write(path, block, rows, 64, use_dictionary=False)
    path.write_bytes(_understated(path.read_bytes(), 100))


def _write(path: Path, block: Any, rows: int, batch: int, **options: Any) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_suffix(".new")
    with pq.ParquetWriter(tmp, block.schema, compression="zstd", **options) as w:
        for start in range(0, rows, batch):
            w.write_table(block.slice(0, min(batch, rows - start)))
    os.replace(tmp, path)


def _varint(n: int, width: int) -> bytes:
    """``n`` as Thrift's compact protocol writes an i64 (zigzag, varint), padded to ``width`` bytes."""
    v, out = (n << 1) ^ (n >> 63), bytearray()
    for _ in range(width - 1):
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def _understated(raw: bytes, says: int) -> bytes:
    """``raw`` (one column) with every chunk's ``total_uncompressed_size`` and every row group's ``total_byte_size``
    (the same numbers; each an i64 field one after the field before it: header byte 0x16) replaced by ``says``."""
    import io

    import pyarrow.parquet as pq

    length = int.from_bytes(raw[-8:-4], "little")
    footer = raw[-8 - length : -8]
    md = pq.read_metadata(io.BytesIO(raw))
    for real in {md.row_group(g).column(0).total_uncompressed_size for g in range(md.num_row_groups)}:
        width = -(-(2 * real).bit_length() // 7)
        footer = footer.replace(b"\x16" + _varint(real, width), b"\x16" + _varint(says, width))
    return raw[: -8 - length] + footer + raw[-8:]


KINDS = {"zeros": _zeros, "dictionary": _dictionary, "forged": _forged}


def bombs(r: Any, n: int) -> None:
    """Round 21: a decompression bomb in a run is named by grade, refused by resume and release, in bounded memory."""
    for i in range(n):
        kind = r.rng.choice(sorted(KINDS))
        cid = f"r21-bomb-{i}-{kind}"
        if r.pattern not in cid:
            continue
        r.count += 1
        d = r.copy(cid)
        rel = r.rng.choice(["data", "meta/episodes"]) + f"/chunk-000/file-{r.rng.randrange(3):03d}.parquet"
        bomb = d / "run" / rel
        t = time.monotonic()
        KINDS[kind](bomb, r)
        made = f"{bomb.stat().st_size:,} bytes made in {time.monotonic() - t:.1f} s"
        res = _cli(r, "grade", d / "run")
        problems = [f"grade: {p}" for p in _check(res, {1}, f"file {bomb} is not read (")]
        problems += [f"grade: {OVER!r} not said"] * (OVER not in " ".join(res.stdout.split()))
        problems += [
            f"resume: {p}" for p in _check(_cli(r, "eval", "--resume", d / "run"), {2}, f"{rel} is not read (")
        ]
        out = d / "released"
        res = _cli(r, "release", d / "run", "--out", out, "--allow-violations")
        problems += [f"release: {p}" for p in _check(res, {2}, f"cannot read a file to release: {bomb} is ")]
        problems += ["release wrote"] * out.exists()
        if problems:
            r.failures.append(f"{cid} ({rel}; {made}): {', '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """The class above: ``max(3, n // 2)`` variants (each writes a bomb and runs three commands)."""
    bombs(r, max(3, n // 2))
