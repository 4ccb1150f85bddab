"""The dashboard's state: local runs (:class:`~rollbench.dashboard.catalog.Catalog`), peers, the label sidecar.

Every method returns plain JSON-able data; :mod:`rollbench.dashboard.app` turns it into HTTP responses and pages.
"""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rollbench.core.identity import RunIdentity
from rollbench.core.jsonfile import strict_dumps
from rollbench.dashboard.catalog import Catalog, RunRecord, inside, live_progress
from rollbench.dashboard.labels import LabelFile, load_labels, set_label
from rollbench.dashboard.peers import Peer, PeerError, peer_failure
from rollbench.dashboard.rubrics import Rubric
from rollbench.dashboard.summary import disagreement_rows, episode_status, join_labels, pending_summary, run_summary
from rollbench.record.runlog import utc_now


@dataclass
class DashboardConfig:
    """What ``rollbench dashboard`` was started with (see :mod:`rollbench.cli.dashboard`)."""

    roots: list[Path]
    labels: Path
    rubric: Rubric
    annotator: str
    cache_dir: Path
    peers: list[tuple[str, str | None]] = field(default_factory=list)
    token: str | None = None
    host: str = "127.0.0.1"  # the bound address and the extra names (--allow-host) its Host header may carry
    allow_hosts: tuple[str, ...] = ()
    stale_after_s: float = 120.0
    peer_refresh_s: float = 5.0
    sync_budget_s: float = 2.0


