"""``rollbench runs [ROOT]``: the runs under a directory, one row each (task(s), policy, status, episodes, success
rate, date), newest first.

Numbers are those ``grade`` stored in each ``run.json`` when the run last finished (a running run shows its live
progress from ``run.live.json``); ``--grade`` recomputes each from its files instead (no video decoding). Reads
only: nothing is written, no lock is taken, and nothing is read through a link leading out of a run directory.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from rollbench.cli.common import print_json, said
from rollbench.core.contracts import ConfigError
from rollbench.core.format import MISSING, not_utf8, pct, printable
from rollbench.record.safe_files import MAX_LIVE_BYTES, read_regular_json

# a run whose run.json says RUNNING while no process holds its lock: killed, or ended by code it ran (a policy calling
# os._exit ends rollbench with the policy's exit code, nothing can run after it in that process: docs/status.md)
STALE = "stale: no process is writing it, the process ended without closing the run"


def stale_note(run_dir: Path) -> str | None:
    """One line for a run that stopped before its end and can be resumed: run.json says RUNNING but no process holds
    its lock (see :data:`STALE`: killed), or INTERRUPTED (Ctrl-C or SIGTERM), with the bare command that resumes it.
    The run may be a handed-over one, so the command never types again what its run.json names to import, run,
    connect to or wait on (that would confirm it for the user: hostile round 16, F1); the line names those instead,
    and says that resume asks for them. None for a run being written or finished, or no readable run.json. Reads
    only; takes no lock."""
    from rollbench.cli.resume import invoked_as
    from rollbench.core.spec import what_it_loads, what_it_waits
    from rollbench.record.runlog import is_locked, read_run_log

    try:
        log = read_run_log(run_dir)
    except ConfigError:
        return None
    if log is None or log.status not in ("RUNNING", "INTERRUPTED") or is_locked(run_dir):
        return None
    why = STALE if log.status == "RUNNING" else "Ctrl-C or SIGTERM stopped it; its committed episodes are kept"
    line = (
        f"note: {run_dir}: run.json says {log.status} ({why}); resume it with: {invoked_as()} eval --resume {run_dir}"
    )
    if names := [f"{field} {value!r}" for field, value in [*what_it_loads(log.spec), *what_it_waits(log.spec)]]:
        line += (
            f" (its run.json names {', '.join(dict.fromkeys(names))}: resume uses them only when you type them again "
            "or add --trust-run; do so only for a run you recorded yourself)"
        )
    return line


def run_row(run_dir: Path, regrade: bool = False) -> dict[str, Any]:
    """One run's row: ``run``, ``run_dir``, ``tasks``, ``policy``, ``status``, ``episodes_recorded``,
    ``episodes_requested``, ``success_rate`` (pooled over tasks, 0..1), ``created`` (UTC, ISO 8601), ``source``
    (where the numbers come from), with ``regrade`` and a damaged run ``damaged`` and grade's ``violations``, or ``run``, ``run_dir`` and ``error`` when it cannot be read."""
    from rollbench.grading.grade import grade
    from rollbench.grading.stopped import listed_status
    from rollbench.record.files import is_inside
    from rollbench.record.runlog import is_locked, read_run_log
    from rollbench.record.runlog_shape import plan_problems

    base: dict[str, Any] = {"run": run_dir.name, "run_dir": str(run_dir)}
    try:
        log = read_run_log(run_dir)
        if log is None:
            raise ConfigError("no run.json")
        results = grade(run_dir, check_videos=False) if regrade else log.results  # a GradeDocument, or None
    except ConfigError as exc:
        return {**base, "error": str(exc)}
    row = {
        **base,
        "tasks": [t.name for t in log.plan.tasks],
        "policy": log.spec.policy,
        "status": listed_status(log),  # a sequential arm stopped by its rule is OK (grading.stopped)
        "episodes_recorded": None,
        "episodes_requested": len(log.plan.episodes),
        "success_rate": None,
        "scored": None,
        "scored_success_rate": None,
        "created": log.provenance.created,
        "source": "graded now" if regrade else "run.json (graded when the run last finished)",
    }
    if problems := plan_problems(log):  # damaged whatever its stored results say (hostile round 5, F6)
        row["damaged"], row["violations"] = True, problems
    if results is not None:
        row["episodes_recorded"] = results.episodes_recorded
        overall = results.overall
        row["success_rate"] = overall.pooled_success_rate
        # what the coverage rule scores (docs/analysis.md#errors-and-coverage): env/infra errors left out; None in
        # a document graded before the rule
        row["scored"], row["scored_success_rate"] = overall.scored, overall.scored_success_rate
        if regrade:
            row["status"] = results.status
            if results.violations:  # damaged: what every analysis refuses without --allow-damaged
                row["damaged"], row["violations"] = True, list(dict.fromkeys([*problems, *results.violations]))
    live = run_dir / "run.live.json"
    if log.status == "RUNNING" and not regrade:
        if is_locked(run_dir):
            with contextlib.suppress(OSError, ValueError):
                if is_inside(run_dir, live):
                    row["episodes_recorded"] = read_regular_json(live, run_dir, max_bytes=MAX_LIVE_BYTES).get(
                        "episodes_done"
                    )
            row["source"] = "run.live.json (running)"
        else:
            row["status"] = f"RUNNING ({STALE}; resume it with eval --resume RUN_DIR)"
            _committed_on_disk(run_dir, row)
    return row


