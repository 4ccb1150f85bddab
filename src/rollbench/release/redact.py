"""Redacting one file of a release: JSON (and JSON lines), parquet and text files, each string checked with
:class:`rollbench.release.rules.Scanner` and replaced by its placeholder; what was replaced is recorded."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.identity import sanitize_segment
from rollbench.core.jsonfile import JsonRefused, loads_strict
from rollbench.release.credentials import secret_path
from rollbench.release.kinds import plain_byte_findings, scan_kind, video_findings, video_parts
from rollbench.release.markup import markup_hidden, markup_kind, markup_said
from rollbench.release.parquet_redact import TableRedaction
from rollbench.release.parquet_text import UnscannableType, has_dictionary, has_text
from rollbench.release.rules import Finding, Scanner

IDENTITY_SEGMENT_FIELDS = ("identity.host", "identity.robot", "identity.name")
# json.dumps styles of the files rollbench writes (run.json: indent 2; JSONL lines: defaults) and the compact one
JSON_STYLES: tuple[dict[str, Any], ...] = ({"indent": 2}, {}, {"separators": (",", ":")})


@dataclass
class Released:
    """One file of the release: where it goes, its bytes, what was replaced in it."""

    path: str  # relative to the release directory
    unchanged: bool  # released byte for byte as recorded (then its release sha256 is the source's too)
    data: bytes
    redactions: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # structural rewrites said in a warning line


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record(rel: str, where: str, pairs: list[tuple[Finding, str]]) -> list[dict[str, Any]]:
    return [{"file": rel, "field": where, "rule": f.rule, "category": f.category, "placeholder": ph} for f, ph in pairs]


def _walk(obj: Any, path: str, out: list[tuple[str, str]], key: Callable[[str], str] = str) -> None:
    """Every string of a JSON document with its field path (keys too, as ``path{key}``); ``key`` spells each key in
    the paths (the redacted key, so MANIFEST.json's field paths carry no secret a key held)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((f"{path}{{key}}", k))
            _walk(v, f"{path}.{key(k)}" if path else key(k), out, key)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk(v, f"{path}[{i}]", out, key)
    elif isinstance(obj, str):
        out.append((path, obj))


def _strings_of_json(text: str, lines: bool, key: Callable[[str], str] = str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    docs = [(f"line {i}: ", ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()] if lines else [("", text)]
    for prefix, doc in docs:
        start: list[tuple[str, str]] = []
        _walk(loads_strict(doc, finite=False), "", start, key)
        found += [(prefix + p, s) for p, s in start]
    return found


def _standing(s: str, f: Finding) -> str:
    """How finding ``f`` stands in its string ``s``: the ``whole`` of it, a ``word`` (no letter or digit on either
    side), or ``inside`` a longer word."""
    if f.start == 0 and f.end == len(s):
        return "whole"
    alnum = re.compile(r"[A-Za-z0-9]")
    if (f.start and alnum.match(s[f.start - 1])) or (f.end < len(s) and alnum.match(s[f.end])):
        return "inside"
    return "word"


def _json_metadata(text: str, where: str) -> bool:
    """True when ``text``, a parquet key-value metadata value, is a JSON object or array."""
    if not where.endswith("{metadata}") or text.strip()[:1] not in ("{", "["):
        return False
    try:
        return isinstance(loads_strict(text, finite=False), dict | list)
    except ValueError:
        return False


def _number(o: Any) -> bool:
    return isinstance(o, int | float) and not isinstance(o, bool)


def _secret_numbers(o: Any, path: str) -> list[str]:
    """Field paths of the numbers of a JSON document under a credential key (:func:`secret_path`)."""
    if isinstance(o, dict):
        return [p for k, v in o.items() for p in _secret_numbers(v, f"{path}.{k}" if path else str(k))]
    if isinstance(o, list):
        return [p for i, v in enumerate(o) for p in _secret_numbers(v, f"{path}[{i}]")]
    return [path] if _number(o) and secret_path(_field_leaf(path)) else []


def _strings_redacted(o: Any, scanner: Scanner) -> Any:
    if isinstance(o, dict):
        return {scanner.redact(k)[0]: _strings_redacted(v, scanner) for k, v in o.items()}
    if isinstance(o, list):
        return [_strings_redacted(v, scanner) for v in o]
    return scanner.redact(o)[0] if isinstance(o, str) else o


def _containers_hold(o: Any, scanner: Scanner) -> bool:
    """Whether an array or object of ``o`` holds an environment secret only as a whole."""
    if not isinstance(o, dict | list):
        return False
    inner = o.values() if isinstance(o, dict) else o
    return scanner.echo.found_joined(o) is not None or any(_containers_hold(v, scanner) for v in inner)


def _spec_identity_released(rel: str, text: str, redactions: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """run.json's ``spec_identity`` is a hash of its ``spec``: when a redaction fell inside the spec (a header's
    token in ``policy_options``, a password in the policy URL, an e-mail in the instruction), the recorded identity
    would let anyone confirm a guessed value by hashing, so it is released as the identity of the redacted spec
    (:func:`rollbench.core.spec.spec_identity_of`) with a warning line; the text and released bytes otherwise
    unchanged."""
    from rollbench.core.spec import spec_identity_of

    if not any(re.match(r"spec(\.|\[|\{|$)", r["field"]) for r in redactions):
        return text, []
    doc = loads_strict(text, finite=False)
    spec, old = doc.get("spec") if isinstance(doc, dict) else None, doc.get("spec_identity")
    if not (isinstance(spec, dict) and isinstance(old, str)):
        return text, []
    new = spec_identity_of(spec)
    text, n = re.subn(r'("spec_identity"\s*:\s*)"' + re.escape(old) + '"', lambda m: f'{m.group(1)}"{new}"', text)
    if n != 1:
        raise RollbenchError(f"{rel}: its spec was redacted but its spec_identity could not be replaced")
    return text, [f"{rel}: spec_identity is released as the identity of the redacted spec (the recorded one hashes "
                  "values the release replaced)"]  # fmt: skip


def _cursor_said(rel: str, rule: str) -> str:
    """The warning line of a text file released as one placeholder because it moves a terminal's cursor
    (:mod:`rollbench.release.cursor`)."""
    if rule == "cursor:withheld":
        return (f"{rel}: its text moves a terminal's cursor and is too long or costly to draw as a terminal shows it, "
                "or edits rectangles or columns (VT420), so the whole file is released as one placeholder (rule cursor:withheld)")  # fmt: skip
    return (f"{rel}: once its text moves the cursor between lines, a terminal shows a match of rule {rule[7:]} in "
            f"it, and rows cannot be traced back to lines: the whole file is released as one placeholder (rule {rule})")  # fmt: skip


def _field_leaf(path: str) -> str:
    return re.sub(r"\[\d+\]$", "", path.split(": ", 1)[-1])


class _DocWalk:
    """One JSON document of a rollbench style redacted as values (:meth:`Releaser._json_doc`), in two passes over
    it: pass 1 (``pieces`` False) every rule, and each array or object that holds an environment secret only as a
    whole; pass 2, on pass 1's result, what still holds a piece of one (:meth:`SecretEcho.piece_in`). In that order,
    so an array holding a secret split over its items is replaced whole, never item by item (which would keep the
    items shorter than a piece). Each redaction is appended to ``redactions``."""

    def __init__(self, releaser: Releaser, rel: str, prefix: str, redactions: list[dict[str, Any]]) -> None:
        self.releaser, self.scanner, self.rel, self.prefix, self.redactions = (
            releaser, releaser.scanner, rel, prefix, redactions
        )  # fmt: skip

    def walk(self, o: Any, path: str, pieces: bool) -> Any:
        """``o`` (at field ``path``) redacted by the pass ``pieces`` names."""
        if isinstance(o, dict):
            key = self.releaser.key
            items = {self.text(k, f"{path}{{key}}", pieces): self.walk(v, f"{path}.{key(k)}" if path else key(k), pieces)
                     for k, v in o.items()}  # fmt: skip
            return self.whole(items, path, pieces)
        if isinstance(o, list):
            return self.whole([self.walk(v, f"{path}[{i}]", pieces) for i, v in enumerate(o)], path, pieces)
        if not pieces and _number(o) and secret_path(_field_leaf(path)):  # a PIN or numeric key: a string
            return self.red(json.dumps(o), path, False)
        return self.text(o, path, pieces) if isinstance(o, str) else o

    def text(self, s: str, path: str, pieces: bool) -> str:
        return self.red(s, path, pieces) if not pieces or self.scanner.echo.piece_in(s) else s

    def red(self, s: str, path: str, pieces: bool) -> str:
        fieldname = None if path.endswith("{key}") else _field_leaf(path)
        new, pairs = self.scanner.redact(s, fieldname, pieces=pieces)
        found = _record(self.rel, self.prefix + path, pairs)
        if pairs and _field_leaf(path) in IDENTITY_SEGMENT_FIELDS:  # must stay a valid identity segment
            new = sanitize_segment(new)
            for r in found:
                r["placeholder"] = sanitize_segment(r["placeholder"])
        self.redactions.extend(found)
        return new

    def whole(self, o: Any, path: str, pieces: bool) -> Any:
        """An array or object holding an environment secret only as a whole (split over its items, an array of its
        bytes: :meth:`rollbench.core.secret_echo.SecretEcho.found_joined`), or in pass 2 a piece of one: its
        placeholder, a string."""
        echo = self.scanner.echo
        name = echo.piece_in(o) if pieces else echo.without_pieces.found_joined(o)
        if name is None:
            return o
        ph = self.scanner.placeholder(json.dumps(o), "env_secret")
        self.redactions.append({"file": self.rel, "field": self.prefix + path, "rule": f"environment:{name}",
                                "category": "env_secret", "placeholder": ph})  # fmt: skip
        return ph


class Releaser:
    """Builds the release in memory (see the module docstring); ``write`` puts it on disk."""

    def __init__(self, scanner: Scanner) -> None:
        self.scanner = scanner

    def key(self, k: str) -> str:
        """A JSON key as it is spelled in a field path: redacted (an identity key's host, an e-mail address used as
        a key), as the released file spells it."""
        return self.scanner.redact(k)[0]

    def json_file(self, rel: str, raw: bytes, lines: bool) -> Released:
        text = raw.decode("utf-8")
        chunks = text.splitlines(keepends=True) if lines else [text]
        out, redactions = [], []
        for n, chunk in enumerate(chunks, 1):
            body = chunk.rstrip("\r\n")
            if not body.strip():
                out.append(chunk)
                continue
            try:
                new, found = self._json_doc(rel, body, f"line {n}: " if lines else "")
            except JsonRefused as exc:
                raise JsonRefused(f"line {n} is not JSON release reads: {exc}" if lines else str(exc)) from None
            out.append(new + chunk[len(body) :])
            redactions += found
        result = "".join(out)
        self._verify(rel, _strings_of_json(result, lines))
        said: list[str] = []
        if not lines and rel.count("/") == 1 and rel.endswith("/run.json"):
            result, said = _spec_identity_released(rel, result, redactions)
        return Released(rel, raw == result.encode("utf-8"), result.encode("utf-8"), redactions, said)

    def _json_doc(self, rel: str, doc: str, prefix: str) -> tuple[str, list[dict[str, Any]]]:
        """One JSON document redacted: re-serialised when its writer's style is reproduced exactly (rollbench's own
        files), else by replacing each secret's JSON-encoded text in place."""
        obj = loads_strict(doc, finite=False)
        redactions: list[dict[str, Any]] = []

        for style in JSON_STYLES:
            if json.dumps(obj, **style) == doc:
                walk = _DocWalk(self, rel, prefix, redactions)
                return json.dumps(walk.walk(walk.walk(obj, "", False), "", True), **style), redactions
        if _containers_hold(_strings_redacted(obj, self.scanner), self.scanner):
            raise RollbenchError(
                f"{rel}: an array or object holds an environment secret split over its items, which cannot be "
                "redacted in place (the file is not in a JSON style rollbench writes); edit it out of the run"
            )
        numbers = _secret_numbers(obj, "")
        if numbers:
            raise RollbenchError(
                f"{rel}: a number at {prefix}{numbers[0]} is under a credential key and cannot be redacted in place "
                "(the file is not in a JSON style rollbench writes); edit it out of the run"
            )
        swaps: dict[tuple[str, str], str] = {}  # (value, how it stands in its string) -> placeholder
        for path, s in _strings_of_json(doc, False, self.key):
            fieldname = None if path.endswith("{key}") else _field_leaf(path)
            _, pairs = self.scanner.redact(s, fieldname)
            redactions += _record(rel, prefix + path, pairs)
            for f, ph in pairs:
                swaps[(f.value, _standing(s, f))] = ph
        # longest first; of one value, whole before word before inside (each later pattern finds every earlier
        # one's matches: a value whole in one field and a word in another would else be found twice, then not at all)
        order = ("whole", "word", "inside")
        for (value, standing), ph in sorted(swaps.items(), key=lambda kv: (-len(kv[0][0]), order.index(kv[0][1]))):
            n = 0
            for enc in dict.fromkeys(json.dumps(value, ensure_ascii=a)[1:-1] for a in (True, False)):  # \u or UTF-8
                if standing == "whole":
                    pattern, repl = re.escape(f'"{enc}"'), f'"{ph}"'
                elif standing == "word":
                    pattern, repl = rf"(?<![A-Za-z0-9]){re.escape(enc)}(?![A-Za-z0-9])", ph
                else:  # found inside a longer word (an environment secret's value, a hex run after a letter)
                    pattern, repl = re.escape(enc), ph
                doc, k = re.subn(pattern, lambda _m, r=repl: r, doc)  # type: ignore[misc]
                n += k
            if n == 0:
                raise RollbenchError(f"{rel}: found a {ph[1:-1]} but could not replace it in the file's text")
        return doc, redactions

    def _verify(self, rel: str, strings: list[tuple[str, str]]) -> None:
        for path, s in strings:
            left = self.scanner.find(s, None if path.endswith("{key}") else _field_leaf(path))
            if left:
                raise RollbenchError(f"{rel}: a {left[0].rule} is still present at {path} after redaction")

    def parquet_file(self, rel: str, raw: bytes) -> Released:
        """Every string the file carries (:mod:`rollbench.release.parquet_text`: values of every text type, column
        and field names, key-value metadata) and every list, struct or map value holding an environment secret as a
        whole (:mod:`rollbench.release.parquet_redact`) redacted; rewritten when something was found or a text
        column is dictionary-encoded (the rewrite keeps only the entries rows use: the others are never read), then
        scanned again; copied byte for byte otherwise. The released bytes are searched last
        (:func:`rollbench.release.kinds.plain_byte_findings`: page statistics, unused pages): a secret there is an error.
        ConfigError naming the file and column for a column of a type release cannot read."""
        table = pq.read_table(pa.BufferReader(raw))
        redactions: list[dict[str, Any]] = []

        def red(text: str, fieldname: str | None, where: str, pieces: bool) -> str:
            if _json_metadata(text, where):  # a JSON document (a run's spec): walked with its field paths
                new, found = self._json_doc(rel, text, f"{where}: ")
                redactions.extend(found)
                return new
            new, pairs = self.scanner.redact(text, fieldname, pieces=pieces)
            redactions.extend(_record(rel, where, pairs))
            return new

        def check(text: str, fieldname: str | None, where: str) -> str:
            if _json_metadata(text, where):
                self._verify(rel, [(f"{where}: {p}", s) for p, s in _strings_of_json(text, False)])
                return text
            left = self.scanner.find(text, fieldname)
            if left:
                raise RollbenchError(f"{rel}: a {left[0].rule} is still present at {where} after redaction")
            return text

        passes = TableRedaction(self.scanner, rel, red, redactions)
        try:
            out = passes.redacted(table)
        except UnscannableType as exc:
            raise ConfigError(
                f"{rel}: column {exc.column!r} is of type {exc.type}, which release cannot read for secrets (it reads "
                "text, numbers, booleans, times, decimals and nulls, and lists, structs, maps, dictionaries and "
                "extension types of those); move the file out of the run"
            ) from None
        data = raw
        if redactions or any(has_dictionary(f.type) and has_text(f.type) for f in table.schema):
            passes.check(out, check)
            sink = pa.BufferOutputStream()
            pq.write_table(out, sink)
            data = sink.getvalue().to_pybytes()
        found = plain_byte_findings(data, self.scanner)
        if found:
            raise RollbenchError(
                f"{rel}: the parquet file's bytes hold a match of rule {found[0]} where release does not read "
                "(the footer, page statistics, an unused page, a number column's bytes); rewrite the file without it or move it out of the run"
            )
        return Released(rel, data == raw, data, redactions)

    def text_file(self, rel: str, raw: bytes) -> Released:
        """Scanned as one string (a PEM block spans lines); each finding's field is the line it starts on; a secret
        hidden by invisible characters replaces its line (:meth:`~rollbench.release.rules.Scanner.find`)."""
        text = raw.decode("utf-8")
        result, pairs = self.scanner.redact(text, lines=True)
        if (kind := markup_kind(rel)) is not None and (shown := markup_hidden(text, kind, pairs, self.scanner)):
            whole = Finding(0, len(text), f"markup:{shown.rule}", shown.category, text)
            ph = self.scanner.placeholder(text, shown.category)
            return Released(rel, False, f"{ph}\n".encode(), _record(rel, "the whole file", [(whole, ph)]),
                            [markup_said(rel, shown.rule)])  # fmt: skip
        redactions = []
        for f, ph in pairs:
            redactions += _record(rel, f"line {text.count(chr(10), 0, f.start) + 1}", [(f, ph)])
        said = [_cursor_said(rel, f.rule) for f, _ in pairs if f.rule.startswith("cursor:") and f.end - f.start >= len(
            text.rstrip("\n")) and (f.rule == "cursor:withheld" or "\n" in text.rstrip("\n"))]  # fmt: skip
        return Released(rel, raw == result.encode("utf-8"), result.encode("utf-8"), redactions, said)

    def file(self, rel: str, raw: bytes, kind: str | None = None) -> Released:
        """The released form of ``raw`` (released as ``rel``), scanned as its ``kind``
        (:func:`rollbench.release.kinds.scan_kind`, computed when not given). RollbenchError when it cannot be
        redacted safely (a secret inside a video); ConfigError for a file release cannot scan (a video with a stream
        other than video: :func:`rollbench.release.kinds.video_parts`)."""
        kind = kind or scan_kind(rel, raw)
        try:
            if kind in ("json", "jsonl"):
                return self.json_file(rel, raw, lines=kind == "jsonl")
            if kind == "parquet":
                return self.parquet_file(rel, raw)
            if kind == "text":
                return self.text_file(rel, raw)
        except (ValueError, RecursionError, pa.ArrowException) as exc:
            why = str(exc) if isinstance(exc, JsonRefused) else f"{type(exc).__name__}: {exc}"
            raise RollbenchError(f"{rel}: cannot be parsed for redaction ({why})") from None
        if kind != "video":
            raise ConfigError(f"{rel} is not a file release can scan for secrets; move it out of the run")
        tags, unread = video_parts(raw)
        found = video_findings(raw, tags, self.scanner)
        if found:
            raise RollbenchError(
                f"{rel}: the video holds a match of rule {found[0]}, which release cannot redact inside a video "
                "(move the video out of the run, or re-encode it without that text)"
            )
        if unread:  # a subtitle's or chapter track's samples are text release never reads: refused, as a .npy is
            raise ConfigError(
                f"{rel}: the video carries {unread[0]}, which release cannot read for secrets (rollbench writes one "
                "video stream only); move the video out of the run, or re-encode it with its video stream alone"
            )
        return Released(rel, True, raw)
