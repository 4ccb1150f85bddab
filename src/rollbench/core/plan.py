"""spec → the full list of episodes, before anything runs.

Each episode's task, index, seed and initial state are a pure function of the spec: never of batch size,
worker count, timing or other episodes' outcomes. Episodes are numbered task-major: task ``i`` (in ``--env``
order) owns episode indices ``i * episodes .. (i + 1) * episodes - 1``; its j-th episode is trial
``k = spec.first_trial + j``, run with seed ``spec.seed + k`` and, for tasks with stored initial states (LIBERO),
initial state ``k``. So trials k..m of a plan run alone (``--first-trial k --episodes m-k+1``) exactly as in the
full run.

Instruction sweeps (``spec.instructions`` or ``spec.instruction_perturb``): every task runs each of its V variants on
the same E trials, so variant pairs share seeds and initial states. Indices are task-major, then variant, then
trial: episode ``(i * V + v) * E + k`` is trial ``k`` of variant ``v`` of task ``i``.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, PolicyInfo, TaskInfo
from rollbench.core.perturbation import Perturbation
from rollbench.core.plan_size import check_plan_size, check_population
from rollbench.core.records import JsonRecord
from rollbench.core.registry import family_of, resolve_tasks
from rollbench.core.runlog_model import Plan as PlanRecord
from rollbench.core.runlog_model import PlannedEpisode as PlannedRecord
from rollbench.core.runlog_model import PlanPolicy, PlanTask, TrialOrder
from rollbench.core.spec import EvalSpec


@dataclass(frozen=True)
class PlannedEpisode(JsonRecord):
    """One episode to run.

    Attributes:
        episode_index: 0..N-1 over the whole run (N = tasks × episodes).
        task: full task name.
        trial: index of this episode within its task's full plan, ``first_trial .. first_trial + episodes - 1``.
        seed: ``spec.seed + trial``.
        initial_state: stored initial state index (``trial``) for tasks that have them, else None.
        task_index: row of the episode's instruction in ``meta/tasks.parquet``.
        instruction: what the policy is told.
        max_steps: the horizon this episode runs to (steps).
        success_rule: ``any_step`` or ``final_step``.
        variant: name of the instruction variant in a sweep, else None.
        perturbation: for a perturbed task (LIBERO-PRO, LIBERO-Plus), the task's
            :class:`~rollbench.core.perturbation.Perturbation` (category, level, control task and detail), recorded per
            episode so a robustness table is recomputed from run.json alone; else None.
    """

    episode_index: int
    task: str
    trial: int
    seed: int
    initial_state: int | None
    task_index: int
    instruction: str
    max_steps: int
    success_rule: str
    variant: str | None = None
    perturbation: Perturbation | None = None

    def to_dict(self) -> dict[str, Any]:
        """run.json's ``plan.episodes`` entry (:class:`rollbench.core.runlog_model.PlannedEpisode`): the fields in
        order (:class:`JsonRecord`), the perturbation as :meth:`Perturbation.to_dict` (its ``rule`` is recorded once,
        in ``plan.tasks``), and no ``perturbation`` key when unperturbed: run.json of unperturbed runs keeps its
        earlier form (and run identity)."""
        out = super().to_dict()
        if self.perturbation is None:
            del out["perturbation"]
        else:
            out["perturbation"] = self.perturbation.to_dict()
        return out


@dataclass(frozen=True)
class Plan:
    """The resolved tasks (in order), the distinct instructions (LeRobot tasks) and every planned episode."""

    tasks: tuple[TaskInfo, ...]
    instructions: tuple[str, ...]
    episodes: tuple[PlannedEpisode, ...]

    def task(self, name: str) -> TaskInfo:
        return next(t for t in self.tasks if t.name == name)


def image_size_for(
    spec: EvalSpec, task: TaskInfo, policy_sizes: Mapping[str, Sequence[int]] | None = None
) -> tuple[int, int]:
    """Rendered ``(height, width)``: the spec's ``image_size``, else the policy's for the task's family
    (``PolicyInfo.image_sizes``, recorded in run.json's ``plan.policy.image_sizes``), else the task's own."""
    if spec.image_size:
        return (spec.image_size[0], spec.image_size[1])
    size = (policy_sizes or {}).get(task.family)
    return (int(size[0]), int(size[1])) if size else task.image_size


def check_compatible(tasks: list[TaskInfo]) -> None:
    """All tasks of one run share a dataset schema: same action and state sizes and fps."""
    first = tasks[0]
    for t in tasks[1:]:
        if (t.action_dim, t.state_dim, t.fps) != (first.action_dim, first.state_dim, first.fps):
            raise ConfigError(
                f"tasks {first.name} and {t.name} cannot share one run directory: action_dim "
                f"{first.action_dim} vs {t.action_dim}, state_dim {first.state_dim} vs {t.state_dim}, "
                f"fps {first.fps} vs {t.fps}; evaluate them in separate runs"
            )


def trial_population(spec: EvalSpec, task: TaskInfo) -> tuple[int, int]:
    """``[first, end)``: a task's trials, from ``first_trial``: ``episodes`` of them (shuffled: its stored initial
    states when more). ConfigError when run.json could not record it (:func:`.plan_size.check_population`)."""
    end = max(task.initial_states if spec.trial_order_seed is not None else 0, spec.first_trial + spec.episodes)
    check_population(task.name, spec.first_trial, end)
    return spec.first_trial, end


def order_stream(task: str, control: str | None) -> str:
    """The name a task's shuffled order is drawn under: its control task's for a perturbed task that names one (so a
    robustness plan's perturbed and control tasks share one permutation: each pair keeps one seed and initial
    state), else its own."""
    return control or task


def plan_populations(spec: EvalSpec, tasks: Sequence[TaskInfo]) -> dict[str, tuple[int, int]]:
    """Each task's population ``[first, end)`` (:func:`trial_population`), shared by the tasks of one
    :func:`order_stream` (the narrowest of theirs, which still holds ``spec.episodes`` trials)."""
    own = {t.name: trial_population(spec, t) for t in tasks}
    stream = {t.name: order_stream(t.name, t.perturbation.control if t.perturbation else None) for t in tasks}
    ends: dict[str, int] = {}
    for name, (_, end) in own.items():
        ends[stream[name]] = min(end, ends.get(stream[name], end))
    return {name: (own[name][0], ends[stream[name]]) for name in own}


def recorded_stream(plan: PlanRecord, task: str) -> str:
    """:func:`order_stream` of ``task`` as run.json's ``plan.tasks`` records it (its perturbation's control)."""
    rec = next((t for t in plan.tasks if t.name == task), None)
    pert = rec.perturbation if rec is not None else None
    return order_stream(task, pert.control if pert is not None else None)


def trial_order(seed: int, task: str, first: int, end: int, episodes: int) -> list[int]:
    """The trials of a shuffled plan's task, in plan order: the first ``episodes`` of a uniform permutation of
    ``first .. end - 1`` drawn by numpy's PCG64 from the seed sequence ``[seed, crc32(task)]`` (so each task of
    a suite has its own order and the same task the same order in both arms of a comparison). ``task`` is the
    task's :func:`order_stream`: a perturbed task draws its control's order."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(task.encode())])))
    return [int(t) for t in rng.permutation(np.arange(first, end, dtype=np.int64))[:episodes]]


