"""The numbers of a handed-over ``OUT/checkpoints.json`` that a recomputation reads, as a typed model.

:func:`rollbench.checkpoints.recompute.recorded` reads ``alpha``, the coverage ``rule`` and, with ``--eliminate``,
``elimination.design`` (``delta``, ``alpha``, ``looks``) and ``elimination.steps`` through :class:`RecordedRanking`:
each is a finite number within the range ``rollbench checkpoints`` accepts (a 401-digit integer, NaN or a string is
refused by name, as a violation, before any arithmetic). The keys the comparison looks rows up by are typed too:
``checkpoints`` is a list of objects, each with an integer ``step``, and ``checkpoint_paths`` (when present) maps
steps to strings (a row's step as a list, ``checkpoints`` null or a number is refused by name, never a traceback:
hostile round 16, F3). Every other key is compared with the recomputation as read
(:func:`rollbench.checkpoints.recompute.ranking_differences`), never used in arithmetic.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rollbench.checkpoints.decision import CHOSEN, UNDECIDED
from rollbench.checkpoints.eliminate import MAX_TRIALS
from rollbench.checkpoints.rank import BEST, INSUFFICIENT, ONLY, TIED
from rollbench.core.format import error_location

MAX_STEP = 10**18  # a training step (lerobot-train names them with 6 or more digits)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class RecordedRule(_Open):
    """``rule``: the coverage rule the ranking was made under."""

    min_coverage: float = Field(ge=0, le=1, allow_inf_nan=False)
    exclude_policy_errors: bool


class RecordedEliminationDesign(_Open):
    """``elimination.design``: the parameters the looks are recomputed from."""

    delta: float = Field(gt=0, lt=1, allow_inf_nan=False)
    alpha: float = Field(gt=0, lt=1, allow_inf_nan=False)
    looks: list[Annotated[int, Field(ge=2, le=MAX_TRIALS)]] = Field(min_length=1, max_length=64)


class RecordedElimination(_Open):
    """``elimination``: its design and the steps it ran."""

    design: RecordedEliminationDesign
    steps: list[Annotated[int, Field(ge=0, le=MAX_STEP)]]


class RecordedRow(_Open):
    """A row of ``checkpoints``: its ``step`` (an integer, never a string, float or boolean: rows are looked up by
    it); its numbers are compared with the recomputation as read."""

    step: int = Field(strict=True, ge=0, le=MAX_STEP)


M = TypeVar("M", bound=BaseModel)


class RecordedRanking(_Open):
    """``checkpoints.json`` as far as a recomputation uses its numbers."""

    alpha: float = Field(gt=0, lt=1, allow_inf_nan=False)
    rule: RecordedRule
    checkpoints: list[RecordedRow]
    checkpoint_paths: dict[str, str] | None = None  # step -> the checkpoint folder evaluated (step_records)
    elimination: RecordedElimination | None = None


def check_recorded(doc: Any, model: type[M] = RecordedRanking) -> M:  # type: ignore[assignment]
    """``doc`` (checkpoints.json as read, or its ``elimination`` block) as ``model`` (:class:`RecordedRanking`).
    Raises ValueError naming the first field refused and why (never quoting its value)."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = "Input should be an object" if err["type"] == "model_type" else err["msg"]  # no class name
        raise ValueError(f"{error_location(err['loc'], 'the document')}: {msg}") from None


# the words a ranking records (decisions and verdicts): shown as written when a recorded one disagrees
WORDS = frozenset({"chosen", "kept", "eliminated", BEST, TIED, INSUFFICIENT, ONLY, CHOSEN, UNDECIDED})
SHOWN_INT = 10**15


def described(value: Any) -> str:
    """A recorded value that disagrees with the recomputation, as a message shows it: None, a boolean, a finite
    number (an integer below 10^15) or one of the ranking's own words as written; anything else only by its type and
    size ("a string of 1000047 characters"), never quoted (recorded text may carry a key or markup: hostile round 9)."""
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value in WORDS):
        return repr(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if abs(value) < SHOWN_INT else "a very large integer"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    return f"a {type(value).__name__}"
