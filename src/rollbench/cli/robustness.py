"""``rollbench robustness``: a robustness study with a matched control arm (docs/robustness.md).

Two forms:

* ``rollbench robustness --env PERTURBED --policy P [eval options]``: runs one ordinary evaluation (the same path as
  ``rollbench eval``: ``--workers``, ``--executor ray``, ``--resume`` work) of the perturbed tasks named by
  ``--env`` *and* their unperturbed control tasks, each trial ``k`` on seed ``seed + k`` and initial state ``k`` in
  both arms, then prints the table recomputed from the recorded files;
* ``rollbench robustness RUN_DIR``: recomputes the table of a recorded run from its files.

An instruction override (``--instruction``, ``--instructions``, ``--instruction-perturb``) is refused: it would put
one prompt on both arms, i.e. run a perturbed scene under the base prompt or a language perturbation under another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from rollbench.cli.analysis_view import ExcludePolicyErrors, MinCoverage, coverage_rule
from rollbench.cli.common import fail, print_json, said
from rollbench.cli.run_flags import EVAL_OPTIONS, eval_options, execution
from rollbench.cli.spec_flags import given_flags
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.format import p_value, pct, points, points_interval, printable
from rollbench.grading.coverage import DEFAULT_MIN_COVERAGE, CoverageRule

_OVERRIDES = ("instruction", "instructions", "instruction_perturb")


_VERDICTS = {  # a robustness block compares A = control with B = perturbed
    "b_better": "perturbed better",
    "a_better": "control better",
    "no_significant_difference": "no significant difference",
    "insufficient_coverage": "insufficient coverage",
}


def print_study(out: Any, study: dict[str, Any]) -> None:
    """The robustness table: one row per category, then one per level of a graded category."""
    table = Table(title="robustness (each perturbed episode paired with its control: same trial, seed, initial state)")
    cols = ("category", "level", "pairs", "control", "perturbed", "Δ (pts)", "95% CI", "b / c", "p", "p (Holm)")
    for col in (*cols, "verdict"):
        table.add_column(col, justify="left" if col in ("category", "level") else "right")
    for cat, b in study["categories"].items():
        rows = [("", b)] + [(str(lv["level"]), lv) for lv in b["levels"]]
        for level, r in rows:
            low, high = r["difference_ci95"]
            table.add_row(
                cat if not level else "",
                level or "all",
                str(r["pairs"]),
                f"{r['control']['successes']}/{r['pairs']} {pct(r['control']['rate'])}",
                f"{r['perturbed']['successes']}/{r['pairs']} {pct(r['perturbed']['rate'])}",
                points(r["difference"]),
                points_interval(low, high),
                f"{r['control_only']} / {r['perturbed_only']}",
                p_value(r["p_value"]),
                p_value(r["p_holm"]),
                _VERDICTS.get(r.get("verdict", ""), "—"),
            )
    out.print(table)
    for cat, b in study["categories"].items():
        for line in [*b.get("error_notes", []), *([b["coverage_gate"]] if b.get("coverage_gate") else [])]:
            out.print(f"{said(cat)}: {said(line)}", highlight=False, soft_wrap=True)
        if b.get("unit") == "scene":
            out.print(
                f"{cat}: its pairs repeat a scene (control task x initial state), so the unit is the scene "
                f"({b['scenes']} scenes): p is a {b['test']} test and the 95% CI resamples scenes",
                highlight=False,
                soft_wrap=True,
            )
    out.print(
        "b / c: pairs only the control / only the perturbed episode solved; p: exact McNemar, two-sided (unit: the "
        "pair, unless said above); Holm over "
        f"categories (levels within their category). Unpaired perturbed episodes: {study['unpaired']}; pairs dropped "
        f"for an environment or infrastructure error (not pairs; policy errors are failures): {study['dropped_errors']}. "
        "Errors: docs/analysis.md, 'Errors and coverage'."
    )


def _from_disk(run_dir: Path, as_json: bool, figure: Path | None, rule: CoverageRule) -> None:
    from rollbench.analysis.robustness import robustness_study
    from rollbench.analysis.sources import load_runs
    from rollbench.cli.analysis import _out

    try:
        loaded = load_runs([run_dir], allow_damaged=None)  # robustness takes no --allow-damaged
    except ConfigError as exc:
        fail(str(exc))
    if len(loaded.runs) != 1:
        fail(f"{run_dir}: expected one run directory, found {len(loaded.runs)}")
    try:
        study = robustness_study(loaded.runs[0], rule)
    except ConfigError as exc:
        fail(f"{run_dir}/{exc}")
    if study is None:
        fail(f"{run_dir}: no episode of this run is a perturbed instance (no plan.episodes[].perturbation)")
    if not study["categories"]:
        fail(
            f"{run_dir}: none of its {study['episodes']['perturbed']} perturbed episodes has its control episode in the "
            "run (no pair); `rollbench robustness --env PERTURBED` runs the controls with them",
            code=1,
        )
    if figure is not None:
        from rollbench.analysis.figures import robustness_figure, to_png
        from rollbench.record.files import write_outputs

        try:  # checked again at the write: a link, FIFO or hard link put there since is refused, never written through
            write_outputs([(figure, to_png(robustness_figure(study)), "--figure")])
        except ConfigError as exc:
            fail(str(exc))
        except OSError as exc:
            fail(f"cannot write --figure {figure}: {exc.strerror or exc}")
    out = _out()
    if as_json:
        print_json(out, json.dumps(study))
    else:
        print_study(out, study)


def _check_figure(figure: Path, inputs: dict[str, list[Any]]) -> None:
    """Exit 2 (one line) when ``--figure`` cannot be written as a file, lies inside a run directory (a PNG over
    a run's meta/info.json: issue 42, item 8) or is one of the command's own input files (``inputs``), before
    anything runs."""
    from rollbench.core.paths import check_output_path
    from rollbench.record.safe_files import refuse_inside_run, refuse_own_input

    try:
        check_output_path(figure, "--figure", directory=False)
        refuse_inside_run(figure, "--figure")
        refuse_own_input(figure, "--figure", inputs)
    except ConfigError as exc:
        fail(str(exc))


@eval_options()
def robustness_cmd(
    ctx: typer.Context,
    run_dir: Annotated[Path | None, typer.Argument(help="A recorded study: recompute its table from disk.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Run directory of a new study.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the study as JSON.")] = False,
    figure: Annotated[
        Path | None, typer.Option(help="Write the success-against-level figure (PNG) of graded categories here.")
    ] = None,
    min_coverage: MinCoverage = DEFAULT_MIN_COVERAGE,
    exclude_policy_errors: ExcludePolicyErrors = False,
    **options: Any,
) -> None:
    """Evaluate a policy on perturbed tasks and on their unperturbed controls (same seeds and initial states), and
    report per perturbation category: control and perturbed rates, paired difference with 95% interval, exact
    McNemar test, Holm over categories; per level for graded perturbations."""
    try:
        rule = coverage_rule(min_coverage, exclude_policy_errors)
    except ConfigError as exc:
        fail(str(exc))
    if figure is not None:
        files = {f"--{k.replace('_', '-')}": [v] for k, v in options.items() if isinstance(v, str | Path)}
        _check_figure(figure, {**files, "RUN_DIR": [run_dir]})
    if run_dir is not None:
        if given_flags(ctx, EVAL_OPTIONS) or out_dir is not None:
            fail("give a recorded RUN_DIR or a new study's --env/--policy (and options), not both")
        _from_disk(run_dir, as_json, figure, rule)
        return
    from rollbench.analysis.robustness import study_env
    from rollbench.cli.eval_run import new_spec, run_with_display

    bad = [f"--{k.replace('_', '-')}" for k in _OVERRIDES if options.get(k)]
    if bad:
        fail(f"{', '.join(bad)}: a robustness study gives every episode its own task's instruction; drop it")
    try:
        if not options.get("env"):
            raise ConfigError("--env (perturbed tasks or suites) and --policy are required, or give a RUN_DIR")
        options = {**options, "env": study_env(options["env"])[0]}
        spec = new_spec(ctx, options, None, options["wire_capture"])
        run = execution(options)
    except ConfigError as exc:
        fail(str(exc))
    except RollbenchError as exc:
        fail(str(exc), code=1)
    result, recorded = run_with_display(spec, out_dir, run, as_json, options["host_label"], options["robot"])
    if recorded is None:
        fail("the study recorded no run directory", code=1)
    _from_disk(recorded, as_json, figure, rule)
    if result.status != "OK":
        typer.echo(f"run status {result.status}: " + "; ".join(map(printable, result.reasons[:5])), err=True)
        raise typer.Exit(1)
