"""MANIFEST.json, the record a release ships beside the released files (:mod:`rollbench.release.copy`): what it
holds, and the check of its final bytes before they are written.

It holds the released paths, each file's release sha256 and size, every redaction (file, field path, rule,
category, placeholder), counts, the grades, the date and the filters used (:func:`filters`). The filters name the
built-in rules with their regexes (code, the same in every release) but never a value the user or the runs gave:
the ``--rules`` patterns by name and category only, the ``allow`` patterns by count, literal names, environment
values, learnt values and learnt names by count (hostile19 F4: a pattern written to hide a password published it).

The manifest is released too, so its final bytes are scanned as every released file is (:func:`check_manifest`):
every string and key it holds read back from those bytes with every rule of the release's scanner (environment
secrets in any form, learnt values and names, host, user and ``--rules`` names and patterns, the format rules). A
finding is a bug of release: the release is refused (RollbenchError, exit 1) before anything is written. Not
scanned: the manifest's own field names (lower-case words, except the keys of the maps keyed by data:
:data:`DATA_KEYED`), each file's ``release_sha256`` when it has a sha256's form, and the texts the manifest holds
whatever the input (:func:`fixed_texts`: the built-in rules' regexes, the secret-field words, the videos' scope...).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.release import credentials as cred
from rollbench.release.kinds import VIDEO_BYTES_SCOPE
from rollbench.release.layout import LABELS, MANIFEST, released_path
from rollbench.release.learnt import LEARNT_RULES, MAX_LENGTH, MIN_LENGTH, NAME_MIN_LENGTH
from rollbench.release.redact import Released, sha256_hex
from rollbench.release.rules import (
    BUILTIN,
    ENTROPY_MIN_BITS,
    ENTROPY_MIN_PIECE,
    ENV_MIN_LENGTH,
    HASH_FIELDS,
    HEX_MIN_DISTINCT,
    USER_FIELDS,
    Scanner,
)
from rollbench.release.sources import EXCLUDED, RECORDED_DATE, STAGED

FORMAT = 3  # 2: no source hash (release 1 listed source_sha256); 3: no --rules regex nor allow pattern (format 2 had)
DATA_KEYED = frozenset({"label_entries", "redaction_counts", "distinct_counts", "grades"})  # maps keyed by data
PATH_KEYED = frozenset({"label_entries", "grades"})  # of those, keyed by released paths
PATHS = frozenset({"runs", "labels", "warnings"})  # top-level lists of released paths (warnings: naming them)
PATH_FIELDS = frozenset({"path", "file"})  # a released path wherever it stands (files, excluded, redactions)
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def filters(scanner: Scanner) -> dict[str, Any]:
    """MANIFEST.json's ``filters``: the built-in rules (name, category, regex) and their bounds; the environment
    variables used and not used (names only); learnt values and names, literal names and field-only names by count;
    the ``--rules`` patterns by name and category and the ``allow`` patterns by count (never their text)."""
    return {
        "rules": [{"name": n, "category": c, "regex": p.pattern} for n, c, p, _ in scanner.patterns[: len(BUILTIN)]],
        "high_entropy": {
            "min_length": 32,
            "max_length": 200,
            "min_bits_per_char": ENTROPY_MIN_BITS,
            "min_unbroken_piece": ENTROPY_MIN_PIECE,
        },
        "hex_string": {
            "min_length": 32,
            "min_distinct_digits": HEX_MIN_DISTINCT,
            "hash_fields": {k: {"form": f.pattern, "strict": st} for k, (f, st) in HASH_FIELDS.items()},
        },
        "environment": {
            "variables": scanner.env_names,
            "not_used": sorted(scanner.env_unused),
            "min_length": ENV_MIN_LENGTH,
            "values": "never shown",
        },
        "learnt_values": {
            "rules": list(LEARNT_RULES),
            "min_length": MIN_LENGTH,
            "max_length": MAX_LENGTH,
            "used": scanner.learnt.count(),
            "not_used": scanner.learnt.not_used,
            "values": "never shown",
        },
        "learnt_names": {
            "fields": sorted(USER_FIELDS),
            "min_length": NAME_MIN_LENGTH,
            "max_length": MAX_LENGTH,
            "used": scanner.names.count(),
            "not_used": scanner.names.not_used,
            "values": "never shown",
        },
        "extra_rules": scanner.extra,  # name and category of each --rules pattern, never its regex
        "literal_names": {
            "host_name": sum(1 for _, c in scanner.literals if c == "host_name"),
            "user_name": sum(1 for _, c in scanner.literals if c == "user_name"),
            "custom": sum(1 for _, c in scanner.literals if c not in ("host_name", "user_name")),
        },
        "field_only_names": {k: len(v) for k, v in scanner.field_only.items()},
        "secret_fields": {"words": sorted(cred.SECRET_KEY_WORDS), "compounds": list(cred.SECRET_KEY_COMPOUNDS)},
        "allow": {"patterns": len(scanner.allow), "texts": "never shown"},
    }


def manifest(
    released: list[Released],
    excluded: list[dict[str, str]],
    scanner: Scanner,
    date: str,
    date_source: str,
    runs: list[Path],
    labels: list[Path],
) -> dict[str, Any]:
    """MANIFEST.json: files with their release sha256, size and whether each is released byte for byte as
    recorded (``unchanged``), every redaction (file, field, rule, category, placeholder), counts per category
    (occurrences: ``redaction_counts``; distinct values: ``distinct_counts``), the filters used (:func:`filters`),
    excluded files, the date and where it came from."""
    redactions = [r for f in released for r in f.redactions]
    counts: dict[str, int] = {}
    for r in redactions:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
    return {
        "rollbench_release": FORMAT,
        "date": date,
        "date_source": date_source,
        "runs": [released_path(scanner, r.name) for r in runs],
        "labels": [released_path(scanner, f"{LABELS}/{f.name}") for f in labels],
        "files": [
            {
                "path": f.path,
                "unchanged": f.unchanged,
                "release_sha256": sha256_hex(f.data),
                "bytes": len(f.data),
                "redactions": len(f.redactions),
            }
            for f in released
        ],
        "excluded": excluded,
        "redactions": redactions,
        "redaction_counts": dict(sorted(counts.items())),
        "distinct_secrets": len(scanner.placeholders),
        "distinct_counts": scanner.distinct_counts(),
        "filters": filters(scanner),
    }


def manifest_bytes(doc: dict[str, Any]) -> bytes:
    """The bytes MANIFEST.json is written as: sorted keys, 2-space indent, ASCII (``\\u`` escapes), a final newline."""
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def _strings(o: Any, path: str, keyed: str = "", paths: bool = False) -> Iterator[tuple[str, str, bool]]:
    """``(where, text, a released path)`` of every string and scanned key of a manifest (see the module docstring);
    ``keyed``: the name of the map keyed by data ``o`` is (:data:`DATA_KEYED`); ``where`` names the place by field
    names and indices only (a key of a map keyed by data is ``{key N}``), never by the text. A released path (or a
    warning naming one) is scanned as :func:`rollbench.release.layout.released_path` redacts one: a hex run in it is
    a run's own name, kept."""
    if isinstance(o, dict):
        for n, (k, v) in enumerate(o.items()):
            if keyed:
                yield f"{path}{{key {n}}}", k, keyed in PATH_KEYED
                yield from _strings(v, f"{path}{{key {n}}}")
                continue
            here = f"{path}.{k}" if path else k
            if not _FIELD_NAME.fullmatch(k):
                yield here, k, False
            if k == "release_sha256" and isinstance(v, str) and _SHA256.fullmatch(v):
                continue  # release's own digest of the released bytes
            top = not path
            yield from _strings(v, here, k if top and k in DATA_KEYED else "", k in PATH_FIELDS or (top and k in PATHS))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _strings(v, f"{path}[{i}]", "", paths)
    elif isinstance(o, str):
        yield path, o, paths


