"""Reading the runs to analyse: run directories, roots containing them, and JSON exports of the dashboard's
``/api/runs``. Every per-episode fact comes from :func:`rollbench.grading.grade.grade` (for run directories) or from the
export's episode rows (which the dashboard built from ``grade``); nothing is re-derived here.

A JSON export is read tolerantly: an object with a ``runs`` list (what ``GET /api/runs`` returns) or a bare list of
runs. Of each run it reads ``host``, ``robot``, ``name`` (the identity), ``policy``, ``model``, ``run_status``
(``RUNNING`` = in progress; ``live`` present and not stale also counts as in progress) and ``episodes[]`` with
``episode_index``, ``task``, ``seed``, ``initial_state``, ``instruction``, ``variant`` (optional), ``success``,
``length``, ``termination_reason`` and, when the export was joined with labels, ``label``. Unknown fields are
ignored; a run without an identity or episodes is an error naming the file.

Damaged runs (grade reports violations: an unreadable, cut or missing file, counts that disagree) are refused
with a ConfigError naming the run and its first violations, unless ``allow_damaged`` (``--allow-damaged``): then
the run is kept with ``damaged`` set and its ``violations``, which every output marks; a run that cannot be read at
all (its run.json does not parse, is not a run log, or over its bound) is then left out, listed in ``unreadable``
with why, and the runs beside it are read (hostile round 15, F8). A byte-copy of a run (the
same run log, :func:`run_fingerprint`) is one run: the first path given is read, the copy is listed in
``copies`` and never pooled again.

Errors: :class:`rollbench.core.contracts.ConfigError` with one line naming the offending paths.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.grade_model import GradeDocument
from rollbench.core.identity import RunIdentity, identity_for_reading
from rollbench.core.jsonfile import read_json
from rollbench.core.runlog_model import PlanTask, RunLog
from rollbench.record.runlog import RUN_SEARCH_DEPTH, find_run_dirs, is_locked


@dataclass
class RunData:
    """One run to analyse. ``episodes`` are its episodes as :class:`~rollbench.analysis.episodes.AnalysisEpisode`
    (from a run directory's graded episodes, or read tolerantly from a dashboard export's). ``result`` is the grade
    document for run directories (None for exports); ``log`` is run.json as read (None for exports);
    :attr:`embedded_labels` maps episode_index to the label an export carried."""

    identity: RunIdentity
    source: str
    policy: str
    model: str
    status: str
    episodes: list[AnalysisEpisode]
    run_dir: Path | None = None
    result: GradeDocument | None = None
    log: RunLog | None = None
    damaged: bool = False
    violations: list[str] = field(default_factory=list)

    def marks(self) -> dict[str, Any]:
        """``{"damaged": True, "violations": [...]}`` for a damaged run (included with --allow-damaged), else {}."""
        return {"damaged": True, "violations": list(self.violations)} if self.damaged else {}

    @property
    def embedded_labels(self) -> dict[int, str]:
        """episode_index -> the label an export carried with that episode (empty for run directories)."""
        return {e.episode_index: e.label for e in self.episodes if e.label is not None}

    @property
    def key(self) -> str:
        return self.identity.key

    def task_settings(self, task: str) -> PlanTask | None:
        """The recorded plan entry of ``task`` (``max_steps``, ``success_rule``, ``instruction``), or None (an export,
        or a task the plan does not hold)."""
        tasks = self.log.plan.tasks if self.log is not None else []
        return next((t for t in tasks if t.name == task), None)


@dataclass
class Loaded:
    """What :func:`load_runs` found: the runs, and the runs left out because they are still being recorded."""

    runs: list[RunData]
    in_progress: list[dict[str, str]]
    copies: list[dict[str, str]] = field(default_factory=list)
    unreadable: list[dict[str, str]] = field(default_factory=list)  # --allow-damaged: {"path", "why"}, left out

    def notes(self) -> list[str]:
        """Warnings every analysis prints: each damaged run included, each byte-copy left out, and one line when
        dashboard exports (no protocol recorded) are among the runs."""
        out = [
            f"run {r.key} ({r.source}) is damaged and included only because of --allow-damaged: "
            f"{len(r.violations)} violation(s), first: {r.violations[0]}"
            for r in self.runs
            if r.damaged
        ]
        out += [f"{c['path']} is a copy of {c['same_as']} (the same run log); counted once" for c in self.copies]
        out += [f"{u['path']} is left out, unreadable: {u['why']}" for u in self.unreadable]
        if exports := sorted({r.source.rsplit(" (runs[", 1)[0] for r in self.runs if r.log is None}):
            out.append(
                f"dashboard export {', '.join(exports)}: an export records no protocol, so its runs' protocol "
                "(horizon, success rule, success hold) was not checked and their cells may pool protocols"
            )
        return out


def run_fingerprint(log: RunLog) -> str:
    """sha256 of the run log's canonical JSON (run.json's keys, sorted): equal for a run directory and a byte-copy
    of it, different for any two recorded runs (their ``provenance.created`` times and ``executions`` differ)."""
    return hashlib.sha256(json.dumps(log.to_json(), sort_keys=True, default=str).encode()).hexdigest()


def damaged_error(run_dir: Path, violations: list[str], allow_option: bool = True) -> ConfigError:
    """The refusal of a damaged run: its path, how many violations, the first two; ``allow_option``: the command
    takes ``--allow-damaged`` (say so)."""
    first = "; ".join(violations[:2])
    hint = ", or pass --allow-damaged to include it marked as damaged" if allow_option else ""
    return ConfigError(
        f"{run_dir} is damaged ({len(violations)} violation(s) by rollbench grade: {first}); it is not analysed. "
        f"Run `rollbench grade` on it for every problem{hint}"
    )


def strip_provider(model: str) -> str:
    """``openai/gpt-x`` -> ``gpt-x``: the model name without any ``provider/`` prefix (the last path segment)."""
    return model.rsplit("/", 1)[-1]


MODEL_KEYS = ("model", "model_name", "checkpoint", "model_id")  # as rollbench.dashboard.summary.policy_model reads them
SERVED_NAME_KEYS = ("policy", "policy_name", "name")  # a policy server's own name for what it serves


def _first_str(d: Any, keys: tuple[str, ...]) -> str | None:
    if not isinstance(d, dict):
        return None
    return next((d[k] for k in keys if isinstance(d.get(k), str) and d[k]), None)


def served_by(log: RunLog) -> tuple[str, str | None, str | None] | None:
    """For a run whose policy was reached over the network (``plan.policy.provenance.server``): ``(url, name,
    model)``, where ``name`` is the policy name the server reported in its metadata (``server_metadata.policy``,
    ``policy_name`` or ``name``; ``rollbench serve-policy`` sends ``policy``) and ``model`` the model it reported
    (``server_metadata`` or its ``provenance``: ``model``, ``model_name``, ``checkpoint``, ``model_id``; without
    provider prefix); either is None when the server did not say. None for an in-process policy."""
    prov = log.plan.policy.provenance
    url = prov.get("server")
    if not isinstance(url, str) or not url:
        return None
    meta = prov.get("server_metadata")
    model = _first_str(meta, MODEL_KEYS) or _first_str((meta or {}).get("provenance"), MODEL_KEYS)
    return url, _first_str(meta, SERVED_NAME_KEYS), strip_provider(model) if model else None


def model_of(log: RunLog, *, merge_served: bool = False) -> str:
    """The model a run's policy recorded (without provider prefix), else the policy's name.

    A served policy (see :func:`served_by`) is ``NAME via URL``, NAME the model the server reported, else its policy
    name; just the URL when the server reported neither. So one policy reached through two URLs (or in process) is
    two models unless ``merge_served`` (``--merge-served``): then NAME alone, which pools it with every run whose
    model or policy has that name. A run with ``--latency`` other than ``none`` is labelled
    ``MODEL (latency MODE, stale RULE)``: a different condition, never pooled with runs of the frozen world; likewise a
    run with ``--action-noise`` is ``MODEL (action noise X)``, never pooled with the policy without it."""
    from rollbench.dashboard.summary import policy_model

    policy, spec = log.plan.policy, log.spec
    model = policy_model(policy.provenance)
    served = served_by(log)
    if model:
        label = strip_provider(model)
    elif served is not None:
        label = _served_label(served[0], served[2] or served[1], merge_served)
    else:
        label = str(policy.name or spec.policy or "unknown")
    noise = spec.action_noise
    if noise > 0:  # another policy in effect: never pooled with the noiseless one
        label += f" (action noise {noise:g})"
    if spec.latency != "none":  # another condition (issue 25): never pooled with the frozen world
        label += f" (latency {spec.latency}, stale {spec.stale})"
    return label


def policy_of(log: RunLog, *, merge_served: bool = False) -> str:
    """The policy's name; a served policy is ``NAME via URL`` (NAME the server-reported policy name, see
    :func:`served_by`), NAME alone with ``merge_served``, the URL alone when the server reported no name."""
    served = served_by(log)
    if served is not None:
        return _served_label(served[0], served[1], merge_served)
    return str(log.plan.policy.name or log.spec.policy)


def _served_label(url: str, name: str | None, merge_served: bool) -> str:
    if name is None:
        return url
    return name if merge_served else f"{name} via {url}"


def _from_run_dir(
    run_dir: Path,
    loaded: Loaded,
    merge_served: bool,
    allow_damaged: bool | None,
    prints: dict[str, Path],
) -> None:
    from rollbench.grading.grade import grade, load_run_log

    log = load_run_log(run_dir)
    identity = identity_for_reading(log, run_dir)  # a bad recorded one is grade's violation, not a refusal
    fingerprint = run_fingerprint(log)
    if fingerprint in prints:
        loaded.copies.append({"run": identity.key, "path": str(run_dir), "same_as": str(prints[fingerprint])})
        return
    prints[fingerprint] = run_dir
    if log.status == "RUNNING":
        why = (
            "being recorded"
            if is_locked(run_dir)
            else "not finished (its writer stopped; resume it with eval --resume)"
        )
        loaded.in_progress.append({"run": identity.key, "path": str(run_dir), "why": why})
        return
    result = grade(run_dir, check_videos=False)  # rollbench grade checks videos; no per-episode fact depends on them
    if result.violations and not allow_damaged:
        raise damaged_error(run_dir, result.violations, allow_option=allow_damaged is not None)
    loaded.runs.append(
        RunData(
            identity=identity,
            source=str(run_dir),
            policy=policy_of(log, merge_served=merge_served),
            model=model_of(log, merge_served=merge_served),
            status=result.status,
            episodes=[AnalysisEpisode.from_graded(e) for e in result.episodes],
            run_dir=run_dir,
            result=result,
            log=log,
            damaged=bool(result.violations),
            violations=list(result.violations),
        )
    )


def _from_export(path: Path, loaded: Loaded, allow_damaged: bool | None) -> None:
    if path.name == "run.json":
        raise ConfigError(f"{path} is a run's run.json; give its run directory {path.parent}")
    data = read_json(path, "dashboard export")
    runs = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(runs, list):
        raise ConfigError(
            f"{path} is neither a run directory nor a dashboard export (a JSON object with a 'runs' list); give run "
            "directories or the folders holding them"
        )
    for i, run in enumerate(runs):
        where = f"{path} (runs[{i}])"
        if not isinstance(run, dict) or not isinstance(run.get("episodes"), list):
            raise ConfigError(f"{where} has no episodes list")
        host, robot, name = (run.get(k) for k in ("host", "robot", "name"))
        try:
            if not (isinstance(host, str) and isinstance(robot, str) and isinstance(name, str)):
                raise ConfigError("host, robot and name must be strings")
            identity = RunIdentity(host, robot, name)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        live = run.get("live") if isinstance(run.get("live"), dict) else None
        if run.get("run_status") == "RUNNING" or (live and not live.get("stale")):
            loaded.in_progress.append({"run": identity.key, "path": where, "why": "being recorded"})
            continue
        violations = [str(v) for v in run.get("violations") or []] if isinstance(run.get("violations"), list) else []
        if violations and not allow_damaged:
            raise damaged_error(Path(where), violations, allow_option=allow_damaged is not None)
        episodes = [AnalysisEpisode.from_export(ep, where) for ep in run["episodes"]]
        seen = Counter(e.episode_index for e in episodes)
        if twice := sorted(i for i, n in seen.items() if n > 1):
            raise ConfigError(f"{where}: episode {twice[0]} appears {seen[twice[0]]} times (episode_index is unique)")
        model = run.get("model")
        loaded.runs.append(
            RunData(
                identity=identity,
                source=where,
                policy=str(run.get("policy") or "unknown"),
                model=strip_provider(model)
                if isinstance(model, str) and model
                else str(run.get("policy") or "unknown"),
                status=str(run.get("status") or "unknown"),
                episodes=episodes,
                damaged=bool(violations),
                violations=violations,
            )
        )


def load_runs(
    paths: list[str | Path],
    *,
    allow_exports: bool = True,
    merge_served: bool = False,
    allow_damaged: bool | None = False,
) -> Loaded:
    """Read every run under ``paths`` (run directories, roots searched up to 3 levels deep by :func:`rollbench.record.runlog.find_run_dirs`, JSON exports).

    A served policy's ``policy`` and ``model`` are ``NAME via URL`` (:func:`policy_of`, :func:`model_of`), so the
    same policy reached through different URLs stays apart; ``merge_served`` labels it NAME alone (exports carry no
    server metadata: their policy is what the dashboard recorded, the URL for a served policy).

    Runs still being recorded (``run.json`` status ``RUNNING``) are left out and listed in ``in_progress``. The same
    directory reached twice (a root and a run inside it) is read once, and so is a byte-copy of a run (``copies``).
    A damaged run is refused unless ``allow_damaged`` (see the module docstring; None: refused, and the command
    has no ``--allow-damaged`` to suggest).

    Raises:
        ConfigError: a path that does not exist, holds no run, or is a malformed export; two runs with the same
            identity ``host/robot/name`` (naming both paths: a copy of a run would count its episodes twice).
    """
    loaded = Loaded([], [])
    seen: set[Path] = set()
    prints: dict[str, Path] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ConfigError(f"{path} does not exist")
        if not path.is_dir():  # a file (or a FIFO, device...: refused unread by the export reader)
            if not allow_exports:
                raise ConfigError(f"{path} is a file; give run directories (or roots containing them)")
            _from_export(path, loaded, allow_damaged)
            continue
        dirs = find_run_dirs([path])
        if not dirs:
            raise ConfigError(f"{path} holds no rollbench run (no run.json up to {RUN_SEARCH_DEPTH} levels down)")
        for d in dirs:
            real = d.resolve()
            if real in seen:
                continue
            seen.add(real)
            try:
                _from_run_dir(d, loaded, merge_served, allow_damaged, prints)
            except RollbenchError as exc:
                if not allow_damaged:
                    raise ConfigError(str(exc)) from None
                loaded.unreadable.append({"path": str(d), "why": str(exc)})
    by_key: dict[str, list[str]] = {}
    for r in loaded.runs:
        by_key.setdefault(r.key, []).append(r.source)
    dupes = {k: v for k, v in by_key.items() if len(v) > 1}
    if dupes:
        shown = "; ".join(f"{k} at {' and '.join(v)}" for k, v in sorted(dupes.items()))
        raise ConfigError(f"duplicate run identities (their episodes would be counted twice): {shown}{_hint(dupes)}")
    return loaded


def _hint(dupes: dict[str, list[str]]) -> str:
    """The fix when every duplicate is a step run of ``rollbench checkpoints`` folders (two OUT folders evaluate the
    same steps under the same run names): report each folder on its own; else nothing."""
    from rollbench.checkpoints.recompute import is_checkpoints_out

    if all(is_checkpoints_out(Path(src).parent) for srcs in dupes.values() for src in srcs):
        return "; both are rollbench checkpoints folders (their step runs share names): report each folder on its own"
    return ""
