"""Evaluating a training run's checkpoints on the same planned episodes, each into its own run directory.

Layout of ``out``: ``out/<step, 6 digits>/``, an ordinary run directory per checkpoint (written and resumed by
:func:`rollbench.api.evaluate`: a partial one is resumed, one already graded OK with the same spec is only re-graded,
so its policy is not even started), ``out/checkpoints.json`` (the ranking, :mod:`.rank`, rewritten after every
checkpoint) and ``out/checkpoints.png`` (:mod:`.figure`). Every spec is the same but its policy (the template with
the checkpoint's path), so every pair of checkpoints is paired episode for episode.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollbench.api import evaluate, grade
from rollbench.checkpoints.decision import rank_eliminated
from rollbench.checkpoints.discover import Checkpoint
from rollbench.checkpoints.figure import success_by_step_png
from rollbench.checkpoints.files_record import record_files
from rollbench.checkpoints.rank import ONLY, outcomes, rank
from rollbench.core.contracts import ConfigError
from rollbench.core.grade_model import GradeDocument
from rollbench.core.paths import make_dirs
from rollbench.core.plan import make_plan
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule, Outcome
from rollbench.record.files import json_bytes, write_outputs
from rollbench.record.locks import directory_held
from rollbench.record.runlog import read_run_log
from rollbench.run.observer import RunObserver
from rollbench.run.runners import Execution

RANKING = "checkpoints.json"
FIGURE = "checkpoints.png"
DEFAULT_TEMPLATE = "lerobot:{path}"


@dataclass(frozen=True)
class CheckpointState:
    """What happens to a checkpoint: ``state`` is ``already evaluated`` (re-graded, its policy not started),
    ``evaluating`` (run or resumed) or ``up to N episodes`` (``--eliminate``: advanced to a look)."""

    step: int
    run_dir: Path
    state: str


@dataclass(frozen=True)
class Skipped:
    """A checkpoint not evaluated: its ``step`` and ``why`` (rollbench's own one-line message: its policy could not
    be built, the run refused it, or it lacks config.json or model.safetensors)."""

    step: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        """``{"step", "why"}``, an entry of the ranking document's ``skipped`` list."""
        return {"step": self.step, "why": self.why}


class CheckpointObserver(RunObserver):
    """A :class:`~rollbench.run.observer.RunObserver` of every checkpoint's run (handed whole to
    :func:`rollbench.api.evaluate`; its ``should_stop`` also stops between checkpoints) that also hears what happens
    to each checkpoint and, under ``--watch``, each wait for a new one. The base class does nothing."""

    def on_checkpoint(self, event: CheckpointState) -> None:
        """A checkpoint is re-graded, evaluated or advanced (see :class:`CheckpointState`)."""

    def on_waiting(self, evaluated: int) -> None:
        """``--watch`` is about to sleep until the next poll; ``evaluated`` checkpoints so far."""

    def on_skipped(self, skipped: Skipped) -> None:
        """A checkpoint could not be evaluated (see :class:`Skipped`); the others go on."""


@dataclass(frozen=True)
class Settings:
    """What every checkpoint's spec shares (``fields``: EvalSpec fields but ``policy``), the policy ``template``
    (``{path}`` = the checkpoint folder, in the name and in string values of the policy options), the verdict's
    ``alpha`` and coverage ``rule``."""

    fields: dict[str, Any]
    template: str = DEFAULT_TEMPLATE
    alpha: float = 0.05
    rule: CoverageRule = field(default=DEFAULT_RULE)

    def __post_init__(self) -> None:
        if "{path}" not in self.template and "{path}" not in json.dumps(self.fields.get("policy_options", {})):
            raise ConfigError(f"--policy-template {self.template!r} has no {{path}} (where the checkpoint goes)")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"--alpha must be between 0 and 1, got {self.alpha}")

    def check(self, run: Path) -> None:
        """ConfigError (before anything runs) when the spec of a checkpoint of ``run`` is bad or cannot be planned
        (unknown task, bad option); the policy itself is built when its checkpoint is evaluated."""
        make_plan(self.spec(Checkpoint(0, run.name, run)))

    def spec(self, ckpt: Checkpoint, **override: Any) -> EvalSpec:
        """The spec of ``ckpt`` (ConfigError on bad fields)."""
        path = str(ckpt.path.resolve())
        policy = self.template.replace("{path}", path)
        options = {
            k: v.replace("{path}", path) if isinstance(v, str) else v
            for k, v in self.fields.get("policy_options", {}).items()
        }
        return build_spec(**{**self.fields, **override, "policy": policy, "policy_options": options})


def evaluated(run_dir: Path, spec: EvalSpec) -> bool:
    """Whether ``run_dir`` already holds ``spec``'s run graded OK (nothing to run again)."""
    log = read_run_log(run_dir) if (run_dir / "run.json").exists() else None
    return log is not None and log.spec_identity == spec.identity() and log.status == "OK"


def evaluate_checkpoint(
    ckpt: Checkpoint,
    spec: EvalSpec,
    out: Path,
    execution: Execution,
    observer: CheckpointObserver | None = None,
) -> GradeDocument:
    """The graded result of ``ckpt`` in ``out/<step>``: re-graded when already evaluated, else run (or resumed)
    with ``observer``; ConfigError when an evaluated one is damaged (:func:`undamaged`). Its files are recorded first (:func:`~rollbench.checkpoints.files_record.record_files`:
    FilesChanged, a ConfigError, when ``out/<step>`` holds episodes of other files)."""
    run_dir = out / ckpt.label
    watcher = observer or CheckpointObserver()
    record_files(ckpt, out)
    if evaluated(run_dir, spec):
        watcher.on_checkpoint(CheckpointState(ckpt.step, run_dir, "already evaluated"))
        return undamaged(grade(run_dir), run_dir, ckpt.step)
    watcher.on_checkpoint(CheckpointState(ckpt.step, run_dir, "evaluating"))
    return evaluate(spec, out=run_dir, execution=execution, observer=watcher)


