"""A terminal's screen for ``rollbench release`` (:mod:`rollbench.release.cursor` reads a text's controls onto
it): pyte's VT100 screen (its cursor, margins, modes, saved cursor and tab stops: :class:`Screen`), its cells kept
in rows of its own that no column or row bound stops, wraps or scrolls (:data:`FAR`), and its work bounded for any
text.

pyte's screen stores every row as wide as the screen, erases and shifts column by column and scrolls row by row, so
a hostile text (a far column, a long row erased again and again) could make it take quadratic time or unbounded
memory; here a row holds the cells written (:class:`_Row`; a string once the cursor left it with nothing to keep),
each erasure, shift or scroll costs what it touches, and that is counted: drawing a text may cost
:data:`WORK_PER_CHAR` cell operations per character of it plus :data:`WORK_FREE` (cells drawn, erased, shifted or
kept, rows moved, tab stops searched, :data:`TOKEN_WORK` per control acted on), and the rows may hold
:data:`MAX_BYTES`; past either, :class:`TooCostly`. Methods pyte
lacks and xterm has: ``repeat`` (REP), ``scroll_up``/``scroll_down`` (SU, SD), ``tab_forward``/``tab_back`` (CHT,
CBT), ``newline`` (``\n`` as a tty writes it: CR LF), ``next_line`` (NEL); one saved cursor, restored as often as
asked (xterm's DECSC); only the insert, new-line and origin modes are set (others would resize the screen or change
no character).

What it shows (:meth:`Screen.views`): every row, and every row as it was just before characters it showed were
overwritten, erased or shifted, when it then held more than one piece of the text (so a key shown in passing
counts too; a row drawn in one piece shows a piece of the text as written). A screen for text that moves the
cursor only within rows (``horizontal``) drops each row once the text leaves it, keeping what it showed if a move
touched it. A character takes its ``wcwidth`` columns (two for a wide one; a combining mark joins the character
before it; a format character is not shown)."""

from __future__ import annotations

import copy
import sys
import unicodedata
from collections.abc import Callable
from typing import Any

import pyte
from pyte import modes
from pyte.screens import Cursor
from wcwidth import wcwidth

FAR = 1 << 30  # the screen's width and height: nothing written reaches either
WORK_PER_CHAR = 8
WORK_FREE = 1 << 16
MAX_BYTES = 1 << 26  # what the rows may hold: 8 bytes a cell of a row being written, a row left as a string
TOKEN_WORK = 4  # what acting on one control or sequence costs (about 2 µs, some 40 cells' work)
REACH = 256  # columns kept either side of characters a row loses: a secret shown in passing up to this long


class TooCostly(Exception):
    """Drawing a text would pass :data:`WORK_PER_CHAR` or :data:`MAX_BYTES`."""


class _Row(list[str]):
    """A row's cells (a character with its combining marks; ``""`` after a wide one), from column 0; ``lo``, ``hi``:
    the columns drawn since it was blank; ``dlo``, ``dhi``: the columns changed since what is around them was last
    kept, while the row shows more than one piece of the text (empty: nothing to keep)."""

    __slots__ = ("dhi", "dlo", "hi", "lo")

    def __init__(self) -> None:
        super().__init__()
        self.lo = self.hi = self.dlo = self.dhi = 0

    def changed(self, start: int, end: int) -> None:
        self.dlo, self.dhi = (min(self.dlo, start), max(self.dhi, end)) if self.dlo < self.dhi else (start, end)


