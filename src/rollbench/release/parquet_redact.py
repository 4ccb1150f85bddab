"""One parquet file's table redacted for ``rollbench release`` (:meth:`rollbench.release.redact.Releaser.
parquet_file`), in the two passes of release's JSON walk (:class:`rollbench.release.redact._DocWalk`):

* pass 1: every rule on each string (no piece of an environment secret looked for) and, innermost first, each list,
  struct or map value that holds an environment secret only as a whole (split over its items, a list of its bytes
  or code points: :meth:`rollbench.core.secret_echo.SecretEcho.found_joined`);
* pass 2, on pass 1's table: each string and container still holding a piece of one
  (:meth:`~rollbench.core.secret_echo.SecretEcho.piece_in`).

In that order, so a list holding a secret split over its items is replaced whole, never item by item. A parquet
list cannot become a string in place, so a container found has every string and binary in it (items, struct field
values, map keys and items) replaced by the secret's placeholder, the one the same value gets in a JSON file
(``<REDACTED:env_secret:N>``); when its numbers still hold the secret (a ``list<int64>`` of its bytes), the file is
refused naming the column and row (:class:`rollbench.core.contracts.RollbenchError`): a number cannot become a
placeholder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from rollbench.core.contracts import RollbenchError
from rollbench.core.secret_echo import MIN_SECRET_CHARS
from rollbench.release.parquet_text import TextFn, fill_text, map_table
from rollbench.release.rules import Scanner

TextRed = Callable[[str, str | None, str, bool], str]  # (text, field, where, pieces) -> redacted text, recorded


def json_form(v: Any) -> Any:
    """A :func:`rollbench.release.parquet_text.map_value` value as the JSON value the secret detector reads: binary
    as text (``surrogateescape``), a map as an object (its keys all distinct strings) or a list of ``[key, item]``
    pairs, a value that is neither text nor a number (a time, a decimal) as null."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, dict):
        return {k: json_form(x) for k, x in v.items()}
    if isinstance(v, list) and v and all(isinstance(x, tuple) for x in v):  # a map's (key, item) pairs
        keys = [k for k, _ in v]
        if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
            return {k: json_form(x) for k, x in v}
        return [[json_form(k), json_form(x)] for k, x in v]
    if isinstance(v, list):
        return [json_form(x) for x in v]
    return v if v is None or isinstance(v, str | int | float) else None


class TableRedaction:
    """The passes over one table (see the module docstring); ``red(text, field, where, pieces)`` redacts one string
    and records what it replaced; each container replaced is appended to ``redactions``."""

    def __init__(self, scanner: Scanner, rel: str, red: TextRed, redactions: list[dict[str, Any]]) -> None:
        self.scanner, self.rel, self.red, self.redactions = scanner, rel, red, redactions

    def redacted(self, table: pa.Table) -> pa.Table:
        """``table`` after both passes. Raises RollbenchError for a secret numbers hold as a whole."""
        echo = self.scanner.echo
        one = map_table(
            table, lambda s, f, w: self.red(s, f, w, False), self._whole(echo.without_pieces.found_joined), self.spell
        )
        two = lambda s, f, w: self.red(s, f, w, True) if echo.piece_in(s) else s  # noqa: E731
        return map_table(one, two, self._whole(echo.piece_in), self.spell)

    def spell(self, leaves: np.ndarray) -> bool:
        """Whether a column of numbers whose integral leaves are ``leaves`` could hold a secret as code points or
        bytes: it needs :data:`~rollbench.core.secret_echo.MIN_SECRET_CHARS` ASCII letters and digits among them (a
        control character or punctuation is dropped by the detector's normalisation), or one number above 127 (NFKC
        may make several letters of it), or any number at all when a secret is not ASCII (its UTF-16 bytes)."""
        values = [p.pattern for n, _, p, _ in self.scanner.patterns if n.startswith("environment:")]
        if not self.scanner.echo.names or not values:
            return False
        leaves = leaves[(leaves >= 0) & (leaves <= 0x10FFFF)]
        if not all(v.isascii() for v in values):
            return len(leaves) > 0
        alnum = (
            ((leaves >= 48) & (leaves <= 57)) | ((leaves >= 65) & (leaves <= 90)) | ((leaves >= 97) & (leaves <= 122))
        )
        return bool((leaves > 127).any()) or int(alnum.sum()) >= MIN_SECRET_CHARS

    def check(self, table: pa.Table, text: TextFn) -> None:
        """``table`` walked with ``text`` (a check that raises on a finding) and every container checked by both
        tests; RollbenchError naming the place of a secret left."""
        echo = self.scanner.echo

        def whole(v: Any, _t: pa.DataType, _field: str, where: str) -> Any:
            name = echo.without_pieces.found_joined(json_form(v)) or echo.piece_in(json_form(v))
            if name is not None:
                raise RollbenchError(f"{self.rel}: an environment secret is still present at {where} after redaction")
            return v

        map_table(table, text, whole, self.spell)

    def _whole(self, detect: Callable[[Any], str | None]) -> Callable[[Any, pa.DataType, str, str], Any]:
        def whole(v: Any, t: pa.DataType, _field: str, where: str) -> Any:
            name = detect(json_form(v))
            if name is None:
                return v
            ph = self.scanner.placeholder(json.dumps(json_form(v)), "env_secret")
            new = fill_text(v, t, ph)
            if detect(json_form(new)) is not None:
                raise RollbenchError(
                    f"{self.rel}: {where} holds an environment secret in the numbers of a list, struct or map, which "
                    "cannot be redacted in place (a number cannot become its placeholder); edit it out of the run"
                )
            self.redactions.append({"file": self.rel, "field": where, "rule": f"environment:{name}",
                                    "category": "env_secret", "placeholder": ph})  # fmt: skip
            return new

        return whole
