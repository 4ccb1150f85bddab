"""The dashboard's state: local runs (:class:`~rollbench.review.catalog.Catalog`), peers, the label sidecar.

Every method returns plain JSON-able data; :mod:`rollbench.review.app` turns it into HTTP responses and pages.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rollbench.identity import RunIdentity
from rollbench.record.runlog import utc_now
from rollbench.review.catalog import Catalog, RunRecord, inside, live_progress
from rollbench.review.labels import LabelFile, load_labels, set_label
from rollbench.review.peers import Peer
from rollbench.review.rubrics import Rubric
from rollbench.review.summary import disagreement_rows, episode_status, join_labels, run_summary


@dataclass
class DashboardConfig:
    """What ``rollbench dashboard`` was started with (see :mod:`rollbench.cli_dashboard`)."""

    roots: list[Path]
    labels: Path
    rubric: Rubric
    annotator: str
    cache_dir: Path
    peers: list[tuple[str, str | None]] = field(default_factory=list)
    token: str | None = None
    stale_after_s: float = 120.0
    peer_refresh_s: float = 5.0


class Dashboard:
    """Runs, peers and labels behind the HTTP API. Thread-safe."""

    def __init__(self, cfg: DashboardConfig) -> None:
        self.cfg = cfg
        self.rubric = cfg.rubric
        self.catalog = Catalog(cfg.roots, cfg.stale_after_s)
        self.peers = [Peer(url, token, cfg.peer_refresh_s) for url, token in cfg.peers]
        self._summaries: dict[Path, tuple[Any, dict[str, Any]]] = {}
        self._labels: tuple[Any, LabelFile] | None = None
        self._lock = threading.Lock()
        self.labels()  # a malformed sidecar or one of another rubric fails at start (ConfigError)

    # ---- labels
    def labels(self) -> LabelFile:
        """The sidecar, re-read when its (mtime, size) changed."""
        try:
            st = self.cfg.labels.stat()
            sig: Any = (st.st_mtime_ns, st.st_size)
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

    def _all_summaries(self) -> list[dict[str, Any]]:
        local = []
        for rec in self.catalog.records():
            s = dict(self._summary(rec))
            s["live"] = live_progress(rec.run_dir, self.cfg.stale_after_s)
            s["stale"] = bool(s["live"] and s["live"]["stale"])
            local.append(s)
        if self.peers:
            with ThreadPoolExecutor(max_workers=len(self.peers)) as pool:
                list(pool.map(lambda p: p.refresh(), self.peers))
        keys = {s["key"] for s in local}
        remote = []
        for peer in self.peers:
            for s in peer.visible_runs():
                if s["key"] not in keys:
                    keys.add(s["key"])
                    remote.append(s)
        return local + remote

    def runs(self) -> dict[str, Any]:
        """``/api/runs``: every run (local and peers') joined with the labels, hosts, disagreements."""
        labels = self.labels()
        runs = [join_labels(s, labels, self.rubric) for s in self._all_summaries()]
        hosts: dict[str, dict[str, Any]] = {}
        for r in runs:
            if r["source"] == "local":
                row = hosts.setdefault(
                    r["host"], {"host": r["host"], "source": "local", "runs": 0, "error": None, "stale_since": None}
                )
                row["runs"] += 1
        host_rows = list(hosts.values()) + [row for p in self.peers for row in p.host_rows()]
        return {
            "generated_at": utc_now(),
            "rubric": self.rubric.to_dict(),
            "runs": runs,
            "hosts": host_rows,
            "disagreements": disagreement_rows(runs),
            "errors": list(self.catalog.errors),
        }

    def find(self, ident: RunIdentity) -> tuple[RunRecord | None, Peer | None, dict[str, Any] | None]:
        """(local record, None, summary) or (None, peer, summary) or (None, None, None)."""
        rec = self.catalog.get(ident)
        if rec is not None:
            return rec, None, self._summary(rec)
        for peer in self.peers:
            peer.refresh()
            for s in peer.visible_runs():
                if s["key"] == ident.key:
                    return None, peer, s
        return None, None, None

    def run_detail(self, ident: RunIdentity) -> dict[str, Any] | None:
        """``/api/run/HOST/ROBOT/NAME``: the summary with labels, and the graded results (per task, latency...)."""
        rec, peer, summary = self.find(ident)
        if summary is None:
            return None
        if rec is not None:
            result = {k: v for k, v in rec.result.items() if k != "episodes"}
            live = live_progress(rec.run_dir, self.cfg.stale_after_s)
            extra = {"results": result, "live": live, "warnings": rec.log.get("warnings", [])}
        else:
            assert peer is not None
            try:
                doc = peer.get_json(f"/api/run/{ident.key}")
                extra = {"results": doc.get("results"), "live": doc.get("live"), "warnings": doc.get("warnings", [])}
            except (httpx.HTTPError, ValueError) as exc:
                extra = {"results": None, "live": None, "warnings": [], "error": f"peer {peer.url}: {exc}"}
        return {**join_labels(summary, self.labels(), self.rubric), **extra}

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
                steps = peer.episode(ident.episode_key(episode_index))["steps"]
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                steps = {"timestamp": [], "reward": [], "success": [], "action": [], "error": f"peer: {exc}"}
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
        video = ep["artifacts"]["videos"].get(camera) if ep else None
        return inside(rec.run_dir / video["path"], rec.run_dir) if video else None

    def local_transcript(self, rec: RunRecord, episode_index: int) -> Path | None:
        ep = rec.by_index.get(episode_index)
        rel = ep["artifacts"]["transcript"] if ep else None
        if not rel or Path(rel).is_absolute():
            return None
        return inside(rec.run_dir / rel, rec.run_dir)
