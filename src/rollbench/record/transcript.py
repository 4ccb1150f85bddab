"""Reading an LLM agent's episode transcript back (format: :mod:`rollbench.policies.agent.policy`) for grading.

Token and cost totals are recomputed from the transcript's ``call`` lines (one per model call, with the provider's
``usage``) and checked against the totals its ``end`` line states.

Bounds (hostile round 19, F2): a transcript over :data:`MAX_TRANSCRIPT_BYTES` or with a hole (a sparse file:
``truncate -s 20G`` makes one that costs no disk) is not read; one within it is read a line at a time and folded
into its totals, so memory is one line (at most the file's bound), never the whole file or its parsed lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rollbench.core.grade_model import EpisodeUsage, GradedEpisode
from rollbench.core.jsonfile import JsonRefused, loads_strict
from rollbench.record.files import why_not_read
from rollbench.record.safe_files import UnsafeFile, open_regular

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# 256 MiB, as a release reads per file. The agent writes at most horizon x (max_text_replies + 1) model calls of at
# most 11 lines and about 150 KB each (docs/agents.md): 256 MiB holds ~1,700 such calls (a 400-step horizon at the
# default max_text_replies (3) makes at most 1,600); a real episode's transcript is tens of KB to a few MB.
MAX_TRANSCRIPT_BYTES = 1 << 28


def read_transcript(path: Path, root: Path | None = None) -> Iterator[dict[str, Any]]:
    """The transcript's lines, one JSON object at a time (read as they are consumed); raises ValueError (with the
    line number) when one is not a strict JSON object (a ``NaN`` or ``Infinity`` is no JSON number: RFC 8259 section
    6; the writer records null), and OSError (:class:`~rollbench.record.safe_files.UnsafeFile`) before a byte is read
    when ``path`` is not a regular file inside ``root`` reached without a link, is over :data:`MAX_TRANSCRIPT_BYTES`
    or has a hole; also when it grows past the bound while it is read."""
    with open_regular(path, root, max_bytes=MAX_TRANSCRIPT_BYTES, dense=True) as f:
        left, i = MAX_TRANSCRIPT_BYTES, 0
        while raw := f.readline(left + 1):
            left, i = left - len(raw), i + 1
            if left < 0:
                raise UnsafeFile(f"{path} grew past the {MAX_TRANSCRIPT_BYTES:,} bytes rollbench reads; not read")
            try:
                obj = loads_strict(raw)
            except JsonRefused as exc:
                raise ValueError(f"line {i} is not JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"line {i} is not a JSON object")
            yield obj


def _count(usage: Any, key: str) -> int:
    """A call line's token count ``key``: what the agent records (a whole number, or null for one the provider did
    not give as one); anything else, in a transcript edited by hand, counts 0, so the stated totals disagree and the
    disagreement is the named violation (never the value's text in a traceback)."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if type(value) is int and value >= 0 else 0


def _finite(value: int | float) -> float | None:
    """``value`` as a float; None for an integer too large for one (400 digits: strict JSON reads it as an int)."""
    try:
        return float(value)
    except OverflowError:
        return None


def usage_totals(lines: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``model_calls``, token sums and ``cost_usd`` (None when no call reports a cost) over the ``call`` lines."""
    return _Totals().add_all(lines).result()


class _Totals:
    """:func:`usage_totals` folded one line at a time (a transcript is never held whole)."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(("model_calls", *TOKEN_KEYS), 0)
        self.cost: float | None = None

    def add(self, line: dict[str, Any]) -> None:
        if line.get("type") != "call":
            return
        self.counts["model_calls"] += 1
        for k in TOKEN_KEYS:
            self.counts[k] += _count(line.get("usage"), k)
        if isinstance(cost := line.get("cost_usd"), int | float) and (cost := _finite(cost)) is not None:
            self.cost = (self.cost or 0) + cost  # as sum() of the costs adds them, from 0

    def add_all(self, lines: Iterable[dict[str, Any]]) -> _Totals:
        for line in lines:
            self.add(line)
        return self

    def result(self) -> dict[str, Any]:
        return {**self.counts, "cost_usd": self.cost}


def check_transcript(run_dir: Path, rel: str, row: GradedEpisode, violations: list[str]) -> EpisodeUsage | None:
    """Totals of the transcript at ``run_dir/rel`` for episode ``row`` (grade's episode); appends violations
    when it is missing, unreadable, of another episode, or its stated totals differ from its call lines."""
    e = row.episode_index
    path = run_dir / rel
    head: dict[str, Any] | None = None
    end, sums = None, _Totals()
    try:
        for line in read_transcript(path, run_dir):
            kind = line.get("type")
            head = line if head is None and kind == "episode" else head
            end = line if kind == "end" else end
            sums.add(line)
    except UnsafeFile as exc:
        violations.append(f"episode {e}: transcript {rel} is not read ({why_not_read(exc, path)})")
        return None
    except (OSError, ValueError) as exc:
        violations.append(f"episode {e}: transcript {rel} is unreadable ({exc})")
        return None
    head = head or {}
    if head.get("task") != row.task or head.get("seed") != row.seed:
        violations.append(
            f"episode {e}: transcript {rel} is of {head.get('task')!r} seed {head.get('seed')!r}, "
            f"not {row.task!r} seed {row.seed!r}"
        )
    totals = sums.result()
    if end is None:
        violations.append(f"episode {e}: transcript {rel} has no end line")
    else:
        if end.get("termination_reason") != row.termination_reason:
            violations.append(
                f"episode {e}: transcript {rel} ends as {end.get('termination_reason')!r} but the episode row says "
                f"{row.termination_reason!r}"
            )
        stated = end.get("totals") or {}
        for k in ("model_calls", *TOKEN_KEYS):
            if stated.get(k) != totals[k]:
                violations.append(
                    f"episode {e}: transcript {rel} states {k}={stated.get(k)} but its call lines sum to {totals[k]}"
                )
    return EpisodeUsage.model_validate(totals)
