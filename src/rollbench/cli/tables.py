"""Printing result tables so that no name or number is ever cut, at any terminal width and when piped.

rich squeezes a table that is wider than the console by shrinking columns, which cuts cells to "…" (a number cut
to "100.…" is a number the user cannot read). :func:`print_table` prevents that:

* every column is *whole* (``no_wrap``, minimum width = its widest cell) except the columns the caller marks as
  prose with ``overflow="fold"`` (instructions, reason lists), which wrap at spaces;
* if the table is wider than the console, its columns are split into several tables printed one after the other,
  each repeating the key columns (the first, or the first ``keys``: all that identify a row), each as wide as fits;
* if even the key column and one other do not fit, it is printed *vertically*: one block per row, one
  ``header: value`` line per non-empty cell, each line printed with ``soft_wrap`` (the terminal wraps a long line
  visually; no character is dropped or replaced).

``--json`` is the machine form; this is only for reading.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console, Group
from rich.errors import MarkupError
from rich.padding import Padding
from rich.table import Column, Table
from rich.text import Text


def _plain(cell: object) -> str:
    """A cell's text without markup (cells are markup strings, :class:`rich.text.Text`, or a
    :class:`rich.console.Group` / :class:`rich.padding.Padding` of those: their lines)."""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, Group):
        return "\n".join(_plain(c) for c in cell.renderables)
    if isinstance(cell, Padding):
        return _plain(cell.renderable)
    return Text.from_markup(str(cell)).plain


def _safe(cell: Any) -> Any:
    """A string cell as :class:`rich.text.Text`: its markup when it parses, else the text as it is (a recorded task
    name or reason such as ``[/x]`` is never a crash), control characters shown as escapes (never sent to the
    terminal); other cells unchanged."""
    if not isinstance(cell, str):
        return cell
    try:
        text = Text.from_markup(cell)
    except MarkupError:
        text = Text(cell)
    if _CONTROL.search(text.plain):
        text = Text(_CONTROL.sub(lambda m: repr(m.group())[1:-1], text.plain))
    return text


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # every C0/C1 control character but the newline


def _widest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


FOLDED_WORD = 10
"""The narrowest a ``breakable`` column (:func:`print_table`) may be: a longer word folds onto the next lines whole."""


def _min_width(column: Column, breakable: bool = False) -> int:
    """Narrowest a column may be: its widest line when whole, its longest word when it may fold (at most
    :data:`FOLDED_WORD` when ``breakable``: such a word is folded across lines, every character kept)."""
    texts = [_plain(column.header), *(_plain(c) for c in column.cells)]
    if column.overflow == "fold":
        longest = max((len(w) for s in texts for w in s.split()), default=1)
        header = max((len(w) for w in _plain(column.header).split()), default=1)
        return max(min(longest, FOLDED_WORD), header) if breakable else longest
    return max((_widest_line(s) for s in texts), default=1)


def _width(table: Table, columns: list[int], widths: list[int]) -> int:
    """Total width of ``table`` showing ``columns``: cells, their padding, and the vertical rules."""
    pad = table.padding[1] + table.padding[3] if len(table.padding) == 4 else 2
    return sum(widths[i] + pad for i in columns) + len(columns) + 1


def _sub_table(table: Table, columns: list[int], title: bool) -> Table:
    sub = Table(title=table.title if title else None, caption=table.caption)
    for i in columns:
        c = table.columns[i]
        sub.add_column(c.header, justify=c.justify, overflow=c.overflow, no_wrap=c.no_wrap, min_width=c.min_width)
    cells = [list(table.columns[i].cells) for i in columns]
    for r, row in enumerate(table.rows):
        sub.add_row(*(col[r] for col in cells), end_section=row.end_section)
    return sub


def print_table(console: Console, table: Table, keys: int = 1, breakable: tuple[str, ...] = ()) -> None:
    """Print ``table`` on ``console`` whole (see the module docstring). Columns added with ``overflow="fold"``
    may wrap at spaces; all others keep every cell on its lines, uncut. ``keys``: how many leading columns identify
    a row (every split table repeats all of them, so the rows of two models stay apart). ``breakable``: headers of
    fold columns whose long words (run names, paths) may also fold across lines rather than split the table."""
    for column in table.columns:
        column._cells = [_safe(c) for c in column._cells]  # rich keeps a column's cells there (no public setter)
    widths = [_min_width(c, _plain(c.header) in breakable) for c in table.columns]
    for column, width in zip(table.columns, widths, strict=True):
        column.min_width = max(column.min_width or 0, width)  # rich never shrinks a column below what fits here
        if column.overflow != "fold":
            column.no_wrap = True
    every = list(range(len(table.columns)))
    if _width(table, every, widths) <= console.width:
        _fit_breakable(table, widths, breakable, console.width)
        console.print(table)
        return
    key = every[: max(1, min(keys, len(every) - 1))]
    groups: list[list[int]] = [list(key)]
    for i in every[len(key) :]:
        if len(groups[-1]) > len(key) and _width(table, [*groups[-1], i], widths) > console.width:
            groups.append(list(key))
        groups[-1].append(i)
    if any(_width(table, g, widths) > console.width for g in groups):
        _print_vertical(console, table)
        return
    for n, group in enumerate(groups):
        sub = _sub_table(table, group, title=n == 0)
        _fit_breakable(sub, [widths[i] for i in group], breakable, console.width)  # else rich widens them past it
        console.print(sub)


def _fit_breakable(table: Table, widths: list[int], breakable: tuple[str, ...], width: int) -> None:
    """Give the ``breakable`` columns of a table that fits at its narrowest (``widths``) the console's spare columns,
    shared in proportion to their widest lines, as fixed widths: rich then folds their long words inside them
    instead of letting the table run past the console."""
    chosen = [i for i, c in enumerate(table.columns) if _plain(c.header) in breakable]
    natural = {i: max(_min_width(table.columns[i]), widths[i]) for i in chosen}
    spare = width - _width(table, list(range(len(table.columns))), widths)
    extra = sum(natural[i] - widths[i] for i in chosen)
    if not chosen or extra <= spare:
        return
    for i in chosen:
        table.columns[i].width = widths[i] + (natural[i] - widths[i]) * spare // extra


def _print_vertical(console: Console, table: Table) -> None:
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(c) for c in col.cells] for col in table.columns]
    if table.title:
        console.print(Text(_plain(table.title), style="bold"), soft_wrap=True)
    for r in range(table.row_count):
        console.print(Text("─" * min(40, console.width)), soft_wrap=True)
        for header, cells in zip(headers, columns, strict=True):
            value = cells[r].replace("\n", " ")
            if value:
                line = Text(f"{header}: ", style="bold")
                line.append(value)
                console.print(line, soft_wrap=True, highlight=False)
    if table.caption:
        console.print(Text(_plain(table.caption)), soft_wrap=True)
