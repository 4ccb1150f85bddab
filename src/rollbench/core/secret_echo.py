"""Does a JSON value hold a secret in any recognisable form? One detector for every place that records what a peer
sent after it was sent a secret (a policy server's metadata, an LLM provider's replies) and for ``release``.

:class:`SecretEcho` answers for a set of secrets (``{name: value}``). A value *holds* a secret when the secret's
normalised text, reversed or rot13 too, is a substring of the normalised text of one of these candidates:

* candidate texts: every string and every key; per container (list or object, at any depth), the concatenation of
  its leaves in order (keys before their values; an integral number from 0 to 0x10FFFF counted as that code point,
  so a token split over items, or sent as an array of code points, is one text), and the bytes of its integral
  leaves from 0 to 255 (an array of a token's bytes); a string that is itself a JSON object or array is read as one
  (two levels);
* each candidate also decoded, and what that gives decoded once more (one nested level): percent, ``=XX`` and
  ``\\xXX`` escapes; ``\\uXXXX``, ``\\U...``, ``\\u{...}`` escapes and HTML entities; every maximal run of the base64
  (standard or URL-safe), base32, hex, base85 and Ascii85 alphabets at every alignment; sequences of numbers written
  in text (``116, 111``, ``0x74 0x6f``, ``74 6f``) as code points;
* bytes read as Latin-1 (with the normalisation below this also finds UTF-16 and UTF-32 of ASCII text), and as
  UTF-8 and UTF-16 when a secret is not ASCII;
* normalised (both sides): Unicode NFKC, case-folded, then every character that is not a letter or digit dropped
  (format characters such as zero-width spaces, whitespace, punctuation, ``_``).

A value also holds a secret when a candidate holds its characters in another order or each written up to three times
(pairs swapped, shuffled, doubled: :mod:`~rollbench.core.secret_permutation`, secrets of 16 letters and digits or more),
and when a candidate holds a long enough piece of it (12 letters and digits of a secret of 24 or more; half of one
from 16 to 23; 8 below: :mod:`~rollbench.core.secret_pieces`), so a secret cut in two and written apart is found;
pieces are looked for in the candidates as written, not in their decodings (a secret cut and each part encoded is
not found).

Not detectable, so never reported: a secret with fewer than :data:`MIN_SECRET_CHARS` letters and digits (a short
one would match ordinary text). Not caught, and cannot be by any detector: a peer that was sent a secret can always
hide it (in the low bits of numbers it returns, in an encryption of its own); this detector finds the echoes a
careless or hostile peer makes with the encodings above, so that they are not recorded.

Bounds: the work per value is at most :data:`WORK_FACTOR` times its size in characters plus :data:`WORK_FLOOR`
decoded characters; a value that needs more is reported as holding the first secret (fail closed: a value built to
exhaust the detector is not recorded). Callers bound what they pass (a server's metadata: 64 KiB; a provider reply:
16 MiB).
"""

from __future__ import annotations

import codecs
import functools
import html
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rollbench.core.secret_decode import a85, b32, b64, b85, hex_runs
from rollbench.core.secret_permutation import Permutations
from rollbench.core.secret_pieces import Pieces, piece_length

