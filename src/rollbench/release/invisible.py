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

ANSI_ESCAPE = (
    r"[\x1b][\[][0-?]*+[ -/]*+[@-~]"  # CSI (ESC [, parameters, intermediates, a final byte): colours, cursor moves
    r"|\x9b[0-?]*+[ -/]*+[@-~]"  # the same, 8-bit
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*+(?:\x07|\x1b\\|\x9c)"  # OSC/DCS/SOS/PM/APC to BEL or ST
    r"|\x1b[ -/]*+[0-~]"  # the other escapes: ESC, intermediates, a final byte (ESC ( B of tput sgr0, ESC =, ESC 7)
    r"|[^\x08\n]{4}\x08{4}|[^\x08\n]{3}\x08{3}|[^\x08\n]{2}\x08{2}|[^\x08\n]\x08"  # overstruck characters
)
"""A terminal's control sequence (ECMA-48: CSI ``ESC [`` ... a final byte; OSC and the other strings ``ESC ]``,
``ESC P``... to BEL or ST, an OSC 8 hyperlink's or a title's; an escape ``ESC`` + intermediates + a final byte, as
``tput sgr0`` prints ``ESC ( B``), or characters a backspace overstrikes (up to four: one backspace erases the
character before it on the screen). Coloured logs hold them: in ``\\x1b[32msk-…`` the ``m`` joins the key's first
letter into one word, in ``ghp_…\\x1b(B…`` the ``(B`` cuts the token in two, yet a terminal shows the key whole."""

_CHARACTERS = (
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
CONTROLS = re.compile(f"{_CHARACTERS}+")
"""A run of invisible characters: every control sequence holds one, so a string without any (:func:`has_invisible`) is
looked at once, at the speed of a character class, not by :data:`INVISIBLE`'s alternatives at every position."""

INVISIBLE = re.compile(f"(?:{ANSI_ESCAPE}|{_CHARACTERS})+")
"""A run of invisible characters and control sequences (see the module docstring; tests/test_release_encodings.py
checks that it holds every ``Cc`` but the four separators and every ``Cf`` character of this Python's Unicode
database)."""


def has_invisible(text: str) -> bool:
    """Whether ``text`` holds an invisible character (then :data:`INVISIBLE` may remove something from it)."""
    return CONTROLS.search(text) is not None


class _Span(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


F = TypeVar("F", bound=_Span)


def views(text: str) -> list[str]:
    """``text`` as a reader may see it once its invisible characters are gone: as a terminal shows it (every
    :data:`INVISIBLE` run removed, control sequences whole) and as its characters alone (only the invisible
    characters removed: ``cat -v``, a viewer that drops control bytes, where ``ESC k`` leaves its ``k``), each once;
    empty when it holds none."""
    if not has_invisible(text):
        return []
    seen = [INVISIBLE.sub("", text), CONTROLS.sub("", text)]
    return seen[:1] if seen[0] == seen[1] else seen


def hidden(text: str, found: Sequence[_Span], find: Callable[[str], list[F]]) -> F | None:
    """The first finding ``find`` makes in one of ``text``'s :func:`views` whose characters, placed back in ``text``,
    are not all inside the spans of ``found`` (the findings in ``text`` as written: ``start`` and ``end`` character
    offsets, sorted, not overlapping), or None: None at once (one regex search) when ``text`` holds no invisible
    character. The finding's offsets are those of the view it was found in."""
    if not has_invisible(text):
        return None
    spans = [(f.start, f.end) for f in found]
    for view in (INVISIBLE, CONTROLS):
        runs = [m.span() for m in view.finditer(text)]
        at, removed = [], [0]  # each run's offset in the view; the characters removed up to and with it
        for s, e in runs:
            at.append(s - removed[-1])
            removed.append(removed[-1] + e - s)

        for f in find(view.sub("", text)):
            first, last = (k + removed[bisect.bisect_right(at, k)] for k in (f.start, f.end - 1))  # offsets in text
            if f.end > f.start and not _covered(text, first, last + 1, spans, view):
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


def _covered(text: str, start: int, end: int, spans: list[tuple[int, int]], view: re.Pattern[str]) -> bool:
    """Whether every character of ``text[start:end]`` that ``view`` keeps is inside one of ``spans``."""
    pos = start
    for s, e in spans[max(0, bisect.bisect_right(spans, (start, len(text) + 1)) - 1) :]:
        if s >= end:
            break
        if e <= pos:
            continue
        if s > pos and view.sub("", text[pos:s]):
            return False
        pos = max(pos, e)
        if pos >= end:
            return True
    return not view.sub("", text[pos:end])
