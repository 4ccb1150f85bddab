"""Text a terminal puts together by moving its cursor (a hostile tester, after round 22): a key written in pieces and
reassembled on the screen (``sk-ant-api03-XXXX\\x1b[4Dabcd…``; a tail written first and its head put before it with
``ESC[23G``, ``ESC 7``/``ESC 8`` or ``ESC[s``/``ESC[u``; an overwrite after ``\\r``; backspaces; a piece moved up
into an earlier row by ``ESC[1A``, ``ESC[H``, ``ESC[5;10H``, ``ESC M``, VT or FF) matches no rule as written, nor
once the invisible characters are removed (:mod:`rollbench.release.invisible`), yet ``cat`` shows the key whole.

A string that may move the cursor (:data:`MOVES`: a CSI or ESC sequence other than an SGR colour, a string or a
character set choice; ``\\r`` not before ``\\n``; a backspace; VT, FF, the C1 moves) is drawn **as it will be
released** (its findings replaced by the placeholders they will get) on a terminal's screen (:func:`render`,
:mod:`rollbench.release.screen`), and the rules run on what the screen shows. The text is read by the grammar of
:data:`rollbench.release.invisible.ANSI_ESCAPE` (a control sequence may hold controls, which act where they stand,
as in xterm); the sequences of :data:`_SEQUENCES`, ``ESC 7 8 D E M c H``, ``\\r``, backspace, tab, VT, FF and the C1
moves act, ``\\n`` is CR LF; SGR colours, strings (OSC, DCS, ...), character set choices and sequences pyte and
xterm may read otherwise (intermediate bytes, sub-parameters) are passed over.

A finding there makes the whole string one placeholder (rule ``cursor:RULE``, ``RULE``'s category); in a text file
(``lines``) each line whose row holds it, when the text moves the cursor only within rows (:data:`HORIZONTAL`: row
N is line N; checked once more as released), else the whole text (rows cannot be traced back to lines once the
cursor moves between them). A string the screen cannot draw within its bounds is withheld whole (rule
``cursor:withheld``, category ``withheld``). A string without such a control costs one regex search.

Not modelled: a terminal's own size (text put against a right edge that clamps it, or relative to a screen top
that scrolled away: the screen here is as wide and tall as the text needs), a character a terminal draws wider
than ``wcwidth`` says (an ambiguous-width one, in a CJK setting), a secret spanning rows shown only in passing,
and what pyte and xterm do not share (a DCS payload, the alternate screen: drawn on the one screen)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from rollbench.release.findings import Finding, merged
from rollbench.release.screen import WORK_FREE, WORK_PER_CHAR, Screen, TooCostly

MOVES = re.compile(r"\r(?!\n)|[\x08\x0b\x0c\x84\x85\x88\x8d]|\x1b(?![\[][0-9;:]*m|[\]PX^_\\()=>])|\x9b(?![0-9;:]*m)")
"""A control that may move the cursor or change what a row shows: without one, a string is drawn as written."""
_C0_IN_CSI = "[\x00-\x17\x19\x1c-\x1f]"  # controls a terminal acts on inside a sequence (not CAN, SUB, ESC)
_CSI = rf"(?:\x1b\[|\x9b)(?P<p>(?:[0-?]|{_C0_IN_CSI})*+)(?P<i>[ -/]*+)(?P<f>[@-~])"
_TOKEN = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*+(?:\x07|\x9c|\x1b\\)?"  # strings: shown nowhere
    rf"|{_CSI}|\x1b(?P<e>[ -/]*+[0-~]?)|(?P<c>[\x00-\x1f\x7f-\x9f])"
)
_SEQUENCES = {  # CSI final -> pyte Screen method, parameters it takes
    "@": ("insert_characters", 1), "A": ("cursor_up", 1), "B": ("cursor_down", 1), "C": ("cursor_forward", 1),
    "D": ("cursor_back", 1), "E": ("cursor_down1", 1), "F": ("cursor_up1", 1), "G": ("cursor_to_column", 1),
    "H": ("cursor_position", 2), "I": ("tab_forward", 1), "J": ("erase_in_display", 1), "K": ("erase_in_line", 1),
    "L": ("insert_lines", 1), "M": ("delete_lines", 1), "P": ("delete_characters", 1), "S": ("scroll_up", 1),
    "T": ("scroll_down", 1), "X": ("erase_characters", 1), "Z": ("tab_back", 1), "`": ("cursor_to_column", 1),
    "a": ("cursor_forward", 1), "b": ("repeat", 1), "d": ("cursor_to_line", 1), "e": ("cursor_down", 1),
    "f": ("cursor_position", 2), "g": ("clear_tab_stop", 1), "h": ("set_mode", 16), "l": ("reset_mode", 16),
    "r": ("set_margins", 2), "s": ("save_cursor", 0), "u": ("restore_cursor", 0),
}  # fmt: skip
_ESCAPES = {"7": "save_cursor", "8": "restore_cursor", "D": "index", "E": "next_line", "M": "reverse_index",
            "c": "reset", "H": "set_tab_stop"}  # fmt: skip
_CONTROLS = {"\n": "newline", "\r": "carriage_return", "\x08": "backspace", "\t": "tab", "\x0b": "linefeed",
             "\x0c": "linefeed", "\x84": "index", "\x85": "next_line", "\x88": "set_tab_stop",
             "\x8d": "reverse_index"}  # fmt: skip
EDITS = frozenset({"$x", "$v", "$z", "${", "'~", "'}"})
"""VT420's rectangle and column edits (an intermediate byte and a final: DECFRA fills a rectangle with a character,
DECCRA copies one, DECERA and DECSERA erase one, DECDC and DECIC delete and insert columns; xterm in VT420 mode and
Windows Terminal act on them; hostile25a F3): the screen does not draw them, so a string holding one is withheld
whole (``cursor:withheld``) rather than scanned as if they did nothing."""
HORIZONTAL = frozenset("@CDGIKPXZ`ab")
"""CSI finals that move the cursor or change cells within its row only: with these, ``\\r``, backspace and tab
alone, row N shows line N of the text (and nothing of another line)."""
_VERTICAL = re.compile(  # what moves the cursor to another row, or sets what later rows are drawn with
    r"[\x0b\x0c\x84\x85\x88\x8d]|\x1b[78DEMcH]"
    rf"|(?:\x1b\[|\x9b)(?:[0-?]|{_C0_IN_CSI})*+[ -/]*+[{re.escape(''.join(sorted(set(_SEQUENCES) - HORIZONTAL)))}]"
)
_PARAMETERS = re.compile(r"[0-9;]*")


def moves(text: str) -> bool:
    """Whether ``text`` holds a :data:`MOVES` control (then a terminal may show it otherwise than written)."""
    return MOVES.search(text) is not None


def _act(screen: Screen, m: re.Match[str]) -> None:
    """One control, escape or control sequence of a text, acted on (pyte's method for it) or passed over."""
    if m["c"] is not None:
        if m["c"] in _CONTROLS:
            screen.act(_CONTROLS[m["c"]])
        return
    if m["e"] is not None:
        if m["e"] in _ESCAPES:
            screen.act(_ESCAPES[m["e"]])
        return
    if m["f"] is None:  # a string (OSC, DCS, ...): shown nowhere
        return
    raw = m["p"]
    for c in raw:  # controls inside a sequence act where they stand, as xterm's do
        if c in _CONTROLS:
            screen.act(_CONTROLS[c])
    params = "".join(c for c in raw if c >= " ")
    private = params.startswith("?")
    params = params[private:]
    if m["i"] and m["i"][-1] + m["f"] in EDITS:
        raise TooCostly  # a rectangle or column edit the screen does not model: the string is withheld whole
    if m["i"] or m["f"] not in _SEQUENCES or (private and m["f"] not in "hlJK") or not _PARAMETERS.fullmatch(params):
        return  # a sequence that moves nothing (SGR), or one pyte and xterm may read otherwise: passed over
    name, arity = _SEQUENCES[m["f"]]
    values = [min(int(v or 0), 9999) for v in params.split(";")][:arity]  # pyte's reading: 9999 at most
    screen.act(name, *values, **({"private": True} if private and m["f"] in "hl" else {}))


def drawn(text: str) -> Screen:
    """``text`` drawn on a :class:`~rollbench.release.screen.Screen` (see the module docstring); TooCostly when that
    would pass its bounds (:data:`~rollbench.release.screen.WORK_PER_CHAR`,
    :data:`~rollbench.release.screen.MAX_BYTES`)."""
    screen = Screen(WORK_PER_CHAR * len(text) + WORK_FREE, _VERTICAL.search(text) is None)
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            screen.pending.append(text[pos : m.start()])
        pos = m.end()
        screen.charge(1)
        _act(screen, m)
    screen.pending.append(text[pos:])
    screen.flush()
    return screen


def render(text: str) -> list[tuple[int, str]] | None:
    """What a terminal shows of ``text`` (:meth:`~rollbench.release.screen.Screen.views` of :func:`drawn`), or
    None when drawing it would pass the screen's bounds."""
    try:
        return drawn(text).views()
    except TooCostly:
        return None


def views(text: str) -> list[str]:
    """``text`` as a terminal shows it (:func:`render`), when it moves the cursor and can be drawn; else empty."""
    shown = render(text) if moves(text) else None
    return ["\n".join(v for _, v in shown)] if shown else []


def _released(text: str, found: list[Finding], placeholders: list[str]) -> tuple[str, list[int]]:
    """``text`` with ``found`` replaced by ``placeholders``; and where each of its lines ends in ``text`` (the
    offset of the newline ending it, then ``len(text)``), after ``-1``."""
    parts, ends, pos = [], [-1], 0
    for start, end, ph in [(f.start, f.end, p) for f, p in zip(found, placeholders, strict=True)] + [
        (len(text), len(text), "")
    ]:
        nl = text.find("\n", pos, start)
        while nl >= 0:
            ends.append(nl)
            nl = text.find("\n", nl + 1, start)
        parts += [text[pos:start], ph]
        pos = end
    return "".join(parts), [*ends, len(text)]


def _whole(text: str, lines: bool, rule: str, category: str) -> Finding:
    """A finding of the whole ``text``; of a text file (``lines``), all of it but its last newlines."""
    end = len(text.rstrip("\n")) if lines else len(text)
    return Finding(0, end, rule, category, text[:end])


def _hits(
    text: str, found: list[Finding], find: Callable[[str], list[Finding]], placeholders: list[str], lines: bool
) -> list[Finding]:
    """The findings of ``text`` as a terminal shows it released (``found`` replaced by ``placeholders``): spans of
    ``text`` to replace, ``cursor:RULE``."""
    shown, ends = _released(text, found, placeholders)
    views = render(shown)
    if views is None:
        return [_whole(text, lines, "cursor:withheld", "withheld")]
    starts, at = [], 0
    for _, v in views:
        starts.append(at)
        at += len(v) + 1
    out = []
    for f in find("\n".join(v for _, v in views)):
        first, last = (bisect.bisect_right(starts, k) - 1 for k in (f.start, max(f.start, f.end - 1)))
        rows = {views[i][0] for i in range(first, last + 1)}
        if not lines or -1 in rows:
            return [_whole(text, lines, f"cursor:{f.rule}", f.category)]
        out += [Finding(ends[y] + 1, ends[y + 1], f"cursor:{f.rule}", f.category, text[ends[y] + 1 : ends[y + 1]])
                for y in sorted(rows)]  # fmt: skip
    return out


def assembled(
    text: str,
    found: list[Finding],
    find: Callable[[str], list[Finding]],
    placeholders: Callable[[list[Finding]], list[str]],
    lines: bool,
) -> list[Finding]:
    """``found`` (the findings of ``text`` as written: sorted, apart) with the findings only a terminal shows
    (:func:`_hits`); ``found`` at once (one regex search) when ``text`` moves no cursor. ``find`` scans a view,
    ``placeholders`` gives those ``found`` will get. With ``lines`` (a text file) a finding in a row of text that
    moves the cursor only within rows is its line's, checked once more as released; else the whole text's."""
    if not moves(text):
        return found
    for _ in range(2):
        hits = _hits(text, found, find, placeholders(found), lines)
        if not hits:
            return found
        found = merged(found + hits, text)
    return [_whole(text, lines, hits[0].rule, hits[0].category)]
