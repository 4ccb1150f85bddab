"""Markup a viewer drops (hostile24a F2): a key split by HTML tags (``<span>ghp_…</span><span>…</span>``), an HTML
comment (``AKIA<!-- -->Q3…``), a character reference (``AKIA&#81;3…``) or Markdown emphasis and escapes
(``AKIA**Q**3…``, ``AKIA\\_Q3…``) matches no rule as written, yet a browser or a Markdown viewer shows it whole.

:func:`markup_views` are the texts such a viewer may show, each a superset of what it joins: the file with every
comment and tag removed (text nodes joined with nothing between them, as a browser shows
``<span>a</span><span>b</span>``; a block element's line break is not assumed, so a key split across blocks is found
too), and for a Markdown file every emphasis, strike-through and code-span mark (``*``, ``_``, ``~``, a backquote)
and escaping backslash removed as well; then character references decoded (:func:`html.unescape`); and the whole
file with only its references decoded (an attribute's value: a ``title`` is a tooltip). A finding in a view whose
matched text the file does not hold as written is a hidden finding: release replaces the whole file (rule
``markup:RULE``), since a rendered text cannot be traced back to lines.

Own code, not a renderer: the standard library's :class:`html.parser.HTMLParser` takes quadratic time on unclosed
tags (``<a`` repeated: 23 s for 128 KiB, 235 s for 512 KiB on this machine) and markdown-it about 11 s per MiB of
emphasis marks; :func:`strip_tags` is linear (each ``<`` is passed once), so the views cost a few regular-expression
passes over the text whatever it holds.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from rollbench.release.findings import Finding
from rollbench.release.rules import Scanner

HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml", ".svg", ".xml"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
MARKS = re.compile(r"\\(?=[!-/:-@\[-`{-~])|[*_~`]")  # Markdown's escaping backslash (before punctuation), its marks


def strip_tags(text: str) -> str:
    """``text`` without its HTML comments (``<!--`` to ``-->``; an unclosed one to the end) and tags (``<`` and a
    letter, ``/``, ``!`` or ``?`` to the next ``>``; an unclosed one to the end), as a browser drops them: linear."""
    out, pos = [], 0
    while (lt := text.find("<", pos)) >= 0:
        out.append(text[pos:lt])
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            pos = len(text) if end < 0 else end + 3
        elif lt + 1 < len(text) and (text[lt + 1].isalpha() or text[lt + 1] in "/!?"):
            end = text.find(">", lt + 1)
            pos = len(text) if end < 0 else end + 1
        else:  # a "<" that opens no tag is text ("a < b")
            out.append("<")
            pos = lt + 1
    out.append(text[pos:])
    return "".join(out)


def markup_kind(rel: str) -> str | None:
    """``"html"`` or ``"markdown"`` for a file whose suffix (any letter case) a browser or a Markdown viewer renders,
    else None."""
    suffix = PurePosixPath(rel).suffix.lower()
    return "html" if suffix in HTML_SUFFIXES else "markdown" if suffix in MARKDOWN_SUFFIXES else None


def markup_views(text: str, kind: str) -> list[str]:
    """The texts a viewer of ``kind`` (:func:`markup_kind`) may show of ``text`` (see the module docstring), each
    differing from ``text``; empty when it holds nothing a viewer drops or decodes."""
    shown = strip_tags(text)
    if kind == "markdown":
        shown = MARKS.sub("", shown)
    views = [html.unescape(shown), html.unescape(text)]
    return [v for i, v in enumerate(views) if v != text and v not in views[:i]]


def markup_hidden(text: str, kind: str, found: Sequence[tuple[Finding, str]], scanner: Scanner) -> Finding | None:
    """The first finding ``scanner`` makes in one of ``text``'s :func:`markup_views` whose matched text is not
    inside a finding of ``found`` (the findings in ``text`` as written, with their placeholders), or None."""
    written = [f.value for f, _ in found]
    for view in markup_views(text, kind):
        for f in scanner.find(view):
            if not any(f.value in w for w in written):
                return f
    return None


def markup_said(rel: str, rule: str) -> str:
    """The warning line of a markup file released as one placeholder (:mod:`rollbench.release.markup`)."""
    return (f"{rel}: a browser or Markdown viewer shows a match of rule {rule} that its text does not hold as written "
            f"(split by tags, a comment, a character reference or Markdown marks): the whole file is released as one "
            f"placeholder (rule markup:{rule})")  # fmt: skip
