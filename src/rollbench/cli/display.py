"""Formatting only: progress bars, result tables and listings. Every number shown comes from grade's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from rollbench.cli.tables import print_table
from rollbench.core.format import interval, number, p_value, pct, points
from rollbench.core.grade_model import Delay, GradeDocument, PooledBlock, Timing
from rollbench.run.observer import EpisodeSummary, Running, RunObserver, RunStart


class ProgressDisplay(RunObserver):
    """One progress bar per task, a :class:`~rollbench.run.observer.RunObserver` of the run: the bars start with the
    run (after its warnings and, on a resume, what is already recorded), advance with each finished episode and, in
    between, by the running episodes' fractions of their horizon (``ep 17: step 120/220``)."""

    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.enabled = enabled
        self.run_dir: Path | None = None
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[ok]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self.bars: dict[str, Any] = {}
        self.done: dict[str, int] = {}
        self.running: dict[str, Running] = {}  # worker -> its episodes in progress
        self._started = False

    def __enter__(self) -> ProgressDisplay:
        return self  # the bars start with the run's start: an error before it prints one line, no bars

    def __exit__(self, *exc: object) -> None:
        if self._started:
            self.progress.__exit__(None, None, None)

    def on_run_start(self, start: RunStart) -> None:
        say = self.progress.console.print
        for w in start.warnings:
            say(f"warning: {w}", highlight=False, soft_wrap=True)
        done, total = sum(start.done.values()), sum(start.totals.values())
        if done or start.retried:
            again = f" ({start.retried} of them errored before and run again, --retry-errors)" if start.retried else ""
            say(
                f"resuming {start.run_dir}: {done} of {total} episodes already recorded, {total - done} to run{again}",
                highlight=False,
                soft_wrap=True,
            )
        self.progress.__enter__()
        self._started = True
        self.run_dir = start.run_dir
        for task, total in start.totals.items():
            self.bars[task] = self.progress.add_task(task, total=total, completed=start.done[task], ok="")
            self.done[task] = start.done[task]

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        self.done[summary.task] = self.done.get(summary.task, 0) + 1
        for worker, eps in self.running.items():
            self.running[worker] = tuple(e for e in eps if e.episode_index != summary.episode_index)
        self._show(summary.task)

    def on_steps(self, worker: str, running: Running) -> None:
        tasks = {e.task for e in self.running.get(worker, ())}
        self.running[worker] = running
        for task in sorted(tasks | {e.task for e in running}):
            self._show(task)

    def _show(self, task: str) -> None:
        """A task's bar: finished episodes plus the running ones' fractions of their horizon, and their steps."""
        if task not in self.bars:
            return
        eps = [e for es in self.running.values() for e in es if e.task == task]
        part = sum(min(1.0, e.step / max(1, e.max_steps)) for e in eps)
        steps = ", ".join(f"ep {e.episode_index}: step {e.step}/{e.max_steps}" for e in eps)
        self.progress.update(self.bars[task], completed=self.done.get(task, 0) + part, ok=steps)


def _pooled_row(table: Table, label: str, block: PooledBlock) -> None:
    """A suite or overall row: the pooled count and rate, and the unweighted mean over its tasks."""
    table.add_row(
        label,
        str(block.episodes),
        str(block.successes),
        pct(block.pooled_success_rate),
        interval(block.pooled_ci95_low, block.pooled_ci95_high),
        "",
        "",
        "",
        f"mean over {block.tasks} tasks: {pct(block.mean_task_success_rate)}",
    )


def _timing_line(timing: Timing) -> str:
    """grade's ``timing`` in words: wall time of the finished invocations, the ones that left no record (killed),
    and the per-episode times summed (which overlap with workers or batches, and include episodes committed by an
    invocation that left no record)."""
    n, lost = timing.invocations, timing.invocations_unrecorded or 0
    text = f"eval wall time: {timing.eval_wall_time_s or 0.0:.1f} s"
    if n > 1 or lost:
        text += f" over {n} finished invocation{'s' if n != 1 else ''}"
    if lost:
        text += f" ({lost} more ended without a record, e.g. killed: its time is not counted)"
    return text + f"; episode times summed: {timing.episode_time_s:.1f} s"


def print_result(console: Console, result: GradeDocument, run_dir: Path | None) -> None:
    """The results table (per task, per suite, overall), latency, status and reasons."""
    print_table(console, _results_table(result))
    if result.variants:
        print_variants(console, result)
    _print_costs(console, result)
    _print_scored(console, result)
    _print_status(console, result, run_dir)


def _print_scored(console: Console, result: GradeDocument) -> None:
    """When errors were left out or counted as failures: what the success rate counts, and the rate over the
    scored episodes (the coverage rule, docs/analysis.md "Errors and coverage")."""
    o = result.overall
    if o.scored is None or not (o.excluded or o.policy_errors_as_failures):
        return
    faults = ", ".join(f"{n} {f}" for f, n in (o.excluded or {}).items())
    console.print(
        f"success rate above: every recorded episode, errors as failures; scored (coverage rule): {o.scored} of "
        f"{o.episodes} episodes ({pct(o.coverage)} coverage; left out: {faults or 'none'}; policy errors "
        f"counted as failures: {o.policy_errors_as_failures}), success rate {pct(o.scored_success_rate)} "
        f"(95% CI {interval(o.scored_ci95_low, o.scored_ci95_high)})",
        highlight=False,
        soft_wrap=True,
    )


