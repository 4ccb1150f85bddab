"""Does a normalised text hold a secret's characters in another order? The part of
:class:`~rollbench.core.secret_echo.SecretEcho` that finds a secret whose characters were moved or repeated rather
than encoded: pairs swapped, the whole reversed or shuffled, every character written twice or three times.

A text *holds a permutation* of a secret ``s`` (normalised: see :func:`~rollbench.core.secret_echo.normalised`) when
some run of ``k * len(s)`` consecutive characters of the text (``k`` in :data:`REPEATS`) has each character of ``s``
exactly ``k`` times as often as ``s`` has it, and no other character. Only secrets of :data:`MIN_PERMUTED_CHARS`
letters and digits or more are looked for this way: a shorter one has too few arrangements for ordinary text (or an
image's base64) never to contain one by chance.

How: each character gets a pseudo-random 64-bit weight (splitmix64 of its code point); a run is a permutation of
``s`` repeated ``k`` times when its weights sum (modulo 2**64) to ``k`` times the sum of ``s``'s weights. One prefix
sum per text, one comparison per run length: linear in the text's length, in numpy. Two different multisets have the
same sum with probability about 2**-64; such a collision would only hide a text that holds nothing (fail closed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_PERMUTED_CHARS = 16
"""The fewest letters and digits a secret needs (after normalisation) to be looked for in another order."""
REPEATS = (1, 2, 3)
"""How many times over each character of a secret may be written (``k`` above)."""


def _weights(codes: np.ndarray) -> np.ndarray:
    """splitmix64 of each code point (``codes``: any unsigned integer array) as a uint64 array."""
    z = codes.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def codes_of(text: str | bytes) -> np.ndarray:
    """The code points of ``text`` (bytes: one per byte) as an unsigned integer array."""
    if isinstance(text, bytes):
        return np.frombuffer(text, dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


class Permutations:
    """The permutation test for ``targets`` (``(name, normalised secret)`` pairs, in the order to report them);
    targets shorter than :data:`MIN_PERMUTED_CHARS` are left out; on bytes, only ASCII targets are looked for."""

    def __init__(self, targets: Sequence[tuple[str, str]]) -> None:
        self._sums: list[tuple[str, int, int, bool]] = []
        seen: set[tuple[int, int]] = set()
        for name, text in targets:
            if len(text) < MIN_PERMUTED_CHARS:
                continue
            total = int(_weights(codes_of(text)).sum(dtype=np.uint64))
            if (len(text), total) not in seen:  # a reversal has its original's multiset
                seen.add((len(text), total))
                self._sums.append((name, len(text), total, text.isascii()))

    def __bool__(self) -> bool:
        return bool(self._sums)

    def found(self, text: str | bytes) -> str | None:
        """The name of the first target ``text`` (normalised, or bytes normalised as Latin-1) holds a permutation of
        (see the module docstring), else None."""
        is_bytes = isinstance(text, bytes)
        usable = [s for s in self._sums if s[3] or not is_bytes]
        if not usable or len(text) < min(s[1] for s in usable):
            return None
        prefix = np.concatenate(([np.uint64(0)], np.cumsum(_weights(codes_of(text)), dtype=np.uint64)))
        for name, length, total, _ in usable:
            for k in REPEATS:
                m = k * length
                if m > len(text):
                    break
                if np.any(prefix[m:] - prefix[:-m] == np.uint64(total * k % 2**64)):
                    return name
        return None