def undamaged(result: GradeDocument, run_dir: Path, step: int) -> GradeDocument:
    """``result`` (the grade of ``run_dir``, recorded OK), or ConfigError naming its first violation when its files
    are damaged since (an episode's files removed...): never ranked, as ``report``, the dashboard and MCP refuse it
    (:func:`rollbench.checkpoints.recompute.recompute`); the command skips that checkpoint with this line."""
    if not result.violations:
        return result
    raise ConfigError(
        f"{run_dir} is damaged ({len(result.violations)} violation(s) by rollbench grade: {result.violations[0]}); "
        f"it is not ranked: move it away to evaluate step {step} again"
    )


def write_ranking(
    out: Path,
    results: Sequence[tuple[Checkpoint, dict[int, Outcome]]],
    settings: Settings,
    elimination: dict[str, Any] | None = None,
    skipped: Sequence[Skipped] = (),
) -> dict[str, Any]:
    """Rank ``results``, write ``checkpoints.json`` and the figure into ``out``; return the ranking document. With
    an ``elimination`` block (``--eliminate``) the document is the elimination's decision
    (:func:`rollbench.checkpoints.decision.rank_eliminated`, the block under ``elimination``), else the fixed-N
    ranking (:func:`rollbench.checkpoints.rank.rank`). ``skipped`` (checkpoints not evaluated, step order) is its
    ``skipped`` list (absent when empty)."""
    runs = [(c.step, str(out / c.label), o) for c, o in results]
    if elimination is None:
        doc = rank(runs, alpha=settings.alpha, rule=settings.rule)
    else:
        doc = rank_eliminated(runs, elimination, alpha=settings.alpha, rule=settings.rule)
    doc["checkpoint_paths"] = {str(c.step): str(c.path) for c, _ in results}
    if skipped:
        doc["skipped"] = [s.to_dict() for s in sorted(skipped, key=lambda s: s.step)]
        if doc["verdict"] == ONLY:  # what it was compared with: nothing, and what was not evaluated
            doc["says"] += (
                f" ({len(skipped)} not evaluated: " + ", ".join(f"step {s['step']}" for s in doc["skipped"]) + ")"
            )
    if elimination is not None:
        doc["elimination"] = elimination
    write_outputs(
        [(out / RANKING, json_bytes(doc), "--out"), (out / FIGURE, success_by_step_png(doc), "--out")],
        own="checkpoints",
    )
    doc["figure"] = str(out / FIGURE)
    return doc


def evaluate_all(
    ckpts: Sequence[Checkpoint],
    out: Path,
    settings: Settings,
    execution: Execution,
    observer: CheckpointObserver | None = None,
    skipped: Sequence[Skipped] = (),
) -> dict[str, Any]:
    """Evaluate every checkpoint of ``ckpts`` (step order) at the settings' episode count, then rank them. Specs
    are all built first: a bad option is a ConfigError before anything runs. A checkpoint whose evaluation raises
    ConfigError (its policy cannot be built, the run refuses it) is skipped (:meth:`CheckpointObserver.on_skipped`)
    and listed with ``skipped`` (those the caller skipped before) in the document; ConfigError
    (:func:`nothing_evaluated`) when every one was skipped."""
    specs = [settings.spec(c) for c in ckpts]
    results: list[tuple[Checkpoint, dict[int, Outcome]]] = []
    dropped = list(skipped)
    for ckpt, spec in zip(ckpts, specs, strict=True):
        if observer and observer.should_stop():
            break
        try:
            result = evaluate_checkpoint(ckpt, spec, out, execution, observer)
        except ConfigError as exc:
            dropped.append(skip(ckpt, exc, observer))
            continue
        results.append((ckpt, outcomes(result)))
        write_ranking(out, results, settings, skipped=dropped)
    if not results and len(dropped) > len(skipped):
        raise nothing_evaluated(dropped[len(skipped) :])
    return write_ranking(out, results, settings, skipped=dropped)


def skip(ckpt: Checkpoint, exc: ConfigError, observer: CheckpointObserver | None) -> Skipped:
    """``ckpt`` skipped for ``exc`` (told to ``observer``)."""
    skipped = Skipped(ckpt.step, str(exc).removeprefix(f"step {ckpt.step}: "))  # the entry names its step
    if observer:
        observer.on_skipped(skipped)
    return skipped


def nothing_evaluated(skipped: Sequence[Skipped]) -> ConfigError:
    """The one line when every checkpoint tried was skipped (most often a bad --policy-template: the same reason
    for each): the first one's reason."""
    first = skipped[0]
    return ConfigError(f"no checkpoint could be evaluated ({len(skipped)} skipped); step {first.step}: {first.why}")


@contextlib.contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on the checkpoints folder ``out`` (created if absent) for a command's whole work, so a
    second ``rollbench checkpoints`` on it is refused (ConfigError, nothing written) instead of rewriting
    checkpoints.json from what it alone saw (hostile round 17, b F4). A file system that cannot lock a directory
    (some NFS mounts) takes no lock (:class:`~rollbench.record.locks.DirLock`)."""
    created, held = make_dirs(out, "--out"), False
    busy = (
        f"{out} is being written by another rollbench checkpoints process; wait for it to end, or choose another --out"
    )
    try:
        with directory_held(out, busy):
            held = True
            yield
    except BaseException:
        if created and held:  # a refusal after it held the folder it made leaves none (only an empty one goes)
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
