"""The small typed contracts every part of rollbench is built on: tasks, observations, envs and policies.

Plug-ins import them from the package top level (``rollbench.Policy``, ``rollbench.PolicyInfo``,
``rollbench.Observation``, ``rollbench.Env``...: the public plug-in API, see :mod:`rollbench`); rollbench's own
code imports them from here. The old paths ``rollbench.types`` and ``rollbench.core.types`` still import, with a
DeprecationWarning.

Shapes and units used throughout:

* ``state``: array ``(state_dim,)`` in the env's own dtype (``float32`` for most families, ``float64`` for LIBERO),
  in the simulator's own units (metres, radians, as the env defines); recorded as ``float32``.
* ``images``: ``uint8`` arrays ``(H, W, 3)``, RGB, keyed by camera name.
* an *action chunk*: a float array ``(k, action_dim)`` with ``k >= 1``, in the policy's own dtype (``float32``
  for most, ``float64`` for a served policy that sends float64); the env is stepped with exactly those values and
  they are recorded as ``float64`` (``action``), so nothing is rounded on the way. The runner executes the first
  ``replan_every`` rows before asking the policy again.
* time is counted in env steps; ``fps`` converts steps to seconds for LeRobot timestamps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from rollbench.core.perturbation import Perturbation

SuccessRule = Literal["any_step", "final_step"]
SUCCESS_RULES: tuple[str, ...] = ("any_step", "final_step")

TerminationReason = Literal["success", "env_terminated", "truncated", "max_steps", "policy_stop", "give_up", "error"]
TERMINATION_REASONS: tuple[str, ...] = (
    "success",
    "env_terminated",
    "truncated",
    "max_steps",
    "policy_stop",
    "give_up",
    "error",
)


class RollbenchError(Exception):
    """Base class of rollbench's own errors; the message is meant to be shown to a user as it is."""


class ConfigError(RollbenchError):
    """Bad input found before any episode runs (unknown name, invalid value, conflicting run directory)."""


Fault = Literal["policy", "environment", "infrastructure"]
FAULTS: tuple[str, ...] = ("policy", "environment", "infrastructure")


class EpisodeError(RollbenchError):
    """Something ended one episode as an error; the run goes on.

    ``fault`` says whose fault it was, so that grading can tell a policy's failure from a broken setup:

    * ``policy``: the policy raised, or returned a non-finite or wrongly shaped action, or a served policy replied
      with an error or a malformed answer, or a worker process died inside the policy's call;
    * ``environment``: the simulator raised, or rendered black/frozen frames, or a worker process died inside the
      env's call;
    * ``infrastructure``: the policy server was unreachable, disconnected or timed out, a worker kept dying outside
      any policy or env call, an env could not be built.
    """

    def __init__(self, message: str, fault: Fault = "policy") -> None:
        super().__init__(message)
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        self.fault: Fault = fault

    def __reduce__(self) -> tuple[Any, ...]:  # keep ``fault`` across pickling (worker processes, Ray actors)
        return (type(self), (str(self), self.fault))


class InfrastructureError(EpisodeError):
    """An episode ended by the infrastructure (server down, disconnect, timeout, worker death, env build)."""

    def __init__(self, message: str, fault: Fault = "infrastructure") -> None:
        super().__init__(message, fault)


@dataclass(frozen=True)
class HoldAction:
    """The action that keeps a robot where it is while no fresh action is available (``--latency``: the world keeps
    stepping while the policy thinks; see :mod:`rollbench.run.schedule`). Declared per task family, with its source.

    Attributes:
        value: ``(action_dim,)`` floats, the hold action (e.g. a zero end-effector delta).
        keep: action dims that repeat the last executed action's value instead (a gripper command left unchanged);
            before any action has run they take ``value``, or the observation state value named in ``from_state``.
        from_state: ``(action dim, state index)`` pairs: before any action has run, that dim of the hold action is
            ``observation.state[state index]`` (an absolute position target held at the robot's own position).
        source: where the rule comes from (the simulator's controller code).
    """

    value: tuple[float, ...]
    keep: tuple[int, ...] = ()
    from_state: tuple[tuple[int, int], ...] = ()
    source: str = ""

    def action(self, last: np.ndarray | None, state: np.ndarray) -> np.ndarray:
        """The hold action ``float32 (action_dim,)`` after ``last`` (the last executed action, None before the first),
        in the state ``state`` (``observation.state`` of this step)."""
        out = np.array(self.value, dtype=np.float32)
        if last is None:
            for dim, index in self.from_state:
                out[dim] = state[index]
        else:
            out[list(self.keep)] = np.asarray(last, dtype=np.float32)[list(self.keep)]
        return out


