"""Characters that hide a secret from the release rules without changing how it reads (hostile19 F1): a provider key
written with a NUL (``\\u0000`` in JSON) or a zero-width space between its characters matches no rule as written,
yet reads as the key once those characters are dropped.

*Invisible* here (:data:`INVISIBLE`): every control character (Unicode category ``Cc``: C0, DEL and C1) except tab,
newline, carriage return and form feed, which separate words; every format character (category ``Cf``: zero-width
space and joiners, soft hyphen, bidirectional marks and isolates, word joiner, the byte order mark, tag characters,
...); and the other default-ignorable characters (variation selectors, the combining grapheme joiner, Hangul fillers,
Mongolian free variation selectors); and a terminal's control sequences whole (:data:`ANSI_ESCAPE`). :func:`hidden` finds what the rules see only once they are removed;
:meth:`rollbench.release.rules.Scanner.find` then replaces the whole string (rule ``interleaved:RULE``). A string
holding them and no hidden finding (an emoji sequence joined by U+200D, Persian text with U+200C) is left as it is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, TypeVar

ANSI_ESCAPE = r"\x1b\[[0-?]*+[ -/]*+[@-~]"
"""A terminal's control sequence (ECMA-48 CSI: ``ESC [``, parameters, intermediates, a final byte), as coloured logs
hold them: ``\\x1b[32msk-…`` shows the key in green, and its ``m`` joins the key's first letter into one word."""

INVISIBLE = re.compile(
    f"(?:{ANSI_ESCAPE}|"
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff])+"
)
"""A run of invisible characters and control sequences (see the module docstring; tests/test_release_encodings.py checks that it holds
every ``Cc`` but the four separators and every ``Cf`` character of this Python's Unicode database)."""


class _Span(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


F = TypeVar("F", bound=_Span)


def stripped(text: str) -> str:
    """``text`` without its invisible characters."""
    return INVISIBLE.sub("", text)


def hidden(text: str, found: Sequence[_Span], find: Callable[[str], list[F]]) -> F | None:
    """The first finding ``find`` makes in ``text`` with its invisible characters removed whose characters, placed
    back in ``text``, are not all inside the spans of ``found`` (the findings in ``text`` as written: ``start`` and
    ``end`` character offsets, sorted, not overlapping), or None: None at once (one regex search) when ``text`` holds
    no invisible character. The finding's offsets are those of the stripped text."""
    if INVISIBLE.search(text) is None:
        return None
    spans = [(f.start, f.end) for f in found]
    runs = [m.span() for m in INVISIBLE.finditer(text)]
    at, removed = [], [0]  # each run's offset in the stripped text; the characters removed up to and with it
    for s, e in runs:
        at.append(s - removed[-1])
        removed.append(removed[-1] + e - s)

    def placed(k: int) -> int:  # the offset in text of the stripped text's character k
        return k + removed[bisect.bisect_right(at, k)]

    for f in find(INVISIBLE.sub("", text)):
        if f.end > f.start and not _covered(text, placed(f.start), placed(f.end - 1) + 1, spans):
            return f
    return None


class _Piece(NamedTuple):
    start: int
    end: int


def hidden_lines(text: str, found: Sequence[_Span], find: Callable[[str], list[F]]) -> list[tuple[int, int, F]]:
    """``(start, end, finding)`` for every line of ``text`` (split at newlines, which are never invisible) that holds
    a :func:`hidden` finding: the line's offsets in ``text`` and the finding :func:`hidden` makes in it, given
    ``found`` (the findings in ``text`` as written, sorted, not overlapping, clipped to each line)."""
    out, start, j = [], 0, 0
    for line in text.split("\n"):
        end = start + len(line)
        while j < len(found) and found[j].end <= start:  # sorted and apart: each is passed once
            j += 1
        own = []
        for f in found[j:]:
            if f.start >= end:
                break
            own.append(_Piece(max(f.start, start) - start, min(f.end, end) - start))
        h = hidden(line, [p for p in own if p.end > p.start], find) if line else None
        if h is not None:
            out.append((start, end, h))
        start = end + 1
    return out


def _covered(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    """Whether every visible character of ``text[start:end]`` is inside one of ``spans``."""
    pos = start
    for s, e in spans[max(0, bisect.bisect_right(spans, (start, len(text) + 1)) - 1) :]:
        if s >= end:
            break
        if e <= pos:
            continue
        if s > pos and INVISIBLE.sub("", text[pos:s]):
            return False
        pos = max(pos, e)
        if pos >= end:
            return True
    return not INVISIBLE.sub("", text[pos:end])
