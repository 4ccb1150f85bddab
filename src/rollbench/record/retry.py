"""Resume re-runs errored episodes (``eval --retry-errors infra|all|none``, default ``infra``), replacing them.

When a run directory is resumed (the same command again, ``eval --resume``, or an MCP call with the same run name),
the episodes that ended in ``error`` with a fault the mode selects are recorded again from their planned seed and
initial state: ``infra`` = ``infrastructure`` faults only (server unreachable, disconnect, timeout, worker death,
env build: nothing the policy did), ``all`` = every errored episode, ``none`` = keep them as recorded.

Replacing keeps the directory a valid LeRobot dataset with contiguous indices (see
:meth:`rollbench.record.writer.DatasetWriter.uncommit` for how and why the committed tail is re-staged, crash-safely).
Every replacement is recorded in ``run.json`` under ``replacements`` *before* anything is removed: episode, task,
trial, seed, the old termination reason, error, fault and length, the UTC time, and the invocation
(``executions`` index); ``new`` holds the re-run's outcome once it is recorded (filled by :func:`record_outcomes`,
also on a later resume if this one was interrupted first).
"""

from __future__ import annotations

from pathlib import Path

from rollbench.core.contracts import ConfigError
from rollbench.core.grade_model import GradedEpisode
from rollbench.core.runlog_model import NewOutcome, ReplacedOutcome, Replacement, RunLog
from rollbench.record.episode_row import EpisodeRow
from rollbench.record.files import read_parquet
from rollbench.record.lerobot import EPISODES_PATH, STAGING, chunk_file
from rollbench.record.runlog import utc_now, write_run_log
from rollbench.record.safe_files import read_regular_json
from rollbench.record.writer import DatasetWriter

RETRY_MODES = ("infra", "all", "none")


def check_mode(mode: str) -> str:
    if mode not in RETRY_MODES:
        raise ConfigError(f"unknown --retry-errors {mode!r}; valid values: {', '.join(RETRY_MODES)}")
    return mode


def _selected(row: EpisodeRow, mode: str) -> bool:
    if row.termination_reason != "error" or mode == "none":
        return False
    return mode == "all" or row.error_fault == "infrastructure"


def _old(row: EpisodeRow) -> ReplacedOutcome:
    return ReplacedOutcome(
        termination_reason=row.termination_reason,
        error=row.error,
        error_fault=row.error_fault,
        length=row.length if "rollbench/steps" in row.missing else row.steps,
    )


def retry_errored(run_dir: Path, writer: DatasetWriter, log: RunLog, mode: str) -> list[int]:
    """Take back the recorded episodes that ``mode`` re-runs, after logging them in ``log.replacements`` (and
    writing run.json); returns their indices, which are then missing and run like any missing episode."""
    check_mode(mode)
    if mode == "none":
        return []
    chosen: dict[int, EpisodeRow] = {}
    for e in range(writer.committed):
        c, f = chunk_file(e)
        row = EpisodeRow.from_row(
            read_parquet(run_dir / EPISODES_PATH.format(chunk_index=c, file_index=f)).to_pylist()[0]
        )
        if _selected(row, mode):
            chosen[e] = row
    staged: set[int] = set()
    for e in writer.staged():
        row = EpisodeRow.from_row(read_regular_json(run_dir / STAGING / f"episode-{e:06d}" / "episode.json", run_dir))
        if _selected(row, mode):
            chosen[e] = row
            staged.add(e)
    if not chosen:
        return []
    now, execution = utc_now(), len(log.executions) - 1
    pending = {r.episode_index for r in log.replacements if r.new is None}  # interrupted
    added = [
        Replacement.model_validate(
            {
                "episode_index": e,
                "task": row.task,
                "trial": row.trial,
                "seed": row.seed,
                "retry_errors": mode,
                "time": now,
                "execution": execution,
                "old": _old(row),
                "new": None,
            }
        )
        for e, row in sorted(chosen.items())
        if e not in pending
    ]
    log.replacements = [*log.replacements, *added]
    write_run_log(run_dir, log)  # the record of what is replaced comes first
    for e in sorted(staged):
        writer.discard_staged(e)
    writer.uncommit(set(chosen) - staged)
    return sorted(chosen)


def record_outcomes(log: RunLog, graded_episodes: list[GradedEpisode]) -> None:
    """Fill ``new`` of every replacement whose re-run is now recorded, from ``grade``'s graded episodes."""
    by_index = {e.episode_index: e for e in graded_episodes}
    for r in log.replacements:
        ep = by_index.get(r.episode_index)
        if r.new is None and ep is not None:
            r.new = NewOutcome(
                termination_reason=ep.termination_reason,
                success=ep.success,
                error=ep.error,
                error_fault=ep.error_fault,
                length=ep.length,
                recorded=utc_now(),
            )
