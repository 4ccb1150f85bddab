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
MARKDOWN_SUFFIXES = frozenset(
    {".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdwn", ".mdtxt", ".mdtext", ".rmd", ".qmd", ".rst", ".rest"}
)  # Markdown as GitHub and editors name it, and reStructuredText (the same marks, and ``\\ `` joining words)
MARKS = re.compile(r"\\([!-/:-@\[-`{-~])|\\ |[*_~`]")  # an escaped character (kept), reST's "\\ ", the marks
LINKS = re.compile(r"\]\([^()\s]*+(?:\s++\"[^\"]*+\")?\)|\]\[[^\[\]]*+\]|[\[\]]")  # a link's destination or label
ENTITY = re.compile(r"<!ENTITY\s++(?:%\s++)?([\w.:-]++)\s++(?:\"([^\"]*+)\"|'([^']*+)')", re.IGNORECASE)
MAX_ENTITY_ROUNDS = 4  # a declared entity expanded within entities this deep; deeper, the file is withheld
RTL = re.compile(r"rtl|bidi-override", re.IGNORECASE)  # <bdo dir="rtl">, CSS direction: rtl; unicode-bidi


def strip_tags(text: str) -> str:
    """``text`` without its HTML comments (``<!--`` to ``-->``; an unclosed one to the end) and tags (``<`` and a
    letter, ``/``, ``!`` or ``?`` to the next ``>``; an unclosed one to the end), as a browser drops them, a CDATA
    section's text kept (``<![CDATA[`` to ``]]>``): linear."""
    out, pos = [], 0
    while (lt := text.find("<", pos)) >= 0:
        out.append(text[pos:lt])
        if text.startswith("<!--", lt):
            end = text.find("-->", lt + 4)
            pos = len(text) if end < 0 else end + 3
        elif text.startswith("<![CDATA[", lt):
            end = text.find("]]>", lt + 9)
            out.append(text[lt + 9 : len(text) if end < 0 else end])
            pos = len(text) if end < 0 else end + 3
        elif lt + 1 < len(text) and (text[lt + 1].isalpha() or text[lt + 1] in "/!?"):
            end = text.find(">", lt + 1)
            pos = len(text) if end < 0 else end + 1
        else:  # a "<" that opens no tag is text ("a < b")
            out.append("<")
            pos = lt + 1
    out.append(text[pos:])
    return "".join(out)


def expand_entities(text: str) -> str | None:
    """``text`` with the entities its document type declares (``<!ENTITY a "Q3EG">`` ... ``&a;``) expanded, as an
    XML parser does, or None when a reference to one is left after :data:`MAX_ENTITY_ROUNDS` rounds or the text
    grows past twice its size plus 1 MiB (entities within entities: the file cannot be read within bounds)."""
    declared = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in ENTITY.finditer(text)}
    if not declared:
        return text
    refs = re.compile("&(" + "|".join(map(re.escape, sorted(declared, key=len, reverse=True))) + ");")
    bound = 2 * len(text) + (1 << 20)
    for _ in range(MAX_ENTITY_ROUNDS):
        if not refs.search(text):
            return text
        text = refs.sub(lambda m: declared[m.group(1)], text)
        if len(text) > bound:
            return None
    return None if refs.search(text) else text


def markup_kind(rel: str) -> str | None:
    """``"html"`` or ``"markdown"`` for a file whose suffix (any letter case) a browser or a Markdown viewer renders,
    else None."""
    suffix = PurePosixPath(rel).suffix.lower()
    return "html" if suffix in HTML_SUFFIXES else "markdown" if suffix in MARKDOWN_SUFFIXES else None


def markup_views(text: str, kind: str) -> list[str] | None:
    """The texts a viewer of ``kind`` (:func:`markup_kind`) may show of ``text`` (see the module docstring), each
    differing from ``text``; empty when it holds nothing a viewer drops or decodes; None when its declared entities
    cannot be expanded within bounds (:func:`expand_entities`)."""
    expanded = expand_entities(text)
    if expanded is None:
        return None
    shown = strip_tags(expanded)
    if kind == "markdown":
        shown = LINKS.sub("", MARKS.sub(lambda m: m.group(1) or "", shown))
    views = [html.unescape(shown), html.unescape(expanded)]
    if RTL.search(text):  # text drawn right to left (<bdo dir="rtl">, CSS direction: rtl): read backwards too
        views.append(views[0][::-1])
    return [v for i, v in enumerate(views) if v != text and v not in views[:i]]


WITHHELD = Finding(0, 0, "withheld", "withheld", "")
"""What :func:`markup_hidden` answers for a file whose views cannot be made within bounds."""


def markup_hidden(text: str, kind: str, found: Sequence[tuple[Finding, str]], scanner: Scanner) -> Finding | None:
    """The first finding ``scanner`` makes in one of ``text``'s :func:`markup_views` whose matched text is not the
    text of a finding of ``found`` (the findings in ``text`` as written, with their placeholders: a set, so the
    check is linear in the findings; hostile25a F4), :data:`WITHHELD` when the views cannot be made, or None."""
    views = markup_views(text, kind)
    if views is None:
        return WITHHELD
    written = {f.value for f, _ in found}
    for view in views:
        for f in scanner.find(view):
            if f.value not in written:
                return f
    return None


def markup_said(rel: str, rule: str) -> str:
    """The warning line of a markup file released as one placeholder (:mod:`rollbench.release.markup`)."""
    if rule == "withheld":
        return (f"{rel}: its markup declares entities that expand beyond {MAX_ENTITY_ROUNDS} levels or twice its size, "
                "so what a viewer shows cannot be read: the whole file is released as one placeholder (rule "
                "markup:withheld)")  # fmt: skip
    return (f"{rel}: a browser or Markdown viewer shows a match of rule {rule} that its text does not hold as written "
            f"(split by tags, a comment, a character reference, an entity, a link or Markdown marks, or drawn right "
            f"to left): the whole file is released as one placeholder (rule markup:{rule})")  # fmt: skip