class Dashboard:
    """Runs, peers and labels behind the HTTP API. Thread-safe."""

    def __init__(self, cfg: DashboardConfig) -> None:
        self.cfg = cfg
        self.rubric = cfg.rubric
        self.catalog = Catalog(cfg.roots, cfg.stale_after_s, cfg.cache_dir, cfg.sync_budget_s)
        self.peers = [Peer(url, token, cfg.peer_refresh_s) for url, token in cfg.peers]
        self._summaries: dict[Path, tuple[Any, dict[str, Any]]] = {}
        self._joined_cache: dict[str, tuple[Any, dict[str, Any], bytes, list[dict[str, Any]]]] = {}
        self._index: tuple[LabelFile, dict[str, list[tuple[str, dict[str, Any]]]]] | None = None
        self._labels: tuple[Any, LabelFile] | None = None
        self._lock = threading.Lock()
        self._shadowed: list[str] = []  # peers' runs whose identity another source serves (named in errors)
        self.labels()  # a malformed sidecar or one of another rubric fails at start (ConfigError)

    # ---- labels
    def labels(self) -> LabelFile:
        """The sidecar, re-read when its (mtime, size) changed."""
        try:
            st = self.cfg.labels.stat()
            sig: Any = (st.st_ino, st.st_mtime_ns, st.st_size)  # each write is a new file (atomic replace)
        except OSError:
            sig = None
        with self._lock:
            if self._labels is not None and self._labels[0] == sig and sig is not None:
                return self._labels[1]
        lf = load_labels(self.cfg.labels, self.rubric)
        with self._lock:
            self._labels = (sig, lf)
        return lf

    # ---- runs
    def _summary(self, rec: RunRecord) -> dict[str, Any]:
        with self._lock:
            cached = self._summaries.get(rec.run_dir)
        if cached is not None and cached[0] == rec.signature:
            return cached[1]
        summary = run_summary(rec)
        with self._lock:
            self._summaries[rec.run_dir] = (rec.signature, summary)
        return summary

    def _all_summaries(self) -> tuple[list[tuple[Any, dict[str, Any], Any, bool]], int]:
        """(version, label-free summary, live, stale) of every run, local first, and the count of pending runs."""
        out: list[tuple[Any, dict[str, Any], Any, bool]] = []
        records, pending = self.catalog.records()
        for rec in records:
            live = live_progress(rec.run_dir, self.cfg.stale_after_s)
            out.append((rec.signature, self._summary(rec), live, bool(live and live["stale"])))
        for ident in pending:
            out.append((("pending",), pending_summary(ident), None, False))
        if self.peers:
            with ThreadPoolExecutor(max_workers=len(self.peers)) as pool:
                list(pool.map(lambda p: p.refresh(), self.peers))
        served = {s["key"]: "this dashboard's roots" for _, s, _, _ in out}
        shadowed: list[str] = []
        for peer in self.peers:
            for s in peer.runs:
                if s["key"] in served:  # one identity, one run: the other is named, never silently dropped
                    shadowed.append(f"{peer.url}: identity {s['key']} is already served from {served[s['key']]}")
                    continue
                served[s["key"]] = peer.url
                live = s.get("live")
                out.append(((peer.url, peer.generation), s, live, peer.error is not None or bool(s.get("stale"))))
        with self._lock:
            self._shadowed = shadowed
        return out, len(pending)

    def _joined(
        self, version: Any, summary: dict[str, Any], labels: LabelFile
    ) -> tuple[dict[str, Any], bytes, list[dict[str, Any]]]:
        """The summary joined with its labels, and its JSON without ``live``/``stale``; cached until the run or its
        labels change (so a listing of a thousand unchanged runs re-encodes nothing)."""
        key = summary["key"]
        mine = self._label_index(labels).get(key, ())
        cache_key = (version, tuple((k, e.get("labeled_at"), e.get("label")) for k, e in mine))
        with self._lock:
            hit = self._joined_cache.get(key)
        if hit is not None and hit[0] == cache_key:
            return hit[1], hit[2], hit[3]
        base = {k: v for k, v in summary.items() if k not in ("live", "stale")}
        joined = join_labels(base, labels, self.rubric)
        encoded = strict_dumps(joined, default=str).encode()  # one run's NaN is null, never a 500 for all
        disagreements = disagreement_rows([joined])
        with self._lock:
            self._joined_cache[key] = (cache_key, joined, encoded, disagreements)
        return joined, encoded, disagreements

    def _label_index(self, labels: LabelFile) -> dict[str, list[tuple[str, dict[str, Any]]]]:
        with self._lock:
            if self._index is not None and self._index[0] is labels:
                return self._index[1]
        index: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for k, e in labels.entries.items():
            index.setdefault(k.rsplit("/", 1)[0], []).append((k, e))
        with self._lock:
            self._index = (labels, index)
        return index

    def _listing(self) -> tuple[list[tuple[dict[str, Any], bytes, list[dict[str, Any]], Any, bool]], dict[str, Any]]:
        labels = self.labels()
        summaries, pending = self._all_summaries()
        rows = [(*self._joined(v, s, labels), live, stale) for v, s, live, stale in summaries]
        hosts: dict[str, dict[str, Any]] = {}
        for joined, *_ in rows:
            if joined["source"] == "local":
                row = hosts.setdefault(
                    joined["host"],
                    {"host": joined["host"], "source": "local", "runs": 0, "error": None, "stale_since": None},
                )
                row["runs"] += 1
        meta = {
            "generated_at": utc_now(),
            "rubric": self.rubric.to_dict(),
            "hosts": list(hosts.values()) + [row for p in self.peers for row in p.host_rows()],
            "disagreements": [d for _, _, dis, _, _ in rows for d in dis],
            "pending": pending,
            "errors": [*self.catalog.errors, *self._shadowed],
            "unknown_labels": [{"key": u.key, "label": u.label} for u in labels.unknown],
        }
        return rows, meta

    def runs(self) -> dict[str, Any]:
        """``/api/runs`` as a dict: every run (local and peers') joined with the labels, with ``live`` and ``stale``;
        ``hosts``, ``disagreements``, ``pending`` (runs still being graded, listed with status ``GRADING``)."""
        rows, meta = self._listing()
        return {**meta, "runs": [{**j, "live": live, "stale": stale} for j, _, _, live, stale in rows]}

    def runs_json(self) -> bytes:
        """:meth:`runs` encoded, from the per-run cached encodings (what ``GET /api/runs`` sends)."""
        rows, meta = self._listing()
        parts = [
            b'{"live": '
            + strict_dumps(live).encode()
            + b', "stale": '
            + (b"true" if stale else b"false")
            + b", "
            + encoded[1:]
            for _, encoded, _, live, stale in rows
        ]
        head = json.dumps(meta, allow_nan=False, default=str).encode()[:-1]
        return head + b', "runs": [' + b", ".join(parts) + b"]}"

    def warm_up(self) -> threading.Thread:
        """List every run once in a daemon thread (grading starts, caches fill) so the first visitor waits less."""
        thread = threading.Thread(target=self.runs_json, name="rollbench-dashboard-warm-up", daemon=True)
        thread.start()
        return thread

    def find(self, ident: RunIdentity) -> tuple[RunRecord | None, Peer | None, dict[str, Any] | None]:
        """(local record, None, summary) or (None, peer, summary) or (None, None, None)."""
        rec = self.catalog.get(ident)
        if rec is not None:
            return rec, None, self._summary(rec)
        for peer in self.peers:
            peer.refresh()
            for s in peer.runs:
                if s["key"] == ident.key:
                    return None, peer, s
        return None, None, None

    def run_detail(self, ident: RunIdentity) -> dict[str, Any] | None:
        """``/api/run/HOST/ROBOT/NAME``: the summary with labels, and the graded results (per task, latency...)."""
        rec, peer, summary = self.find(ident)
        if summary is None:
            return None
        if rec is not None:
            from rollbench.grading.robustness import robustness_study

            result = {k: v for k, v in rec.result.to_json().items() if k != "episodes"}
            live = live_progress(rec.run_dir, self.cfg.stale_after_s)
            extra: dict[str, Any] = {"results": result, "live": live, "warnings": list(rec.log.warnings)}
            study = robustness_study(rec.log.plan.episodes, rec.result.episodes)  # docs/robustness.md
            if study is not None:
                extra["robustness"] = study
            if rec.log.sequential is not None:
                extra["sequential"] = sequential_of(rec.run_dir, rec.log.sequential.partner)
        else:
            assert peer is not None
            try:
                extra = _peer_run_extra(peer.get_object(f"/api/run/{ident.key}"))
            except (httpx.HTTPError, PeerError) as exc:
                extra = {
                    "results": None,
                    "live": None,
                    "warnings": [],
                    "error": f"peer {peer.url}: {peer_failure(exc)}",
                }
        return {**join_labels(summary, self.labels(), self.rubric), **extra}

    def reproduction(self, ident: RunIdentity, reference: str) -> dict[str, Any] | None:
        """``/api/reproduce/HOST/ROBOT/NAME?reference=NAME``: :func:`rollbench.reproduce.reproduce` of a local run
        against a *shipped* reference (a request never names a file). None: no such local run. Raises ConfigError
        (unknown reference, no suite in common)."""
        from rollbench.core.contracts import ConfigError
        from rollbench.reproduce import load_reference, reproduce, shipped_names

        if reference not in shipped_names():
            raise ConfigError(f"unknown reference {reference!r}; shipped: {', '.join(shipped_names())}")
        rec = self.catalog.get(ident)
        return None if rec is None else reproduce([rec.run_dir], load_reference(reference))

    def matching_references(self, ident: RunIdentity) -> list[str]:
        """Shipped references with an entry for one of the local run's suites (empty for a peer's run)."""
        from rollbench.reproduce import load_reference, shipped_names

        rec = self.catalog.get(ident)
        suites = set(rec.result.suites if rec is not None else ())
        return [n for n in shipped_names() if any(e.key in suites for e in load_reference(n).entries)]

    def episode_detail(self, ident: RunIdentity, episode_index: int) -> dict[str, Any] | None:
        """``/api/episode/HOST/ROBOT/NAME/E``: the episode, its per-step timeline, its label entry with history."""
        rec, peer, summary = self.find(ident)
        if summary is None:
            return None
        joined = join_labels(summary, self.labels(), self.rubric)
        ep = next((e for e in joined["episodes"] if e["episode_index"] == episode_index), None)
        if ep is None:
            return None
        steps: dict[str, Any]
        if rec is not None:
            steps = self.catalog.steps(rec, episode_index)
        else:
            assert peer is not None
            try:
                steps = peer.episode_steps(ident.episode_key(episode_index))
            except (httpx.HTTPError, PeerError) as exc:
                error = f"peer {peer.url}: {peer_failure(exc)}"
                steps = {"timestamp": [], "reward": [], "success": [], "action": [], "error": error}
        order = [e["episode_index"] for e in joined["episodes"]]
        pos = order.index(episode_index)
        unlabeled = [e for e in joined["episodes"][pos + 1 :] + joined["episodes"][:pos] if e["label"] is None]
        run = {k: joined[k] for k in ("key", "host", "robot", "name", "env", "policy", "model", "cameras", "fps")}
        run.update(source=joined["source"], status=joined["status"], page=joined["urls"]["page"])
        nav = {
            "prev": joined["episodes"][pos - 1]["urls"]["review"] if pos > 0 else None,
            "next": joined["episodes"][pos + 1]["urls"]["review"] if pos + 1 < len(order) else None,
            "next_unlabeled": unlabeled[0]["urls"]["review"] if unlabeled else None,
        }
        entry = self.labels().entries.get(ep["key"])
        return {
            "run": run,
            "episode": ep,
            "steps": steps,
            "label": entry,
            "rubric": self.rubric.to_dict(),
            "nav": nav,
        }

    def label_context(self, ident: RunIdentity, episode_index: int) -> dict[str, Any] | None:
        _, _, summary = self.find(ident)
        if summary is None:
            return None
        ep = next((e for e in summary["episodes"] if e["episode_index"] == episode_index), None)
        if ep is None:
            return None
        return {
            "task": ep["task"],
            "instruction": ep.get("instruction"),
            "policy": summary.get("policy"),
            "model": summary.get("model"),
            "status": episode_status(ep),
        }

    def set_label(self, ident: RunIdentity, episode_index: int, label: str | None, note: str) -> dict[str, Any] | None:
        """Write the label (ConfigError on a bad label); None when the episode is unknown."""
        ctx = self.label_context(ident, episode_index)
        if ctx is None:
            return None
        entry = set_label(
            self.cfg.labels,
            ident.episode_key(episode_index),
            label,
            rubric=self.rubric,
            note=note,
            annotator=self.cfg.annotator,
            context=ctx,
        )
        return {"key": ident.episode_key(episode_index), "entry": entry}

    # ---- files
    def local_video(self, rec: RunRecord, episode_index: int, camera: str) -> Path | None:
        ep = rec.by_index.get(episode_index)
        video = ep.artifacts.videos.get(camera) if ep else None
        return inside(rec.run_dir / video.path, rec.run_dir) if video else None

    def local_transcript(self, rec: RunRecord, episode_index: int) -> Path | None:
        ep = rec.by_index.get(episode_index)
        rel = ep.artifacts.transcript if ep else None
        if not rel or Path(rel).is_absolute():
            return None
        return inside(rec.run_dir / rel, rec.run_dir)