def _committed_on_disk(run_dir: Path, row: dict[str, Any]) -> None:
    """A run whose process died: its run.json results (if any) are from an earlier invocation, so the count shown
    is the committed episodes of ``meta/info.json`` (rewritten after every commit) and no success rate is shown
    until it is graded again (``--grade``)."""
    from rollbench.grading.files import read_info

    violations: list[str] = []
    info = read_info(run_dir, violations)
    if not violations and isinstance(info.get("total_episodes"), int):
        row["episodes_recorded"] = info["total_episodes"]
        row["success_rate"] = None
        row["source"] = "meta/info.json (committed episodes; not graded since the process died: use --grade)"


def list_runs(root: Path, regrade: bool = False) -> list[dict[str, Any]]:
    """Rows (see :func:`run_row`) for the run directories found at or below ``root`` the way the dashboard finds
    them (:func:`rollbench.record.runlog.find_run_dirs`: up to three levels down, e.g. the instruction optimiser's
    ``NAME/rounds/NAME-r000``), each named by its path relative to ``root``; newest first. ConfigError when
    ``root`` is not a directory."""
    from rollbench.record.runlog import find_run_dirs

    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory (give the directory your runs are in, e.g. runs/)")
    rows = []
    for d in find_run_dirs([root]):
        if (shown := not_utf8(d)) is not None:  # named escaped, not read: rollbench records names as UTF-8
            name = not_utf8(d.relative_to(root)) or d.name
            rows.append({"run": name, "run_dir": shown, "error": f"{shown}: its name is not valid UTF-8; rename it"})
            continue
        row = run_row(d, regrade)
        if d != root:
            row["run"] = d.relative_to(root).as_posix()
        rows.append(row)
    rows.sort(key=lambda r: r.get("created") or "", reverse=True)
    return rows


def runs_cmd(
    root: Annotated[Path, typer.Argument(help="Directory holding run directories (or one run directory).")] = Path(
        "runs"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    regrade: Annotated[
        bool, typer.Option("--grade", help="Recompute each run's numbers from its files (slower).")
    ] = False,
) -> None:
    """List runs: task(s), policy, status, episodes, success rate and date, newest first."""
    from rich.table import Table

    from rollbench.cli.common import fail, out
    from rollbench.cli.tables import print_table

    try:
        rows = list_runs(root, regrade)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        print_json(out, json.dumps(rows))
        return
    if not rows:
        out.print(f"no runs under {root}", highlight=False)
        return
    table = Table(title=f"runs under {root} (numbers as graded in each run.json; --grade recomputes them)")
    for col in ("run", "task(s)", "policy", "status", "episodes", "success rate", "created (UTC)"):
        table.add_column(
            col,
            justify="right" if col in ("episodes", "success rate") else "left",
            overflow="fold"
            if col in ("run", "status", "task(s)", "policy", "created (UTC)")
            else "ellipsis",  # never cut
        )
    unreadable = [r for r in rows if "error" in r]
    for r in rows:
        if "error" in r:
            table.add_row(said(r["run"]), "", "", "unreadable (below)", "", "", "")
            continue
        tasks = (
            MISSING
            if not r["tasks"]
            else r["tasks"][0]
            if len(r["tasks"]) == 1
            else f"{r['tasks'][0]} +{len(r['tasks']) - 1} more"
        )
        rec = MISSING if r["episodes_recorded"] is None else str(r["episodes_recorded"])
        rate = pct(r["success_rate"])
        table.add_row(
            said(r["run"]), said(tasks), said(r["policy"]), said(r["status"]) + (" (damaged)" if r.get("damaged") else ""),
            f"{rec}/{r['episodes_requested']}", rate,
            said(r["created"] or ""),
        )  # fmt: skip
    # run names, policies and times may fold (a time at its T: date over time), so one table fits 100 columns unless
    # task names are long; then it splits, task names whole (issue 42, item 20)
    print_table(out, table, breakable=("run", "policy", "created (UTC)"))
    for r in unreadable:
        out.print(
            f"unreadable: {printable(r['run'])}: {printable(r['error'])}", highlight=False, soft_wrap=True, markup=False
        )
    for r in rows:  # the rate above counts every recorded episode; say what the coverage rule scores where it differs
        if r.get("scored") is not None and r.get("episodes_recorded") not in (None, r["scored"]):
            out.print(
                f"{printable(r['run'])}: success rate above counts errors as failures; scored (coverage rule): {r['scored']} of "
                f"{r['episodes_recorded']} episodes, success rate {pct(r['scored_success_rate'])}",
                highlight=False, soft_wrap=True, markup=False,
            )  # fmt: skip
    for r in (r for r in rows if r.get("damaged")):
        n = len(r["violations"])
        out.print(
            f"damaged: {printable(r['run'])}: {n} violation(s), first: {printable(r['violations'][0])} (`rollbench grade` "
            "lists them)",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