class Screen(pyte.Screen):
    """pyte's screen with rows of its own (:class:`_Row`, only those written, each as long as written): its
    column-by-column and row-by-row methods are replaced by ones whose work is counted (:data:`WORK_PER_CHAR`)."""

    cursor: Cursor
    tabstops: set[int]

    def __init__(self, budget: int, horizontal: bool) -> None:
        self.budget, self.work, self.cells, self.strings, self.horizontal = budget, 0, 0, 0, horizontal
        self.grid: dict[int, _Row | str] = {}  # a row the cursor left with nothing to keep: a string (1/8 the size)
        self.snaps: list[tuple[int, str]] = []  # (row, what it showed) before it lost characters
        self.shown: list[tuple[int, str]] = []  # horizontal: rows finished that a move touched
        self.moved: set[int] = set()
        self.pending: list[str] = []
        self.last, self.stops_cleared, self.unset, self.interned = "", False, set[int](), dict[str, str]()
        super().__init__(1, 1)
        self.columns = self.lines = FAR

    def charge(self, n: int) -> None:
        self.work += n
        if self.work > self.budget or 8 * self.cells + self.strings + 64 * len(self.grid) > MAX_BYTES:
            raise TooCostly

    def act(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Draw the text put so far, then call ``name``."""
        self.flush()
        self.charge(TOKEN_WORK)
        y = self.cursor.y
        if self.horizontal and name not in ("newline", "tab", "tab_forward"):
            self.moved.add(y)
        getattr(self, name)(*args, **kwargs)
        row = self.grid.get(y)
        if self.cursor.y != y and isinstance(row, _Row) and row.dlo >= row.dhi:
            self.charge(len(row))
            text = "".join(row)  # left, with nothing to keep: a string, when each cell is one character
            if len(text) == len(row):
                self.grid[y], self.cells, self.strings = text, self.cells - len(row), self.strings + sys.getsizeof(text)

    def flush(self) -> None:
        if self.pending:
            text, self.pending = "".join(self.pending), []
            self.draw(text)

    def _row(self) -> _Row:
        """The cursor's row, to be written."""
        row = self.grid.get(self.cursor.y)
        if isinstance(row, _Row):
            return row
        self.grid[self.cursor.y] = new = _Row()
        if row:  # a string again: one piece, as far as anything is to be kept
            new.extend(row)
            new.hi, self.cells, self.strings = len(row), self.cells + len(row), self.strings - sys.getsizeof(row)
            self.charge(len(row))
        return new

    def _keep(self, y: int, row: _Row, start: int, end: int) -> None:
        """Keep what ``row`` (row ``y``) shows within :data:`REACH` of columns ``start``..``end``, about to change,
        when it changed near them since it was last kept there (a secret shown now holds a changed column)."""
        if row.dlo < row.dhi and row.dlo < end + REACH and row.dhi > start - REACH:
            lo, hi = max(0, start - REACH), end + REACH
            self.charge(max(0, min(hi, len(row)) - lo))
            self.snaps.append((y, "".join(row[lo:hi]).strip()))
            if lo <= row.dlo and row.dhi <= hi:
                row.dlo = row.dhi = 0

    def _drop(self, y: int) -> None:
        row = self.grid.pop(y)
        if isinstance(row, str):
            self.strings -= sys.getsizeof(row)
        else:
            self._keep(y, row, 0, len(row))
            self.cells -= len(row)

    def _cells(self, data: str) -> str | list[str]:
        """``data``'s cells: itself when each character takes one column (wcwidth: C, 80 ns a character)."""
        if data.isascii() or all(w == 1 for w in map(wcwidth, data)):
            return data
        out: list[str] = []
        for c in data:
            w = wcwidth(c)
            if w > 0:
                out += [self.interned.setdefault(c, c), ""] if w == 2 else [self.interned.setdefault(c, c)]
            elif w == 0 and out and unicodedata.category(c)[0] == "M":  # a combining mark joins its character
                out[-1 if out[-1] else -2] += c
        return out  # other characters of no width (format characters) are not shown

    def draw(self, data: str) -> None:
        cells = self._cells(data)
        if not cells:
            return
        if modes.IRM in self.mode:
            self.insert_characters(len(cells))
        y, x, row = self.cursor.y, self.cursor.x, self._row()
        end = x + len(cells)
        self.charge(len(cells))
        old = row[x:end]
        if old != list(cells[: len(old)]) and old.count(" ") < len(old):  # changes characters it showed
            self._keep(y, row, x, end)
        single = row.hi <= row.lo or (x <= row.lo and end >= row.hi)  # the row is this piece of the text alone
        if len(row) < end:  # grown by extending (a slice assignment would copy cells into a list first)
            self.cells += end - len(row)
            self.charge(end - len(row))
            del row[x:]
            row.extend(" " * (x - len(row)))
            row.extend(cells)
        else:
            row[x:end] = cells
        row.lo, row.hi = (x, end) if single else (min(row.lo, x), max(row.hi, end))
        if single:
            row.dlo = row.dhi = 0
        else:
            row.changed(x, end)
        self.last = cells[-1] or cells[-2]
        self.cursor.x = min(end, self.columns - 1)

    def repeat(self, count: int | None = None) -> None:
        """REP: the last character drawn, ``count`` more times."""
        if self.last:
            self.draw(self.last * (count or 1))

    def _edit(self, how: Callable[[_Row, int], None], start: int, end: int, changes: bool) -> None:
        """``how`` applied to the cursor's row (and column), which changes columns ``start``..``end`` (blanks or
        moves what they hold; ``changes``: so that characters may stand side by side anew)."""
        row = self._row() if self.grid.get(self.cursor.y) else None
        if row:
            self._keep(self.cursor.y, row, start, end)
            before = len(row)
            how(row, self.cursor.x)
            self.cells += len(row) - before
            self.charge(max(before, len(row)))
            if changes:
                row.changed(start, min(end, max(before, len(row))))

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        def erase(row: _Row, x: int) -> None:
            if how == 1:
                row[: x + 1] = [" "] * min(x + 1, len(row))
            else:
                del row[x if how == 0 else 0 :]
            if how == 2 or (how == 0 and x <= row.lo) or (how == 1 and x + 1 >= row.hi):
                row.lo = row.hi = 0

        x = self.cursor.x
        start, end = (x, FAR) if how == 0 else (0, x + 1) if how == 1 else (0, FAR)
        self._edit(erase, start, end, False)

    def erase_characters(self, count: int | None = None) -> None:
        x, n = self.cursor.x, count or 1
        self._edit(lambda row, x: row.__setitem__(slice(x, x + n), [" "] * len(row[x : x + n])), x, x + n, True)

    def delete_characters(self, count: int | None = None) -> None:
        self._edit(lambda row, x: row.__delitem__(slice(x, x + (count or 1))), self.cursor.x, FAR, True)

    def insert_characters(self, count: int | None = None) -> None:
        n = count or 1
        self._edit(
            lambda row, x: row.__setitem__(slice(x, x), [" "] * n if x < len(row) else []), self.cursor.x, FAR, True
        )

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        y = self.cursor.y
        self.charge(len(self.grid))
        for r in [r for r in self.grid if (r > y if how == 0 else r < y if how == 1 else True)]:
            self._drop(r)
        if how in (0, 1):
            self.erase_in_line(how)

    def _shift(self, first: int, last: int, n: int) -> None:
        """Rows ``first``..``last`` moved ``n`` rows down (up when negative); those moved out of them are lost."""
        self.charge(len(self.grid))
        for r in sorted((r for r in self.grid if first <= r <= last), reverse=n > 0):
            if first <= r + n <= last:
                self.grid[r + n] = self.grid.pop(r)
            else:
                self._drop(r)

    def _region(self) -> tuple[int, int]:
        return (self.margins.top, self.margins.bottom) if self.margins else (0, self.lines - 1)

    def insert_lines(self, count: int | None = None) -> None:
        top, bottom = self._region()
        if top <= self.cursor.y <= bottom:
            self._shift(self.cursor.y, bottom, count or 1)
            self.carriage_return()

    def delete_lines(self, count: int | None = None) -> None:
        top, bottom = self._region()
        if top <= self.cursor.y <= bottom:
            self._shift(self.cursor.y, bottom, -(count or 1))
            self.carriage_return()

    def scroll_up(self, count: int | None = None) -> None:
        self._shift(*self._region(), -(count or 1))

    def scroll_down(self, count: int | None = None) -> None:
        self._shift(*self._region(), count or 1)

    def index(self) -> None:
        if self.cursor.y == self._region()[1]:
            self.scroll_up(1)
        else:
            self.cursor_down()

    def reverse_index(self) -> None:
        if self.cursor.y == self._region()[0]:
            self.scroll_down(1)
        else:
            self.cursor_up()

    def newline(self) -> None:
        """``\\n`` as a tty writes it (ONLCR: CR LF); text moving only within rows is done with its row."""
        if self.horizontal and self.cursor.y in self.grid:
            y, row = self.cursor.y, self._row()
            if y in self.moved:
                self.charge(len(row))
                self.shown.append((y, "".join(row).rstrip()))
            row.dlo = row.dhi = 0  # shown above, or never moved: one piece after another, as written
            self._drop(y)
        self.carriage_return()
        self.linefeed()

    def next_line(self) -> None:
        self.carriage_return()
        self.index()

    def reset(self) -> None:
        for y in list(getattr(self, "grid", ())):
            self._drop(y)
        columns, lines = self.columns, self.lines
        self.columns = self.lines = 1  # pyte's reset lists a tab stop every 8 columns of the width
        super().reset()
        self.columns, self.lines = columns, lines
        self.stops_cleared, self.unset = False, set()

    def save_cursor(self) -> None:
        super().save_cursor()
        del self.savepoints[:-1]  # one saved cursor, as xterm keeps

    def restore_cursor(self) -> None:
        kept = self.savepoints[-1:]
        super().restore_cursor()
        self.savepoints[:0] = kept  # restored as often as asked
        self.cursor = copy.copy(self.cursor)

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        kept = [m for m in modes if m in ((6,) if kwargs.get("private") else (4, 20))]  # DECOM; IRM, LNM
        if kept:
            super().set_mode(*kept, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        kept = [m for m in modes if m in ((6,) if kwargs.get("private") else (4, 20))]
        if kept:
            super().reset_mode(*kept, **kwargs)

    def _stop(self, x: int, step: int) -> int:
        """The next tab stop after column ``x`` (``step`` 1) or before it (-1)."""
        self.charge(1 + len(self.tabstops) + len(self.unset))
        stops = [s for s in self.tabstops if (s - x) * step > 0]
        if not self.stops_cleared:
            d = (x // 8 + 1) * 8 if step > 0 else (x - 1) // 8 * 8
            while d in self.unset:
                d += 8 * step
            stops += [d] if d >= 0 else []
        return min(stops, default=self.columns - 1) if step > 0 else max(stops, default=0)

    def tab(self) -> None:
        self.cursor.x = self._stop(self.cursor.x, 1)

    def tab_forward(self, count: int | None = None) -> None:
        for _ in range(count or 1):
            self.tab()

    def tab_back(self, count: int | None = None) -> None:
        for _ in range(count or 1):
            self.cursor.x = self._stop(self.cursor.x, -1)

    def set_tab_stop(self) -> None:
        self.tabstops.add(self.cursor.x)
        self.unset.discard(self.cursor.x)

    def clear_tab_stop(self, how: int = 0) -> None:
        if how == 0:
            self.tabstops.discard(self.cursor.x)
            self.unset.add(self.cursor.x)
        elif how == 3:
            self.tabstops, self.stops_cleared = set(), True

    def views(self) -> list[tuple[int, str]]:
        """What the screen shows: horizontal, ``(row, text)`` of each row a move touched, each followed by what it
        showed before losing characters; else ``(-1, text)``: every row (blank rows between shown as one) and,
        after a blank line, every row as it was before losing characters."""
        if self.horizontal:
            self.newline()
            earlier: dict[int, list[str]] = {}
            for y, t in self.snaps:
                earlier.setdefault(y, []).append(t)
            return [(y, "\n".join([t, *earlier.get(y, [])])) for y, t in self.shown]
        parts, last = [], None
        for y in sorted(self.grid):
            self.charge(len(self.grid[y]))
            parts += ["\n" * min(y - last, 2) if last is not None else "", "".join(self.grid[y]).rstrip()]
            last = y  # "".join of a string: the string
        return [(-1, "".join(parts + ["\n\n" + "\n".join(t for _, t in self.snaps)] * bool(self.snaps)))]