def make_plan(spec: EvalSpec) -> Plan:
    """Resolve the spec's tasks and plan every episode. Raises ConfigError on unknown names or bad values."""
    tasks = resolve_tasks(spec.env)
    check_plan_size(spec, len(tasks))  # T x V x E from the spec, before one episode is built (hostile round 16, F4)
    check_compatible(tasks)
    if spec.image_size is None and len({t.image_size for t in tasks}) > 1:
        sizes = ", ".join(sorted({f"{t.name}: {t.image_size[0]}x{t.image_size[1]}" for t in tasks}))
        raise ConfigError(f"these tasks render at different sizes ({sizes}); give one with --image-size")
    instructions: list[str] = []
    episodes: list[PlannedEpisode] = []
    populations = plan_populations(spec, tasks)
    for ti, task in enumerate(tasks):
        variants = task_variants(spec, task)
        for _, instruction in variants:
            if task.has_instruction and not instruction.strip():
                raise ConfigError(f"task {task.name} declares an instruction but it is empty")
            if instruction not in instructions:
                instructions.append(instruction)
        last = spec.first_trial + spec.episodes - 1
        if task.initial_states and last >= task.initial_states:
            asked = f"--episodes {spec.episodes}" + (f" from --first-trial {spec.first_trial}" * bool(spec.first_trial))
            raise ConfigError(
                f"task {task.name} has {task.initial_states} stored initial states; {asked} would need more "
                f"(trials up to {last}; trial k starts from initial state k)"
            )
        if spec.cameras:
            bad = [c for c in spec.cameras if c not in task.cameras]
            if bad:
                raise ConfigError(f"task {task.name} has no camera {bad}; its cameras: {list(task.cameras)}")
        first, end = populations[task.name]
        trials = list(range(first, end))
        if spec.trial_order_seed is not None:
            stream = order_stream(task.name, task.perturbation.control if task.perturbation else None)
            trials = trial_order(spec.trial_order_seed, stream, first, end, spec.episodes)
        for vi, (variant, instruction) in enumerate(variants):
            for j in range(spec.episodes):
                k = trials[j]
                episodes.append(
                    PlannedEpisode(
                        episode_index=(ti * len(variants) + vi) * spec.episodes + j,
                        task=task.name,
                        trial=k,
                        seed=spec.seed + k,
                        initial_state=k if task.initial_states else None,
                        task_index=instructions.index(instruction),
                        instruction=instruction,
                        max_steps=spec.max_steps or task.max_steps,
                        success_rule=spec.success_rule or task.success_rule,
                        variant=variant,
                        perturbation=task.perturbation,
                    )
                )
    return Plan(tuple(tasks), tuple(instructions), tuple(episodes))


