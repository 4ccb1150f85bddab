"""``rollbench release``: copy runs (and label files) into a release directory with secrets and private data replaced.

What is found and what replaces it: :mod:`rollbench.release.rules`. How each kind of file is handled:

* ``*.json`` and ``*.jsonl`` (run.json, LeRobot's meta/info.json and stats.json, transcripts, wire captures, JSON
  labels and notes): every string (and key) is parsed and scanned with its field path (``plan.policy.provenance.
  host``, ``line 3: message.content``); each secret found is then replaced in the file's own text by its
  placeholder, so every other byte stays as it was (formatting, key order, numbers);
* ``*.parquet`` (``meta/episodes``, ``meta/tasks``, ``data``): columns of every type that can hold text are
  scanned value by value (field = column name; :mod:`rollbench.release.parquet_text`), a type release can neither
  read nor knows to be text-free refuses the file; a file with a finding, or with a dictionary-encoded text column,
  is rewritten with pyarrow with the same schema and schema metadata, rows and order; a file without one is copied
  byte for byte (the per-step data files have no strings); the released bytes are searched last
  (:meth:`rollbench.release.redact.Releaser.parquet_file`);
* other UTF-8 text (``.md``, ``.txt``, ``.csv``, ``.log``, ...): scanned line by line;
* a run's own videos (``videos/KEY/chunk-CCC/file-FFF.mp4`` that open as one) are checked, not redacted: a secret
  in their metadata (chapters' too) or bytes, or a stream other than video, refuses the release
  (:mod:`rollbench.release.kinds`);
* anything else (a ``.npy``, an image, any binary release cannot read as text) refuses the release, naming the file
  (exit 2): nothing is copied unscanned. ``run.lock``, ``run.live.json`` and ``.staging/`` (uncommitted
  episodes) are not copied, and symbolic links are refused; MANIFEST.json lists what was left out and why.

Invariants: sources are only read (copies, never moves); the output directory must not exist or be empty, and must
not be a source or inside one (nor hold one); every released text is scanned again after redaction and any finding
left is an error (nothing is written then), and so is MANIFEST.json's, read back from its final bytes
(:func:`rollbench.release.manifest.check_manifest`); every released path is worked out and checked before the first write
(two sources on one path, a run released as ``MANIFEST.json`` or ``labels``: :mod:`rollbench.release.layout`). The released runs stay LeRobot datasets that ``rollbench grade``
scores as the originals (a secret inside an error message is replaced there too).

Determinism: files are visited in a fixed order (the runs in the order given, then their files sorted by path, then
the label files), so placeholders and bytes are the same on every release of the same input. MANIFEST.json holds no
clock time: its ``date`` is ``--date``, else the latest ``provenance.created`` / ``executions[].finished`` of the
released runs' run.json.
"""

from __future__ import annotations

import contextlib
import fnmatch
import getpass
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.identity import RunIdentity, sanitize_segment
from rollbench.core.jsonfile import loads_strict, read_json
from rollbench.core.runlog_model import RunLog
from rollbench.grading.grade import load_run_log
from rollbench.record.parquet_bounds import check_parquet_bytes
from rollbench.record.safe_files import read_regular_bytes
from rollbench.release.first_pass import learn_values
from rollbench.release.kinds import VIDEO_BYTES_SCOPE, scan_kind
from rollbench.release.layout import LABELS, check_files, check_runs, released_path, renamed, write_release
from rollbench.release.manifest import check_manifest, check_rules_shown, manifest, manifest_bytes
from rollbench.release.redact import Releaser
from rollbench.release.rules import BUILTIN, Scanner
from rollbench.release.sources import (
    MAX_FILE_BYTES,
    MAX_RELEASE_BYTES,
    MAX_RULES_BYTES,
    check_label_annotators,
    check_paths,
    not_being_written,
    release_date,
    run_files,
)

_HOME = re.compile(BUILTIN[-1][2])


def _names(runs: list[Path], logs: list[RunLog], texts: list[str]) -> tuple[set[str], set[str]]:
    """Host and user names to redact: recorded hosts (provenance, identity), this machine's host name and OS user,
    and the user of every home directory seen in the sources."""
    hosts = {socket.gethostname()}
    for log in logs:
        hosts.add(log.provenance.host)
        if log.identity is not None:
            hosts.add(log.identity.host)
    users = {os.environ.get("USER", ""), os.environ.get("LOGNAME", "")}
    with contextlib.suppress(KeyError, OSError):
        users.add(getpass.getuser())
    for text in texts:
        for m in _HOME.finditer(text):
            seg = re.split(r"[/\\]+", m.group(0).rstrip("/\\"))[-1]
            if seg and seg.lower() not in ("home", "users", "root"):
                users.add(seg)
    return {h for h in hosts if h}, {u for u in users if u}


