"""The grade document (``rollbench grade --json``, and ``results`` in run.json) as pydantic models.

These models are the grade document: :func:`rollbench.grading.grade.grade` builds a :class:`GradeDocument` (its
episodes :class:`GradedEpisode`, its task blocks :class:`TaskBlock`, ...), and every reader inside rollbench reads
its attributes. :func:`document_json` is the one way from the model to the JSON document (``grade --json``, an MCP
tool's answer, ``GradeDocument.to_json()``); run.json keeps ``results`` in the order it always had
(:func:`run_log_order`, applied by :class:`~rollbench.core.runlog_model.RunLog` when it writes). Keys a document was
built or read without stay absent (``exclude_unset``): documents graded before the coverage rule have no coverage
keys, a run without an instruction sweep no ``variants``.

Their JSON Schema is ``docs/grade.schema.json`` (written by ``python -m rollbench.core.schemas``), so other tools
can validate a document without rollbench; ``tests/test_schemas.py`` checks that the committed schema is what these
models give and that a real run's documents validate. Every block is closed (``extra="forbid"``): grade writes
exactly these keys. Rates and interval bounds are fractions in [0, 1]; lengths are env steps; times are seconds.

Deprecated: until issue 41 ``rollbench.grade`` and ``rollbench.evaluate`` returned the document as a dict. Every
block still answers ``block["key"]``, ``block.get("key")``, ``"key" in block``, ``block.keys()`` and ``block ==
{...}`` with the dict's values, each use warning once (:class:`DeprecationWarning` naming the attribute to read
instead); ``to_json()`` gives the dict.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["OK", "PARTIAL", "FAILED"]


class Closed(BaseModel):
    """A block with exactly the declared keys."""

    model_config = ConfigDict(extra="forbid")


class Block(Closed):
    """A block of the grade document: attributes, plus the deprecated dict reading of the document it replaced."""

    def to_json(self) -> dict[str, object]:
        """The block as its JSON document (:func:`document_json`): a new dict of plain values."""
        return document_json(self)

    def _field(self, key: str, use: str) -> str:
        """The field behind JSON key ``key``, after the one DeprecationWarning of a dict-style ``use``."""
        names = self._names()
        name = names.get(key, key)
        warnings.warn(
            f"{type(self).__name__}{use} is deprecated (the grade document is a model since issue 41): read "
            f".{name} instead, or .to_json() for a dict",
            DeprecationWarning,
            stacklevel=3,
        )
        if name not in names.values() or name not in self.model_fields_set:
            raise KeyError(key)
        return name

    def __getitem__(self, key: str) -> object:
        return getattr(self, self._field(key, f"[{key!r}]"))

    def get(self, key: str, default: object = None) -> object:
        """Deprecated: ``getattr(block, key)``."""
        try:
            return getattr(self, self._field(key, f".get({key!r})"))
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        try:
            self._field(str(key), f": {key!r} in ...")
        except KeyError:
            return False
        return True

    def keys(self) -> list[str]:
        """Deprecated: the JSON keys the block holds (``to_json()``'s)."""
        self._warn_whole("keys()")
        return list(document_json(self))

    def _warn_whole(self, use: str) -> None:
        warnings.warn(
            f"{type(self).__name__}.{use} is deprecated (the grade document is a model since issue 41): read its "
            "attributes, or .to_json() for a dict",
            DeprecationWarning,
            stacklevel=3,
        )

    @classmethod
    def _names(cls) -> dict[str, str]:
        """JSON key -> field name (``return`` -> ``return_``)."""
        return {(f.alias or name): name for name, f in cls.model_fields.items()}

    def items(self) -> list[tuple[str, object]]:
        """Deprecated: ``(JSON key, attribute value)`` of the keys the block holds."""
        self._warn_whole("items()")
        return [(k, getattr(self, self._names()[k])) for k in document_json(self)]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]  # a dict's iteration: its keys
        self._warn_whole("__iter__ (list(block), for key in block)")
        return iter(list(document_json(self)))

    def values(self) -> list[object]:
        """Deprecated: the attribute values of the keys the block holds."""
        self._warn_whole("values()")
        return [getattr(self, self._names()[k]) for k in document_json(self)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            warnings.warn(
                f"comparing a {type(self).__name__} with a dict is deprecated (the grade document is a model since "
                "issue 41): compare .to_json()",
                DeprecationWarning,
                stacklevel=2,
            )
            return document_json(self) == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


def document_json(block: BaseModel) -> dict[str, object]:
    """The one way from a grade model to its JSON document: the keys it was built or read with (an absent key stays
    absent), by their JSON names (``return``), in the model's order (that of ``rollbench grade --json``). Values are
    plain (dicts, lists, str, int, float, bool, None), as :func:`json.dumps` writes them."""
    return block.model_dump(by_alias=True, exclude_unset=True)


class TaskBlock(Block):
    """One task's results over its recorded episodes. ``success_rate`` counts every errored episode as a failure
    (all recorded episodes); ``scored_success_rate`` follows the coverage rule (docs/analysis.md, "Errors and
    coverage"): environment-, infrastructure- and unclassified-fault errors left out, policy errors as failures.
    The coverage fields are absent in documents graded before the rule existed."""

    episodes: int = Field(ge=0, description="Recorded episodes of the task (attempted).")
    successes: int = Field(ge=0)
    success_rate: float | None = Field(
        description="successes / episodes, every errored episode a failure; null without episodes."
    )
    ci95_low: float = Field(ge=0, le=1, description="95% Wilson score interval, low end (0 without episodes).")
    ci95_high: float = Field(ge=0, le=1, description="95% Wilson score interval, high end (1 without episodes).")
    episodes_ran: int = Field(ge=0, description="Episodes that ran (not errored before their first step).")
    mean_length: float | None = Field(description="Mean steps over the episodes that ran.")
    median_length: float | None
    mean_return: float | None = Field(description="Mean summed reward over the episodes that ran.")
    errors: int = Field(ge=0)
    errors_by_fault: dict[str, int] = Field(
        description="Errored episodes per fault: policy, environment, infrastructure (and unclassified if any)."
    )
    success_at_reset: int = Field(ge=0, description="Episodes already successful at reset (never counted).")
    termination_reasons: dict[str, int]
    scored: int | None = Field(default=None, ge=0, description="Episodes the coverage rule scores.")
    coverage: float | None = Field(default=None, ge=0, le=1, description="scored / episodes (0 without episodes).")
    excluded: dict[str, int] | None = Field(default=None, description="Episodes left out of scoring, per fault.")
    policy_errors_as_failures: int | None = Field(default=None, ge=0, description="Policy errors scored as failures.")
    scored_success_rate: float | None = Field(default=None, description="successes / scored; null when none scored.")
    scored_ci95_low: float | None = Field(default=None, ge=0, le=1, description="Wilson interval over scored.")
    scored_ci95_high: float | None = Field(default=None, ge=0, le=1)


class PooledBlock(Block):
    """A suite or the whole run: the pooled count over its episodes and the unweighted mean over its tasks."""

    tasks: int = Field(ge=0)
    episodes: int = Field(ge=0)
    successes: int = Field(ge=0)
    errors: int = Field(ge=0)
    errors_by_fault: dict[str, int]
    pooled_success_rate: float | None = Field(description="successes / episodes, every errored episode a failure.")
    pooled_ci95_low: float = Field(ge=0, le=1)
    pooled_ci95_high: float = Field(ge=0, le=1)
    mean_task_success_rate: float | None = Field(description="Unweighted mean of the tasks' success rates.")
    scored: int | None = Field(default=None, ge=0, description="Episodes the coverage rule scores.")
    coverage: float | None = Field(default=None, ge=0, le=1, description="scored / episodes.")
    excluded: dict[str, int] | None = Field(default=None, description="Episodes left out of scoring, per fault.")
    policy_errors_as_failures: int | None = Field(default=None, ge=0)
    scored_success_rate: float | None = Field(default=None, description="successes / scored (the coverage rule).")
    scored_ci95_low: float | None = Field(default=None, ge=0, le=1)
    scored_ci95_high: float | None = Field(default=None, ge=0, le=1)


class LatencyBlock(Block):
    """Policy-call latency (seconds) over the steps that called the policy."""

    policy_calls: int = Field(ge=0)
    calls_per_episode: float | None
    p50_s: float | None
    p95_s: float | None
    p99_s: float | None
    mean_s: float | None


class Latency(LatencyBlock):
    by_task: dict[str, LatencyBlock]


class Paired(Block):
    """Counts over the trials recorded for both a variant and the reference variant (same seed and state)."""

    reference: str
    pairs: int = Field(ge=0)
    both: int = Field(ge=0)
    reference_only: int = Field(ge=0)
    variant_only: int = Field(ge=0)
    neither: int = Field(ge=0)


class _Instruction(Block):
    instruction: str


class VariantBlock(TaskBlock, _Instruction):
    """One instruction variant of a task in a sweep: its instruction, its task block, its paired counts."""

    paired: Paired


class EpisodeUsage(Block):
    """Model calls, tokens and cost (USD, null when no call reports one) from an episode's transcript."""

    model_calls: int = Field(ge=0)
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int = Field(ge=0)
    cost_usd: float | None


class _EpisodeCount(Block):
    episodes: int = Field(ge=0, description="Episodes with a transcript summed here.")


class UsageTotals(EpisodeUsage, _EpisodeCount):
    """An ``agent_usage`` total: the episodes summed, then their summed usage."""


class AgentUsage(Block):
    overall: UsageTotals
    by_task: dict[str, UsageTotals]


class Timing(Block):
    """Wall time from run.json's executions and the graded episodes' own times."""

    eval_wall_time_s: float | None = Field(description="Summed elapsed_s of the finished invocations.")
    invocations: int = Field(ge=0, description="Invocations that finished (recorded elapsed_s).")
    invocations_unrecorded: int | None = Field(
        default=None, ge=0, description="Invocations that left no elapsed_s (killed); absent in older documents."
    )
    episode_time_s: float = Field(ge=0, description="Summed per-episode wall times (reset to last step).")


class DelayStats(Block):
    """How late the executed actions were (env steps) and how often the robot held, over recorded steps."""

    steps: int = Field(ge=0, description="Steps recorded (padding frames left out).")
    hold_steps: int = Field(ge=0, description="Steps that ran the task's hold action.")
    hold_share: float | None = Field(description="hold_steps / steps; null without steps.")
    mean_delay_steps: float | None = Field(description="Over policy actions: step minus its observation's step.")
    max_delay_steps: int | None


class _DelaySetting(Block):
    latency: str = Field(description="The spec's latency: fixed:MS, steps:K or measured.")
    stale: Literal["skip", "execute"]
    call_delay_steps: int | None = Field(description="Delay of every policy call in steps; null for measured.")


class Delay(DelayStats, _DelaySetting):
    """Runs with a latency other than ``none`` (:mod:`rollbench.grading.delay`): the setting, then the stats."""

    by_task: dict[str, DelayStats]


class GradedEpisode(Block):
    """One recorded episode, recomputed from its step rows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    episode_index: int = Field(ge=0)
    task: str
    trial: int = Field(ge=0)
    seed: int = Field(ge=0)
    initial_state: int | None
    instruction: str | None
    variant: str | None
    success: bool
    success_at_reset: bool
    length: int = Field(ge=0, description="Steps executed.")
    return_: float | None = Field(
        alias="return", description="Sum of next.reward; null when that is not a finite number (a violation names it)."
    )
    termination_reason: str
    error: str | None
    error_fault: str | None = Field(
        description="policy, environment, infrastructure or unclassified; null unless error."
    )
    render_failure: str | None = Field(
        description="Why the images were black or frozen (then the episode is an environment error); else null."
    )
    render_fault: str | None = Field(
        deprecated=True,
        description="Deprecated (issue 29: 'fault' names only the category of an error): render_failure's old name, "
        "the same value; to be removed.",
    )
    transcript: str | None = Field(description="Path of the agent transcript, relative to the run directory.")
    agent_usage: EpisodeUsage | None = Field(default=None, description="Present when the transcript was readable.")


class GradeDocument(Block):
    """What ``rollbench grade --json`` prints and run.json keeps under ``results``."""

    status: Status
    reasons: list[str] = Field(
        description="Why the status is not OK, in words (empty when OK, except the stop of a sequential arm)."
    )
    violations: list[str] = Field(description="Broken invariants of the recorded files.")
    episodes_requested: int = Field(ge=0)
    episodes_recorded: int = Field(ge=0)
    tasks: dict[str, TaskBlock]
    suites: dict[str, PooledBlock]
    overall: PooledBlock
    latency: Latency
    episodes: list[GradedEpisode]
    variants: dict[str, dict[str, VariantBlock]] | None = Field(
        default=None, description="Instruction sweeps only: task -> variant (the first is the reference)."
    )
    delay: Delay | None = Field(default=None, description="Runs with a latency other than none.")
    agent_usage: AgentUsage | None = Field(default=None, description="When any episode has a transcript.")
    timing: Timing


_COVERAGE_KEYS = ("scored", "coverage", "excluded", "policy_errors_as_failures", "scored_success_rate",
                  "scored_ci95_low", "scored_ci95_high")  # fmt: skip
# run.json has kept ``results`` in the models' field order before issue 41, which differs from the document's
# (``grade --json``) in four places; :func:`run_log_order` keeps those bytes as they were
_TASK_ORDER = ("episodes", "successes", "success_rate", "ci95_low", "ci95_high", *_COVERAGE_KEYS)
_TOP_ORDER = ("variants", "agent_usage", "delay", "timing")


def _ordered(doc: Mapping[str, object], first: tuple[str, ...] = (), last: tuple[str, ...] = ()) -> dict[str, object]:
    """``doc``'s keys: those of ``first`` present, the others in their order, then those of ``last`` present."""
    middle = [k for k in doc if k not in first and k not in last]
    return {k: doc[k] for k in (*first, *middle, *last) if k in doc}


def _blocks(value: object) -> dict[str, dict[str, object]]:
    return value if isinstance(value, dict) else {}


def run_log_order(doc: dict[str, object]) -> dict[str, object]:
    """A grade document's JSON (:func:`document_json`) in the key order run.json keeps ``results`` in: the coverage
    keys of a task or variant block after its interval, a variant's ``instruction`` after its counts, ``delay``'s
    setting after its stats, an usage total's ``episodes`` last, ``agent_usage`` before ``delay``."""
    out = _ordered(doc, last=_TOP_ORDER)
    out["tasks"] = {t: _ordered(b, _TASK_ORDER) for t, b in _blocks(doc.get("tasks")).items()}
    if "variants" in out:
        out["variants"] = {
            t: {v: _ordered(b, _TASK_ORDER, ("instruction", "paired")) for v, b in _blocks(vs).items()}
            for t, vs in _blocks(doc["variants"]).items()
        }
    if isinstance(delay := out.get("delay"), dict):
        out["delay"] = _ordered(delay, last=("latency", "stale", "call_delay_steps", "by_task"))
    if isinstance(usage := out.get("agent_usage"), dict):
        totals = [("overall", _ordered(_blocks(usage)["overall"], last=("episodes",)))]
        by_task = {t: _ordered(b, last=("episodes",)) for t, b in _blocks(usage.get("by_task")).items()}
        out["agent_usage"] = dict([*totals, ("by_task", by_task)])
    return out