def _results_table(result: GradeDocument) -> Table:
    """One row per task, then each suite and (with several tasks) the whole run, pooled."""
    table = Table(title="rollbench results (graded from the recorded files)")
    for col in (
        "task",
        "episodes",
        "successes",
        "success rate",
        "95% CI",
        "mean len",
        "median len",
        "mean return",
        "termination",
    ):
        table.add_column(
            col,
            justify="left" if col in ("task", "termination") else "right",
            overflow="fold" if col == "termination" else "ellipsis",
        )
    for name, t in result.tasks.items():
        reasons = ", ".join(f"{k} {v}" for k, v in t.termination_reasons.items())
        table.add_row(
            name,
            str(t.episodes),
            str(t.successes),
            pct(t.success_rate),
            interval(t.ci95_low, t.ci95_high),
            number(t.mean_length),
            number(t.median_length),
            number(t.mean_return, 2),
            reasons,
        )
    for name, suite in result.suites.items():
        _pooled_row(table, f"[bold]{name}[/] (suite, pooled)", suite)
    if len(result.tasks) > 1:
        _pooled_row(table, "[bold]overall (pooled)[/]", result.overall)
    return table


def _print_costs(console: Console, result: GradeDocument) -> None:
    """What the run cost: policy-call latency, wall time, and an agent's model calls, tokens and money."""
    lat = result.latency
    if lat.policy_calls:
        console.print(
            f"policy latency: p50 {1e3 * (lat.p50_s or 0.0):.2f} ms, p95 {1e3 * (lat.p95_s or 0.0):.2f} ms, "
            f"p99 {1e3 * (lat.p99_s or 0.0):.2f} ms over {lat.policy_calls} calls"
            + (f" ({lat.calls_per_episode:.1f} per episode)" if lat.calls_per_episode else "")
        )
    if result.delay:
        print_delay(console, result.delay)
    if result.timing.eval_wall_time_s is not None:
        console.print(_timing_line(result.timing), highlight=False, soft_wrap=True)
    agent = result.agent_usage
    blocks = [("overall", agent.overall)] if agent else []
    if agent and len(result.tasks) > 1:
        blocks += list(agent.by_task.items())
    for name, u in blocks:
        cost = f", cost ${u.cost_usd:.4f}" if u.cost_usd is not None else ", cost unknown"
        console.print(
            f"agent usage ({name}): {u.model_calls} model calls, {u.prompt_tokens} prompt + "
            f"{u.completion_tokens} completion = {u.total_tokens} tokens{cost}",
            highlight=False,
        )


def _print_status(console: Console, result: GradeDocument, run_dir: Path | None) -> None:
    """The status, what OK means, every reason it is not OK, and where the run is."""
    color = {"OK": "green", "PARTIAL": "yellow", "FAILED": "red"}[result.status]
    console.print(
        f"status: [bold {color}]{result.status}[/] — {result.episodes_recorded} of "
        f"{result.episodes_requested} requested episodes recorded",
        highlight=False,
    )
    if result.status == "OK":
        rate = result.overall.pooled_success_rate
        every = "every requested episode recorded"
        if result.episodes_recorded < result.episodes_requested:  # a sequential arm stopped by its rule
            every = "every episode its sequential rule needed recorded"
        console.print(
            f"  (OK: the run is complete and valid — {every}, none errored, no broken "
            f"invariant; it says nothing about the policy: its success rate is {pct(rate)})",
            highlight=False,
            soft_wrap=not console.is_terminal,  # a terminal: wrapped at words by rollbench; a pipe: one line
        )
    for r in result.reasons:  # error texts quote values such as [[nan, 0.0]]: never read them as markup
        console.print(f"  - {escape(r)}", highlight=False, soft_wrap=True)
    if run_dir is not None:
        console.print(f"run directory: {escape(str(run_dir))}", highlight=False, soft_wrap=True)


def print_variants(console: Console, result: GradeDocument) -> None:
    """The instruction sweep (robustness) table: per task and variant, the success rate, its change against the
    task's first variant on the same trials, the discordant pairs (grade's ``paired`` counts) and the two-sided
    exact McNemar p-value."""
    from rollbench.optimize.compare import mcnemar_p

    table = Table(title="instruction variants (paired on the same seeds; Δ and p against the first variant)")
    for col in ("task", "variant", "instruction", "episodes", "success rate", "95% CI", "Δ", "b / c", "p"):
        table.add_column(
            col,
            justify="left" if col in ("task", "variant", "instruction") else "right",
            overflow="fold" if col == "instruction" else "ellipsis",
        )
    for task, variants in (result.variants or {}).items():
        for i, (name, v) in enumerate(variants.items()):
            pc = v.paired  # grade's counts over the trials both recorded
            b, c = pc.variant_only, pc.reference_only
            delta = (b - c) / pc.pairs if pc.pairs else 0.0
            table.add_row(
                task if i == 0 else "",
                name,
                v.instruction,
                str(v.episodes),
                pct(v.success_rate),
                interval(v.ci95_low, v.ci95_high),
                "(reference)" if i == 0 else f"{points(delta)} pts",
                "" if i == 0 else f"{b} / {c}",
                "" if i == 0 else p_value(mcnemar_p(b, c, "two-sided")),
                end_section=i == len(variants) - 1,
            )
    print_table(console, table)
    console.print("b / c: trials only the variant / only the reference solved; p: exact McNemar, two-sided")