def build_release(
    runs: list[Path],
    out: Path,
    *,
    labels: list[Path] | None = None,
    rules: Path | None = None,
    date: str | None = None,
    dry_run: bool = False,
    allow_violations: bool = False,
) -> dict[str, Any]:
    """Build (and unless ``dry_run`` write) the release of ``runs`` and ``labels`` into ``out``.

    Returns the manifest (see :func:`manifest`). Raises ConfigError for bad input (before anything is written), a run
    that ``rollbench grade`` finds violations in included unless ``allow_violations`` (see :func:`graded_runs`), and
    RollbenchError when a file cannot be redacted safely (then nothing is written).
    """
    labels = labels or []
    check_paths(runs, labels, out)
    with contextlib.ExitStack() as held:
        for r in runs:  # no writer starts while the runs are read; one writing now is refused
            held.enter_context(not_being_written(r))
        return _build(runs, out, labels, rules, date, dry_run, allow_violations)


def _build(
    runs: list[Path],
    out: Path,
    labels: list[Path],
    rules: Path | None,
    date: str | None,
    dry_run: bool,
    allow_violations: bool,
) -> dict[str, Any]:
    rules_obj = None
    if rules is not None:
        rules_obj = read_json(rules, "--rules", max_bytes=MAX_RULES_BYTES)
    logs = [load_run_log(r) for r in runs]  # ConfigError naming the file for a damaged or foreign run.json
    for r, log in zip(runs, logs, strict=True):  # no live writer (checked above), yet its last execution never ended
        if log.status == "RUNNING" and not allow_violations:
            raise ConfigError(f"{r} is still RUNNING or was interrupted; resume or grade it first")
    when, when_source = release_date(logs, date)  # --date checked before any run is graded
    listed = [run_files(r) for r in runs]  # links, nested runs and oversized files refused before anything is read
    grades = graded_runs(runs, allow_violations)
    sources: list[tuple[str, Path]] = [
        (f"{r.name}/{p.relative_to(r).as_posix()}", p)
        for r, (files, _) in zip(runs, listed, strict=True)
        for p in files
    ]
    n_run = len(sources)  # then the label files: a source is one by its place, never by its path (a run named labels)
    sources += [(f"{LABELS}/{f.name}", f) for f in labels]
    total = sum(os.lstat(p).st_size for _, p in sources)
    if total > MAX_RELEASE_BYTES:
        raise ConfigError(f"the release would be {total:,} bytes, over its {MAX_RELEASE_BYTES:,}-byte bound")
    try:  # each file read once, bounded, as a regular file (a FIFO or device swapped in since listing is refused)
        raws = [
            read_regular_bytes(p, follow_links=i >= n_run, max_bytes=MAX_FILE_BYTES) for i, (_, p) in enumerate(sources)
        ]
    except OSError as exc:
        raise ConfigError(f"cannot read a file to release: {exc}") from None
    kinds = [scan_kind(rel, raw) for (rel, _), raw in zip(sources, raws, strict=True)]
    refuse_bombs([p for _, p in sources], raws, kinds)  # before any parquet file is parsed
    unknown = next((p for (_, p), kind in zip(sources, kinds, strict=True) if kind is None), None)
    if unknown is not None:  # copied only what was scanned: never bytes release cannot read for secrets
        raise ConfigError(
            f"{unknown} is not a file release can scan for secrets (JSON, JSON lines, parquet, UTF-8 text or the "
            "run's own video); move it out of the run to release the rest"
        )
    idents = {r.name: RunIdentity.from_run_log(log, r) for log, r in zip(logs, runs, strict=True)}
    keys = {i.key for i in idents.values()}
    episodes = recorded_episode_keys(idents, sources[:n_run], raws[:n_run])
    label_entries: dict[str, dict[str, Any]] = {}
    recorded = list(raws)  # the bytes as found: a file is ``unchanged`` in MANIFEST.json only when released as them
    for i, (rel, p) in enumerate(sources[n_run:], start=n_run):
        raws[i], label_entries[rel] = only_released_labels(raws[i], keys, p, episodes)
    scanner = _scanner(
        runs, logs, rules_obj, [(p, raw, kind) for (_, p), raw, kind in zip(sources, raws, kinds, strict=True)]
    )
    check_runs(runs, [released_path(scanner, r.name) for r in runs], bool(labels))  # before the first write
    releaser = Releaser(scanner)
    released = [
        releaser.file(released_path(scanner, rel), raw, kind)
        for (rel, _), raw, kind in zip(sources, raws, kinds, strict=True)
    ]
    check_files([(f.path, p) for f, (_, p) in zip(released, sources, strict=True)])
    for f, raw in zip(released, recorded, strict=True):
        f.unchanged = f.data == raw
    label_entries = {
        released_path(scanner, rel): _redacted_keys(releaser, entries) for rel, entries in label_entries.items()
    }
    excluded = [{**e, "path": released_path(scanner, e["path"])} for _, ex in listed for e in ex]
    doc = manifest(released, excluded, scanner, when, when_source, runs, labels)
    doc["label_entries"] = label_entries
    if "video" in kinds:  # checked, not redacted: what of their bytes was searched
        doc["filters"]["video_bytes"] = VIDEO_BYTES_SCOPE
    doc["grades"] = {released_path(scanner, name): g for name, g in grades.items()}
    doc["warnings"] = _rewrites(scanner, [rel for rel, _ in sources]) + [w for f in released for w in f.warnings]
    data = manifest_bytes(doc)
    check_manifest(scanner, data)  # released too: a value release replaced must not be in it (nothing written)
    if not dry_run:
        write_release(out, released, data)
    return doc


