"""Which files ``rollbench release`` knows how to scan for secrets, and the scan of a run's videos.

A release copies only what it scanned (issue 42). The kinds (:func:`scan_kind`):

* ``json`` / ``jsonl`` (by suffix), ``parquet`` (by suffix): every string they carry is redacted
  (:mod:`rollbench.release.redact`, :mod:`rollbench.release.parquet_text`);
* ``text``: a file of a text suffix (:data:`TEXT_SUFFIXES`), or any file that is UTF-8 text; either holding no NUL
  byte anywhere (hostile19 F1: UTF-16 or UTF-32 text is ASCII with NULs between, valid UTF-8 that no rule reads).
  A file of a text suffix holding one is refused by name (:func:`scan_kind`: ConfigError, exit 2); other control
  characters (an ANSI colour's ESC, a backspace) are kept, and a secret they hide is found without them
  (:mod:`rollbench.release.invisible`);
* ``video``: an ``.mp4`` at the writer's own video path of a run (``RUN/videos/KEY/chunk-CCC/file-FFF.mp4``) that
  PyAV opens as a container with a video stream. A video cannot be redacted, so it is checked instead
  (:func:`video_findings`): its container, stream and chapter metadata (a chapter's title) with every rule; its
  bytes with the rules whose matches cannot occur by chance in compressed data (provider keys, PEM private keys,
  the releasing environment's secret values, read as Latin-1 and encoded as UTF-8, UTF-16LE and UTF-16BE:
  :func:`env_spellings`); and every run of :data:`MIN_TEXT_RUN` or more printable ASCII bytes or UTF-16LE/BE
  characters in it (:func:`text_runs`: a ``free`` or ``udta`` box's text, a chapter list, an encoder's SEI string)
  with the e-mail, home-path and named-credential rules (:data:`NAMED_RULES`: ``token=``, ``Bearer``, ...) and the
  host, user and ``--rules`` literal names and learnt values (:mod:`rollbench.release.learnt`) of
  :data:`MIN_BYTE_NAME` or more characters. A
  finding refuses the release (nothing is written): a video cannot be redacted in place. Not searched in video bytes
  (said by :data:`VIDEO_BYTES_SCOPE`): shorter text runs, shorter names and the other rules (they match compressed
  data by chance). A video carrying a stream other than video (audio, subtitle or chapter text, data, attachment:
  rollbench writes none) is refused too (:func:`video_parts`): release cannot read its samples;
* anything else (a ``.npy``, a ``.png``, an ``.mp4`` elsewhere, a binary of any name) is ``None``: release refuses
  the run naming the file (exit 2) instead of copying bytes it never read as text.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath

from rollbench.core.contracts import ConfigError
from rollbench.release import credentials as cred
from rollbench.release.rules import PLACEHOLDER, Finding, Scanner

TEXT_SUFFIXES = {".md", ".txt", ".csv", ".tsv", ".log", ".yaml", ".yml", ".toml", ".ini", ".html"}
VIDEO_PATH = re.compile(r"[^/]+/videos/[^/]+/chunk-[0-9]{3}/file-[0-9]{3}\.mp4")  # a run's, as record.lerobot names it
# rules whose matches are long fixed-prefix forms: safe to search for in compressed bytes (no match by chance)
BYTE_RULES = frozenset(
    {
        "private_key", "anthropic_key", "openai_key", "aws_access_key", "github_token", "huggingface_token",
        "slack_token", "google_api_key", "gitlab_token", "jwt",
    }
)  # fmt: skip
# text in a video's bytes: runs of printable ASCII at least this long (random bytes hold one of 16 about once in
# 7 million positions, and an e-mail address inside it far less often), searched with these rules
MIN_TEXT_RUN = 16
TEXT_RUN = re.compile(rb"[\x20-\x7e]{%d,}" % MIN_TEXT_RUN)
TEXT_RUN_RULES = frozenset({"email", "home_path"})
# the same text in UTF-16 (hostile19 F3: a ``free`` box written by a Windows tool): runs of MIN_TEXT_RUN or more
# characters of U+0020..U+007E and U+00A0..U+00FF; each pattern starts with a NUL byte, so re's literal-prefix search
# finds the candidates (about 3 ms per 8 MB of video bytes, where a character class first would cost 100 times more)
_CHAR = rb"[\x20-\x7e\xa0-\xff]"
UTF16BE_RUN = re.compile(rb"\x00%s(?:\x00%s){%d,}" % (_CHAR, _CHAR, MIN_TEXT_RUN - 1))
UTF16LE_TAIL = re.compile(rb"\x00(?:%s\x00){%d,}" % (_CHAR, MIN_TEXT_RUN - 1))  # a UTF-16LE run from its 1st NUL
# an environment secret's value is searched in a file's bytes in these encodings too (label, codec, errors: a value
# os.environ decoded with surrogate escapes is encoded back to its bytes)
ENV_ENCODINGS = (("UTF-8", "utf-8", "surrogateescape"), ("UTF-16LE", "utf-16-le", "surrogatepass"),
                 ("UTF-16BE", "utf-16-be", "surrogatepass"))  # fmt: skip
# credentials named where they stand (``token=``, ``password:``, ``Bearer``, ``Authorization:``, ``Cookie:``, a URL's
# ``user:PASSWORD@`` or ``?sig=``), searched in a video's text runs too (hostile18 F3: a chapter title written as
# text in the file): each match needs its name or scheme spelt out, which compressed data does not hold by chance
NAMED_RULES = frozenset(
    {"secret_field", "bearer_token", "authorization", "cookie", "url_credential", "url_path_credential", "url_fragment"}
)
NAME_RULES = frozenset({"host_name", "user_name", "literal"})
MIN_BYTE_NAME = 6  # a shorter name is a common token of encoder strings ("ref=3", "me=hex")
VIDEO_BYTES_SCOPE = (
    "a video's bytes are searched for provider and private keys, the environment's secret values (as Latin-1, UTF-8, "
    f"UTF-16LE and UTF-16BE), and, in runs of {MIN_TEXT_RUN}+ printable characters (ASCII, UTF-16LE, UTF-16BE), "
    "e-mail addresses, home paths, named credentials (token=, password:, "
    "Bearer, Authorization, Cookie, URL passwords and secret query values), host/user/--rules names of "
    f"{MIN_BYTE_NAME}+ characters and values learnt as credentials; other rules and shorter names are not searched there"
)


def _utf8_text(raw: bytes) -> bool:
    if b"\0" in raw:  # a binary, or UTF-16/32 text (ASCII with NULs between: valid UTF-8 no rule reads)
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _opens_as_video(raw: bytes) -> bool:
    import av  # PyAV, as record.files reads and writes videos

    try:
        with av.open(io.BytesIO(raw), mode="r") as container:
            return bool(container.streams.video)
    except Exception:  # PyAV raises its own error types (and ValueError) for a file that is not a media container
        return False


def scan_kind(rel: str, raw: bytes) -> str | None:
    """How release scans the file ``rel`` (``RUN/inner/path`` or ``labels/NAME``) holding ``raw``: ``"json"``,
    ``"jsonl"``, ``"parquet"``, ``"text"``, ``"video"``, or None when it cannot (see the module docstring).
    ConfigError naming ``rel`` and the byte for a file of a text suffix holding a NUL byte."""
    suffix = PurePosixPath(rel).suffix.lower()
    if suffix in (".json", ".jsonl", ".parquet"):
        return suffix[1:]
    if suffix in TEXT_SUFFIXES and b"\0" in raw:
        raise ConfigError(
            f"{rel} holds a NUL byte (at byte {raw.index(0):,}): it is UTF-16 or UTF-32 text or a binary, not UTF-8 "
            "text release can scan for secrets; convert it to UTF-8 or move it out of the run to release the rest"
        )
    if suffix in TEXT_SUFFIXES or _utf8_text(raw):
        return "text"
    if suffix == ".mp4" and VIDEO_PATH.fullmatch(rel) and _opens_as_video(raw):
        return "video"
    return None


def video_parts(raw: bytes) -> tuple[list[tuple[str, dict[str, str]]], list[str]]:
    """What a video carries besides its frames, read with one opening of the file: ``(where, tags)`` of its
    container, each stream and each chapter (a chapter's title is a tag), and the parts release cannot read, each
    described (a stream that is not video: audio, subtitle or chapter text, data, attachment; rollbench writes one
    video stream only). A video holding such a part is refused: its samples are never scanned."""
    import av

    with av.open(io.BytesIO(raw), mode="r") as container:
        tags = [("container", dict(container.metadata or {}))]
        tags += [(f"stream {s.index}", dict(s.metadata or {})) for s in container.streams]
        tags += [(f"chapter {i}", dict(ch.get("metadata") or {})) for i, ch in enumerate(container.chapters())]
        unread = [f"a {s.type} stream (stream {s.index})" for s in container.streams if s.type != "video"]
    return tags, unread


def video_findings(raw: bytes, tags: list[tuple[str, dict[str, str]]], scanner: Scanner) -> list[str]:
    """Where a video holds a secret, each as ``"RULE in WHERE"``: its container, stream or chapter metadata
    (``tags``, from :func:`video_parts`; every rule, the tag's name is the field), or its bytes
    (:func:`byte_findings`)."""
    found: list[str] = []
    for where, metadata in tags:
        for key, value in metadata.items():
            found += [f"{f.rule} in {where} metadata" for f in scanner.find(str(key)) + scanner.find(str(value), key)]
    return found + byte_findings(raw, scanner)


def _printable(b: int) -> bool:
    return 0x20 <= b <= 0x7E or b >= 0xA0


def text_runs(raw: bytes) -> Iterator[tuple[str, str]]:
    """``(where, text)`` of each run of text in ``raw``: :data:`MIN_TEXT_RUN` or more printable ASCII bytes, and as
    many UTF-16LE or UTF-16BE characters of U+0020..U+007E and U+00A0..U+00FF (:data:`UTF16LE_TAIL`,
    :data:`UTF16BE_RUN`); ``where`` names the run's kind and byte offset."""
    for m in TEXT_RUN.finditer(raw):
        yield f"a text run at byte {m.start():,}", m.group().decode("ascii")
    for m in UTF16LE_TAIL.finditer(raw):
        s, e = m.span()
        if s and _printable(raw[s - 1]):  # its first character; else the bytes from s are UTF16BE_RUN's run
            yield f"a UTF-16LE text run at byte {s - 1:,}", raw[s - 1 : e].decode("utf-16-le")
    for m in UTF16BE_RUN.finditer(raw):
        yield f"a UTF-16BE text run at byte {m.start():,}", m.group().decode("utf-16-be")


def _cased_outside_ascii(c: str) -> bool:
    return not c.isascii() and c.lower() != c.upper()


def _decoded_match(
    raw: bytes, low: bytes, value: str, pattern: re.Pattern[str], encoding: tuple[str, str, str]
) -> str | None:
    """The first match of ``pattern`` (an environment secret's, any letter case) in ``raw`` decoded as ``encoding``
    (an item of :data:`ENV_ENCODINGS`; UTF-16 at both byte alignments), for a ``value`` with cased letters outside
    ASCII. Only the bytes around each place holding the longest piece of ``value`` without such letters (searched in
    ``low``, ``raw`` lower-cased) are decoded when that piece has 4 or more characters; all of ``raw`` otherwise.
    Linear: overlapping windows are merged before decoding."""
    label, codec, errors = encoding
    anchor = max(re.split("|".join(map(re.escape, {c for c in value if _cased_outside_ascii(c)})), value), key=len)
    how = "surrogateescape" if label == "UTF-8" else "replace"  # invalid bytes as os.environ reads them
    spans: list[list[int]] = [[0, len(raw)]]
    if len(anchor) >= 4:
        needle, reach, spans = anchor.encode(codec, errors).lower(), 4 * len(value) + 8, []
        at = low.find(needle)
        while at >= 0:
            if spans and at - reach <= spans[-1][1]:
                spans[-1][1] = at + reach
            else:
                spans.append([max(0, at - reach), at + reach])
            at = low.find(needle, at + 1)
    for s, e in spans:
        for a in (0,) if label == "UTF-8" else (0, 1):
            if m := pattern.search(raw[s + a : e].decode(codec, errors=how)):
                return m.group()
    return None


def env_spellings(raw: bytes, scanner: Scanner) -> list[tuple[str, str, str]]:
    """``(rule, encoding, text)`` for each environment secret whose value ``raw`` holds in any letter case encoded as
    UTF-8 (a value that is not ASCII: an ASCII one's UTF-8 is its Latin-1, which the rule's own pattern finds),
    UTF-16LE or UTF-16BE (:data:`ENV_ENCODINGS`); ``text`` is the first match decoded (an ``allow`` regex is matched
    against it). A value whose cased letters are all ASCII (the usual token) is a substring search of the bytes
    lower-cased, a few milliseconds per 10 MB; one with other cased letters (``Pässwort``) is the rule's own pattern
    on the bytes decoded (:func:`_decoded_match`), as its Latin-1 spelling is."""
    low, out = raw.lower(), []
    for name, _category, pattern, _group in scanner.patterns:
        if not name.startswith("environment:"):
            continue
        value = scanner.env_values[name.split(":", 1)[1]]
        for encoding in ENV_ENCODINGS:
            label, codec, errors = encoding
            if label == "UTF-8" and value.isascii():
                continue
            if any(map(_cased_outside_ascii, value)):
                found = _decoded_match(raw, low, value, pattern, encoding)
            else:
                needle = value.encode(codec, errors).lower()
                at = low.find(needle)
                found = raw[at : at + len(needle)].decode(codec, errors="replace") if at >= 0 else None
            if found is not None:
                out.append((name, label, found))
    return out


def _run_rule(f: Finding) -> bool:
    """Whether finding ``f`` in a text run of a file's bytes counts (see :func:`byte_findings`)."""
    rule = f.rule.removeprefix("interleaved:")
    return (
        rule in TEXT_RUN_RULES
        or rule in NAMED_RULES
        or rule in BYTE_RULES  # found anywhere in the bytes too; in a UTF-16 run only here
        or rule.startswith(("learnt:", "environment:"))
        or (rule in NAME_RULES and len(f.value) >= MIN_BYTE_NAME)
    )


# what is left of a named credential's value once release has replaced every string in it: JSON's punctuation and the
# names of its fields (``{"sid": "<REDACTED:credential:3>"}``, the key-value metadata release decoded and redacted)
_REDACTED_STRUCTURE = re.compile(r'(?:[\s{}\[\],:]|"[^"\\]*+"[ \t]*+:|"")*+')


def _named_or_keys(run: str, scanner: Scanner, allowed: Callable[[str], bool]) -> list[str]:
    """The rules of :data:`BYTE_RULES` (a UTF-16 key) and :data:`NAMED_RULES` matching in ``run`` (a text run of a
    parquet file's bytes), each rule's own pattern alone (no other rule's longer match hides it: ``token=`` before a
    high-entropy value is a named credential here); a named credential's value that holds nothing but placeholders
    in JSON's structure (``"cookies": {"sid": "<REDACTED:credential:3>"}``: what release wrote where it decoded and
    redacted) is no match, nor is a value ``allowed`` (an ``allow`` regex)."""
    out = []
    for name, _category, pattern, group in scanner.patterns:
        if name == "secret_field":
            values = [run[a:b] for a, b in cred.pair_secrets(run, pattern)]
        elif name in NAMED_RULES or name in BYTE_RULES:
            values = [m.group(group) for m in pattern.finditer(run)]
        else:
            continue
        if any(
            v and not allowed(v) and (name in BYTE_RULES or not _REDACTED_STRUCTURE.fullmatch(PLACEHOLDER.sub("", v)))
            for v in values
        ):
            out.append(name)
    return out


def byte_findings(raw: bytes, scanner: Scanner) -> list[str]:
    """Where a file's bytes, read as they are (not decoded), hold a secret, each as ``"RULE in its bytes ..."``:
    :data:`BYTE_RULES` anywhere; environment secrets' values anywhere, read as Latin-1 in any letter case and
    encoded as UTF-8, UTF-16LE and UTF-16BE (:func:`env_spellings`); and in each text run (:func:`text_runs`: ASCII,
    UTF-16LE, UTF-16BE) the e-mail, home-path and named-credential rules, :data:`BYTE_RULES` (a UTF-16 key),
    environment secrets in their other forms, learnt values, and host, user and ``--rules`` literal names of
    :data:`MIN_BYTE_NAME` or more characters (a video's bytes)."""
    text = raw.decode("latin-1")
    found = [
        f"{name} in its bytes"
        for name, _category, pattern, _group in scanner.patterns
        if (name in BYTE_RULES or name.startswith("environment:")) and pattern.search(text)
    ]
    found += [f"{rule} in its bytes (as {label})" for rule, label, _ in env_spellings(raw, scanner)]
    for where, run in text_runs(raw):
        found += [f"{f.rule} in its bytes ({where})" for f in scanner.find(run) if _run_rule(f)]
    return found


def plain_byte_findings(raw: bytes, scanner: Scanner) -> list[str]:
    """:func:`byte_findings` without decoding (each rule's own pattern only; cheap on large files, used for a
    parquet file as released: its footer's ``created_by``, page statistics, an unused page, a number column's raw
    bytes): :data:`BYTE_RULES` (provider and private keys) and environment secrets' values anywhere (the values read
    as Latin-1 in any letter case, and as UTF-8, UTF-16LE and UTF-16BE: :func:`env_spellings`), and in each text run
    (:func:`text_runs`: ASCII, UTF-16LE, UTF-16BE) the e-mail, home-path and named-credential rules
    (:data:`NAMED_RULES`), :data:`BYTE_RULES` (a UTF-16 key), and host, user and ``--rules`` literal names of
    :data:`MIN_BYTE_NAME` or more characters and learnt values (:mod:`rollbench.release.learnt`); a match of an
    ``allow`` regex is no finding (hostile24a F1: the provider keys and named credentials were left out)."""

    def allowed(value: str) -> bool:
        return any(a.search(value) for a in scanner.allow)

    def hit(pattern: re.Pattern[str], group: int, text: str, shortest: int) -> bool:
        return any(len(m.group(group)) >= shortest and not allowed(m.group(group)) for m in pattern.finditer(text))

    text = raw.decode("latin-1")
    found = [
        f"{name} in its bytes"
        for name, _category, pattern, group in scanner.patterns
        if (name in BYTE_RULES or name.startswith("environment:")) and hit(pattern, group, text, 1)
    ]
    found += [f"{rule} in its bytes (as {label})" for rule, label, s in env_spellings(raw, scanner) if not allowed(s)]
    rules = [(n, p, g) for n, _c, p, g in scanner.patterns if n in TEXT_RUN_RULES or n in NAME_RULES]
    if scanner.learnt.pattern is not None:
        rules.append(("learnt value", scanner.learnt.pattern, 0))
    for where, s in text_runs(raw):
        found += [
            f"{name} in its bytes ({where})"
            for name, pattern, group in rules
            if hit(pattern, group, s, 1 if name in TEXT_RUN_RULES else MIN_BYTE_NAME)
        ]
        found += [f"{rule} in its bytes ({where})" for rule in _named_or_keys(s, scanner, allowed)]
    return found