NAME_WIDTH = 22  # the name column of `rollbench policies`; a longer name gets a line of its own


def print_policies(console: Console, rows: list[dict[str, Any]]) -> None:
    """``rollbench policies``: each policy's name and description (plain text: no markup from docstrings), then the
    ``module:factory`` line. On a terminal each description wraps at words under its own column and a name longer
    than :data:`NAME_WIDTH` stands on its own line above it; on a pipe each entry stays one line (what scripts
    grep). Nothing is ever cut."""
    entries = [(r["name"], ("test fixture: " if r["kind"] == "fixture" else "") + r["description"]) for r in rows]
    entries.append(
        ("module:factory", "Your own policy: factory(name, options) in an importable module (docs/plugins.md).")
    )
    if not console.is_terminal:
        for name, said in entries:
            console.print(Text.assemble((f"{name:<{NAME_WIDTH}}", "bold"), " ", said), soft_wrap=True)
        return
    grid = _policy_grid()
    for name, said in entries:
        if len(name) > NAME_WIDTH:  # the name whole on its own line, its description under the column
            if grid.row_count:
                console.print(grid)
            console.print(Text(name, style="bold"), soft_wrap=True)
            grid, name = _policy_grid(), ""
        grid.add_row(Text(name), Text(said))
    console.print(grid)


def _policy_grid() -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=NAME_WIDTH, no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    return grid


def print_envs(console: Console, rows: list[dict[str, Any]], show_tasks: bool = True) -> None:
    """Each family as a heading (its description, whether it is installed, the cameras its tasks share, its suites:
    paragraphs wrapped at words to the console) and, with ``show_tasks``, a table of its tasks: the name whole on
    the first line of its cell with the instruction wrapped under it, horizon, success rule (and cameras when the
    tasks do not share them). Readable at 80 columns and more; ``--json`` is the machine form."""
    for n, r in enumerate(rows):
        if n:
            console.print()
        installed = "[green]installed[/]" if r["installed"] else f"[red]not installed[/]: {escape(str(r['missing']))}"
        console.print(f"[bold]{escape(r['family'])}[/] — {escape(r['description'])}", highlight=False, overflow="fold")
        shared = {tuple(t["cameras"]) for t in r["tasks"]}
        facts = [installed, f"{len(r['tasks'])} task{'' if len(r['tasks']) == 1 else 's'}"]
        if len(shared) == 1:
            facts.append(f"cameras: {escape(', '.join(next(iter(shared))))}")
        console.print(Padding("; ".join(facts), (0, 0, 0, 2), expand=False), highlight=False)
        suites = ", ".join(f"{r['family']}/{s} ({len(v)})" for s, v in r["suites"].items())
        if suites:
            console.print(Padding(f"suites: {escape(suites)}", (0, 0, 0, 2), expand=False), highlight=False)
        if show_tasks and r["tasks"]:
            print_table(console, _tasks_table(r["tasks"], cameras=len(shared) > 1))


def _tasks_table(tasks: list[dict[str, Any]], cameras: bool) -> Table:
    longest = max(len(t["name"]) for t in tasks)
    table = Table()
    table.add_column("task (instruction)", overflow="fold", min_width=longest)
    table.add_column("horizon", justify="right")
    table.add_column("success rule")
    if cameras:
        table.add_column("cameras", overflow="fold")
    for t in tasks:
        name = Text(t["name"], no_wrap=True)
        said = [Padding(Text(t["instruction"], style="dim"), (0, 0, 0, 2))] if t["instruction"] else []
        row: list[Any] = [Group(name, *said), str(t["max_steps"]), t["success_rule"]]
        table.add_row(*row, *([", ".join(t["cameras"])] if cameras else []))
    return table


def print_delay(console: Console, delay: Delay) -> None:
    """One line for a run with ``--latency`` (:mod:`rollbench.grading.delay`): the mode, the delay of every call, the
    mean delay of executed actions and the share of hold steps."""
    d = delay.call_delay_steps
    mean, share = delay.mean_delay_steps, delay.hold_share
    console.print(
        f"latency {delay.latency} (stale actions: {delay.stale})"
        + (f", {d} step{'s' if d != 1 else ''} per call" if d is not None else "")
        + (f"; executed actions {mean:.2f} steps old on average" if mean is not None else "")
        + (f"; hold action on {pct(share)} of {delay.steps} steps" if share is not None else ""),
        highlight=False,
        soft_wrap=True,
    )
