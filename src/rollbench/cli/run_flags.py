"""The options of the commands that run evaluations (``eval``, ``robustness``, ``sequential``), declared once.

Two tables: :data:`rollbench.cli.spec_flags.SPEC_FLAGS` (what is evaluated: EvalSpec fields) and :data:`RUN_FLAGS`
here (how it runs: :class:`rollbench.run.execution.Execution` and Ray options, the run's identity, wire capture).
:func:`eval_options` adds a chosen set of them to a command's signature, in the order ``rollbench eval --help`` lists
them (:data:`EVAL_OPTIONS`); the command receives them as keyword arguments (``**options``) and turns them into an
Execution with :func:`execution` and into spec fields with :func:`rollbench.cli.spec_flags.spec_fields`. A command
declares only its own options (``--out``, ``--json``, ...); every option shared with ``eval`` is this one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rollbench.cli.spec_flags import SPEC_FLAGS, SpecFlag
from rollbench.core.spec import MAX_BATCH_SIZE, MAX_WORKERS

if TYPE_CHECKING:
    from rollbench.run.execution import Execution


@dataclass(frozen=True)
class RunFlag:
    """One option of how a run is executed or labelled (not part of its spec).

    param: the command's parameter name (the option is ``--`` + it with ``-`` for ``_``, unless ``decls``). kind:
    the type typed on the command line. default: its default. help: the help text. decls: typer's option
    declarations. minimum: the lowest accepted value, or None."""

    param: str
    kind: Any
    default: Any
    help: str
    decls: tuple[str, ...] = ()
    minimum: Any = None

    @property
    def option(self) -> str:
        return self.decls[0].split("/")[0] if self.decls else "--" + self.param.replace("_", "-")

    def parameter(self) -> inspect.Parameter:
        """The typer parameter of this flag (keyword-only, annotated with its ``typer.Option``)."""
        option = typer.Option(*self.decls, help=self.help, min=self.minimum)
        return inspect.Parameter(
            self.param, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[self.kind, option], default=self.default
        )


# the fields of Execution and its RayOptions, in the order `rollbench eval --help` lists them
EXECUTION_FLAGS: tuple[RunFlag, ...] = (
    RunFlag("workers", int, 1, f"Local worker processes (or Ray actors), 1 to {MAX_WORKERS}.", minimum=1),
    RunFlag("executor", str, "local", "local or ray."),
    RunFlag(
        "batch_size",
        int,
        1,
        f"Episodes each worker runs in lockstep, one batched policy call per step, 1 to {MAX_BATCH_SIZE}.",
        minimum=1,
    ),
    RunFlag("ray_address", str | None, None, "Ray cluster address (default: start a local one)."),
    RunFlag("ray_cpus", float, 1.0, "Ray: CPUs per env worker, 0.0001 to 1e14 (fractional allowed)."),
    RunFlag("ray_gpus", float, 0.0, "Ray: GPUs per copy of the policy (fractional below 1)."),
    RunFlag("ray_resources", str | None, None, "Ray: custom resources per env worker, JSON, e.g. '{\"libero\": 1}'."),
    RunFlag("ray_placement", str, "spread", "Ray: spread (over nodes) or pack (fill a node first)."),
    RunFlag(
        "ray_policy_per_node",
        bool,
        False,
        "Ray: one policy actor per node, shared by its env workers.",
        decls=("--ray-policy-per-node",),
    ),
    RunFlag(
        "ray_shared_fs",
        bool,
        False,
        "Ray: actors that see the run directory write it (else episodes ship).",
        decls=("--ray-shared-fs",),
    ),
    RunFlag(
        "retry_errors",
        str,
        "infra",
        "On resume, re-run errored episodes: infra (infrastructure faults), all or none.",
    ),
)
IDENTITY_FLAGS: tuple[RunFlag, ...] = (
    RunFlag(
        "host_label", str | None, None, "Host segment of the run's identity host/robot/name (default: machine name)."
    ),
    RunFlag("robot", str | None, None, "Robot segment of the run's identity (default: the env family's embodiment)."),
)
WIRE_CAPTURE = RunFlag(
    "wire_capture",
    bool,
    False,
    "agent:* policies: keep raw provider requests/responses (keys redacted).",
    decls=("--wire-capture",),
)
RUN_FLAGS: tuple[RunFlag, ...] = (*EXECUTION_FLAGS, *IDENTITY_FLAGS, WIRE_CAPTURE)

Flag = SpecFlag | RunFlag

# Every flag of both tables in the order `rollbench eval --help` lists them (the order they were released in), in
# three parts: the leading ones, those before the command's ``--json`` (after its own options before it), and those
# after ``--json`` (before its own options after it).
_PARTS: tuple[tuple[str, ...], ...] = (
    (
        *("env", "policy", "episodes", "max_steps", "seed", "action_noise", "replan_every", "video", "cameras"),
        *("image_size", "success_rule", "instruction", "policy_options"),
    ),
    (
        *("workers", "executor", "batch_size", "ray_address", "ray_cpus", "ray_gpus", "ray_resources"),
        *("ray_placement", "ray_policy_per_node", "ray_shared_fs"),
    ),
    (
        *(
            "policy_timeout",
            "first_trial",
            "trial_order_seed",
            "retry_errors",
            "success_hold",
            "fast_render",
            "host_label",
            "robot",
        ),
        *("instructions", "instruction_perturb", "wire_capture", "latency", "stale"),
    ),
)
_PART = {name: i for i, names in enumerate(_PARTS) for name in names}
_ALL: tuple[Flag, ...] = (*SPEC_FLAGS, *RUN_FLAGS)
_BY_PARAM: dict[str, Flag] = {f.param: f for f in _ALL}
if sorted(_BY_PARAM) != sorted(name for names in _PARTS for name in names):
    raise TypeError(f"_PARTS must name every flag once: {sorted(set(_BY_PARAM) ^ set(_PART))}")
EVAL_OPTIONS: tuple[Flag, ...] = tuple(_BY_PARAM[name] for names in _PARTS for name in names)


def eval_options(flags: Iterable[Flag] = EVAL_OPTIONS) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``flags`` (any of :data:`EVAL_OPTIONS`) to a command's signature, which must take ``**options`` and an
    ``as_json`` parameter, so typer offers them and passes them as keyword arguments. Placed in eval's order: the
    leading spec flags first (after a ``typer.Context``), then the command's own options before ``as_json``, the
    execution flags, ``as_json``, the remaining flags, and the command's options after ``as_json``."""
    chosen = [f for f in EVAL_OPTIONS if f in set(flags)]

    def add(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind != inspect.Parameter.VAR_KEYWORD]
        lead = [p for p in own if p.annotation is typer.Context]
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in lead]
        at = [p.name for p in rest].index("as_json") + 1
        part = [[f.parameter() for f in chosen if _PART[f.param] == i] for i in range(3)]
        params = [*lead, *part[0], *rest[: at - 1], *part[1], *rest[at - 1 : at], *part[2], *rest[at:]]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return command

    return add


def execution(options: dict[str, Any]) -> Execution:
    """The Execution of the :data:`EXECUTION_FLAGS` in ``options`` (keyword arguments by parameter name; a flag the
    command does not take has its default). Raises ConfigError naming the flag on a bad value."""
    from rollbench.run.execution import Execution
    from rollbench.run.ray_options import RayOptions, parse_resources

    v = {f.param: options.get(f.param, f.default) for f in EXECUTION_FLAGS}
    ray = RayOptions(
        cpus=v["ray_cpus"],
        gpus=v["ray_gpus"],
        resources=parse_resources(v["ray_resources"]),
        placement=v["ray_placement"],
        policy="node" if v["ray_policy_per_node"] else "worker",
        shared_fs=v["ray_shared_fs"],
    )
    return Execution(
        workers=v["workers"],
        executor=v["executor"],
        ray_address=v["ray_address"],
        batch_size=v["batch_size"],
        retry_errors=v["retry_errors"],
        ray=ray,
    )
