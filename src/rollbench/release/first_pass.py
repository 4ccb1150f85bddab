"""The first pass of ``rollbench release`` (hostile17 F6): every file the release scans is read, before anything is
redacted, for the values the context rules find as credentials (:data:`rollbench.release.learnt.LEARNT_RULES`: a
secret-named field's value, a ``token=`` pair's value, a URL's password, an ``Authorization`` or ``Cookie``
value...), so the redaction pass replaces each of them wherever else it stands, with the same placeholder
(:mod:`rollbench.release.learnt`).

Only those rules run here (no format, entropy, hex or environment rule, and no placeholder is given), on the same
strings with the same field paths as the redaction pass (:mod:`rollbench.release.redact`: JSON strings, keys and the
numbers under a credential key; parquet values, names and metadata; text files whole). Videos are not read here
(their bytes are only checked, in the redaction pass). A file that does not parse teaches nothing: the redaction pass
refuses it. Not taught: a value shorter than :data:`rollbench.release.learnt.MIN_LENGTH` characters; a value that is
whole one finding of a rule that finds it anywhere by itself (a provider key, a hex token, an environment value, a
host name: that rule's placeholder stays); and, counted in ``not_used``, a value longer than
:data:`rollbench.release.learnt.MAX_LENGTH`, an ordinary word or (part of) a run's own name
(:func:`rollbench.release.rules.ordinary_value`).

Names (hostile19 F2): a value release redacts as a user name by the field holding it (a label's ``annotator``:
:meth:`rollbench.release.rules.Scanner.field_name`) is learnt too, and redacted wherever else it stands as a whole
word, as written (:class:`rollbench.release.learnt.LearntNames`), unless :func:`unused_name` leaves it out."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.jsonfile import loads_strict
from rollbench.release import credentials as cred
from rollbench.release import cursor
from rollbench.release.invisible import views
from rollbench.release.learnt import (
    LEARNT_RULES,
    MAX_LENGTH,
    MIN_LENGTH,
    NAME_MIN_LENGTH,
    LearntNames,
    taught,
    whole_word,
)
from rollbench.release.parquet_text import UnscannableType, map_table
from rollbench.release.redact import _field_leaf, _json_metadata
from rollbench.release.rules import BUILTIN, COMMON_NAMES, HASH_FIELDS, PLACEHOLDER, Scanner, ordinary_value

_MAY_HOLD = re.compile(r"[:=]|(?i:bearer)")  # a pair's or header's separator, a URL's, Bearer's scheme word


def context_findings(scanner: Scanner, text: str, field: str | None) -> list[tuple[str, str, str]]:
    """``(rule, category, value)`` of every finding of a :data:`LEARNT_RULES` rule in ``text`` (at ``field``, as
    :meth:`Scanner.find` takes it), overlaps not resolved, the ``--rules`` allow-list applied."""
    if not text or PLACEHOLDER.fullmatch(text):
        return []
    out: list[tuple[str, str, str]] = []
    if field is not None and text != "<redacted>":
        whole = cred.secret_value(text, PLACEHOLDER) if cred.secret_path(field) else None
        if whole:
            out.append((whole[1], whole[2], text[whole[0] :]))
        digest = HASH_FIELDS.get(field.rsplit(".", 1)[-1].lower())
        if digest is not None and digest[1] and not digest[0].fullmatch(text):
            out.append(("malformed_hash", "secret", text))
    if not _MAY_HOLD.search(text):  # every context rule's match holds one of these
        return [o for o in out if not any(a.search(o[2]) for a in scanner.allow)]
    for name, category, pat, group in scanner.patterns[: len(BUILTIN)]:
        if name == "secret_field":
            out += [(name, category, text[s:e]) for s, e in cred.pair_secrets(text, pat)]
        elif name in LEARNT_RULES:
            out += [(name, category, m.group(group)) for m in pat.finditer(text) if m.group(group)]
    out += [(rule, "credential", text[s:e]) for s, e, rule in cred.url_secrets(text)]
    return [o for o in out if not any(a.search(o[2]) for a in scanner.allow)]


class _Pass:
    """The values found so far, in file order: ``{value: (category, rule)}``."""

    def __init__(self, scanner: Scanner) -> None:
        self.scanner = scanner
        self.found: dict[str, tuple[str, str]] = {}
        self.names: dict[str, str] = {}  # a user name found by its field (a label's annotator) -> that rule
        self._spelled: dict[str, str] = {}

    def take(self, text: str, field: str | None) -> None:
        """The values ``text`` (at ``field``) teaches (a user field's user name among them), and those it teaches
        without its invisible characters (:mod:`rollbench.release.invisible`: ``password=Hun\\u200bter2…`` teaches
        ``Hunter2…``) and as a terminal shows it (:mod:`rollbench.release.cursor`)."""
        if field is not None and text.strip() and not PLACEHOLDER.fullmatch(text) and text != "<redacted>":
            named = self.scanner.field_name(text, field)
            if named is not None and named.category == "user_name":
                self.names.setdefault(text.strip(), named.rule)
        for t in (text, *views(text), *cursor.views(text)):
            for rule, category, value in context_findings(self.scanner, t, field):
                for v in taught(rule, value):
                    if len(v) >= MIN_LENGTH:
                        self.found.setdefault(v, (category, rule))

    def key(self, k: str) -> str:
        """A JSON key as the redaction pass spells it in a field path (:meth:`Releaser.key`), with no placeholder
        given: each finding's placeholder numbered 0 (the words of a field path are what matter)."""
        if k not in self._spelled:
            parts, pos = [], 0
            for f in self.scanner.find(k):
                parts += [k[pos : f.start], f"<REDACTED:{f.category}:0>"]
                pos = f.end
            self._spelled[k] = "".join(parts) + k[pos:]
        return self._spelled[k]

    def walk(self, o: Any, path: str) -> None:
        """A JSON document's strings, keys and numbers under a credential key (as the redaction pass turns them into
        strings), each with its field path."""
        if isinstance(o, dict):
            for k, v in o.items():
                self.take(k, None)
                self.walk(v, f"{path}.{self.key(k)}" if path else self.key(k))
        elif isinstance(o, list):
            for i, v in enumerate(o):
                self.walk(v, f"{path}[{i}]")
        elif isinstance(o, str):
            self.take(o, _field_leaf(path))
        elif isinstance(o, int | float) and not isinstance(o, bool) and cred.secret_path(_field_leaf(path)):
            self.take(json.dumps(o), _field_leaf(path))

    def file(self, raw: bytes, kind: str | None) -> None:
        if kind in ("json", "jsonl"):
            text = raw.decode("utf-8")
            for doc in text.splitlines() if kind == "jsonl" else [text]:
                if doc.strip():
                    self.walk(loads_strict(doc, finite=False), "")
        elif kind == "parquet":
            map_table(pq.read_table(pa.BufferReader(raw)), self.parquet_text)
        elif kind == "text":
            self.take(raw.decode("utf-8"), None)

    def parquet_text(self, text: str, field: str | None, where: str) -> str:
        if _json_metadata(text, where):
            self.walk(loads_strict(text, finite=False), "")
        else:
            self.take(text, field)
        return text


def learn_values(scanner: Scanner, files: list[tuple[bytes, str | None]], run_names: set[str]) -> None:
    """Fill ``scanner.learnt`` with the values the context rules find in ``files`` (``(bytes, kind)`` in release
    order, :func:`rollbench.release.kinds.scan_kind`), within the bounds of the module docstring; ``run_names``: the
    released runs' own names."""
    learning = _Pass(scanner)
    for raw, kind in files:
        try:
            learning.file(raw, kind)
        except (ValueError, RecursionError, pa.ArrowException, UnscannableType):
            continue  # refused, naming the file, by the redaction pass
    for value, (category, rule) in learning.found.items():
        own = scanner.find(value)
        if len(own) == 1 and (own[0].start, own[0].end) == (0, len(value)) and own[0].rule not in LEARNT_RULES:
            continue  # found everywhere by its own rule
        if len(value) > MAX_LENGTH or "REDACTED" in value.upper() or ordinary_value(value, run_names):
            scanner.learnt.not_used += 1
        else:
            scanner.learnt.add(value, category, rule)
    scanner.learnt.compile()
    scanner.learn_names(_names_used(scanner, learning.names, run_names))


def unused_name(scanner: Scanner, name: str, run_names: set[str]) -> str | None:
    """Why a user name found by its field (``name``: a label's annotator) is not redacted wherever else it stands, or
    None when it is: shorter than :data:`NAME_MIN_LENGTH` or longer than :data:`MAX_LENGTH` characters, a common word
    (:data:`rollbench.release.rules.COMMON_NAMES`), a word of one of ``run_names`` (the runs' own task, env, policy,
    robot and host names: ``expert`` of ``scripted-expert``) or holding a placeholder; ``"found"`` when the scanner
    already finds it whole by another rule (this machine's user, an e-mail address): redacted everywhere by that."""
    own = scanner.find(name)
    if len(own) == 1 and (own[0].start, own[0].end) == (0, len(name)):
        return "found"
    if not NAME_MIN_LENGTH <= len(name) <= MAX_LENGTH or name.lower() in COMMON_NAMES or "REDACTED" in name.upper():
        return "a common word, or of a length release does not match everywhere"
    word = whole_word(re.escape(name))
    if any(word.search(n) for n in run_names):
        return "a word of the runs' own names"
    return None


def _names_used(scanner: Scanner, names: dict[str, str], run_names: set[str]) -> LearntNames:
    """The user names of ``names`` that :func:`unused_name` keeps, compiled; the others counted in ``not_used``
    (a name another rule finds whole is not counted: it is redacted everywhere)."""
    learnt = LearntNames()
    for name, rule in names.items():
        why = unused_name(scanner, name, run_names)
        if why is None:
            learnt.names[name] = rule
        elif why != "found":
            learnt.not_used += 1
    learnt.compile()
    return learnt
