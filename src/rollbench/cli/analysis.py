"""``rollbench summarize``, ``rollbench compare`` (and ``compare --power``) and ``rollbench report``.

Bad input (unknown ``--by`` key, duplicate run identities, labels outside the rubric, instructions that differ from
the canonical one, unpaired runs without ``--unpaired``) is one line on stderr and exit code 2; nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from rollbench.cli.analysis_view import (
    ExcludePolicyErrors,
    MinCoverage,
    coverage_rule,
    print_comparison,
    print_summary,
)
from rollbench.cli.common import exit_on_errors, make_console, output_console, print_doc, print_json, said, stage
from rollbench.core.contracts import ConfigError
from rollbench.core.paths import check_output_path

console = make_console(stderr=True)


def _out() -> Console:
    return output_console(piped_width=200)


ALLOW_DAMAGED_HELP = (
    "Include runs that rollbench grade finds damaged (violations), marked damaged in every output; without it such "
    "a run is refused (exit 2)."
)
MERGE_SERVED_HELP = (
    "Label a served policy by the name its server reported (NAME), not NAME via URL: pools it across URLs and with "
    "in-process runs of that name."
)


def _fail(msg: str, code: int = 2) -> NoReturn:
    from rollbench.cli.common import fail

    fail(msg, code)


def _distinct_paths(runs: list[Path]) -> None:
    """ConfigError when two arguments name the same directory (``compare A A``, or ``A`` and ``./A``)."""
    seen: dict[str, Path] = {}
    for p in runs:
        real = os.path.realpath(p)
        if real in seen:
            same = (
                f"{p} is given twice" if str(seen[real]) == str(p) else f"{seen[real]} and {p} are the same directory"
            )
            raise ConfigError(f"{same}; compare needs two different runs (a run against itself has nothing to test)")
        seen[real] = p


def print_warnings(warnings: list[str]) -> None:
    """Each warning as one ``warning:`` line on stderr (so --json / --csv output stays machine-readable); a warning
    quotes recorded names and notes, so it is printed as text from outside (:func:`~rollbench.cli.common.said`)."""
    for w in warnings:
        console.print(f"[bold yellow]warning:[/] {said(w)}", highlight=False, soft_wrap=True, markup=True)


def summarize_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Run directories, folders holding them, or dashboard exports (JSON).")
    ],
    labels: Annotated[Path | None, typer.Option(help="Label sidecar (written by rollbench dashboard).")] = None,
    rubric: Annotated[
        str | None, typer.Option(help="Rubric name or file (default: the built-in one the labels record).")
    ] = None,
    by: Annotated[str, typer.Option(help="Cell keys: task, model, policy, host, robot, run, variant, instruction.")] = (
        "task,model"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV row per cell.")] = False,
    merge_served: Annotated[bool, typer.Option(help=MERGE_SERVED_HELP)] = False,
    allow_damaged: Annotated[bool, typer.Option(help=ALLOW_DAMAGED_HELP)] = False,
    exclude_policy_errors: ExcludePolicyErrors = False,
) -> None:
    """Pool episodes across runs and hosts into task x model x instruction cells: counts (attempted, scored, errored
    by fault), success rate over the scored episodes with its Wilson interval, label counts and the rubric's rates.
    Environment and infrastructure errors are not scored; policy errors count as failures (docs/analysis.md, "Errors
    and coverage"). Episodes repeating a (task, seed, initial state, instruction) already in a cell are counted and
    named in a warning on stderr."""
    from rollbench.analysis.sources import load_runs
    from rollbench.analysis.summarize import cells_csv, load_label_set, parse_by, summarize_runs

    if as_json and as_csv:
        _fail("give --json or --csv, not both")
    try:
        keys = parse_by(by)
        loaded = load_runs(list(paths), merge_served=merge_served, allow_damaged=allow_damaged)
        label_set = load_label_set(loaded, str(labels) if labels else None, rubric)
        doc = summarize_runs(loaded, keys, label_set, rule=coverage_rule(exclude_policy_errors=exclude_policy_errors))
    except ConfigError as exc:
        _fail(str(exc))
        return
    print_warnings(doc["warnings"])
    out = _out()
    if as_json:
        print_json(out, json.dumps(doc))
    elif as_csv:
        typer.echo(cells_csv(doc), nl=False)
    else:
        print_summary(out, doc)


RUN_ONLY_FLAGS = {
    "--sequential": "sequential",
    "--unpaired": "unpaired",
    "--seed": "seed",
    "--resamples": "resamples",
    "--min-coverage": "min_coverage",
    "--exclude-policy-errors": "exclude_policy_errors",
    "--allow-damaged": "allow_damaged",
}
"""compare's options that apply to a comparison of runs only (option -> parameter): refused with --power."""
SEQUENTIAL_REFUSES = ("--unpaired", "--seed", "--resamples", "--allow-damaged")
"""compare's options for a fixed-N comparison that a sequential test has no use for: refused with --sequential."""


def _typed(ctx: typer.Context, param: str) -> bool:
    """Whether the user gave ``param`` on the command line (a default is not given)."""
    return getattr(ctx.get_parameter_source(param), "name", "") == "COMMANDLINE"


def compare_cmd(
    ctx: typer.Context,
    runs: Annotated[list[Path] | None, typer.Argument(help="Two or more run directories.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    unpaired: Annotated[bool, typer.Option(help="Allow runs that are not paired: unpaired statistics.")] = False,
    seed: Annotated[int, typer.Option(min=0, help="Bootstrap seed (the intervals are reproducible).")] = 0,
    resamples: Annotated[
        int, typer.Option(min=100, help="Bootstrap resamples (at most 1,000,000, and 2^27 / episodes).")
    ] = 10_000,
    power: Annotated[bool, typer.Option("--power", help="Plan: paired episodes per task needed (no runs).")] = False,
    p_a: Annotated[float | None, typer.Option("--p-a", help="--power: expected success rate of A.")] = None,
    p_b: Annotated[float | None, typer.Option("--p-b", help="--power: expected success rate of B.")] = None,
    alpha: Annotated[float | None, typer.Option(help="--power: significance level (default 0.05).")] = None,
    power_target: Annotated[float | None, typer.Option(help="--power: wanted power (default 0.8).")] = None,
    discordant: Annotated[
        float | None,
        typer.Option(help="--power: P(exactly one policy succeeds), e.g. from a pilot; default: independent."),
    ] = None,
    allow_damaged: Annotated[bool, typer.Option(help=ALLOW_DAMAGED_HELP)] = False,
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Recompute a `rollbench sequential` comparison (its arms, or the directory holding them) from disk.",
        ),
    ] = False,
    min_coverage: MinCoverage = 0.95,
    exclude_policy_errors: ExcludePolicyErrors = False,
) -> None:
    """Compare runs on paired episodes (same task, seed, initial state): rates, difference with a paired bootstrap
    interval, exact McNemar test, Holm across tasks, each arm's attempted / scored / errored episodes by fault and a
    verdict (withheld as 'insufficient coverage' below --min-coverage); or, with --power, the episodes per task a
    comparison needs. Errors: docs/analysis.md, "Errors and coverage"."""
    out = _out()
    if power:
        given = [f for f, p in RUN_ONLY_FLAGS.items() if _typed(ctx, p)]
        if given:  # never silently ignored (hostile round 12, F3), as --alpha without --power is not
            _fail(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a comparison of runs; --power plans "
                  f"one from --p-a and --p-b: drop {'it' if len(given) == 1 else 'them'}, or drop --power")  # fmt: skip
        _power_plan(out, bool(runs), (p_a, p_b), 0.05 if alpha is None else alpha,
                    0.8 if power_target is None else power_target, discordant, as_json)  # fmt: skip
        return
    planning = {
        "--p-a": p_a,
        "--p-b": p_b,
        "--alpha": alpha,
        "--power-target": power_target,
        "--discordant": discordant,
    }
    if given := [name for name, value in planning.items() if value is not None]:  # never silently ignored (round 10)
        _fail(f"{', '.join(given)} plan a comparison with --power; a comparison of runs tests at 0.05 (Holm across "
              "tasks): drop them, or add --power")  # fmt: skip
    if sequential:
        from rollbench.cli.sequential import recompute_sequential

        fixed_n = [f for f in SEQUENTIAL_REFUSES if _typed(ctx, RUN_ONLY_FLAGS[f])]
        with exit_on_errors():
            recompute_sequential(out, runs or [], as_json, fixed_n, coverage_rule(min_coverage, exclude_policy_errors))
        return
    from rollbench.analysis.compare import compare_runs
    from rollbench.analysis.sources import load_runs
    from rollbench.grading.stats import check_resamples

    with exit_on_errors():
        check_resamples(resamples, 0)
        rule = coverage_rule(min_coverage, exclude_policy_errors)
        if not runs or len(runs) < 2:
            raise ConfigError("compare needs two or more run directories (or --power --p-a P --p-b P)")
        loaded = load_runs(list(runs), allow_exports=False, allow_damaged=allow_damaged)
        if loaded.copies:
            c = loaded.copies[0]
            raise ConfigError(f"{c['path']} is a copy of {c['same_as']} (the same run log); compare different runs")
        if loaded.in_progress:
            raise ConfigError(
                f"{loaded.in_progress[0]['path']} is {loaded.in_progress[0]['why']}; compare finished runs"
            )
        if loaded.unreadable:  # each argument is one arm: an unreadable one is named, not dropped
            raise ConfigError(loaded.unreadable[0]["why"])
        if len(loaded.runs) != len(runs):
            _distinct_paths(list(runs))  # the same directory twice says so; else a path held several runs
            raise ConfigError(f"give one run directory per argument ({len(runs)} paths hold {len(loaded.runs)} runs)")
        doc = compare_runs(loaded.runs, paired=not unpaired, seed=seed, n_resamples=resamples, rule=rule)
    print_warnings(loaded.notes())
    print_doc(out, doc, as_json, print_comparison)


def _power_plan(
    out: Console,
    runs_given: bool,
    rates: tuple[float | None, float | None],
    alpha: float,
    power_target: float,
    discordant: float | None,
    as_json: bool,
) -> None:
    """``compare --power``: the paired episodes per task a comparison of success rates ``rates`` (A, B) needs."""
    from rollbench.grading.power import paired_sample_size

    p_a, p_b = rates
    if runs_given:
        _fail("--power plans a comparison; give --p-a and --p-b, not runs")
    if p_a is None or p_b is None:
        _fail("--power needs --p-a and --p-b (the success rates you expect), e.g. --p-a 0.6 --p-b 0.7")
        return
    try:
        r = paired_sample_size(p_a, p_b, alpha=alpha, power=power_target, discordant=discordant)
    except ValueError as exc:
        _fail(str(exc))
        return
    if as_json:
        print_json(out, json.dumps(r.to_dict()))
        return
    out.print(
        f"{r.n_exact} paired episodes per task (exact McNemar test, two-sided alpha {alpha}, power "
        f"{power_target}) to detect {p_a:.0%} vs {p_b:.0%}; Connor (1987)'s approximation gives {r.n} "
        f"(exact power {r.exact_power:.3f}). Assumed P(only A succeeds) = {r.p_a_only:.3f}, P(only B) = "
        f"{r.p_b_only:.3f}"
        + (" (independent policies; give --discordant from a pilot run)" if discordant is None else ""),
        highlight=False,
    )


def _reproductions(loaded: Any, reference: str | None) -> list[dict[str, Any]]:
    """``rollbench reproduce`` of each run directory among the report's inputs that has a suite of the reference
    (one document per run, so runs of one suite by different policies each get their verdict); [] without
    ``--reference``. Raises ConfigError when no run directory has such a suite (exports carry no protocol)."""
    if reference is None:
        return []
    from rollbench.reproduce import load_reference, reproduce
    from rollbench.reproduce.document import NoSuiteInCommon

    ref = load_reference(reference)
    docs = []
    for run in loaded.runs:
        if run.run_dir is None:
            continue
        try:
            docs.append(reproduce([run.run_dir], ref))
        except NoSuiteInCommon:
            continue
    if not docs:
        raise ConfigError(f"--reference {reference}: no run directory among the inputs has a suite of it")
    return docs


def report_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Run directories, folders holding them, or dashboard exports (JSON).")
    ],
    out_path: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    plots: Annotated[
        Path | None, typer.Option(help="Also write every figure as PNG and SVG into this directory.")
    ] = None,
    dashboard_url: Annotated[
        str | None, typer.Option(help="Link episodes to this dashboard's review pages and videos.")
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            help="Label sidecar (checked as in summarize). Default: the labels.json the dashboard writes for the "
            "same paths (runs/labels.json for `report runs/`), when it exists."
        ),
    ] = None,
    rubric: Annotated[
        str | None, typer.Option(help="Rubric name or file (default: the built-in one the labels record).")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Bootstrap seed.")] = 0,
    merge_served: Annotated[bool, typer.Option(help=MERGE_SERVED_HELP)] = False,
    allow_damaged: Annotated[bool, typer.Option(help=ALLOW_DAMAGED_HELP)] = False,
    reference: Annotated[
        str | None, typer.Option(help="Add a reproduction section against this reference (rollbench reproduce).")
    ] = None,
    min_coverage: MinCoverage = 0.95,
    exclude_policy_errors: ExcludePolicyErrors = False,
) -> None:
    """Write one self-contained offline HTML report: success rates with intervals, comparisons (paired where a
    pair's episodes pair, else unpaired and said so), length and latency distributions (and the same figures as
    PNG/SVG with --plots), and with --reference the reproduction verdicts. Its warnings are also printed on stderr."""

    from rollbench.analysis.checkpoints_section import checkpoint_sections, checkpoint_warnings
    from rollbench.analysis.html_report import render_report, report_comparison, report_summary, report_warnings
    from rollbench.analysis.sources import load_runs
    from rollbench.analysis.summarize import load_label_set
    from rollbench.record.files import write_outputs
    from rollbench.record.safe_files import refuse_own_input

    if dashboard_url is not None and not dashboard_url.startswith(("http://", "https://")):
        _fail(f"--dashboard-url {dashboard_url!r} is not an http(s) URL")
    try:
        check_output_path(out_path, "--out", directory=False)
        if plots is not None:
            check_output_path(plots, "--plots", directory=True)
        check_outputs(out_path, plots)
        refuse_own_input(out_path, "--out", {"PATHS": paths, "--labels": [labels], "--rubric": [rubric]})
        rule = coverage_rule(min_coverage, exclude_policy_errors)
        status = stage("reading and grading the runs")  # progress on a terminal only (issue 42, item 20)
        with status:
            loaded = load_runs(list(paths), merge_served=merge_served, allow_damaged=allow_damaged)
            if not loaded.runs:
                raise ConfigError("no finished run among the inputs")
            labels = labels if labels is not None else _dashboards_labels(paths)
            label_set = load_label_set(loaded, str(labels) if labels else None, rubric)
            status.update(f"comparing and pooling {len(loaded.runs)} run(s)")
            comparison = report_comparison(loaded, seed=seed, rule=rule)
            summary = report_summary(loaded, label_set, rule)  # checkpoint runs: Checkpoints section only
            reproductions = _reproductions(loaded, reference)
            status.update("drawing the figures and writing the page")
            figure_files: dict[str, bytes] | None = {} if plots is not None else None  # name -> bytes
            checkpoints = checkpoint_sections(loaded, figure_files, rule)  # checkpoints folders, recomputed (issue 43)
            text = render_report(
                loaded,
                labels=label_set,
                comparison=comparison,
                dashboard_url=dashboard_url,
                plots=figure_files,
                summary=summary,
                reproductions=reproductions,
                checkpoints=checkpoints,
            )
        warnings = report_warnings(comparison, summary) + checkpoint_warnings(checkpoints)
        outputs = [(out_path, text.encode("utf-8"), "--out")]
        if plots is not None and figure_files is not None:
            outputs += [(plots / name, data, "--plots") for name, data in figure_files.items()]
        write_outputs(outputs)  # every target checked (a link, FIFO, hard link: refused), then each renamed over
    except ConfigError as exc:
        _fail(str(exc))
        return
    except OSError as exc:
        _fail(f"cannot write the report: {exc}")
    print_warnings(warnings)
    _out().print(f"report written to {out_path}" + (f"; figures in {plots}" if plots else ""), highlight=False)


def check_outputs(out_path: Path, plots: Path | None) -> None:
    """ConfigError for an output that is a directory, or that is or lies inside a run directory (never written:
    a report there would replace or join the run's own files)."""
    from rollbench.record.safe_files import refuse_inside_run

    if out_path.is_dir():
        raise ConfigError(
            f"--out {out_path} is a directory; give the HTML file to write, e.g. {out_path / 'report.html'}"
        )
    refuse_inside_run(out_path, "--out")
    if plots is not None:
        refuse_inside_run(plots, "--plots")


def _dashboards_labels(paths: list[Path]) -> Path | None:
    """The labels.json ``rollbench dashboard --root PATHS`` writes by default (:func:`default_labels`), when it is a
    regular file: a report of the folder the dashboard labelled shows those labels without ``--labels``."""
    from rollbench.cli.dashboard import default_labels

    folders = [p for p in paths if p.is_dir()]
    if not folders:  # exports only: never the user-wide labels.json default_labels falls back to
        return None
    found = default_labels(folders)
    return found if found.is_file() and not found.is_symlink() else None