def task_variants(spec: EvalSpec, task: TaskInfo) -> list[tuple[str | None, str]]:
    """``(variant name, exact instruction)`` pairs ``task`` runs, in order; ``[(None, instruction)]`` without a sweep.

    A perturbation sweep is ``original`` (the task's instruction, or the spec's override) then one variant per
    perturbation, each generated from it by :func:`rollbench.core.perturb.perturb`.
    """
    if spec.instructions is not None:
        named: list[tuple[str | None, str]] = [(v.name, v.instruction) for v in spec.instructions]
        return named
    base = spec.instruction if spec.instruction is not None else task.instruction
    if spec.instruction_perturb is None:
        return [(None, base)]
    from rollbench.core.perturb import perturb

    perturbed: list[tuple[str | None, str]] = [(p, perturb(base, p)) for p in spec.instruction_perturb]
    return [("original", base), *perturbed]


def policy_cameras_for(spec: EvalSpec, task: TaskInfo, needs_images: bool) -> tuple[str, ...]:
    """Cameras the policy receives (rendered on the steps it is asked for a chunk): :func:`cameras_for` when the
    policy needs images or the run names cameras, else none."""
    return cameras_for(spec, task, needs_images) if needs_images or spec.cameras else ()


def video_cameras_for(spec: EvalSpec, task: TaskInfo, needs_images: bool) -> tuple[str, ...]:
    """Cameras ``--video`` records (rendered every step): none without video; else the spec's, else the task's
    ``video_cameras``, else :func:`cameras_for`."""
    if not spec.video:
        return ()
    if spec.cameras:
        return tuple(spec.cameras)
    if task.video_cameras:
        return tuple(task.video_cameras)
    return cameras_for(spec, task, needs_images)


def cameras_for(spec: EvalSpec, task: TaskInfo, needs_images: bool) -> tuple[str, ...]:
    """Cameras to render each step: the spec's, else the task's ``policy_cameras`` if the policy needs images,
    else the task's first one if video or the policy needs images."""
    if spec.cameras:
        return tuple(spec.cameras)
    if needs_images and task.policy_cameras:
        return tuple(task.policy_cameras)
    if (spec.video or needs_images) and task.cameras:
        return (task.cameras[0],)
    return ()


@dataclass(frozen=True)
class TaskFacts:
    """What one task of a run renders and shows the policy, resolved once before the run (see :class:`ResolvedRun`).

    Attributes:
        task: the task.
        policy_cameras: cameras the policy receives (:func:`policy_cameras_for`).
        video_cameras: cameras ``--video`` records every step (:func:`video_cameras_for`).
        image_size: rendered ``(height, width)`` in pixels (:func:`image_size_for`).
    """

    task: TaskInfo
    policy_cameras: tuple[str, ...]
    video_cameras: tuple[str, ...]
    image_size: tuple[int, int]

    @property
    def render_cameras(self) -> tuple[str, ...]:
        """Every camera the env must render: the policy's, then the video's it does not already have."""
        return (*self.policy_cameras, *(c for c in self.video_cameras if c not in self.policy_cameras))


@dataclass(frozen=True)
class ResolvedRun:
    """The plan plus the policy facts every worker runs it with, resolved once before anything runs
    (``run.prepare.prepare_run``) and handed to every worker as is (picklable).

    Attributes:
        spec: the run's spec.
        plan: its plan.
        replan_every: actions executed from each chunk before the policy is asked again (the spec's, else the
            policy's advertised one, else the tasks' reference client's when they agree, else 1; a resumed run keeps
            the one it recorded in run.json's ``plan.replan_every``).
        needs_images: whether the policy reads camera images (``PolicyInfo.needs_images``, as recorded).
        image_sizes: env family -> ``(height, width)`` the policy asked for (``PolicyInfo.image_sizes``, as recorded).
        tasks: task name -> its :class:`TaskFacts`, in plan order.
    """

    spec: EvalSpec
    plan: Plan
    replan_every: int
    needs_images: bool
    image_sizes: Mapping[str, tuple[int, int]]
    tasks: Mapping[str, TaskFacts]