@dataclass(frozen=True)
class TaskInfo:
    """A named env configuration.

    Attributes:
        name: full task name, ``family/task``, e.g. ``metaworld/pick-place-v3``.
        instruction: the English instruction given to the policy; empty only if ``has_instruction`` is False.
        max_steps: the task's horizon in env steps (after any settle steps).
        cameras: camera names the env can render.
        success_rule: ``any_step`` (latched once reached, episode ends) or ``final_step`` (judged at the end).
        action_dim, state_dim: sizes of the flat action and ``observation.state`` vectors.
        action_low, action_high: per-dimension action bounds, length ``action_dim``.
        fps: control frequency in steps per second (LeRobot ``fps``; timestamps are ``frame_index / fps``).
        settle_steps: no-op steps run after reset/initial state and before the policy acts (LIBERO uses 10).
        initial_states: number of stored initial states (0 = scenes come from the seed only).
        has_instruction: False for tasks that declare no instruction (then an empty one is allowed).
        source: where the instruction, horizon and success rule come from (paper, upstream file).
        replan_every: actions executed per returned chunk by the benchmark's reference client (LIBERO: openpi's
            ``replan_steps = 5``); used when neither ``--replan-every`` nor the policy says (None: 1).
        image_size: ``(height, width)`` rendered when the run gives no ``--image-size`` (LIBERO: 256 x 256, the
            size openpi's LIBERO client renders before resizing to 224).
        policy_cameras: cameras rendered for a policy that reads images when the run names none (empty: the
            first camera); LIBERO: both, as openpi's LIBERO client sends them.
        hold: the family's :class:`HoldAction`, executed while a delayed policy call is outstanding and its
            previous chunk has run out (``--latency``); None: the task cannot be run with a latency.
        video_cameras: cameras ``--video`` records when the run names none (empty: those rendered for the policy,
            else the first camera); LIBERO: ``agentview``, the one openpi's LIBERO client records.
        perturbation: set when the task is a perturbed instance of another (LIBERO-PRO, LIBERO-Plus), else None.
    """

    name: str
    instruction: str
    max_steps: int
    cameras: tuple[str, ...]
    success_rule: SuccessRule
    action_dim: int
    state_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    fps: int = 10
    settle_steps: int = 0
    initial_states: int = 0
    has_instruction: bool = True
    source: str = ""
    policy_cameras: tuple[str, ...] = ()
    video_cameras: tuple[str, ...] = ()
    replan_every: int | None = None
    image_size: tuple[int, int] = (224, 224)
    hold: HoldAction | None = None
    perturbation: Perturbation | None = None

    def __post_init__(self) -> None:
        if "/" not in self.name:
            raise ValueError(f"task name {self.name!r} must be 'family/task'")
        if self.max_steps < 1:
            raise ValueError(f"task {self.name}: max_steps must be >= 1, got {self.max_steps}")
        if self.success_rule not in SUCCESS_RULES:
            raise ValueError(f"task {self.name}: success_rule must be one of {SUCCESS_RULES}")
        if len(self.action_low) != self.action_dim or len(self.action_high) != self.action_dim:
            raise ValueError(f"task {self.name}: action bounds must have length action_dim={self.action_dim}")
        if self.has_instruction and not self.instruction.strip():
            raise ValueError(f"task {self.name}: declares an instruction but it is empty")
        if self.hold is not None and (
            len(self.hold.value) != self.action_dim
            or not all(0 <= d < self.action_dim for d in (*self.hold.keep, *(d for d, _ in self.hold.from_state)))
            or not all(0 <= i < self.state_dim for _, i in self.hold.from_state)
        ):
            raise ValueError(f"task {self.name}: its hold action does not fit action_dim={self.action_dim}")

    @property
    def family(self) -> str:
        return self.name.split("/", 1)[0]