MIN_SECRET_CHARS = 8
"""The fewest letters and digits a secret needs (after normalisation) to be detected at all."""
WORK_FACTOR = 64
WORK_FLOOR = 2**20
CLEAN_MEMO = 64
_DROP = re.compile(r"[\W_]+")
_BREAK = "\u01c2"  # a letter in no alphabet decoded here: ends every run, survives normalisation
_ESCAPE = re.compile(r"(?:%|=|\\x)([0-9A-Fa-f]{2})")
_UNICODE = re.compile(r"\\u\{([0-9A-Fa-f]{1,6})\}|\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_DECIMAL = re.compile(r"(?<![0-9A-Za-z])[0-9]{1,7}(?![0-9A-Za-z])")
_HEX_NUMBER = re.compile(r"(?<![0-9A-Za-z])(?:0x)?([0-9A-Fa-f]{1,6})(?![0-9A-Za-z])")
_B85 = "0-9A-Za-z!#$%&()*+\\-;<=>?@^_`{|}~"


def _latin1_table() -> tuple[bytes, bytes]:
    """Bytes read as Latin-1 and normalised as :func:`normalised` would, one byte each: kept when it normalises to
    one ASCII letter or digit (``A`` -> ``a``, superscript two -> ``2``), dropped when it normalises to nothing,
    else 0xFF (a letter outside ASCII, or one NFKC expands: a break)."""
    table, dropped = bytearray(range(256)), bytearray()
    for b in range(256):
        n = normalised(chr(b))
        if not n:
            dropped.append(b)
        table[b] = ord(n) if len(n) == 1 and n.isascii() else 0xFF
    return bytes(table), bytes(dropped)


class _Exhausted(Exception):
    """The work bound was reached."""


def normalised(text: str) -> str:
    """``text`` in NFKC, case-folded, with every character that is not a letter or digit dropped."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return _DROP.sub("", text.casefold())


def _leaves(value: Any, keys: bool = True) -> Iterator[Any]:
    """The leaves of a JSON value in document order (an object's key before its value, when ``keys``)."""
    if isinstance(value, dict | list):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            if keys and isinstance(value, dict):
                yield k
            yield from _leaves(v, keys)
    else:
        yield value


def _integral(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) <= 2**31:
        return int(v)
    return None


_LATIN1, _LATIN1_DROPPED = _latin1_table()


class SecretEcho:
    """The detector for ``secrets`` (``{name: value}``; see the module docstring). ``names`` lists the secrets it
    can detect (those with :data:`MIN_SECRET_CHARS` or more letters and digits), in the order given. With
    ``pieces`` False, a piece of a secret (:mod:`~rollbench.core.secret_pieces`) is not looked for:
    :attr:`without_pieces` is that detector for the same secrets."""

    def __init__(self, secrets: Mapping[str, str], pieces: bool = True) -> None:
        self._secrets, self._use_pieces = dict(secrets), pieces
        self._targets: list[tuple[str, tuple[str, ...]]] = []
        for name, value in secrets.items():
            n = normalised(value)
            if len(n) >= MIN_SECRET_CHARS:
                rot = codecs.encode(n, "rot13")
                self._targets.append((name, tuple(dict.fromkeys((n, n[::-1], rot, rot[::-1])))))
        self.names = [n for n, _ in self._targets]
        self._permutations = Permutations([(name, t) for name, ts in self._targets for t in ts])
        self._pieces = Pieces([(name, t) for name, ts in self._targets for t in ts])
        shortest = min((len(t[0]) for _, t in self._targets), default=MIN_SECRET_CHARS)
        # the shortest text as written that can hold a target: its shortest piece (rollbench.core.secret_pieces)
        self._shortest_piece = min((piece_length(len(t[0])) for _, t in self._targets), default=MIN_SECRET_CHARS)
        longest = max((len(t[0]) for _, t in self._targets), default=MIN_SECRET_CHARS)
        self._ascii = all(t[0].isascii() for _, t in self._targets)
        self._window = 16 * longest + 64  # the longest form of a secret this detector decodes, with margin
        self._runs = [
            (re.compile(rf"[A-Za-z0-9+/_\-]{{{4 * shortest // 3},}}"), 4, b64),
            (re.compile(rf"[A-Za-z2-7]{{{8 * shortest // 5},}}"), 8, b32),
            (re.compile(rf"[0-9A-Fa-f]{{{2 * shortest},}}"), 2, hex_runs),
            (re.compile(f"[{_B85}]{{{5 * shortest // 4},}}"), 5, b85),
            (re.compile(rf"[!-u]{{{5 * shortest // 4},}}"), 5, a85),
        ]
        self._shortest = shortest
        self._printable = re.compile(rf"[\t\n\r -~]{{{shortest},}}")
        self._printable_bytes = re.compile(self._printable.pattern.encode())
        self._byte_targets = [(name, tuple(t.encode() for t in ts)) for name, ts in self._targets if ts[0].isascii()]
        self._work = 0
        self._clean: dict[str, None] = {}

    @functools.cached_property
    def without_pieces(self) -> SecretEcho:
        """This detector without the piece test (the first pass of :func:`scrubbed`)."""
        return SecretEcho(self._secrets, pieces=False)

    def piece_in(self, value: str | list[Any] | dict[str, Any]) -> str | None:
        """The name of the first secret a piece of which ``value`` holds as written (a string, or an array or
        object's leaves joined and byte values; no decoding), else None (see :mod:`~rollbench.core.secret_pieces`)."""
        if not self._pieces:
            return None
        joins, octets = self._joins(value) if isinstance(value, dict | list) else ([value], b"")
        for text in joins:
            if len(text) >= self._shortest_piece and (hit := self._pieces.found(normalised(text))):
                return hit
        return self._pieces.found(octets.translate(_LATIN1, _LATIN1_DROPPED)) if octets else None

    def found(self, value: Any) -> str | None:
        """The name of the first secret ``value`` (a JSON value: object, array, string, number) holds in a form
        this detector recognises, else None."""
        if not self._targets:
            return None
        self._work = WORK_FACTOR * len(json.dumps(value, default=str)) + WORK_FLOOR
        try:
            return self._found(value, 0)
        except _Exhausted:
            return self.names[0]

    def found_text(self, text: str) -> str | None:
        """:meth:`found` for one string (its own candidates only; see the module docstring)."""
        if not self._targets:
            return None
        self._work = WORK_FACTOR * len(text) + WORK_FLOOR
        try:
            return self._in_string(text, 0)
        except _Exhausted:
            return self.names[0]

    def found_outside(self, text: str, spans: list[tuple[int, int]]) -> str | None:
        """:meth:`found_text` for ``text`` without its sorted, disjoint ``spans`` (``(start, end)``: what a caller
        replaces in place); the pieces around them are not joined (a break stands for each span)."""
        cuts = [0, *(i for span in spans for i in span), len(text)]
        return self.found_text(_BREAK.join(text[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True)))

    def found_joined(self, container: list[Any] | dict[str, Any]) -> str | None:
        """:meth:`found` for what ``container`` holds only as a whole (its leaves joined, its byte values): the
        check left once each of its strings was checked alone."""
        if not self._targets:
            return None
        try:
            return self._in_joined(container, budget=True)
        except _Exhausted:
            return self.names[0]

    def _found(self, value: Any, level: int) -> str | None:
        if isinstance(value, str):
            return self._in_string(value, level)
        if isinstance(value, dict | list):
            for leaf in _leaves(value):
                if isinstance(leaf, str) and (hit := self._in_string(leaf, level)):
                    return hit
            return self._in_containers(value)
        return None

    def _in_containers(self, value: Any) -> str | None:
        if isinstance(value, dict | list):
            if hit := self._in_joined(value):
                return hit
            for v in value.values() if isinstance(value, dict) else value:
                if hit := self._in_containers(v):
                    return hit
        return None

    def _in_string(self, text: str, level: int) -> str | None:
        """One string: a JSON object or array in it is read as that document (two levels), else as text. A long
        string found clean is remembered (:data:`CLEAN_MEMO` of them): an agent's request bodies repeat its images."""
        if len(text) < self._shortest_piece and text.isascii():
            return None
        if text in self._clean:
            return None
        stripped = text.strip()
        parsed = None
        if level < 2 and stripped[:1] in ("{", "["):
            try:
                parsed = json.loads(stripped)
            except (ValueError, RecursionError):
                parsed = None
        hit = self._found(parsed, level + 1) if isinstance(parsed, dict | list) else self._in_text(text)
        if hit is None and len(text) >= 4096:
            self._clean[text] = None
            while len(self._clean) > CLEAN_MEMO:
                del self._clean[next(iter(self._clean))]
        return hit

    def _in_joined(self, container: Any, budget: bool = False) -> str | None:
        """The container's texts and bytes (:meth:`_joins`) searched."""
        joins, octets = self._joins(container)
        if budget:
            self._work = WORK_FACTOR * (len(joins[0]) + len(joins[1]) + len(octets)) + WORK_FLOOR
        for joined in dict.fromkeys(joins):
            if joined and (hit := self._in_text(joined)):
                return hit
        return self._in_bytes(octets, 0) if len(octets) >= self._shortest_piece else None

    def _joins(self, container: Any) -> tuple[list[str], bytes]:
        """The container's leaves joined (with its keys, then without: a token split over an object's values; ""
        for a single leaf), long strings cut to their ends; and its integral leaves from 0 to 255 as bytes."""
        w, joins, octets = self._window, [], bytearray()
        for keys in (True, False):
            parts = []
            for leaf in _leaves(container, keys):
                if isinstance(leaf, str):
                    parts.append(leaf if len(leaf) <= 2 * w else leaf[:w] + _BREAK + leaf[-w:])
                elif (n := _integral(leaf)) is not None and 0 <= n <= 0x10FFFF:
                    parts.append(chr(n))
                    if keys and n <= 255:
                        octets.append(n)
            joins.append("".join(parts) if len(parts) > 1 else "")
        return joins, bytes(octets)

    def _in_text(self, text: str | bytes, level: int = 0) -> str | None:
        """``text`` (bytes: read as Latin-1) and its decodings (levels 1 and 2) searched for every target."""
        if hit := self._hit(text, level) if isinstance(text, str) else self._hit_bytes(text, level):
            return hit
        if level >= 2:
            return None
        for decoded in self._decodings(text):
            if hit := self._in_text(decoded, level + 1):
                return hit
        return None

    def _in_bytes(self, data: bytes, level: int) -> str | None:
        for text in self._texts([data]):
            if hit := self._in_text(text, level):
                return hit
        return None

    def _hit_bytes(self, data: bytes, level: int) -> str | None:
        """:meth:`_hit` for bytes read as Latin-1, normalised with :data:`_LATIN1` (C speed: a decoded image is
        large); a secret that is not ASCII is looked for in the bytes' UTF-8 and UTF-16 texts instead."""
        self._work -= len(data)
        if self._work < 0:
            raise _Exhausted
        n = data.translate(_LATIN1, _LATIN1_DROPPED)
        for name, targets in self._byte_targets:
            if any(t in n for t in targets):
                return name
        return self._moved(n, level)

    def _moved(self, n: str | bytes, level: int) -> str | None:
        """A target whose characters ``n`` (normalised) holds in another order, or (a text as written, ``level``
        0) one of whose pieces it holds."""
        if self._permutations and (hit := self._permutations.found(n)):
            return hit
        return self._pieces.found(n) if self._pieces and self._use_pieces and not level else None

    def _hit(self, text: str, level: int) -> str | None:
        self._work -= len(text)
        if self._work < 0:
            raise _Exhausted
        n = normalised(text)
        if len(n) < (self._shortest if level else self._shortest_piece):
            return None
        for name, targets in self._targets:
            if any(t in n for t in targets):
                return name
        return self._moved(n, level)

    def _decodings(self, text: str | bytes) -> Iterator[str | bytes]:
        """What ``text`` may encode (see the module docstring): escapes, entities, alphabet runs, numbers. Every
        alphabet decoded is printable ASCII, so only ``text``'s printable runs long enough to encode a secret are
        read (binary decoded at level 1 costs one scan); the decodings of one alphabet at one alignment are one
        text (runs joined by a letter no alphabet has, so no match spans two runs)."""
        if isinstance(text, bytes):
            runs = [r.decode("ascii") for r in self._printable_bytes.findall(text)]
        else:
            runs = self._printable.findall(text)
        if not runs:
            return
        text = _BREAK.join(runs)
        if _ESCAPE.search(text):
            yield _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
        if "\\u" in text or "\\U" in text or "&" in text:
            yield html.unescape(_UNICODE.sub(_unicode_char, text))
        for pattern, step, decode in self._runs:
            found = pattern.findall(text)
            for start in range(step if found else 0):
                yield from self._texts(decode([run[start:] for run in found]))
        for pattern, base in ((_DECIMAL, 10), (_HEX_NUMBER, 16)):
            numbers = [int(m.group(m.lastindex or 0), base) for m in pattern.finditer(text)]
            if len(numbers) >= self._shortest:
                yield "".join(chr(n) for n in numbers if n <= 0x10FFFF)

    def _texts(self, pieces: list[bytes]) -> Iterator[str | bytes]:
        """``pieces`` of bytes joined by a break, as bytes (read as Latin-1), and as UTF-8 and UTF-16 texts for a
        secret that is not ASCII."""
        if not pieces:
            return
        yield b"\xff".join(pieces)
        if not self._ascii:
            yield _BREAK.join(p.decode("utf-8", "replace") for p in pieces)
            for codec in ("utf-16-le", "utf-16-be"):
                for i in (0, 1):
                    yield _BREAK.join(p[i:].decode(codec, "replace") for p in pieces)


def _unicode_char(m: re.Match[str]) -> str:
    n = int(next(g for g in m.groups() if g), 16)
    return chr(n) if n <= 0x10FFFF else ""


def scrubbed(value: Any, echo: SecretEcho, placeholder: str, exact: Callable[[str], str] | None = None) -> Any:
    """``value`` (a JSON value) as it may be recorded: each string first through ``exact`` (a caller's in-place
    replacement of the secret's exact forms), then every smallest part that still holds a secret of ``echo`` (a
    string, a key, or an array or object that holds it only as a whole: split over its items, an array of its
    bytes) replaced whole by ``placeholder``; then, on what is left, every smallest part that holds a piece of one
    (:meth:`SecretEcho.piece_in`). In that order, so an array holding a secret split over its items is replaced
    whole, never item by item (which would keep the items shorter than a piece). Numbers, booleans and null are
    kept."""
    return _pieces_scrubbed(_scrubbed(value, echo.without_pieces, placeholder, exact), echo, placeholder)


def _scrubbed(value: Any, echo: SecretEcho, placeholder: str, exact: Callable[[str], str] | None) -> Any:
    if isinstance(value, str):
        s = exact(value) if exact else value
        return placeholder if echo.found_text(s) else s
    if isinstance(value, list):
        out: Any = [_scrubbed(v, echo, placeholder, exact) for v in value]
    elif isinstance(value, dict):
        out = {_scrubbed(k, echo, placeholder, exact): _scrubbed(v, echo, placeholder, exact) for k, v in value.items()}
    else:
        return value
    return placeholder if echo.found_joined(out) else out


def _pieces_scrubbed(value: Any, echo: SecretEcho, placeholder: str) -> Any:
    if isinstance(value, str):
        return placeholder if value != placeholder and echo.piece_in(value) else value
    if isinstance(value, list):
        out: Any = [_pieces_scrubbed(v, echo, placeholder) for v in value]
    elif isinstance(value, dict):
        out = {_pieces_scrubbed(k, echo, placeholder): _pieces_scrubbed(v, echo, placeholder) for k, v in value.items()}
    else:
        return value
    return placeholder if echo.piece_in(out) else out
