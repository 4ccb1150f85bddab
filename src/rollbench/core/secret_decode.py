"""The alphabet decoders of :class:`~rollbench.core.secret_echo.SecretEcho`: each takes the maximal runs of its
alphabet found in a text (at one alignment) and returns what they decode to (a piece that does not decode is left
out). base64 (standard or URL-safe) and base32 leave out a last character that encodes no byte; base85 and Ascii85
decode together with numpy (the standard library's decoders are pure Python)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

import numpy as np


def _each(decode: Callable[[str], bytes]) -> Callable[[list[str]], list[bytes]]:
    """``decode`` (one run -> its bytes) applied to a list of runs, leaving out the runs that do not decode."""

    def each(pieces: list[str]) -> list[bytes]:
        out = []
        for piece in pieces:
            try:
                out.append(decode(piece))
            except (ValueError, binascii.Error):
                continue
        return out

    return each


@_each
def b64(piece: str) -> bytes:
    """base64 runs (standard or URL-safe alphabet, no padding needed) -> their bytes."""
    piece = piece[: len(piece) - 1] if len(piece) % 4 == 1 else piece  # a lone last character encodes no byte
    return base64.b64decode(piece.replace("-", "+").replace("_", "/") + "=" * (-len(piece) % 4), validate=True)


@_each
def b32(piece: str) -> bytes:
    """base32 runs (any case) -> their bytes."""
    piece = piece[: len(piece) // 8 * 8 + (0, 0, 2, 2, 4, 5, 5, 7)[len(piece) % 8]]  # the lengths that end a group
    return base64.b32decode(piece.upper() + "=" * (-len(piece) % 8))


@_each
def hex_runs(piece: str) -> bytes:
    """Hexadecimal runs (an odd last digit dropped) -> their bytes."""
    return bytes.fromhex(piece[: len(piece) // 2 * 2])


def _base85_table(alphabet: str) -> np.ndarray:
    table = np.zeros(128, dtype=np.uint64)
    table[np.frombuffer(alphabet.encode(), dtype=np.uint8)] = np.arange(85, dtype=np.uint64)
    return table


_B85_TABLE = _base85_table("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~")
_A85_TABLE = _base85_table("".join(map(chr, range(33, 118))))
_POWERS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)


def _base85(pieces: list[str], table: np.ndarray, top: str) -> list[bytes]:
    """Base85 ``pieces`` decoded together with numpy (the standard library's decoder is pure Python): each padded
    with the alphabet's top digit to whole groups and followed by one group of it, which is over 2**32 and, like
    every group over 2**32, decodes to 0xFF bytes (a letter in Latin-1: a break)."""
    if not pieces:
        return []
    joined = "".join(p + top * (-len(p) % 5 + 5) for p in pieces)
    groups = table[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)].reshape(-1, 5) @ _POWERS
    return [np.minimum(groups, 0xFFFFFFFF).astype(">u4").tobytes()]


def b85(pieces: list[str]) -> list[bytes]:
    """base85 runs (RFC 1924 alphabet, as ``base64.b85encode``) -> their bytes, as one piece (see ``_base85``)."""
    return _base85(pieces, _B85_TABLE, "~")


def a85(pieces: list[str]) -> list[bytes]:
    """Ascii85 runs (``!`` to ``u``, as ``base64.a85encode``) -> their bytes, as one piece (see ``_base85``)."""
    return _base85(pieces, _A85_TABLE, "u")
