"""The search state ``OUT/optimize.json`` as a pydantic model, and its reader.

A state file is handed over like a run directory: everything in it is read through :class:`SearchState` (every
block closed, ``extra="forbid"``, as run.json's blocks rollbench alone writes), and its names are checked against
the ones rollbench derives from ``--out`` and the round index (:func:`check_names`): no path is ever taken from it.
A file either model or names refuse is a :class:`~rollbench.core.contracts.ConfigError` of one line naming the file
and the first bad field (exit 2), never a traceback (hostile round 9, F5 and F11).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rollbench.core.contracts import ConfigError
from rollbench.core.format import described, error_location, error_message
from rollbench.core.spec import MAX_INSTRUCTION_CHARS
from rollbench.optimize.config import SearchConfig

Text = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)
Count = Field(ge=0)
Seeds = Field(min_length=2, max_length=2)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # "6" is not 6: a retyped value is damage


class Candidate(_Closed):
    name: str = Field(pattern=r"^c[1-9][0-9]?$")
    instruction: str = Text
    proposer: Literal["drop", "insert", "reorder", "synonym", "template", "llm"]  # a rule (``mix`` names none)


class Dropped(_Closed):
    """A proposed text left out before it was saved or run: which line of the proposer's reply, and why."""

    line: int = Field(ge=1)
    reason: str


class Score(_Closed):
    successes: int = Count
    episodes: int = Count
    errors: int = Count


class _Paired(_Closed):
    """:class:`rollbench.optimize.compare.Paired`'s fields."""

    reference: str
    variant: str
    pairs: int = Count
    reference_successes: int = Count
    variant_successes: int = Count
    variant_only: int = Count
    reference_only: int = Count
    difference: float
    p_value: float = Field(ge=0.0, le=1.0)
    alternative: str


class Comparison(_Paired):
    better: bool


class Decision(_Closed):
    accepted: str | None
    instruction: str = Text
    reason: str


class Round(_Closed):
    round: int = Count
    seeds: list[int] = Seeds
    run_dir: str
    incumbent: str = Text
    candidates: list[Candidate] = Field(min_length=1, max_length=63)
    dropped: list[Dropped] = Field(default_factory=list, max_length=10_000)
    status: Literal["proposed", "decided"]
    scores: dict[str, Score] | None = None
    comparisons: list[Comparison] | None = None
    decision: Decision | None = None
    perfect: bool | None = None


class Arm(_Closed):
    instruction: str = Text
    successes: int = Count
    episodes: int = Count
    success_rate: float | None
    ci95_low: float
    ci95_high: float


class PairedBlock(_Paired):
    difference_ci95: list[float] = Seeds
    interval: str


class Holdout(_Closed):
    run_dir: str
    seeds: list[int] = Seeds
    status: str
    original: Arm
    winner: Arm
    paired: PairedBlock
    significant: bool
    verdict: str


class SeedPlan(_Closed):
    holdout: list[int] = Seeds
    rounds: str


class SearchState(_Closed):
    """``optimize.json``: the configuration, the names rollbench derived, the rounds and the held-out result."""

    rollbench_optimize: Literal[1]
    config: dict[str, Any]
    config_identity: str
    task: str
    task_instruction: str
    original: str = Text
    runs_prefix: str
    seeds: SeedPlan
    status: Literal["RUNNING", "DONE"]
    incumbent: str = Text
    episodes_used: int = Count
    rounds: list[Round] = Field(max_length=1000)
    stop_reason: str | None
    holdout: Holdout | None


def round_dir(prefix: str, r: int) -> str:
    """Round ``r``'s run directory, relative to the search directory."""
    return f"rounds/{prefix}-r{r:03d}"


def holdout_dir(prefix: str) -> str:
    """The held-out run directory, relative to the search directory."""
    return f"{prefix}-holdout"


def read_state(raw: Any, path: Path) -> dict[str, Any]:
    """``raw`` (the parsed JSON of ``path``) validated by :class:`SearchState`, as the dict the search works on
    (keys it never had stay absent). ConfigError naming ``path`` and the first bad field."""
    if not isinstance(raw, dict) or "config" not in raw:
        raise ConfigError(f"search state {path} is not an instruction search's optimize.json; choose another --out")
    try:
        state = SearchState.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = error_location(err["loc"], "state")
        got = "" if err["type"] == "missing" else f" (got {described(err.get('input'))})"
        raise ConfigError(f"search state {path} is damaged: {where}: {error_message(err)}{got}") from None
    return state.model_dump(mode="json", exclude_unset=True)


def check_names(state: dict[str, Any], prefix: str, cfg: SearchConfig, path: Path) -> None:
    """ConfigError when a name recorded in ``state`` is not the one rollbench derives (``prefix`` from ``--out``,
    each round's directory and seeds from its index, the held-out seeds from ``cfg``), or when a round other than
    the last is still proposed or a decided round lacks its scores."""

    def bad(field: str, value: Any, want: Any) -> ConfigError:
        return ConfigError(
            f"search state {path} is damaged: {field} is {described(value)}, not {described(want)} (derived from "
            "--out, the options and the recorded rounds; no name or path is taken from the state file)"
        )

    if state["runs_prefix"] != prefix:
        raise bad("runs_prefix", state["runs_prefix"], prefix)
    incumbent, used = state["original"], 0
    for i, rnd in enumerate(state["rounds"]):
        if rnd["round"] != i:
            raise bad(f"rounds.{i}.round", rnd["round"], i)
        if rnd["run_dir"] != round_dir(prefix, i):
            raise bad(f"rounds.{i}.run_dir", rnd["run_dir"], round_dir(prefix, i))
        if rnd["seeds"] != list(cfg.round_seeds(i)):
            raise bad(f"rounds.{i}.seeds", rnd["seeds"], list(cfg.round_seeds(i)))
        if rnd["status"] == "proposed" and i != len(state["rounds"]) - 1:
            raise ConfigError(f"search state {path} is damaged: rounds.{i} is proposed but a later round exists")
        if rnd["status"] == "decided" and any(rnd.get(k) is None for k in ("scores", "comparisons", "decision")):
            raise ConfigError(f"search state {path} is damaged: rounds.{i} is decided without its scores or decision")
        names = [c["name"] for c in rnd["candidates"]]
        if names != [f"c{k + 1}" for k in range(len(names))]:
            raise bad(f"rounds.{i}.candidates", names, [f"c{k + 1}" for k in range(len(names))])
        if rnd["incumbent"] != incumbent:
            raise bad(f"rounds.{i}.incumbent", rnd["incumbent"], incumbent)
        if rnd["status"] == "decided":
            used += (len(names) + 1) * cfg.episodes_per_candidate
            if rnd["decision"]["accepted"] is not None:
                incumbent = rnd["decision"]["instruction"]
    if state["incumbent"] != incumbent:
        raise bad("incumbent", state["incumbent"], incumbent)
    if state["episodes_used"] != used:
        raise bad("episodes_used", state["episodes_used"], used)
    hold = state["holdout"]
    if hold is not None and hold["run_dir"] != holdout_dir(prefix):
        raise bad("holdout.run_dir", hold["run_dir"], holdout_dir(prefix))
    for field, got in (("seeds.holdout", state["seeds"]["holdout"]), ("holdout.seeds", (hold or {}).get("seeds"))):
        if got is not None and got != list(cfg.holdout_seeds()):
            raise bad(field, got, list(cfg.holdout_seeds()))
