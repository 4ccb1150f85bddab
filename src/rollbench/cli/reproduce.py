"""``rollbench reproduce RUN_DIR… --reference NAME_OR_FILE``: per suite and overall, the run's successes/episodes with
their Wilson interval against a published rate, the difference, the test's p-value, the power to detect a gap and a
verdict (:mod:`rollbench.reproduce`). Bad input (unknown reference, damaged reference file, missing run directory, a
suite in two runs, no suite in common) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rollbench.cli.common import fail as _fail
from rollbench.cli.common import out, print_json
from rollbench.core.contracts import ConfigError

GAP_HELP = "The gap in points the run should be able to detect (80% power) before agreement counts as consistent."


def reproduce_cmd(
    run_dirs: Annotated[list[Path] | None, typer.Argument(help="Run directories (one or more suites each).")] = None,
    reference: Annotated[
        str | None, typer.Option(help="A shipped reference name (see --list) or a reference JSON file.")
    ] = None,
    gap: Annotated[float, typer.Option(help=GAP_HELP)] = 5.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the reproduction document as JSON.")] = False,
    list_refs: Annotated[bool, typer.Option("--list", help="List the shipped references and exit.")] = False,
) -> None:
    """Compare runs with published numbers: per suite, a verdict (consistent / below / above / underpowered) from an
    exact test, the power to detect a --gap point difference, and every protocol difference named. Exit codes: 0
    when the comparison was made, whatever the verdicts (they are in the output and in --json); 2 for bad input
    (one error line, nothing compared)."""
    from rollbench.reproduce import load_reference, render_text, reproduce, shipped_names

    if list_refs:
        for name in shipped_names():
            ref = load_reference(name)
            typer.echo(f"{name}: {ref.policy} — {ref.reported_by}")
        return
    if not run_dirs or reference is None:
        what = "--reference NAME_OR_FILE is missing" if run_dirs else "give one or more run directories"
        _fail(
            f"{what}: rollbench reproduce RUN_DIR... --reference NAME_OR_FILE (rollbench reproduce --list names them)"
        )
    try:
        doc = reproduce(list(run_dirs), load_reference(str(reference)), gap_pts=gap)
    except ConfigError as exc:
        _fail(str(exc))
    if as_json:
        print_json(out, json.dumps(doc))
    else:
        typer.echo(render_text(doc), nl=False)
