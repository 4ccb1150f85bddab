"""``rollbench release``: copy runs (and label files) into a release directory with secrets and private data replaced.

What is found and what replaces it: :mod:`rollbench.release_rules`. How each kind of file is handled:

* ``*.json`` and ``*.jsonl`` (run.json, LeRobot's meta/info.json and stats.json, transcripts, wire captures, JSON
  labels and notes): every string (and key) is parsed and scanned with its field path (``plan.policy.provenance.
  host``, ``line 3: message.content``); each secret found is then replaced in the file's own text by its
  placeholder, so every other byte stays as it was (formatting, key order, numbers);
* ``*.parquet`` (``meta/episodes``, ``meta/tasks``, ``data``): string and list-of-string columns are scanned value
  by value (field = column name); a file with a finding is rewritten with pyarrow with the same schema and schema
  metadata, rows and order; a file without one is copied byte for byte (the per-step data files have no strings);
* other UTF-8 text (``.md``, ``.txt``, ``.csv``, ``.log``, ...): scanned line by line;
* anything else (videos) is copied unchanged. ``run.lock``, ``run.live.json`` and ``.staging/`` (uncommitted
  episodes) are not copied, and symbolic links are refused; MANIFEST.json lists what was left out and why.

Invariants: sources are only read (copies, never moves); the output directory must not exist or be empty, and must
not be a source or inside one (nor hold one); every released text is scanned again after redaction and any finding
left is an error (nothing is written then). The released runs stay LeRobot datasets that ``rollbench grade``
scores as the originals (a secret inside an error message is replaced there too).

Determinism: files are visited in a fixed order (the runs in the order given, then their files sorted by path, then
the label files), so placeholders and bytes are the same on every release of the same input. MANIFEST.json holds no
clock time: its ``date`` is ``--date``, else the latest ``provenance.created`` / ``executions[].finished`` of the
released runs' run.json.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollbench.grading import load_run_log
from rollbench.identity import sanitize_segment
from rollbench.release_rules import BUILTIN, Finding, Scanner
from rollbench.types import ConfigError, RollbenchError

EXCLUDED = {
    "run.lock": "the writer's lock file (empty; only its flock matters)",
    "run.live.json": "live progress, not a result",
}
TEXT_SUFFIXES = {".md", ".txt", ".csv", ".tsv", ".log", ".yaml", ".yml", ".toml", ".ini", ".html"}
IDENTITY_SEGMENT_FIELDS = ("identity.host", "identity.robot", "identity.name")
_HOME = re.compile(BUILTIN[-1][2])
# json.dumps styles of the files rollbench writes (run.json: indent 2; JSONL lines: defaults) and the compact one
JSON_STYLES: tuple[dict[str, Any], ...] = ({"indent": 2}, {}, {"separators": (",", ":")})


@dataclass
class Released:
    """One file of the release: where it goes, its bytes, what was replaced in it."""

    path: str  # relative to the release directory
    source_sha256: str
    data: bytes
    redactions: list[dict[str, Any]] = field(default_factory=list)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_inside(a: Path, b: Path) -> bool:
    return a == b or b in a.parents


def _check_paths(runs: list[Path], labels: list[Path], out: Path) -> None:
    names = [r.name for r in runs]
    for r in runs:
        if not (r / "run.json").is_file():
            raise ConfigError(f"{r} is not a rollbench run directory (no run.json)")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"two runs share the directory name {dup[0]!r}; release them separately")
    for f in labels:
        if not f.is_file():
            raise ConfigError(f"--labels {f} is not a file")
    o = out.resolve()
    for src in [*runs, *labels]:
        s = src.resolve()
        if _is_inside(o, s):
            raise ConfigError(f"--out {out} is inside the source {src}; a release is written elsewhere")
        if _is_inside(s, o):
            raise ConfigError(f"the source {src} is inside --out {out}; choose an empty directory elsewhere")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not an empty directory; a release needs a fresh one")


def _names(runs: list[Path], logs: list[dict[str, Any]], texts: list[str]) -> tuple[set[str], set[str]]:
    """Host and user names to redact: recorded hosts (provenance, identity), this machine's host name and OS user,
    and the user of every home directory seen in the sources."""
    hosts = {socket.gethostname()}
    for log in logs:
        for v in ((log.get("provenance") or {}).get("host"), (log.get("identity") or {}).get("host")):
            if isinstance(v, str):
                hosts.add(v)
    users = {os.environ.get("USER", ""), os.environ.get("LOGNAME", "")}
    with contextlib.suppress(KeyError, OSError):
        users.add(getpass.getuser())
    for text in texts:
        for m in _HOME.finditer(text):
            seg = re.split(r"[/\\]+", m.group(0).rstrip("/\\"))[-1]
            if seg and seg.lower() not in ("home", "users", "root"):
                users.add(seg)
    return {h for h in hosts if h}, {u for u in users if u}


def _record(rel: str, where: str, pairs: list[tuple[Finding, str]]) -> list[dict[str, Any]]:
    return [{"file": rel, "field": where, "rule": f.rule, "category": f.category, "placeholder": ph} for f, ph in pairs]


def _walk(obj: Any, path: str, out: list[tuple[str, str]]) -> None:
    """Every string of a JSON document with its field path (keys too, as ``path{key}``)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((f"{path}{{key}}", k))
            _walk(v, f"{path}.{k}" if path else k, out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk(v, f"{path}[{i}]", out)
    elif isinstance(obj, str):
        out.append((path, obj))


def _strings_of_json(text: str, lines: bool) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    docs = [(f"line {i}: ", ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()] if lines else [("", text)]
    for prefix, doc in docs:
        start: list[tuple[str, str]] = []
        _walk(json.loads(doc), "", start)
        found += [(prefix + p, s) for p, s in start]
    return found


def _field_leaf(path: str) -> str:
    return re.sub(r"\[\d+\]$", "", path.split(": ", 1)[-1])


class Releaser:
    """Builds the release in memory (see the module docstring); ``write`` puts it on disk."""

    def __init__(self, scanner: Scanner) -> None:
        self.scanner = scanner

    def json_file(self, rel: str, raw: bytes, lines: bool) -> Released:
        text = raw.decode("utf-8")
        chunks = text.splitlines(keepends=True) if lines else [text]
        out, redactions = [], []
        for n, chunk in enumerate(chunks, 1):
            body = chunk.rstrip("\r\n")
            if not body.strip():
                out.append(chunk)
                continue
            new, found = self._json_doc(rel, body, f"line {n}: " if lines else "")
            out.append(new + chunk[len(body) :])
            redactions += found
        result = "".join(out)
        self._verify(rel, _strings_of_json(result, lines))
        return Released(rel, _sha(raw), result.encode("utf-8"), redactions)

    def _json_doc(self, rel: str, doc: str, prefix: str) -> tuple[str, list[dict[str, Any]]]:
        """One JSON document redacted: re-serialised when its writer's style is reproduced exactly (rollbench's own
        files), else by replacing each secret's JSON-encoded text in place."""
        obj = json.loads(doc)
        redactions: list[dict[str, Any]] = []

        def red(s: str, path: str) -> str:
            fieldname = None if path.endswith("{key}") else _field_leaf(path)
            new, pairs = self.scanner.redact(s, fieldname)
            found = _record(rel, prefix + path, pairs)
            if pairs and _field_leaf(path) in IDENTITY_SEGMENT_FIELDS:  # must stay a valid identity segment
                new = sanitize_segment(new)
                for r in found:
                    r["placeholder"] = sanitize_segment(r["placeholder"])
            redactions.extend(found)
            return new

        def walk(o: Any, path: str) -> Any:
            if isinstance(o, dict):
                return {red(k, f"{path}{{key}}"): walk(v, f"{path}.{k}" if path else k) for k, v in o.items()}
            if isinstance(o, list):
                return [walk(v, f"{path}[{i}]") for i, v in enumerate(o)]
            return red(o, path) if isinstance(o, str) else o

        for style in JSON_STYLES:
            if json.dumps(obj, **style) == doc:
                return json.dumps(walk(obj, ""), **style), redactions
        swaps: dict[tuple[str, bool], str] = {}
        for path, s in _strings_of_json(doc, False):
            fieldname = None if path.endswith("{key}") else _field_leaf(path)
            _, pairs = self.scanner.redact(s, fieldname)
            redactions += _record(rel, prefix + path, pairs)
            for f, ph in pairs:
                swaps[(f.value, f.start == 0 and f.end == len(s))] = ph
        for (value, whole), ph in sorted(swaps.items(), key=lambda kv: -len(kv[0][0])):
            enc = json.dumps(value)[1:-1]
            if whole:
                pattern, repl = re.escape(f'"{enc}"'), f'"{ph}"'
            else:
                pattern, repl = rf"(?<![A-Za-z0-9]){re.escape(enc)}(?![A-Za-z0-9])", ph
            doc, n = re.subn(pattern, lambda _m, r=repl: r, doc)  # type: ignore[misc]
            if n == 0:
                raise RollbenchError(f"{rel}: found a {ph[1:-1]} but could not replace it in the file's text")
        return doc, redactions

    def _verify(self, rel: str, strings: list[tuple[str, str]]) -> None:
        for path, s in strings:
            left = self.scanner.find(s, None if path.endswith("{key}") else _field_leaf(path))
            if left:
                raise RollbenchError(f"{rel}: a {left[0].rule} is still present at {path} after redaction")

    def parquet_file(self, rel: str, raw: bytes) -> Released:
        table = pq.read_table(pa.BufferReader(raw))
        redactions: list[dict[str, Any]] = []
        changed = False
        for i, fld in enumerate(table.schema):
            t = fld.type
            is_str = pa.types.is_string(t) or pa.types.is_large_string(t)
            is_list = pa.types.is_list(t) and pa.types.is_string(t.value_type)
            if not (is_str or is_list):
                continue
            values = table.column(i).to_pylist()
            new: list[Any] = []
            for row, v in enumerate(values):
                items = v if is_list and v is not None else [v]
                red: list[str | None] = []
                for item in items:
                    if item is None:
                        red.append(None)
                        continue
                    text, pairs = self.scanner.redact(item, fld.name)
                    redactions += _record(rel, f"{fld.name}[{row}]", pairs)
                    red.append(text)
                new.append(red if is_list and v is not None else red[0])
            if new != values:
                changed = True
                table = table.set_column(i, fld, pa.array(new, type=t))
        if not changed:
            return Released(rel, _sha(raw), raw, redactions)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        return Released(rel, _sha(raw), sink.getvalue().to_pybytes(), redactions)

    def text_file(self, rel: str, raw: bytes) -> Released:
        """Scanned as one string (a PEM block spans lines); each finding's field is the line it starts on."""
        text = raw.decode("utf-8")
        result, pairs = self.scanner.redact(text)
        redactions = []
        for f, ph in pairs:
            redactions += _record(rel, f"line {text.count(chr(10), 0, f.start) + 1}", [(f, ph)])
        return Released(rel, _sha(raw), result.encode("utf-8"), redactions)

    def file(self, rel: str, raw: bytes) -> Released:
        suffix = Path(rel).suffix.lower()
        try:
            if suffix in (".json", ".jsonl"):
                return self.json_file(rel, raw, lines=suffix == ".jsonl")
            if suffix == ".parquet":
                return self.parquet_file(rel, raw)
            if suffix in TEXT_SUFFIXES or (b"\0" not in raw[:8192] and _utf8(raw)):
                return self.text_file(rel, raw)
        except (ValueError, pa.ArrowException) as exc:
            raise RollbenchError(f"{rel}: cannot be parsed for redaction ({type(exc).__name__}: {exc})") from None
        return Released(rel, _sha(raw), raw)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _run_files(run: Path) -> tuple[list[Path], list[dict[str, str]]]:
    files, excluded = [], []
    for p in sorted(run.rglob("*"), key=lambda q: q.relative_to(run).as_posix()):
        rel = p.relative_to(run).as_posix()
        if p.is_symlink():
            raise ConfigError(f"{p} is a symbolic link; a release copies real files only")
        if rel.split("/")[0] == ".staging":
            if p.is_file():
                excluded.append({"path": f"{run.name}/{rel}", "why": "staged episode not committed"})
            continue
        if p.is_file():
            if rel in EXCLUDED:
                excluded.append({"path": f"{run.name}/{rel}", "why": EXCLUDED[rel]})
            else:
                files.append(p)
    return files, excluded


def _release_date(logs: list[dict[str, Any]], date: str | None) -> tuple[str, str]:
    if date:
        return date, "--date"
    stamps = []
    for log in logs:
        stamps.append((log.get("provenance") or {}).get("created"))
        stamps += [e.get("finished") for e in log.get("executions") or [] if isinstance(e, dict)]
    found = sorted(s for s in stamps if isinstance(s, str))
    if not found:
        raise ConfigError("the runs record no creation time; give the release date with --date YYYY-MM-DD")
    return found[-1], "latest provenance.created / executions[].finished of the released runs"


def build_release(
    runs: list[Path],
    out: Path,
    *,
    labels: list[Path] | None = None,
    rules: Path | None = None,
    date: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Build (and unless ``dry_run`` write) the release of ``runs`` and ``labels`` into ``out``.

    Returns the manifest (see :func:`manifest`). Raises ConfigError for bad input (before anything is written) and
    RollbenchError when a file cannot be redacted safely (then nothing is written).
    """
    labels = labels or []
    _check_paths(runs, labels, out)
    rules_obj = None
    if rules is not None:
        try:
            rules_obj = json.loads(rules.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--rules {rules}: cannot read a JSON object ({exc})") from None
    logs = [load_run_log(r) for r in runs]  # ConfigError naming the file for a damaged or foreign run.json
    listed = [_run_files(r) for r in runs]
    sources: list[tuple[str, Path]] = [
        (f"{r.name}/{p.relative_to(r).as_posix()}", p)
        for r, (files, _) in zip(runs, listed, strict=True)
        for p in files
    ]
    sources += [(f"labels/{f.name}", f) for f in labels]
    raws = [p.read_bytes() for _, p in sources]  # each file read once
    texts = [
        raw.decode("utf-8", errors="ignore") for (_, p), raw in zip(sources, raws, strict=True) if p.suffix != ".mp4"
    ]
    hosts, users = _names(runs, logs, texts)
    scanner = Scanner(hosts, users, rules_obj)
    releaser = Releaser(scanner)
    released = [releaser.file(rel, raw) for (rel, _), raw in zip(sources, raws, strict=True)]
    when, when_source = _release_date(logs, date)
    doc = manifest(released, [e for _, ex in listed for e in ex], scanner, when, when_source, runs, labels)
    if not dry_run:
        write_release(out, released, doc)
    return doc


def manifest(
    released: list[Released],
    excluded: list[dict[str, str]],
    scanner: Scanner,
    date: str,
    date_source: str,
    runs: list[Path],
    labels: list[Path],
) -> dict[str, Any]:
    """MANIFEST.json: files with source and release sha256, every redaction (file, field, rule, category,
    placeholder), counts per category, the filters used, excluded files, the date and where it came from."""
    redactions = [r for f in released for r in f.redactions]
    counts: dict[str, int] = {}
    for r in redactions:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
    return {
        "rollbench_release": 1,
        "date": date,
        "date_source": date_source,
        "runs": [r.name for r in runs],
        "labels": [f"labels/{f.name}" for f in labels],
        "files": [
            {
                "path": f.path,
                "source_sha256": f.source_sha256,
                "release_sha256": _sha(f.data),
                "bytes": len(f.data),
                "redactions": len(f.redactions),
            }
            for f in released
        ],
        "excluded": excluded,
        "redactions": redactions,
        "redaction_counts": dict(sorted(counts.items())),
        "distinct_secrets": len(scanner.placeholders),
        "filters": scanner.describe(),
    }


def write_release(out: Path, released: list[Released], doc: dict[str, Any]) -> None:
    """Write every file, then MANIFEST.json (sorted keys, 2-space indent) last."""
    from rollbench.record.files import atomic_write_bytes

    out.mkdir(parents=True, exist_ok=True)
    for f in released:
        atomic_write_bytes(out / f.path, f.data, durable=False)
    atomic_write_bytes(out / "MANIFEST.json", (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
