"""Learnt values of ``rollbench release``: a value a context rule found as a credential in one place (the whole value
of a secret-named field, a ``token=`` pair's value, a URL's password, an ``Authorization`` value...) is looked for
everywhere in the release, so the same value gets the same placeholder in every file, field and line
(hostile17 F6). The first pass over the files (:mod:`rollbench.release.first_pass`) collects them; the
:class:`rollbench.release.rules.Scanner` matches them as literals (rule ``learnt:RULE``, ``RULE`` the rule that
found the value first).

Which rules teach a value (:data:`LEARNT_RULES`): those whose finding depends on where the value stands, not on its
form; the format rules (provider keys, JWTs, PEM keys), hex and high-entropy runs and environment values find every
copy of a value by themselves. Bounds: a value of :data:`MIN_LENGTH` to :data:`MAX_LENGTH` characters, not an ordinary
word (shorter than 12 characters with no digit) nor (part of) a run's own name
(:func:`rollbench.release.rules.ordinary_value`, as for environment values); an ``Authorization`` or ``Cookie``
value teaches its pieces too (``Basic TOKEN``: ``TOKEN``; ``a=V; b=W``: ``V``, ``W``). A value is matched as written,
in any letter case, wherever it stands (also inside a longer word, as environment values are).

Work: the values are one regex, a trie of them (the alternatives at a node begin with different characters), so the
work at a character of a string is bounded by the longest value's length and the alphabet, not by the number of
values."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LEARNT_RULES = (
    "secret_field", "bearer_token", "authorization", "cookie", "url_credential", "url_path_credential",
    "url_fragment", "malformed_hash",
)  # fmt: skip
"""The rules whose findings teach a value (see the module docstring)."""
MIN_LENGTH = 8  # a shorter value would match ordinary words and numbers elsewhere
MAX_LENGTH = 256  # bounds the work per character (the module docstring)
_PIECES = re.compile(r"[\s,;]+")


def taught(rule: str, value: str) -> list[str]:
    """The values a finding of ``rule`` with ``value`` teaches: the value, and for ``authorization`` and ``cookie``
    each piece between spaces, commas and semicolons (a ``name=value`` piece's value, unquoted)."""
    out = [value]
    if rule in ("authorization", "cookie"):
        for piece in _PIECES.split(value):
            out.append(piece.split("=", 1)[1].strip("\"'") if "=" in piece else piece)
    return out


def _trie(words: list[str]) -> str:
    """A regex matching exactly ``words``, longest first at each position, as a trie of alternatives."""
    tree: dict[str, dict] = {}
    for w in words:
        node = tree
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(node[ch]) for ch in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"
        return f"(?:{body})?" if "" in node else body

    return emit(tree)


@dataclass
class LearntValues:
    """The learnt values, by their lower-case form: ``(value as learnt, category, rule)``; ``not_used``: how many
    values the bounds left out (see the module docstring)."""

    forms: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    not_used: int = 0
    pattern: re.Pattern[str] | None = None

    def add(self, value: str, category: str, rule: str) -> None:
        self.forms.setdefault(value.lower(), (value, category, rule))

    def compile(self) -> None:
        if self.forms:
            self.pattern = re.compile(_trie(sorted(self.forms)), re.IGNORECASE)

    def count(self) -> int:
        return len(self.forms)

    def find(self, text: str) -> list[tuple[int, int, str, str]]:
        """``(start, end, rule, category)`` of every learnt value in ``text`` (rule ``learnt:RULE``)."""
        if self.pattern is None:
            return []
        out = []
        for m in self.pattern.finditer(text):
            _, category, rule = self.forms.get(m.group(0).lower(), ("", "credential", "secret_field"))
            out.append((m.start(), m.end(), f"learnt:{rule}", category))
        return out

    def canonical(self, matched: str) -> str:
        """The value as learnt for a ``matched`` form of it: its placeholder's key, so every form shares one."""
        return self.forms.get(matched.lower(), (matched, "", ""))[0]


NAME_MIN_LENGTH = 3  # a shorter name (``"x"``, ``"t"``) is redacted only in its field, as the other user names
NAME_BOUNDARY = r"[^\W_]"  # a letter or digit of any script: a name is matched only where none stands beside it


def whole_word(body: str) -> re.Pattern[str]:
    """A pattern matching regex ``body`` as a whole word (no letter or digit of any script either side:
    :data:`NAME_BOUNDARY`), as learnt names are found and replaced."""
    return re.compile(rf"(?<!{NAME_BOUNDARY})(?:{body})(?!{NAME_BOUNDARY})")


@dataclass
class LearntNames:
    """User names learnt where they stand (a label's ``annotator``: :meth:`rollbench.release.rules.Scanner.field_name`),
    redacted wherever else they stand in the release (hostile19 F2): ``names`` in the order met, each with the rule
    that found it; ``not_used``: how many the bounds left out (:func:`rollbench.release.first_pass.learn_values`).

    A name is matched as written (case-sensitive) and as a whole word: no letter or digit of any script on either side
    (``kwendeborn:`` and ``kwendeborn_notes`` are, ``kwendeborns`` and ``anaïs`` for ``ana`` are not); the names are
    one regex, a trie, as learnt values are."""

    names: dict[str, str] = field(default_factory=dict)
    not_used: int = 0
    pattern: re.Pattern[str] | None = None

    def compile(self) -> None:
        if self.names:
            body = _trie(sorted(self.names))
            self.pattern = whole_word(body)

    def count(self) -> int:
        return len(self.names)
