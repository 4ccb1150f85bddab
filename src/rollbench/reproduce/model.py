"""Reference files: published success rates with their sources, shipped in ``references/`` or given by a user.

A reference file (JSON, ``"format": "rollbench.reference/1"``) holds the results one source published for one
policy: the policy and checkpoint, where the numbers were read (:class:`Source`), the evaluation protocol they assume
(:class:`Protocol`, each field ``null`` when the source does not state it), and one :class:`Entry` per published
number (benchmark, suite, optionally task; the rate in percent as printed; the episode and success counts when the
source states them). Every field is checked (unknown fields are refused) and a bad file is reported as one line
naming the file and the field (:class:`ReferenceFileError`, exit 2 in the CLI).

Rounding rule (:data:`PRINT_TOLERANCE_PTS`): a count and a printed rate agree when ``|100 * successes / episodes -
success_rate| <= 0.05`` percentage points (a rate printed to one decimal); an entry whose counts disagree with its
printed rate must say so in ``discrepancy``, and so must a file whose ``published_average`` is not the mean of its
entries (:func:`check_average`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rollbench.core.contracts import ConfigError
from rollbench.core.format import error_location, error_message
from rollbench.core.jsonfile import JsonRefused, loads_strict, read_text
from rollbench.core.registry import did_you_mean

FORMAT = "rollbench.reference/1"
PRINT_TOLERANCE_PTS = 0.05  # a rate printed to one decimal is within 0.05 points of the true one
MAX_EPISODES = 10_000_000
MAX_REFERENCE_BYTES = 2**20  # 1 MiB: a reference file is a few suites of published rates


class ReferenceFileError(ConfigError):
    """A reference file that cannot be read or does not validate; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Source(_Strict):
    """Where the numbers were read: a repository file at a commit (``repository``, ``path``, ``commit``, ``lines``)
    or a paper (``paper`` title, ``arxiv`` id, ``table``). ``date`` is the commit's or paper's date (ISO 8601)."""

    kind: Literal["repository", "paper"]
    repository: str | None = None
    path: str | None = None
    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    lines: str | None = None
    paper: str | None = None
    arxiv: str | None = None
    table: str | None = None
    date: str | None = None
    quoted_from: str | None = None

    @model_validator(mode="after")
    def _checkable(self) -> Source:
        if self.kind == "repository" and not (self.repository and self.path and self.commit and self.lines):
            raise ValueError("a repository source needs repository, path, commit (40 hex digits) and lines")
        if self.kind == "paper" and not (self.paper and self.table):
            raise ValueError("a paper source needs paper (its title) and table")
        return self


class Protocol(_Strict):
    """The evaluation protocol a published number assumes; ``None`` = the source does not state it.

    ``horizon``: suite -> env steps per episode (settle steps not counted); ``settle_steps``: no-op steps after the
    initial state; ``replan_every``: actions executed from each predicted chunk; ``episodes_per_task``;
    ``init_states``: ``"stored-k"`` = trial k starts from the benchmark's stored initial state k;
    ``render_size``: ``[height, width]`` rendered by the simulator (before any resize by the policy's client);
    ``fast_render``: reflections/shadows off; ``mujoco``/``robosuite``: versions the reference ran.
    ``source``: where these protocol values were read (same form as :class:`Source`)."""

    horizon: dict[str, int] | None = None
    settle_steps: int | None = Field(default=None, ge=0)
    replan_every: int | None = Field(default=None, ge=1)
    episodes_per_task: int | None = Field(default=None, ge=1)
    seeds: int | None = Field(default=None, ge=1)
    init_states: Literal["stored-k"] | None = None
    render_size: tuple[int, int] | None = None
    fast_render: bool | None = None
    mujoco: str | None = None
    robosuite: str | None = None
    source: Source | None = None
    notes: list[str] = Field(default_factory=list)


class Entry(_Strict):
    """One published number: ``success_rate`` in percent as printed; ``episodes``/``successes`` when stated."""

    benchmark: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    task: str | None = None
    success_rate: float = Field(ge=0.0, le=100.0, allow_inf_nan=False)
    episodes: int | None = Field(default=None, ge=1, le=MAX_EPISODES)
    successes: int | None = Field(default=None, ge=0)
    tasks: int | None = Field(default=None, ge=1)
    checkpoint: str | None = None
    label: str | None = None
    discrepancy: str | None = None

    @model_validator(mode="after")
    def _counts_agree(self) -> Entry:
        if self.successes is not None:
            if self.episodes is None:
                raise ValueError("successes needs episodes")
            if self.successes > self.episodes:
                raise ValueError(f"successes ({self.successes}) exceed episodes ({self.episodes})")
            gap = abs(100.0 * self.successes / self.episodes - self.success_rate)
            if gap > PRINT_TOLERANCE_PTS + 1e-9 and not self.discrepancy:
                raise ValueError(
                    f"{self.successes}/{self.episodes} is not the printed {self.success_rate}%: "
                    "say why in 'discrepancy' or fix the numbers"
                )
        elif self.episodes is not None and reference_successes(self) is None:
            raise ValueError(
                f"no whole number of successes out of {self.episodes} episodes prints as {self.success_rate}%"
            )
        return self

    @property
    def key(self) -> str:
        """``benchmark/suite`` (the run's suite name), with ``:task`` for a per-task entry."""
        return f"{self.benchmark}/{self.suite}" + (f":{self.task}" if self.task else "")


