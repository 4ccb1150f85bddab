"""Everything a run checks and resolves before any motion: :func:`prepare_run`.

Four steps, in order: **check** (the run directory, the plan, each family's install), **resolve** (build the policy
once; its facts and the plan become the :class:`~rollbench.core.plan.ResolvedRun` every worker runs, see
:func:`rollbench.core.plan.resolve_run`), **refuse** on a mismatch with what the run directory already holds
(another spec, files that are not a run, another identity), **warn** (the run log's ``warnings``). Nothing is
written here: ``api.evaluate`` creates the directory only after all four passed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollbench.core.contracts import ChecksTasks, ConfigError, Policy, PolicyInfo
from rollbench.core.env_timeout import env_timeout_s
from rollbench.core.format import differences, quoted
from rollbench.core.identity import run_identity
from rollbench.core.latency import check_latency
from rollbench.core.paths import check_output_path
from rollbench.core.plan import Plan, ResolvedRun, make_plan, plan_log, replan_interval, resolve_run
from rollbench.core.plan_size import planned_episodes
from rollbench.core.registry import EnvFamily, EnvOptions, family_of
from rollbench.core.runlog_model import Identity, Provenance, RunLog
from rollbench.core.runlog_model import Plan as PlanRecord
from rollbench.core.spec import EvalSpec, check_action_noise
from rollbench.core.urlcreds import check_spec_secrets, check_spec_urls
from rollbench.record.committed import Committed, committed_episodes, committed_lengths
from rollbench.record.files import check_no_escaping_links
from rollbench.record.lerobot import run_features
from rollbench.record.on_disk import check_rowless, check_state_files, interrupted_start
from rollbench.record.runlog import check_plan_bytes, check_resumable, new_run_log, provenance, read_run_log
from rollbench.record.safe_files import read_regular_json, refuse_inside_release, run_dir_containing
from rollbench.run.probed import close_probe, keep
from rollbench.run.worker import build_policy

if TYPE_CHECKING:
    from rollbench.run.runners import Execution


def _probe_policy(spec: EvalSpec, plan: Plan, recorded: PlanRecord | None) -> tuple[PolicyInfo, ResolvedRun, Policy]:
    """Build the policy once before any episode and resolve the run with it: unknown names and unreachable servers
    fail here, clearly, and so do tasks refused by the optional hook ``check_tasks(tasks, image_size_of)`` (a LeRobot
    checkpoint's features), asked with the image sizes the run will render. Returns the policy open (the caller
    keeps it for the run or closes it: :mod:`rollbench.run.probed`); closed here when it is refused.

    ``recorded`` is run.json's ``plan`` of the run being resumed: its replan interval and policy facts are kept (the
    episodes already recorded ran with them), else they come from the policy just built."""
    policy = build_policy(spec)
    try:
        info = policy.info
        run = resolve_run(spec, plan, *_policy_facts(spec, plan, info, recorded))
        if isinstance(policy, ChecksTasks) and plan.tasks:
            policy.check_tasks(list(plan.tasks), lambda t: run.tasks[t.name].image_size)
    except BaseException:
        close_probe(spec, policy)
        raise
    return info, run, policy


def _policy_facts(
    spec: EvalSpec, plan: Plan, info: PolicyInfo, recorded: PlanRecord | None
) -> tuple[int, bool, Mapping[str, Sequence[int]]]:
    """``(replan_every, needs_images, image_sizes)``: as ``recorded`` (run.json's ``plan``, of a run being resumed),
    else resolved from the policy's ``info``."""
    if recorded is None:
        return replan_interval(spec, plan.tasks, info), info.needs_images, dict(info.image_sizes)
    policy = recorded.policy
    return recorded.replan_every, policy.needs_images, policy.image_sizes or {}


def check_run_dir(run_dir: Path) -> None:
    """ConfigError (nothing touched) unless ``run_dir`` is absent or a directory rollbench may open: no link in it
    leads outside it, and its committed episodes are intact (see ``record.committed.committed_lengths``; their
    types and plan are checked by :func:`check_committed`, once the run is resolved)."""
    check_output_path(run_dir, "--out", directory=True)  # the path can be a directory: nothing else to check
    if (outer := run_dir_containing(run_dir.parent)) is not None:  # issue 30, item 10
        raise ConfigError(f"--out {run_dir} lies inside the run directory {outer}; a run never goes inside another run")
    refuse_inside_release(run_dir)  # a release is written once by `rollbench release` (hostile round 15, F4)
    if not run_dir.exists():
        return
    check_state_files(run_dir)
    check_no_escaping_links(run_dir)
    if (run_dir / "run.json").exists():
        committed_lengths(run_dir)


def check_committed(run_dir: Path, run: ResolvedRun) -> Committed | None:
    """ConfigError (nothing touched) unless the committed episodes of ``run_dir`` are whole episodes of ``run`` (as
    its run.json and meta/info.json record it, its instructions in meta/tasks.parquet; ``committed_lengths`` names
    the file and column) and no episode of the plan but the next to commit has files without a row
    (:func:`~rollbench.record.on_disk.check_rowless`). Returns their lengths and their data files' statistics (None
    without a run.json: nothing checked). Call holding the run lock."""
    if not (run_dir / "run.json").exists():
        return None
    committed = committed_episodes(run_dir, run.plan, run_features(run))
    check_rowless(run_dir, len(committed.lengths), len(run.plan.episodes))
    return committed


def check_one_stream(info: PolicyInfo, spec: EvalSpec, plan: Plan, execution: Execution | None, resuming: bool) -> None:
    """ConfigError unless a policy whose episodes share one random stream (``PolicyInfo.one_stream``, e.g. a LeRobot
    checkpoint with seeding ``lerobot-eval``) gets it as its reference run does: one task, its trials 0..N-1 in
    order (seeds ``--seed`` + k), one worker, one slot, into a fresh run directory."""
    why = []
    if execution is not None and execution.workers > 1:
        why.append(f"--workers {execution.workers} (give 1)")
    if execution is not None and execution.batch_size > 1:
        why.append(f"--batch-size {execution.batch_size} (give 1)")
    if resuming:
        why.append("a resume (give a new --out)")
    if len(plan.tasks) > 1:
        why.append(f"{len(plan.tasks)} tasks (give one)")
    if any(e.variant is not None for e in plan.episodes):
        why.append("an instruction sweep")
    if spec.first_trial:
        why.append(f"--first-trial {spec.first_trial} (its stream starts at trial 0)")
    if why:
        raise ConfigError(f"{info.one_stream}, so it cannot run with " + ", ".join(why))


def check_spec(spec: EvalSpec, host_label: str | None = None, robot: str | None = None) -> None:
    """ConfigError when ``spec`` could not start as a new run: everything :func:`prepare_run` checks and resolves
    before motion (the plan, the families' installs, the policy built once, the tasks it drives, the options, the
    warnings' settings, the identity's labels), without a run directory: nothing is read or written."""
    prepare_run(spec, None, host_label, robot)


def _user_secrets(spec: EvalSpec) -> dict[str, str]:
    """The user's secrets a spec must not hold: ``$ROLLBENCH_SERVER_TOKEN`` and the agent key its options name."""
    import os

    from rollbench.wire.guard import TOKEN_ENV

    names = [TOKEN_ENV, *([key] if isinstance(key := spec.policy_options.get("api_key_env"), str) else [])]
    return {n: os.environ.get(n, "") for n in names}


def prepare_run(
    spec: EvalSpec,
    run_dir: Path | None,
    host_label: str | None = None,
    robot: str | None = None,
    execution: Execution | None = None,
    *,
    keep_policy: bool = False,
) -> tuple[ResolvedRun, RunLog]:
    """Validate everything that can be validated before motion; return the resolved run and the run log to write.

    In order: check (the directory, the plan, the families' installs), refuse on a mismatch with what ``run_dir``
    already holds (before anything is built or contacted), resolve (build the policy once, see
    :func:`_probe_policy`), warn. ``host_label`` and
    ``robot`` set the run's identity (defaults: see :func:`rollbench.core.identity.run_identity`); a resumed run keeps
    the identity it recorded, and asking for another one is a ConfigError. ``execution`` is checked against a policy
    that declares ``one_stream`` (see :func:`check_one_stream`). ``run_dir`` None: a new run not yet given a
    directory (:func:`check_spec`; the log's run_id is then ``run``). ``keep_policy``: the caller runs the episodes
    next in this thread (``api.evaluate``), so the policy built to probe is kept for its in-process worker
    (:mod:`rollbench.run.probed`, when ``execution`` is local with 1 worker) instead of closed; the caller then
    calls :func:`rollbench.run.probed.release` when the run ends."""
    check_spec_urls(spec.policy, spec.policy_options)  # an EvalSpec built directly (API) skipped build_spec's check
    check_spec_secrets(spec.model_dump(mode="json"), _user_secrets(spec))
    env_timeout_s()  # $ROLLBENCH_ENV_TIMEOUT_S: a bad value is refused before anything runs
    if run_dir is not None:
        check_run_dir(run_dir)
    with planning_memory(spec):
        plan = make_plan(spec)
    check_action_noise(spec.action_noise, plan.tasks)
    identity = Identity.model_validate(
        run_identity(run_dir or Path("run"), [t.family for t in plan.tasks], host_label, robot).to_dict()
    )
    for t in plan.tasks:
        why = family_of(t.name).missing()
        if why:
            raise ConfigError(f"cannot evaluate {t.name}: {why}")
    existing = read_run_log(run_dir) if run_dir is not None else None
    same = existing is not None and existing.spec_identity == spec.identity()
    if run_dir is not None and existing is not None and same:
        check_resumable(run_dir)  # its recorded facts are what this run continues with
    _refuse_other_run(spec, run_dir, existing, {"host": host_label, "robot": robot})  # before the policy is built
    info, run, policy = _probe_policy(spec, plan, existing.plan if existing is not None and same else None)
    try:
        with planning_memory(spec, len(plan.tasks)):
            resolved = _resolved(spec, run_dir, plan, info, run, existing, identity, execution)
    except BaseException:
        close_probe(spec, policy)
        raise
    if keep_policy and execution is not None and execution.executor == "local" and execution.workers == 1:
        keep(spec, policy)  # this process's own worker runs it: built once per run (rollbench.run.probed)
    else:
        close_probe(spec, policy)
    return resolved


@contextlib.contextmanager
def planning_memory(spec: EvalSpec, tasks: int | None = None) -> Iterator[None]:
    """A MemoryError while the run is planned (its episodes, run.json's plan) as a ConfigError: one line naming the
    plan's size (``tasks`` resolved tasks, when known), never a traceback (hostile round 16, F4)."""
    try:
        yield
    except MemoryError:
        size = f"{spec.episodes:,} episodes of each task and instruction variant"
        size = f"{planned_episodes(spec, tasks):,} planned episodes" if tasks is not None else size
        raise ConfigError(
            f"out of memory while planning the run ({size}); split it into several runs (fewer tasks, episodes or "
            "instruction variants each) or free memory"
        ) from None


def _resolved(
    spec: EvalSpec,
    run_dir: Path | None,
    plan: Plan,
    info: PolicyInfo,
    run: ResolvedRun,
    existing: RunLog | None,
    identity: Identity,
    execution: Execution | None,
) -> tuple[ResolvedRun, RunLog]:
    """The rest of :func:`prepare_run` once the policy is probed: refuse what it cannot run, warn, and the run log
    (``existing``'s for a resume)."""
    if info.one_stream:
        check_one_stream(info, spec, plan, execution, resuming=existing is not None)
    refuse_options(run)
    cannot = [t.name for t in plan.tasks if not info.drives(t.name)]
    if cannot:
        raise ConfigError(
            f"policy {spec.policy} cannot drive {', '.join(cannot)}: it drives {', '.join(info.tasks)} only"
        )
    warnings = _run_warnings(spec, plan, info)
    if existing is not None:
        if run_dir is not None:  # a resume: what the spec resolves to now against what the run recorded
            refuse_another_plan(run, plan_log(spec, plan, info, run.replan_every), existing.plan, run_dir)
        if existing.identity is None:
            existing.identity = identity
        return run, existing
    plan_block = plan_log(spec, plan, info, run.replan_every)
    check_plan_bytes(plan_block)  # every run.json rollbench writes stays within what it reads (hostile 15, F7)
    log = new_run_log(
        run_dir.name if run_dir is not None else "run",
        identity,
        spec,
        spec.identity(),
        plan_block,
        Provenance.model_validate(_provenance(plan)),
        warnings,
    )
    return run, log


PLAN_TASK_FIELDS = ("name", "instruction", "max_steps", "success_rule", "cameras", "fps", "perturbation")
"""What of each recorded ``plan.tasks`` entry a resumed run must resolve to again."""


def refuse_another_plan(run: ResolvedRun, fresh: PlanRecord, recorded: PlanRecord, run_dir: Path) -> None:
    """ConfigError (exit 2, one line, nothing written) when the run being resumed no longer resolves to what it
    recorded: its tasks (``fresh``, this invocation's ``plan_log``, against run.json's ``plan``: the fields in
    :data:`PLAN_TASK_FIELDS`), its planned episodes, or the dataset features its ``meta/info.json`` declares. A
    family that now resolves the same name to another task (another venv, another version) would otherwise
    record other episodes into the run and rewrite its meta/info.json (issue 42, item 3)."""

    def tasks(plan: PlanRecord) -> list[dict[str, object]]:  # JSON values: differences() quotes them
        dumps = [t.model_dump(mode="json") for t in plan.tasks]
        return [{k: d.get(k) for k in PLAN_TASK_FIELDS} for d in dumps]

    def episodes(plan: PlanRecord) -> list[dict[str, object]]:
        return [e.model_dump(mode="json") for e in plan.episodes]

    there, here = tasks(recorded), tasks(fresh)
    why = "" if len(there) == len(here) else f"{len(there)} tasks recorded, {len(here)} now"
    for t_there, t_here in zip(there, here, strict=False):
        why = why or (f"task {t_there['name']!r}: " + differences(t_there, t_here) if t_there != t_here else "")
    if not why and episodes(recorded) != episodes(fresh):
        why = "its planned episodes (seeds, initial states, instructions) differ"
    info_path = run_dir / "meta" / "info.json"
    if not why and (info_path.exists() or info_path.is_symlink()):  # absent: no episode committed yet
        features = run_features(run)
        info = _resumable_info(info_path, run_dir, run.tasks[run.plan.tasks[0].name].task.fps)
        declared: dict[str, Any] = info["features"]  # a dict: _resumable_info refuses anything else
        if declared != features:
            why = f"meta/info.json declares other features ({differences(declared, features) or 'their order'})"
    if why:
        raise ConfigError(
            f"--resume {run_dir}: the spec no longer resolves to the plan its run.json records ({why[:300]}); "
            "nothing was changed: resume it where it was recorded (the same env family set-up), or start a new --out"
        )


def _resumable_info(path: Path, run_dir: Path, fps: int) -> dict[str, Any]:
    """The run's ``meta/info.json`` as a resume finds it, or ConfigError (exit 2, nothing changed) when it is
    damaged: unreadable, not JSON, not an object, without a ``features`` object, or of an fps other than the plan's.
    The writer rewrites it atomically after every commit, so damage is never a crash's: a resume that rewrote it
    from the plan would replace a damaged input without naming it (docs/design.md, "Bad input and damaged runs":
    a damaged run is named and not resumed; hostile round 13, F14)."""
    why = ""
    try:
        info = read_regular_json(path, run_dir)
    except OSError as exc:
        info, why = {}, f"is unreadable ({exc.strerror or type(exc).__name__})"
    except ValueError:
        info, why = {}, "is not readable JSON"
    if not why and not isinstance(info, dict):
        why = f"is not a JSON object (it holds a {type(info).__name__})"
    elif not why and not isinstance(info.get("features"), dict):
        why = "has no 'features' object"
    elif not why and info.get("fps") != fps:
        why = f"says fps {quoted(info.get('fps'))}, not the plan's {fps}"
    if why:
        raise ConfigError(
            f"--resume {run_dir}: meta/info.json {why}; the run is damaged and cannot be resumed (nothing was "
            f"changed; `rollbench grade {run_dir}` lists every problem)"
        )
    return info


def refuse_options(run: ResolvedRun) -> None:
    """ConfigError (exit 2, before anything runs) when a family says a task cannot be built with the options the run
    will build it with: the optional family hook ``refuse_options(task, options) -> str | None`` (LIBERO-Plus: a
    sensor-noise instance at a size its corruption code cannot take), given the cameras and image size each
    worker passes to ``make``."""
    for facts in run.tasks.values():
        options = EnvOptions(
            cameras=facts.render_cameras, image_size=facts.image_size, fast_render=run.spec.fast_render
        )
        why = family_of(facts.task.name).refuse_options(facts.task, options)
        if why:
            raise ConfigError(f"cannot evaluate {facts.task.name}: {why}")


def _refuse_other_run(
    spec: EvalSpec, run_dir: Path | None, existing: RunLog | None, asked: dict[str, str | None]
) -> None:
    """ConfigError when ``run_dir`` holds something this run may not continue: a run of another spec, files that are
    not a run, a run recorded under another identity than ``asked``. Checked before the policy is built: building
    one may connect to a server or spend an API key (issue 42, class 1)."""
    if existing is not None and existing.spec_identity != spec.identity():
        old, new = existing.spec.model_dump(mode="json"), spec.model_dump(mode="json")
        diff = differences(old, new)
        again = (  # an in-memory policy's run resumes only from Python, with the same object
            "evaluate() with the same spec and policy object"
            if spec.policy.startswith("in-memory:")
            else "rollbench eval --resume RUN_DIR"
        )
        raise ConfigError(
            f"{run_dir} already holds a run of a different spec ({diff or 'identity ' + existing.spec_identity}); "
            f"choose another output directory (--out), or resume it with the same options ({again})"
        )
    if existing is None and run_dir is not None and run_dir.exists() and any(run_dir.iterdir()):
        if interrupted_start(run_dir):  # killed before its first run.json (hostile round 17, b F3): start afresh
            return
        raise ConfigError(f"{run_dir} exists and is not a rollbench run directory; choose another --out")
    if existing is not None and existing.identity is not None:
        recorded = existing.identity.model_dump()
        clash = differences(recorded, {k: v for k, v in asked.items() if v})
        if clash:
            raise ConfigError(
                f"{run_dir} was recorded with identity {recorded} ({clash}); drop --host-label/--robot to resume it"
            )


def _run_warnings(spec: EvalSpec, plan: Plan, info: PolicyInfo) -> list[str]:
    """What a new run's log warns about: overridden success rules, latency settings, a replan interval longer than
    the policy's chunk, the policy's own ``warnings`` and the families' ``run_warnings(spec)``. ConfigError on
    impossible latency settings."""
    warnings = list(info.warnings)
    if spec.success_rule:
        for t in plan.tasks:
            if t.success_rule != spec.success_rule:
                warnings.append(
                    f"success rule of {t.name} overridden: declared {t.success_rule}, graded with {spec.success_rule}"
                )
    warnings.extend(check_latency(spec.latency, spec.stale, plan.tasks, info))
    if spec.replan_every and info.chunk_size_known and spec.replan_every > info.chunk_size:
        warnings.append(
            f"--replan-every {spec.replan_every} is larger than the action chunk of policy {spec.policy} "
            f"({info.chunk_size} action{'s' if info.chunk_size > 1 else ''}): each chunk is executed whole and the "
            f"policy is asked again every {info.chunk_size} step{'s' if info.chunk_size > 1 else ''}, not every "
            f"{spec.replan_every}"
        )
    for fam in _families(plan):
        warnings.extend(fam.run_warnings(spec))  # the family's warnings about its set-up (EnvFamily hook)
    return warnings


def _families(plan: Plan) -> list[EnvFamily]:
    """The env families of the plan's tasks, by name."""
    return [family_of(name) for name in sorted({t.family for t in plan.tasks})]


def _provenance(plan: Plan) -> dict[str, Any]:
    """run.json's ``provenance``: versions of what ran, and each family's own ``provenance()`` facts (where it has
    any)."""
    families = _families(plan)
    prov = provenance(families)
    for fam in families:
        if (facts := fam.provenance()) is not None:
            prov[fam.name] = facts
    return prov
