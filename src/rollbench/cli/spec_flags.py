"""The ``rollbench eval`` options that set :class:`rollbench.core.spec.EvalSpec` fields, from one table.

Each EvalSpec field has one :class:`SpecFlag`: its help text and, where the command line differs from the field,
the option name, the type typed on the command line, the default and how the text becomes the field's value. The
bounds shown and enforced by the option (``[x>=1]``) are the field's own ``ge`` unless given.
:func:`rollbench.cli.run_flags.eval_options` adds one typer option per flag to a command's signature; the command
receives them as keyword arguments named by :attr:`SpecFlag.param` and turns them into spec fields with
:func:`spec_fields`. Adding a field to EvalSpec means adding its line here and its place in
``rollbench.cli.run_flags`` (tests/test_cli.py checks that every field has one).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import typer

from rollbench.core.format import is_decimal
from rollbench.core.spec import MAX_INSTRUCTION_CHARS, EvalSpec

_FROM_SPEC: Any = object()  # sentinel: take the value from EvalSpec's field


def image_size(value: str) -> tuple[int, int]:
    """``"224"`` -> (224, 224); ``"240x320"`` or ``"240,320"`` -> (240, 320) (height, width in pixels).
    Raises typer.BadParameter (exit 2, one line) for anything else."""
    try:
        fields = value.lower().replace("x", ",").split(",")
        if not all(is_decimal(v) for v in fields):  # int() also takes "３２", " 32" and "3_2"
            raise ValueError(value)
        parts = [int(v) for v in fields]
    except ValueError:
        raise typer.BadParameter(
            f"--image-size {value!r} is not HEIGHTxWIDTH or a single size, e.g. 224 or 240x320"
        ) from None
    if len(parts) == 1:
        parts *= 2
    if len(parts) != 2:
        raise typer.BadParameter(f"--image-size {value!r} is not HEIGHTxWIDTH")
    return parts[0], parts[1]


def _names(value: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in value.split(","))


def _policy_options(value: str | None) -> dict[str, Any]:
    from rollbench.wire.obs_map import load_policy_options

    return load_policy_options(value)


def _variants(value: Path) -> Any:
    from rollbench.core.variants import read_variants

    return read_variants(value)


@dataclass(frozen=True)
class SpecFlag:
    """One EvalSpec field as a ``rollbench eval`` option.

    field: the EvalSpec field. help: the option's help text. param_name: the command's parameter name (default: the
    field's; the option is ``--`` + it with ``-`` for ``_``). decls: typer's option declarations (e.g.
    ``"--video/--no-video"``). cli_type: the type typed on the command line (default: the field's annotation).
    default: the option's default (default: the field's). minimum: the lowest accepted value (default: the field's
    ``ge``). parse: turns the typed value into the field's value; applied to non-empty values only (an empty or
    missing one stays None), unless ``parse_empty``.
    """

    field: str
    help: str
    param_name: str | None = None
    decls: tuple[str, ...] = ()
    cli_type: Any = _FROM_SPEC
    default: Any = _FROM_SPEC
    minimum: Any = _FROM_SPEC
    parse: Callable[[Any], Any] | None = None
    parse_empty: bool = False

    @property
    def param(self) -> str:
        return self.param_name or self.field

    @property
    def option(self) -> str:
        return "--" + self.param.replace("_", "-")

    def parameter(self) -> inspect.Parameter:
        """The typer parameter of this flag (keyword-only, annotated with its ``typer.Option``)."""
        info = EvalSpec.model_fields[self.field]
        kind = info.annotation if self.cli_type is _FROM_SPEC else self.cli_type
        default = info.get_default(call_default_factory=True) if self.default is _FROM_SPEC else self.default
        minimum = self.minimum
        if minimum is _FROM_SPEC:
            minimum = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)  # pydantic's Field(ge=...)
        option = typer.Option(*self.decls, help=self.help, min=minimum)
        return inspect.Parameter(
            self.param, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, option], default=default
        )

    def value(self, typed: Any) -> Any:
        """The EvalSpec value of what was typed (or defaulted) on the command line."""
        if self.parse is None or (not typed and not self.parse_empty):
            return None if self.parse is not None else typed
        return self.parse(typed)


# Each run of them among the other options in `rollbench eval --help`: rollbench.cli.run_flags.EVAL_OPTIONS.
SPEC_FLAGS: tuple[SpecFlag, ...] = (
    SpecFlag(
        "env", "Task, suite or comma-separated tasks, e.g. metaworld/pick-place-v3.", cli_type=str | None, default=None
    ),
    SpecFlag("policy", "Policy name (see `rollbench policies`) or server URL.", cli_type=str | None, default=None),
    SpecFlag("episodes", "Independently reset episodes per task.", default=10),
    SpecFlag("max_steps", "Horizon in steps (default: the task's)."),
    SpecFlag("seed", "Base seed; episode k of each task uses seed + k."),
    SpecFlag("action_noise", "Std of Gaussian action noise (action units)."),
    SpecFlag("replan_every", "Actions executed per chunk (default: policy's, else 1)."),
    SpecFlag("video", "Record an mp4 per camera per episode.", decls=("--video/--no-video",)),
    SpecFlag("cameras", "Comma-separated cameras (default: the task's first).", cli_type=str | None, parse=_names),
    SpecFlag(
        "image_size",
        "Rendered image size, HxW or one number (default: the task's, 224; LIBERO 256).",
        cli_type=str | None,
        parse=image_size,
    ),
    SpecFlag("success_rule", "Override: any_step or final_step.", cli_type=str | None),
    SpecFlag("instruction", f"Override the task's instruction (at most {MAX_INSTRUCTION_CHARS} characters)."),
    SpecFlag(
        "policy_options",
        "Policy options (e.g. obs_map, timeout_s): a JSON object or a JSON file.",
        cli_type=str | None,
        default=None,
        parse=_policy_options,
        parse_empty=True,
    ),
    SpecFlag(
        "policy_timeout_s",
        "Deadline of every policy call in seconds; past it the episode errors.",
        param_name="policy_timeout",
        minimum=0.001,
    ),
    SpecFlag("first_trial", "Run trials FIRST_TRIAL.. of each task, with the full plan's seeds and states."),
    SpecFlag(
        "trial_order_seed",
        "Draw each task's trials in a seeded random order (as sequential plans do; recorded); default: in order.",
    ),
    SpecFlag("success_hold", "Success must hold this many consecutive steps to count (recorded)."),
    SpecFlag(
        "fast_render", "Reflections and shadows off (LIBERO; recorded).", decls=("--fast-render/--no-fast-render",)
    ),
    SpecFlag(
        "instructions",
        "Instruction sweep: a file, one instruction per line or JSON with names; paired per task.",
        cli_type=Path | None,
        parse=_variants,
    ),
    SpecFlag(
        "instruction_perturb",
        "Robustness sweep: comma-separated paraphrase, synonym, drop-object, distractor.",
        cli_type=str | None,
        parse=_names,
    ),
    SpecFlag("latency", "Policy-call latency: none, fixed:MS, steps:K, measured."),
    SpecFlag("stale", "Stale actions of a delayed chunk: skip or execute.", cli_type=str),
)


class _Flag(Protocol):
    @property
    def param(self) -> str: ...


_F = TypeVar("_F", bound=_Flag)


def given_flags(ctx: typer.Context, flags: Iterable[_F]) -> list[_F]:
    """The ``flags`` (spec or run flags) typed on the command line (typer vendors click, so the parameter source is
    compared by name)."""
    return [f for f in flags if getattr(ctx.get_parameter_source(f.param), "name", None) == "COMMANDLINE"]


def spec_fields(values: dict[str, Any], flags: Iterable[SpecFlag] = SPEC_FLAGS) -> dict[str, Any]:
    """EvalSpec fields from the command's keyword arguments ``values`` (by parameter name), for ``flags``."""
    return {f.field: f.value(values[f.param]) for f in flags}
