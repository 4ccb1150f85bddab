"""EvalSpec: what to evaluate. Every field here can change results, so the spec is the run's identity.

How to execute (worker count, executor, output directory) is deliberately *not* in the spec: running the same
spec with 1 or 3 workers must record the same episodes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rollbench.types import ConfigError

MAX_EPISODES_PER_TASK = 100_000
MAX_VARIANTS = 64
VARIANT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# fields added after runs were first recorded: left out of the identity hash while unset, so older run
# directories keep their identity (and stay resumable)
_UNSET_NOT_HASHED = ("instructions", "instruction_perturb")


class InstructionVariant(BaseModel):
    """One instruction of a sweep: a short name (recorded per episode as ``rollbench/variant``) and the exact text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=VARIANT_NAME)
    instruction: str = Field(min_length=1)

    @field_validator("instruction")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("an instruction variant must not be blank")
        return v


class EvalSpec(BaseModel):
    """A policy × tasks × episodes evaluation.

    Attributes:
        env: a task (``metaworld/pick-place-v3``), a suite (``metaworld/MT10``) or a comma-separated list.
        policy: a registered policy name (``rollbench policies``) or a server URL (``ws://host:port``).
        episodes: episodes per task (each independently reset); >= 1.
        max_steps: horizon override in env steps; None = each task's own horizon.
        seed: base seed; episode k of every task runs with seed ``seed + k``, so a single episode is reproduced
            by ``--seed (seed + k) --episodes 1``.
        action_noise: std of Gaussian noise added to every action (action units), 0 = none.
        replan_every: actions executed from each chunk before asking the policy again; None = the policy's
            advertised value, else 1.
        video: record one mp4 per camera per episode.
        cameras: cameras to render (for the policy and the video); None = the task's first camera.
        image_size: ``(height, width)`` in pixels of rendered images.
        success_rule: override of the tasks' declared success rule (a warning is recorded in the run log).
        instruction: override of the tasks' instruction given to the policy (recorded); None = the task's own.
        policy_options: extra options passed to the policy factory (e.g. observation key mapping).
        instructions: an instruction sweep: every task runs every variant on the same seeds and initial states
            (paired); None = one instruction per task. Excludes ``instruction`` and ``instruction_perturb``.
        instruction_perturb: a perturbation sweep: variant ``original`` (the task's instruction, or ``instruction``)
            plus one variant per named perturbation (:data:`rollbench.optimize.perturb.PERTURBATIONS`), generated
            deterministically from each task's instruction.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    episodes: int = Field(ge=1, le=MAX_EPISODES_PER_TASK)
    max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    action_noise: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    replan_every: int | None = Field(default=None, ge=1)
    video: bool = False
    cameras: tuple[str, ...] | None = None
    image_size: tuple[int, int] = (224, 224)
    success_rule: Literal["any_step", "final_step"] | None = None
    instruction: str | None = None
    policy_options: dict[str, Any] = Field(default_factory=dict)
    instructions: tuple[InstructionVariant, ...] | None = Field(default=None, min_length=1, max_length=MAX_VARIANTS)
    instruction_perturb: tuple[str, ...] | None = Field(default=None, min_length=1)

    @field_validator("image_size")
    @classmethod
    def _even_positive(cls, v: tuple[int, int]) -> tuple[int, int]:
        if any(d < 16 or d > 4096 or d % 2 for d in v):
            raise ValueError("image size must be two even numbers of pixels between 16 and 4096")
        return v

    @field_validator("instruction")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("an instruction override must not be empty")
        return v

    @field_validator("instructions")
    @classmethod
    def _unique_names(cls, v: tuple[InstructionVariant, ...] | None) -> tuple[InstructionVariant, ...] | None:
        names = [x.name for x in v or ()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"instruction variant names must be unique; repeated: {', '.join(dup)}")
        return v

    @field_validator("instruction_perturb")
    @classmethod
    def _known_perturbations(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        from rollbench.optimize.perturb import PERTURBATIONS

        for p in v or ():
            if p not in PERTURBATIONS:
                raise ValueError(f"unknown perturbation {p!r}; valid perturbations: {', '.join(PERTURBATIONS)}")
        if v and len(set(v)) != len(v):
            raise ValueError("each perturbation may be named once")
        return v

    @model_validator(mode="after")
    def _one_source_of_instructions(self) -> EvalSpec:
        if self.instructions is not None and (self.instruction is not None or self.instruction_perturb is not None):
            raise ValueError("an instruction sweep (instructions) excludes instruction and instruction_perturb")
        return self

    def identity(self) -> str:
        """A stable hash of every field; two runs with equal identity must record the same episodes."""
        dump = self.model_dump(mode="json")
        for key in _UNSET_NOT_HASHED:
            if dump[key] is None:
                del dump[key]
        blob = json.dumps(dump, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_spec(**fields: Any) -> EvalSpec:
    """Build an EvalSpec, turning pydantic's validation errors into one ConfigError with plain sentences."""
    try:
        return EvalSpec(**fields)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "spec"
            parts.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError("invalid evaluation spec: " + "; ".join(parts)) from None
