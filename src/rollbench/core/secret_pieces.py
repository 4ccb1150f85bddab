"""Does a normalised text hold a piece of a secret? The part of :class:`~rollbench.core.secret_echo.SecretEcho` that
finds a secret cut into parts that were written apart (two halves on two lines of an instruction file, with words
between them): each part is a piece of the secret, and a long enough piece is as good as the secret to whoever reads
it.

A text *holds a piece* of a secret ``s`` (normalised: see :func:`~rollbench.core.secret_echo.normalised`, ``L``
letters and digits) when it holds any ``P`` consecutive characters of ``s``, where ``P = piece_length(L)``: 12 for a
secret of 24 or more, half the secret (rounded up) from 16 to 23, and 8 (the whole secret's floor,
:data:`~rollbench.core.secret_echo.MIN_SECRET_CHARS`) below 16. So a secret of 16 or more cut in two is always
found (one half has ``P`` or more); a secret cut into more parts is found when one part has ``P`` or more; parts all
shorter than ``P`` are not found, and said so (docs/release.md). A piece of 12 random letters and digits is one of
36**12 (about 5e18) strings: ordinary text does not hold one by chance.

How: the polynomial hash (modulo 2**64, odd base) of every window of ``P`` characters of the text, in numpy (``P``
multiply-adds over the text), looked up among the sorted hashes of the secret's windows. Two different windows have
the same hash with probability about 2**-64; such a collision only reports a text that holds nothing (fail closed).
A short text is checked with a set of the pieces instead (numpy's fixed cost would dominate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rollbench.core.secret_permutation import codes_of

LONG_PIECE = 12
"""The piece length of a secret of ``2 * LONG_PIECE`` letters and digits or more."""
SHORT_PIECE = 8
"""The shortest piece looked for (the floor of a detectable secret)."""
_BASE = np.uint64(0x100000001B3)  # odd: every power is a unit modulo 2**64
_SHORT_TEXT = 512  # characters: below this a text is checked with Python's set of pieces


def piece_length(n: int) -> int:
    """``P`` for a normalised secret of ``n`` letters and digits (see the module docstring): 8 below 16,
    ``ceil(n / 2)`` from 16 to 23, 12 from 24."""
    return min(LONG_PIECE, max(SHORT_PIECE, -(-n // 2)))


def _window_hashes(codes: np.ndarray, p: int) -> np.ndarray:
    """The hash of every window of ``p`` consecutive ``codes`` (uint64 array; ``len(codes) >= p``), in order."""
    n = len(codes) - p + 1
    out = np.zeros(n, dtype=np.uint64)
    for j in range(p):
        out = out * _BASE + codes[j : j + n]
    return out


class _Index:
    """Every target's windows of one piece length ``p``: as a set (short texts) and as sorted hashes with the
    index of the first target each belongs to (long texts)."""

    def __init__(self, p: int, targets: list[tuple[int, str]]) -> None:
        self.p = p
        self.pieces: dict[str, int] = {}
        by_hash: dict[int, int] = {}
        for order, text in targets:
            for i in range(len(text) - p + 1):
                self.pieces.setdefault(text[i : i + p], order)
            for h in _window_hashes(codes_of(text).astype(np.uint64), p).tolist():
                by_hash.setdefault(h, order)
        self.hashes = np.array(sorted(by_hash), dtype=np.uint64)
        self.orders = np.array([by_hash[h] for h in sorted(by_hash)], dtype=np.int64)

    def first(self, text: str, codes: np.ndarray | None) -> int | None:
        """The lowest target order whose piece ``text`` holds (``codes``: its code points, for a long text)."""
        p = self.p
        if codes is None:
            hits = [o for i in range(len(text) - p + 1) if (o := self.pieces.get(text[i : i + p])) is not None]
            return min(hits) if hits else None
        h = _window_hashes(codes, p)
        at = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
        hit = self.hashes[at] == h
        return int(self.orders[at[hit]].min()) if hit.any() else None


class Pieces:
    """The piece test for ``targets`` (``(name, normalised secret)`` pairs, in the order to report them); on bytes,
    only ASCII targets are looked for. A target shorter than 8 is left out."""

    def __init__(self, targets: Sequence[tuple[str, str]]) -> None:
        kept = [(name, text) for name, text in targets if len(text) >= SHORT_PIECE]
        self._names = [name for name, _ in kept]
        self._indexes: dict[bool, list[_Index]] = {}
        for is_bytes in (False, True):
            by_length: dict[int, list[tuple[int, str]]] = {}
            for order, (_, text) in enumerate(kept):
                if text.isascii() or not is_bytes:
                    by_length.setdefault(piece_length(len(text)), []).append((order, text))
            self._indexes[is_bytes] = [_Index(p, ts) for p, ts in sorted(by_length.items())]

    def __bool__(self) -> bool:
        return bool(self._names)

    def found(self, text: str | bytes) -> str | None:
        """The name of the first target ``text`` (normalised, or bytes normalised as Latin-1) holds a piece of (see
        the module docstring), else None."""
        s = text.decode("latin-1") if isinstance(text, bytes) else text
        codes = codes_of(text).astype(np.uint64) if len(s) >= _SHORT_TEXT else None
        orders = []
        for index in self._indexes[isinstance(text, bytes)]:
            if len(s) >= index.p and (order := index.first(s, codes)) is not None:
                orders.append(order)
        return self._names[min(orders)] if orders else None
