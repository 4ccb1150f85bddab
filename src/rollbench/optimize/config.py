"""The instruction search's configuration (:class:`SearchConfig`: what identifies a search, its seeds) and its
acceptance rule (:func:`is_better`)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rollbench.core.contracts import ConfigError
from rollbench.core.format import error_location, error_message
from rollbench.optimize.compare import Paired
from rollbench.optimize.proposers import PROPOSERS


class SearchConfig(BaseModel):
    """Everything that decides what the search does; stored in optimize.json, must match on resume."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    rounds: int = Field(default=5, ge=1, le=1000)
    candidates: int = Field(default=4, ge=1, le=63)
    episodes_per_candidate: int = Field(default=10, ge=1, le=10_000)
    seed: int = Field(default=0, ge=0)
    holdout_episodes: int = Field(default=20, ge=1, le=100_000)
    proposer: str = "mix"
    start: str | None = None
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    margin: float | None = Field(default=None, gt=0.0, le=1.0)
    patience: int = Field(default=3, ge=1)
    budget: int | None = Field(default=None, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    policy_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> SearchConfig:
        if self.proposer not in PROPOSERS:
            raise ValueError(f"unknown proposer {self.proposer!r}; valid proposers: {', '.join(PROPOSERS)}")
        if self.start is not None and not self.start.strip():
            raise ValueError("--start must not be blank")
        last = self.seed + self.holdout_episodes + self.rounds * self.episodes_per_candidate - 1
        if last > 2**31 - 1:
            raise ValueError(f"the seeds would run past 2**31 - 1 (last seed {last}); use a smaller --seed")
        cost = (self.candidates + 1) * self.episodes_per_candidate
        if self.budget is not None and self.budget < cost:
            raise ValueError(f"--budget {self.budget} is below one round's {cost} episodes")
        return self

    def identity(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def round_seeds(self, r: int) -> tuple[int, int]:
        """``[first, last + 1)`` of round ``r``'s seeds."""
        lo = self.seed + self.holdout_episodes + r * self.episodes_per_candidate
        return lo, lo + self.episodes_per_candidate

    def holdout_seeds(self) -> tuple[int, int]:
        return self.seed, self.seed + self.holdout_episodes


def build_config(**fields: Any) -> SearchConfig:
    """A SearchConfig, pydantic's errors turned into one ConfigError."""
    try:
        return SearchConfig(**fields)
    except ValidationError as exc:
        parts = [f"{error_location(e['loc'], 'options')}: {error_message(e)}" for e in exc.errors()]
        raise ConfigError("invalid optimize-instruction options: " + "; ".join(parts)) from None


def is_better(cmp: Paired, cfg: SearchConfig) -> bool:
    """The acceptance rule (module docstring)."""
    if cfg.margin is not None:
        return cmp.difference >= cfg.margin - 1e-12
    return cmp.variant_only > cmp.reference_only and cmp.p_value <= cfg.alpha