@functools.cache
def fixed_texts() -> frozenset[str]:
    """The strings a manifest holds whatever the input: those of the filters of a scanner given nothing (the
    built-in rules' names, categories and regexes, the digest fields' forms, the secret-field words), the videos'
    scope, why a file is excluded, where the date came from."""
    bare = json.loads(json.dumps(filters(Scanner(set(), set(), None, environ={}))))
    found = {s for _, s, _ in _strings(bare, "")}
    return frozenset(found | {VIDEO_BYTES_SCOPE, STAGED, RECORDED_DATE, "--date", *EXCLUDED.values()})


def check_rules_shown(scanner: Scanner, rules: dict[str, Any] | None) -> None:
    """ConfigError (exit 2, naming the entry) when a ``--rules`` pattern's name or category, or a literal's category,
    holds something ``scanner`` replaces (an environment secret's value, a literal, a learnt value, a match of another
    pattern or of its own): MANIFEST.json shows names and categories (``filters.extra_rules``, each redaction's rule
    and category) and the placeholders show categories."""
    for key, shown in (("patterns", ("name", "category")), ("literals", ("category",))):
        for i, entry in enumerate((rules or {}).get(key, [])):
            for what in shown:
                found = scanner.find(str(entry.get(what, "custom")))
                if found:
                    raise ConfigError(
                        f"--rules: {key}[{i}]'s {what} holds a match of rule {found[0].rule}, a value release "
                        f"replaces, and MANIFEST.json shows it; give the entry another {what}"
                    )


def check_manifest(scanner: Scanner, data: bytes) -> None:
    """RollbenchError naming the first place (by field names and indices, never the text) where ``data``, the
    manifest's final bytes, holds a finding of ``scanner`` (see the module docstring): a value release replaced
    would be published in the manifest, so nothing is written."""
    fixed, seen = fixed_texts(), set()  # each text scanned once (a path, a rule, a placeholder recur per redaction)
    for where, text, path in _strings(json.loads(data), ""):
        if text in fixed or (text, path) in seen:
            continue
        seen.add((text, path))
        found = scanner.find(text, structural=path)
        if found:
            raise RollbenchError(
                f"{MANIFEST} would hold a match of rule {found[0].rule} at {where}, a value the release replaces; "
                "the release is refused (a bug of release: please report it)"
            )