def _peer_run_extra(doc: dict[str, Any]) -> dict[str, Any]:
    """``results``, ``live`` and ``warnings`` of a peer's ``/api/run`` answer: PeerError (never quoting it) unless
    results is null or an object with an object of task rows (:func:`_task_row`), live null or an object, warnings a list of strings."""
    results, live, warnings = doc.get("results"), doc.get("live"), doc.get("warnings", [])
    if results is not None and not (isinstance(results, dict) and isinstance(results.get("tasks"), dict)):
        raise PeerError("its run answer's results are not an object with an object of tasks")
    if results is not None and not all(_task_row(t) for t in results["tasks"].values()):
        raise PeerError("its run answer's results.tasks are not rows of rates, intervals and counts")
    if live is not None and not isinstance(live, dict):
        raise PeerError("its run answer's live is not an object")
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise PeerError("its run answer's warnings are not a list of strings")
    return {"results": results, "live": live, "warnings": warnings}


def _task_row(row: Any) -> bool:
    """A graded task row as the run page draws it: numbers or null for the rate and its interval, counts."""
    numbers = ("success_rate", "ci95_low", "ci95_high")
    if not isinstance(row, dict) or not all(type(row.get(k, "")) in (int, float, type(None)) for k in numbers):
        return False
    return row.get("success_rate") is None or all(
        type(row.get(k)) in (int, float) for k in (*numbers[1:], "successes", "episodes")
    )


SIBLING = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")


def sequential_of(run_dir: Path, partner: str) -> dict[str, Any]:
    """An arm's sequential test recomputed from it and its partner (a sibling directory whose plain name run.json
    ``sequential.partner`` gives; never a link, never another path) under the default coverage rule, as ``{"task":
    task document, "note": the coverage rule's note or None}`` or ``{"error": why}``."""
    from rollbench.core.contracts import RollbenchError
    from rollbench.sequential.recompute import compare_sequential

    if not SIBLING.fullmatch(partner) or partner in (".", ".."):
        return {"error": "run.json names no valid partner arm"}
    other = run_dir.parent / partner
    if other.is_symlink() or not other.is_dir():
        return {"error": f"its partner arm {partner} is not beside it"}
    try:
        doc = compare_sequential([run_dir, other])
    except RollbenchError as exc:
        return {"error": str(exc)}
    return {"task": doc["tasks"][0], "note": doc["coverage_rule_note"]}  # the default gate, never the recorded one
