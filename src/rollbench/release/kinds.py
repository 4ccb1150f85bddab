"""Which files ``rollbench release`` knows how to scan for secrets, and the scan of a run's videos.

A release copies only what it scanned (issue 42). The kinds (:func:`scan_kind`):

* ``json`` / ``jsonl`` (by suffix), ``parquet`` (by suffix): every string they carry is redacted
  (:mod:`rollbench.release.redact`, :mod:`rollbench.release.parquet_text`);
* ``text``: a file of a text suffix (:data:`TEXT_SUFFIXES`), or any file that is UTF-8 (no NUL in its first 8 KiB);
* ``video``: an ``.mp4`` at the writer's own video path of a run (``RUN/videos/KEY/chunk-CCC/file-FFF.mp4``) that
  PyAV opens as a container with a video stream. A video cannot be redacted, so it is checked instead
  (:func:`video_findings`): its container, stream and chapter metadata (a chapter's title) with every rule; its
  bytes with the rules whose matches cannot occur by chance in compressed data (provider keys, PEM private keys,
  the releasing environment's secret values); and every run of :data:`MIN_TEXT_RUN` or more printable ASCII bytes
  in it (a ``free`` or ``udta`` box's text, a chapter list, an encoder's SEI string) with the e-mail, home-path and
  named-credential rules (:data:`NAMED_RULES`: ``token=``, ``Bearer``, ...) and the host, user and ``--rules``
  literal names and learnt values (:mod:`rollbench.release.learnt`) of :data:`MIN_BYTE_NAME` or more characters. A
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
from pathlib import PurePosixPath

from rollbench.release.rules import Scanner

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
# credentials named where they stand (``token=``, ``password:``, ``Bearer``, ``Authorization:``, ``Cookie:``, a URL's
# ``user:PASSWORD@`` or ``?sig=``), searched in a video's text runs too (hostile18 F3: a chapter title written as
# text in the file): each match needs its name or scheme spelt out, which compressed data does not hold by chance
NAMED_RULES = frozenset(
    {"secret_field", "bearer_token", "authorization", "cookie", "url_credential", "url_path_credential", "url_fragment"}
)
NAME_RULES = frozenset({"host_name", "user_name", "literal"})
MIN_BYTE_NAME = 6  # a shorter name is a common token of encoder strings ("ref=3", "me=hex")
VIDEO_BYTES_SCOPE = (
    "a video's bytes are searched for provider and private keys, the environment's secret values, and, in runs of "
    f"{MIN_TEXT_RUN}+ printable characters, e-mail addresses, home paths, named credentials (token=, password:, "
    "Bearer, Authorization, Cookie, URL passwords and secret query values), host/user/--rules names of "
    f"{MIN_BYTE_NAME}+ characters and values learnt as credentials; other rules and shorter names are not searched there"
)


def _utf8_text(raw: bytes) -> bool:
    if b"\0" in raw[:8192]:  # a binary header
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
    ``"jsonl"``, ``"parquet"``, ``"text"``, ``"video"``, or None when it cannot (see the module docstring)."""
    suffix = PurePosixPath(rel).suffix.lower()
    if suffix in (".json", ".jsonl", ".parquet"):
        return suffix[1:]
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


def byte_findings(raw: bytes, scanner: Scanner) -> list[str]:
    """Where a file's bytes, read as they are (not decoded), hold a secret, each as ``"RULE in its bytes ..."``:
    :data:`BYTE_RULES` and environment secrets (any letter case) anywhere, and in each run of :data:`MIN_TEXT_RUN`
    or more printable ASCII bytes the e-mail and home-path rules and host, user and ``--rules`` literal names of
    :data:`MIN_BYTE_NAME` or more characters (a video's bytes; a parquet file's as released)."""
    found: list[str] = []
    text = raw.decode("latin-1")
    for name, _category, pattern, _group in scanner.patterns:
        if (name in BYTE_RULES or name.startswith("environment:")) and pattern.search(text):
            found.append(f"{name} in its bytes")
    for run in TEXT_RUN.finditer(raw):
        found += [
            f"{f.rule} in its bytes (a text run at byte {run.start():,})"
            for f in scanner.find(run.group().decode("ascii"))
            if f.rule in TEXT_RUN_RULES
            or f.rule in NAMED_RULES
            or f.rule.startswith("learnt:")
            or (f.rule in NAME_RULES and len(f.value) >= MIN_BYTE_NAME)
        ]
    return found


def plain_byte_findings(raw: bytes, scanner: Scanner) -> list[str]:
    """:func:`byte_findings` without decoding (each rule's own pattern only; cheap on large files, used for a
    parquet file as released): environment secrets' values (any letter case) anywhere, and in each run of
    :data:`MIN_TEXT_RUN` or more printable ASCII bytes the e-mail and home-path rules and host, user and ``--rules``
    literal names of :data:`MIN_BYTE_NAME` or more characters and learnt values (:mod:`rollbench.release.learnt`); a
    match of an ``allow`` regex is no finding."""

    def hit(pattern: re.Pattern[str], group: int, text: str, shortest: int) -> bool:
        return any(
            len(m.group(group)) >= shortest and not any(a.search(m.group(group)) for a in scanner.allow)
            for m in pattern.finditer(text)
        )

    text = raw.decode("latin-1")
    found = [
        f"{name} in its bytes"
        for name, _category, pattern, group in scanner.patterns
        if name.startswith("environment:") and hit(pattern, group, text, 1)
    ]
    rules = [(n, p, g) for n, _c, p, g in scanner.patterns if n in TEXT_RUN_RULES or n in NAME_RULES]
    if scanner.learnt.pattern is not None:
        rules.append(("learnt value", scanner.learnt.pattern, 0))
    for run in TEXT_RUN.finditer(raw):
        s = run.group().decode("ascii")
        found += [
            f"{name} in its bytes (a text run at byte {run.start():,})"
            for name, pattern, group in rules
            if hit(pattern, group, s, 1 if name in TEXT_RUN_RULES else MIN_BYTE_NAME)
        ]
    return found