class ReferenceSet(_Strict):
    """One reference file: one source's published numbers for one policy."""

    format: Literal["rollbench.reference/1"]
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    policy: str = Field(min_length=1)
    checkpoint: str | None = None
    revision: str | None = None
    reported_by: str = Field(min_length=1)
    source: Source
    protocol: Protocol
    entries: list[Entry] = Field(min_length=1)
    published_average: float | None = Field(default=None, ge=0.0, le=100.0)
    discrepancy: str | None = None
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_and_average(self) -> ReferenceSet:
        keys = [e.key for e in self.entries]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"more than one entry for {', '.join(dup)}")
        if not check_average(self) and not self.discrepancy:
            raise ValueError(
                f"published_average {self.published_average} is not the mean of the entries: "
                "say why in 'discrepancy' or fix the numbers"
            )
        return self


def reference_successes(entry: Entry) -> int | None:
    """Successes behind an entry: its stated count, else the whole number ``k`` nearest ``rate * episodes`` (the lower
    one on a tie) when ``100 k / episodes`` prints as the rate (within :data:`PRINT_TOLERANCE_PTS`); ``None`` when
    the episodes are unknown or no whole number fits."""
    if entry.successes is not None:
        return entry.successes
    if entry.episodes is None:
        return None
    exact = entry.success_rate * entry.episodes / 100.0
    k = int(exact) if exact - int(exact) <= 0.5 else int(exact) + 1
    if abs(100.0 * k / entry.episodes - entry.success_rate) <= PRINT_TOLERANCE_PTS + 1e-9:
        return k
    return None


def check_average(ref: ReferenceSet) -> bool:
    """True when ``published_average`` is absent or within 0.05 points (one printed decimal) of the unweighted mean of
    the per-suite entries' printed rates (a source's "Average" column is that mean)."""
    if ref.published_average is None:
        return True
    suites = [e.success_rate for e in ref.entries if e.task is None]
    mean = sum(suites) / len(suites)
    return abs(mean - ref.published_average) <= PRINT_TOLERANCE_PTS + 1e-9


def _plain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = error_location(err["loc"], "(file)")
        msg = error_message(err)
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def parse_reference(text: str, where: str) -> ReferenceSet:
    """Validate a reference file's text. Raises :class:`ReferenceFileError` naming ``where`` and the field."""
    try:
        data = loads_strict(text)
    except JsonRefused as exc:
        raise ReferenceFileError(f"reference file {where}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReferenceFileError(f"reference file {where}: must be a JSON object")
    try:
        return ReferenceSet.model_validate(data)
    except ValidationError as exc:
        raise ReferenceFileError(f"reference file {where}: {_plain(exc)}") from None


def shipped_names() -> list[str]:
    """Names of the reference files shipped with rollbench (``rollbench/reproduce/references/*.json``), sorted."""
    folder = resources.files("rollbench.reproduce").joinpath("references")
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def load_reference(name_or_file: str) -> ReferenceSet:
    """A shipped reference by name (``pi05-openpi``), else a user file by path. Raises :class:`ReferenceFileError`
    (unknown name: lists the shipped ones; unreadable or invalid file: names the file and the field)."""
    names = shipped_names()
    if name_or_file in names:
        text = resources.files("rollbench.reproduce").joinpath("references", f"{name_or_file}.json").read_text("utf-8")
        ref = parse_reference(text, f"{name_or_file}.json (shipped)")
        if ref.name != name_or_file:
            raise ReferenceFileError(f"reference file {name_or_file}.json (shipped): name is {ref.name!r}")
        return ref
    path = Path(name_or_file)
    if not (path.exists() or path.is_symlink()):
        raise ReferenceFileError(
            f"unknown reference {name_or_file!r}: not a file and not a shipped reference.{did_you_mean(name_or_file, names)}"
            f" Shipped references: {', '.join(names)}"
        )
    try:
        text = read_text(path, "reference file", MAX_REFERENCE_BYTES)  # regular files only, never blocks
    except ConfigError as exc:
        raise ReferenceFileError(str(exc)) from None
    return parse_reference(text, str(path))