@dataclass
class Observation:
    """What a policy sees at one step.

    Attributes:
        state: ``(state_dim,)`` float, in the env's own dtype (``float32`` for most families, ``float64`` for
            LIBERO, whose reference client sends the env's float64 values); recorded as float32.
        images: camera name -> ``uint8 (H, W, 3)``; only the cameras the run asked for.
        raw: the simulator's native observation (for scripted experts that need it); never recorded.
    """

    state: np.ndarray
    images: dict[str, np.ndarray] = field(default_factory=dict)
    raw: Any = None


@dataclass
class StepResult:
    """The outcome of one ``Env.step``.

    ``success`` is the env's own success check *after* the action; ``terminated``/``truncated`` follow gymnasium.
    """

    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    success: bool
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    """A simulator instance for one task. Built inside the process that uses it (GL contexts do not travel)."""

    task: TaskInfo

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        """Reset to the scene determined by ``seed`` (and stored initial state ``initial_state`` if given).

        The same ``(seed, initial_state)`` must give the same initial scene in any process.
        """
        ...

    def step(self, action: np.ndarray) -> StepResult:
        """Apply one ``(action_dim,)`` action, exactly the values the policy returned (its own float dtype)."""
        ...

    def render(self, camera: str) -> np.ndarray:
        """Return ``uint8 (H, W, 3)`` from ``camera`` (one of ``task.cameras``). (Optional hook of an env whose step
        renders its cameras itself: :class:`ExpectsImages`.)"""
        ...

    def success(self) -> bool:
        """The env's own success check for the current state."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PolicyInfo:
    """Static description of a policy.

    Attributes:
        name: the name it was built from (``metaworld-expert``, ``ws://host:8000``...).
        chunk_size: rows of the action chunks it returns (``k``); 1 for single-step policies.
        replan_every: actions of each chunk it advertises to execute before replanning (None: no preference).
        needs_images: whether ``act`` needs rendered camera images.
        io_bound: whether ``act`` mostly waits on I/O (a policy server), so calls of several instances may overlap
            in threads (batched stepping, :mod:`rollbench.run.lockstep`).
        provenance: free-form facts recorded in run.json (checkpoint, server URL, server metadata...).
        tasks: the tasks it can drive, as ``fnmatch`` patterns of task names (``metaworld/*``, ``fetch/Reach``);
            empty = any task. Checked before a run starts (``api.prepare_run``): a mismatch is a ConfigError.
        chunk_size_known: False when ``chunk_size`` is a default rather than declared (a server that does not
            advertise its chunk length); then ``--replan-every`` cannot be checked against it.
        image_sizes: env family -> ``(height, width)`` the policy needs rendered in that family when the run gives
            no ``--image-size`` (a LeRobot checkpoint sees what lerobot-eval renders: PushT 96 x 96); families not
            listed render at their tasks' own size.
        bounded: True only for rollbench's own built-in policies (``zero``, ``random``, the scripted, MetaWorld and
            Fetch experts): a few microseconds of arithmetic with no I/O and no loop that could fail to end. Their
            calls run inline instead of through the ``--policy-timeout`` helper thread
            (:mod:`rollbench.run.deadline`), whose hand-offs cost up to ~18% of in-process throughput next to
            the background committer (BENCHMARKS.md). Leave False for anything else: a plug-in's True (often the
            info of a built-in it wraps) is set back to False when it is built, so its calls keep their deadline.
        one_stream: empty, or why the episodes draw from one random stream played as its reference run plays it
            (LeRobot with seeding ``lerobot-eval``): several workers/slots/tasks, a resume or a sweep are refused.
        warnings: facts to show before the run (a checkpoint of another lerobot release), kept in run.json.
    """

    name: str
    chunk_size: int = 1
    replan_every: int | None = None
    needs_images: bool = False
    io_bound: bool = False
    provenance: Mapping[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()
    chunk_size_known: bool = True
    bounded: bool = False
    image_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    one_stream: str = ""
    warnings: tuple[str, ...] = ()

    def drives(self, task: str) -> bool:
        """Whether ``task`` (a full task name) matches one of :attr:`tasks` (always True when none is declared)."""
        from fnmatch import fnmatchcase

        return not self.tasks or any(fnmatchcase(task, p) for p in self.tasks)


class PolicyStop(Exception):
    """Raised by ``Policy.act`` to end the episode on purpose (termination reason ``policy_stop``).

    An LLM agent raises it when it calls its ``done`` tool: it claims the task is done; success is still judged by
    the env, never by the claim.
    """

    termination_reason: TerminationReason = "policy_stop"


class PolicyGiveUp(PolicyStop):
    """Raised by ``Policy.act`` when the policy declares it cannot do the task (termination reason ``give_up``).

    An LLM agent raises it when it calls its ``give_up`` tool; the message is the agent's stated reason.
    """

    termination_reason: TerminationReason = "give_up"


@runtime_checkable
class ExpectsImages(Protocol):
    """Optional :class:`Env` hook, for an env whose step renders its cameras itself (LIBERO: see
    :mod:`rollbench.envs.libero.scene`): before every ``reset`` and ``step`` the episode loop names the cameras it
    will render from the resulting observation, so the others are not rendered."""

    def expect_images(self, cameras: Sequence[str]) -> None: ...


@runtime_checkable
class Policy(Protocol):
    """Maps (observation, instruction) to an action chunk ``(k, action_dim)`` (float, in the policy's own dtype).

    Optional hooks, each its own protocol (rollbench checks ``isinstance(policy, Hook)``; define the method to use
    it): :class:`ChecksTasks` (``check_tasks``: refuse tasks before any episode), :class:`FinishesEpisodes`
    (``finish_episode``: per-episode files such as a transcript), :class:`~rollbench.core.batch.Batchable`
    (``batched``: serve B batch slots at once)."""

    info: PolicyInfo

    def reset(self, task: TaskInfo, seed: int) -> None:
        """Called before every episode; must drop any state (queued actions, hidden state) of the last one."""
        ...

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """Return an action chunk ``(k, action_dim)`` (a ``(action_dim,)`` vector is read as ``k = 1``). Raise
        :class:`PolicyStop` / :class:`PolicyGiveUp` to end the episode on purpose, :class:`EpisodeError` to end it
        as ``error`` with a fault; anything else ends it as ``error``, fault ``policy``."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ChecksTasks(Protocol):
    """Optional :class:`Policy` hook: called once before any episode (``rollbench.api.prepare_run``) with the run's
    tasks and ``image_size_of(task) -> (height, width)``, the size each task will be rendered at; raise ConfigError
    to refuse the run (a LeRobot checkpoint whose input features the tasks do not provide)."""

    def check_tasks(self, tasks: Sequence[TaskInfo], image_size_of: Callable[[TaskInfo], tuple[int, int]]) -> None: ...


@runtime_checkable
class FinishesEpisodes(Protocol):
    """Optional :class:`Policy` hook: called when an episode ends, with ``outcome`` (``termination_reason``,
    ``success``, ``length``, ``error``); returns files to record with the episode, ``{kind: bytes}`` (an LLM agent's
    ``transcript``), staged and committed with it. Raising ends the episode as ``error``."""

    def finish_episode(self, outcome: Mapping[str, Any]) -> Mapping[str, bytes]: ...


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception raised by code under evaluation, never raising itself: an exception whose
    ``__str__`` raises (or returns a non-string) is ``Type: <str() raised ...>`` (issue 30, item 7)."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception as inner:
        return f"{name}: <its str() raised {type(inner).__name__}>"
    return f"{name}: {text}"