def refuse_bombs(paths: list[Path], raws: list[bytes], kinds: list[str | None]) -> None:
    """ConfigError naming the first parquet file of ``paths`` (its bytes ``raws``, its kind ``kinds``) that decodes
    to more than :data:`~rollbench.record.parquet_bounds.MAX_DECODED_BYTES` (a decompression bomb: a few KiB of
    zstd-compressed zeros), checked from its footer and page headers before release parses any."""
    try:
        for p, raw, kind in zip(paths, raws, kinds, strict=True):
            if kind == "parquet":
                check_parquet_bytes(raw, p)
    except OSError as exc:
        raise ConfigError(f"cannot read a file to release: {exc}") from None


def _scanner(
    runs: list[Path], logs: list[RunLog], rules: dict[str, Any] | None, files: list[tuple[Path, bytes, str | None]]
) -> Scanner:
    """The release's scanner: the names to redact (:func:`_names`), the values the first pass learns from ``files``
    (``(source, bytes as released, kind)``: :func:`rollbench.release.first_pass.learn_values`) and each run's name
    derived from a redacted directory name, which gets the directory's released name (:meth:`Scanner.alias`)."""
    hosts, users = _names(
        runs, logs, [raw.decode("utf-8", errors="ignore") for p, raw, _ in files if p.suffix != ".mp4"]
    )
    run_names = _run_names(logs)
    scanner = Scanner(hosts, users, rules, run_names=run_names)
    learn_values(scanner, [(raw, kind) for _, raw, kind in files], run_names)
    check_rules_shown(scanner, rules)
    for r in runs:
        derived, released_name = sanitize_segment(r.name, "run"), released_path(scanner, r.name)
        if released_name != r.name and derived not in (r.name, "run"):
            scanner.alias(derived, released_name)
    return scanner


def _run_names(logs: list[RunLog]) -> set[str]:
    """The runs' own names an environment secret's value must not rewrite: tasks, env, policy, robot and host."""
    names: set[str] = set()
    for log in logs:
        names |= {log.spec.env, log.spec.policy, log.plan.policy.name, log.provenance.host}
        names |= {t.name for t in log.plan.tasks} | set(log.spec.env.split(","))
        if log.identity is not None:
            names |= {log.identity.host, log.identity.robot}
    return {n for n in names if n}


def _rewrites(scanner: Scanner, rels: list[str]) -> list[str]:
    """One warning line per structural rewrite: a released path renamed by a redaction, an environment secret not
    used (named, never its value)."""
    lines = [
        f"environment variable {k} is not used for redaction: its value {why}"
        for k, why in sorted(scanner.env_unused.items())
    ] + [f"{n} values found as credentials are redacted only where found (ordinary words, run names or over 256 "
         "characters: docs/release.md)" for n in [scanner.learnt.not_used] if n] + [
         f"{n} names found as annotators are redacted only where found (common words, words of run names, under 3 "
         "or over 256 characters: docs/release.md)" for n in [scanner.names.not_used] if n]  # fmt: skip
    return lines + renamed(scanner, rels)


def _redacted_keys(releaser: Releaser, entries: dict[str, Any]) -> dict[str, Any]:
    """A labels file's ``label_entries`` with its episode keys spelled as the released file spells them
    (:meth:`Releaser.key`: the host segment replaced): MANIFEST.json is released too."""
    return {k: [releaser.key(key) for key in v] if isinstance(v, list) else v for k, v in entries.items()}


