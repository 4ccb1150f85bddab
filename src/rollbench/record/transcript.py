"""Reading an LLM agent's episode transcript back (format: :mod:`rollbench.policies.agent.policy`) for grading.

Token and cost totals are recomputed from the transcript's ``call`` lines (one per model call, with the provider's
``usage``) and checked against the totals its ``end`` line states.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollbench.core.grade_model import EpisodeUsage, GradedEpisode
from rollbench.core.jsonfile import JsonRefused, loads_strict
from rollbench.record.safe_files import read_regular_text

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def read_transcript(path: Path, root: Path | None = None) -> list[dict[str, Any]]:
    """The transcript's lines; raises ValueError (with the line number) when one is not a strict JSON object (a
    ``NaN`` or ``Infinity`` is no JSON number: RFC 8259 section 6; the writer records null), and OSError
    (:class:`~rollbench.record.safe_files.UnsafeFile`) when ``path`` is not a regular file inside ``root`` reached
    without a link."""
    lines = []
    for i, text in enumerate(read_regular_text(path, root).splitlines(), 1):
        try:
            obj = loads_strict(text)
        except JsonRefused as exc:
            raise ValueError(f"line {i} is not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {i} is not a JSON object")
        lines.append(obj)
    return lines


def _count(usage: Any, key: str) -> int:
    """A call line's token count ``key``: what the agent records (a whole number, or null for one the provider did
    not give as one); anything else, in a transcript edited by hand, counts 0, so the stated totals disagree and the
    disagreement is the named violation (never the value's text in a traceback)."""
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if type(value) is int and value >= 0 else 0


def usage_totals(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """``model_calls``, token sums and ``cost_usd`` (None when no call reports a cost) over the ``call`` lines."""
    calls = [ln for ln in lines if ln.get("type") == "call"]
    out: dict[str, Any] = {"model_calls": len(calls)}
    for k in TOKEN_KEYS:
        out[k] = sum(_count(c.get("usage"), k) for c in calls)
    costs = [float(c["cost_usd"]) for c in calls if isinstance(c.get("cost_usd"), int | float)]
    out["cost_usd"] = sum(costs) if costs else None
    return out


def check_transcript(run_dir: Path, rel: str, row: GradedEpisode, violations: list[str]) -> EpisodeUsage | None:
    """Totals of the transcript at ``run_dir/rel`` for episode ``row`` (grade's episode); appends violations
    when it is missing, unreadable, of another episode, or its stated totals differ from its call lines."""
    e = row.episode_index
    path = run_dir / rel
    try:
        lines = read_transcript(path, run_dir)
    except (OSError, ValueError) as exc:
        violations.append(f"episode {e}: transcript {rel} is unreadable ({exc})")
        return None
    head = next((ln for ln in lines if ln.get("type") == "episode"), {})
    end = next((ln for ln in reversed(lines) if ln.get("type") == "end"), None)
    if head.get("task") != row.task or head.get("seed") != row.seed:
        violations.append(
            f"episode {e}: transcript {rel} is of {head.get('task')!r} seed {head.get('seed')!r}, "
            f"not {row.task!r} seed {row.seed!r}"
        )
    totals = usage_totals(lines)
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