def replan_interval(spec: EvalSpec, tasks: Sequence[TaskInfo], info: PolicyInfo) -> int:
    """The replan interval of a new run: the spec's, else the policy's advertised one (a server's), else the tasks'
    reference client's when they all name the same one (LIBERO: openpi's 5), else 1."""
    task_replan = {t.replan_every for t in tasks}
    return spec.replan_every or info.replan_every or (task_replan.pop() if len(task_replan) == 1 else None) or 1


def resolve_run(
    spec: EvalSpec, plan: Plan, replan_every: int, needs_images: bool, image_sizes: Mapping[str, Sequence[int]]
) -> ResolvedRun:
    """The :class:`ResolvedRun` of ``plan`` with these policy facts: each task's cameras and image size computed
    here, once. Raises ConfigError when the tasks would record different cameras (one dataset schema per run)."""
    sizes = {fam: (int(hw[0]), int(hw[1])) for fam, hw in image_sizes.items()}
    facts = {
        t.name: TaskFacts(
            t,
            policy_cameras_for(spec, t, needs_images),
            video_cameras_for(spec, t, needs_images),
            image_size_for(spec, t, sizes),
        )
        for t in plan.tasks
    }
    if len({f.video_cameras for f in facts.values()}) > 1:
        raise ConfigError("tasks of one run must record the same cameras; pass --cameras explicitly")
    return ResolvedRun(spec, plan, replan_every, needs_images, sizes, facts)


def plan_log(spec: EvalSpec, plan: Plan, info: PolicyInfo, replan_every: int) -> PlanRecord:
    """run.json's ``plan`` (:class:`rollbench.core.runlog_model.Plan`): the requested episode count, the replan
    interval, the policy as probed, every task (instruction, horizon, success rule as run and as declared, cameras,
    fps, settle steps, variants), the suites named in ``--env``, the instructions and every planned episode. Keys
    not set here (a policy's ``image_sizes`` when it asked for none, a task's ``perturbation`` when unperturbed) are
    not written."""
    suites = {}
    for part in (p.strip() for p in spec.env.split(",")):
        fam = family_of(part)
        suite = part.split("/", 1)[1] if "/" in part else ""
        if suite in fam.suites():
            suites[part] = list(fam.suites()[suite])
    asked = {"image_sizes": {k: list(v) for k, v in info.image_sizes.items()}} if info.image_sizes else {}
    policy = PlanPolicy(
        name=info.name,
        chunk_size=info.chunk_size,
        replan_every=info.replan_every,
        needs_images=info.needs_images,
        **asked,
        provenance=dict(info.provenance),
    )
    return PlanRecord(
        episodes_requested=len(plan.episodes),
        replan_every=replan_every,
        policy=policy,
        tasks=[_plan_task(spec, plan, t) for t in plan.tasks],
        suites=suites,
        instructions=list(plan.instructions),
        episodes=[PlannedRecord.model_validate(e.to_dict()) for e in plan.episodes],
        **(
            {"trial_order": TrialOrder.model_validate(trial_order_log(spec, plan))}
            if spec.trial_order_seed is not None
            else {}
        ),
    )


def trial_order_log(spec: EvalSpec, plan: Plan) -> dict[str, Any]:
    """run.json's ``plan.trial_order`` of a shuffled plan: the method, the seed and each task's population
    ``[first, end)`` of trials (what :func:`trial_order` needs to redraw the order)."""
    return {
        "method": "seeded-permutation",
        "seed": spec.trial_order_seed,
        "populations": {name: list(pop) for name, pop in plan_populations(spec, plan.tasks).items()},
    }


def _plan_task(spec: EvalSpec, plan: Plan, t: TaskInfo) -> PlanTask:
    """One task of run.json's ``plan.tasks``, as its first planned episode runs it."""
    ep0 = next(e for e in plan.episodes if e.task == t.name)
    perturbed = {"perturbation": {**t.perturbation.to_dict(), "rule": t.perturbation.rule}} if t.perturbation else {}
    return PlanTask.model_validate(  # validated: a success rule or variant name the model refuses is a bug here
        {
            "name": t.name,
            "instruction": ep0.instruction,
            "max_steps": ep0.max_steps,
            "success_rule": ep0.success_rule,
            "declared_success_rule": t.success_rule,
            "cameras": list(t.cameras),
            "fps": t.fps,
            "settle_steps": t.settle_steps,
            "source": t.source,
            "variants": [{"name": v, "instruction": i} for v, i in task_variants(spec, t)]
            if ep0.variant is not None
            else None,
            **perturbed,
        }
    )