def graded_runs(runs: list[Path], allow_violations: bool) -> dict[str, dict[str, Any]]:
    """Each run graded from its own files (:func:`rollbench.grading.grade.grade`, videos decoded):
    ``{run name: {"status", "violations": count}}`` (MANIFEST.json's ``grades``; the violations' texts name local
    paths, so only their count is released). Raises ConfigError naming the first run with violations and its first
    one, unless ``allow_violations``: a release is what others will grade, so a damaged run is not published quietly.
    """
    from rollbench.grading.grade import grade

    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        doc = grade(r)
        found = list(doc.violations)
        if found and not allow_violations:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise ConfigError(f"{r} fails rollbench grade: {found[0]}{more}; release it anyway with --allow-violations")
        out[r.name] = {"status": doc.status, "violations": len(found)}
    return out


def _episode_run(key: Any) -> str | None:
    """The run part ``host/robot/name`` of an episode key ``host/robot/name/EPISODE``, else None."""
    return key.rsplit("/", 1)[0] if isinstance(key, str) and key.count("/") == 3 else None


def recorded_episode_keys(
    idents: dict[str, RunIdentity], sources: list[tuple[str, Path]], raws: list[bytes]
) -> set[str]:
    """``host/robot/name/EPISODE`` of every episode the released runs record: the ``episode_index`` values of their
    ``meta/episodes`` files (read from the bytes being released; a file that does not read holds none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: set[str] = set()
    for (rel, _), raw in zip(sources, raws, strict=True):
        run, _, inner = rel.partition("/")
        if run not in idents or not fnmatch.fnmatchcase(inner, "meta/episodes/chunk-*/file-*.parquet"):
            continue
        try:
            values = pq.read_table(pa.BufferReader(raw), columns=["episode_index"]).column(0).to_pylist()
        except Exception:  # a damaged episode row names no episode (grade reports it)
            continue
        out |= {idents[run].episode_key(v) for v in values if type(v) is int and v >= 0}
    return out


def only_released_labels(
    raw: bytes, run_keys: set[str], path: Path, episodes: set[str] | None = None
) -> tuple[bytes, dict[str, Any]]:
    """A labels file cut to the entries of the released runs (``run_keys``: their ``host/robot/name``) and, when
    ``episodes`` is given, of episodes those runs record (their ``host/robot/name/EPISODE`` keys), with what was
    kept and how many were left out: ``left_out`` (of other runs) and ``left_out_unrecorded`` (keys of a released
    run naming an episode it does not record, listed) (issue 30, item 18: releasing one run copied another run's
    label and note). Two forms: the dashboard's sidecar (:mod:`rollbench.dashboard.labels`, ``labels`` by episode
    key) and JSON lines with an ``episode`` key. Kept lines keep their bytes; a file with nothing left out is
    released as it is. Any other file (plain notes) is released whole and said so (``whole``): rollbench cannot tell
    which runs it is about."""

    def released(key: Any) -> bool:
        return _episode_run(key) in run_keys and (episodes is None or key in episodes)

    def unrecorded(keys: list[Any]) -> list[str]:
        return sorted(str(k) for k in keys if _episode_run(k) in run_keys and not released(k))

    text = raw.decode("utf-8", errors="replace")
    try:
        doc = loads_strict(text, finite=False)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("labels"), dict):
        kept = {k: v for k, v in doc["labels"].items() if released(k)}
        check_label_annotators(path, kept)
        gone = unrecorded(list(doc["labels"]))
        left_out = len(doc["labels"]) - len(kept) - len(gone)
        data = (
            raw
            if len(kept) == len(doc["labels"])
            else (json.dumps({**doc, "labels": kept}, indent=2) + "\n").encode("utf-8")
        )
        return data, {"kept": sorted(kept), "left_out": left_out, "left_out_unrecorded": gone}
    lines = raw.splitlines(keepends=True)
    entries = []
    for line in lines:
        try:
            entry = loads_strict(line, finite=False) if line.strip() else None
        except ValueError:
            return raw, {"kept": [], "left_out": 0, "whole": True}
        if line.strip() and not (isinstance(entry, dict) and _episode_run(entry.get("episode"))):
            return raw, {"kept": [], "left_out": 0, "whole": True}
        entries.append((line, entry))
    kept_lines = [(ln, e) for ln, e in entries if e is None or released(e.get("episode"))]
    check_label_annotators(path, {str(e.get("episode")): e for _, e in kept_lines if e is not None})
    gone = unrecorded([e.get("episode") for _, e in entries if e is not None])
    left_out = len(entries) - len(kept_lines) - len(gone)
    keys = sorted(e["episode"] for _, e in kept_lines if e is not None)
    data = b"".join(ln for ln, _ in kept_lines) if len(kept_lines) < len(entries) else raw
    return data, {"kept": keys, "left_out": left_out, "left_out_unrecorded": gone}
