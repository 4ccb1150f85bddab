"""``rollbench checkpoints``: evaluate a training run's checkpoints on the same planned episodes and rank them
(docs/checkpoints.md).

Exit codes: 0 = ranked (whatever the verdict; checkpoints that could not be evaluated are skipped and named); 2 = bad
input (nothing ran), a checkpoint whose files changed since its episodes were made (nothing ran), or every checkpoint
skipped; 130 / 143 = interrupted (the same command resumes; checkpoints already evaluated are not run again); 1 = a
run could not go on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rollbench.cli.common import console, fail, print_json, said
from rollbench.cli.run_flags import EXECUTION_FLAGS, eval_options, execution
from rollbench.cli.tables import print_table
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.format import MISSING, interval, p_value, pct, points


def print_ranking(out: Console, doc: dict[str, Any]) -> None:
    """The ranking table (rank order), the verdict line and the coverage notes; with ``--eliminate`` the
    elimination's decision instead (:func:`print_elimination`)."""
    if doc.get("elimination"):
        print_elimination(out, doc)
        return
    table = Table(title=f"checkpoints ranked (paired to the best, Holm alpha {doc['alpha']:g})")
    for col in ("step", "success", "95% CI", "scored/attempted", "diff to best", "p (Holm)", "pairs"):
        table.add_column(col, justify="right")
    for r in doc["checkpoints"]:
        cov, paired = r["coverage"], r.get("paired")
        ci = interval(r["ci95"][0], r["ci95"][1])
        diff = MISSING if paired is None else f"{points(paired['difference'])} pts"
        p = MISSING if paired is None else p_value(paired["p_holm"]) + (" worse" if paired["worse"] else "")
        pairs = MISSING if paired is None else str(paired["pairs"])
        table.add_row(str(r["step"]), pct(r["success_rate"]), ci, f"{cov['scored']}/{cov['attempted']}", diff, p, pairs)
    print_table(out, table)
    _tail(out, doc)


def _tail(out: Console, doc: dict[str, Any]) -> None:
    for s in doc.get("skipped", []):
        out.print(f"not evaluated: step {s['step']}: {said(s['why'])}", highlight=False, soft_wrap=True)
    out.print(f"verdict: {said(doc['says'])}", highlight=False, soft_wrap=True)
    for note in doc.get("notes", []):
        out.print(f"note: {said(note)}", highlight=False, soft_wrap=True)
    if doc.get("figure"):
        out.print(f"figure: {said(doc['figure'])}", highlight=False, soft_wrap=True)


def decision_text(r: dict[str, Any]) -> str:
    """A row's decision under ``--eliminate``: ``chosen``, ``kept`` (running when the rule stopped) or the look
    whose anytime bound eliminated it."""
    at = r.get("eliminated_at")
    return str(r["decision"]) if at is None else f"eliminated at look {at['look']} ({at['trials']} episodes)"


def _dropped(look: dict[str, Any]) -> str:
    """The steps a look eliminated, each with its anytime lower bound on (highest rate minus it)."""
    bounds = {b["step"]: b["lower"] for b in look["bounds"]}
    return ", ".join(
        f"step {s} (lower bound on step {look['best']} minus it: {points(bounds[s])} pts > 0)"
        for s in look["eliminated"]
    )


def print_elimination(out: Console, doc: dict[str, Any]) -> None:
    """The elimination's decision (:mod:`rollbench.checkpoints.decision`): the table (descriptive rates, each
    step's decision), the verdict with its guarantee, each look, the episodes used against the fixed-N design."""
    e = doc["elimination"]
    d = e["design"]
    table = Table(title=f"checkpoints by early elimination (delta {d['delta']:g}, alpha {d['alpha']:g})")
    for col in ("step", "rate (descriptive, adaptive sample)", "95% CI (descriptive)", "scored/attempted"):
        table.add_column(col, justify="right")
    table.add_column("decision")
    for r in doc["checkpoints"]:
        cov = r["coverage"]
        ci = interval(r["ci95"][0], r["ci95"][1])
        table.add_row(
            str(r["step"]), pct(r["success_rate"]), ci, f"{cov['scored']}/{cov['attempted']}", decision_text(r)
        )
    print_table(out, table)
    for i, look in enumerate(e["looks"], 1):
        out.print(
            f"look {i} at {look['trials']} episodes: highest rate step {look['best']}, eliminated "
            f"{_dropped(look) or 'none'}",
            highlight=False,
            soft_wrap=True,
        )
    if e.get("stopped"):  # absent in an elimination recorded before its stopping reason was
        out.print(said(e["stopped"]), highlight=False, soft_wrap=True)
    out.print(
        f"episodes used {e['episodes_used']}; the fixed-N design with the same guarantee: {e['episodes_fixed_n']}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(f"rates: {doc['rates']}", highlight=False, soft_wrap=True)
    _tail(out, doc)


def check_out(out_dir: Path) -> None:
    """Before anything is written, ConfigError when ``--out`` is or lies inside a recorded run directory, or when
    one of the files the command writes there (the files record, the ranking, its figure, the elimination) exists
    as a link, FIFO, socket, device or file with other hard links (issue 42: outputs never written through)."""
    from rollbench.checkpoints.eliminate_run import ELIMINATION
    from rollbench.checkpoints.files_record import FILES_RECORD
    from rollbench.checkpoints.runner import FIGURE, RANKING
    from rollbench.record.files import check_output_file
    from rollbench.record.safe_files import refuse_inside_run

    refuse_inside_run(out_dir, "--out")
    for name in (FILES_RECORD, RANKING, FIGURE, ELIMINATION):
        check_output_file(out_dir / name, "--out", own="checkpoints")


@eval_options(EXECUTION_FLAGS)
def checkpoints_cmd(
    run: Annotated[
        Path, typer.Argument(help="A lerobot-train output folder, its checkpoints/, or a folder of checkpoint folders.")
    ],
    env: Annotated[str, typer.Option(help="Task, suite or comma-separated tasks (every checkpoint runs the same).")],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Directory for one run directory per checkpoint (OUT/<step>) and the ranking.")
    ],
    episodes: Annotated[int, typer.Option(min=1, help="Episodes per task for each checkpoint.")] = 50,
    policy_template: Annotated[
        str, typer.Option(help="Policy of each checkpoint, {path} = its folder.")
    ] = "lerobot:{path}",
    policy_options: Annotated[
        str | None, typer.Option(help="Policy options (JSON or file), the same for every checkpoint.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed; episode k uses seed + k for every checkpoint.")] = 0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Horizon (default: the task's).")] = None,
    video: Annotated[bool, typer.Option("--video/--no-video", help="Record an mp4 per episode.")] = False,
    alpha: Annotated[float, typer.Option(help="Family-wise level of the comparisons with the best (Holm).")] = 0.05,
    min_coverage: Annotated[
        float, typer.Option(help="Scored/attempted needed in every checkpoint for a verdict.")
    ] = 0.95,
    exclude_policy_errors: Annotated[
        bool, typer.Option(help="Leave policy errors out too (default: failures).")
    ] = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep polling RUN and evaluate each new checkpoint once stable.")
    ] = False,
    poll_s: Annotated[float, typer.Option(help="--watch: seconds between polls (0 .. 86400).")] = 10.0,
    until_idle: Annotated[
        float | None,
        typer.Option(help="--watch: stop after this many seconds without a new checkpoint (0 .. 2592000)."),
    ] = None,
    max_checkpoints: Annotated[
        int | None, typer.Option(min=1, help="--watch: stop after evaluating this many.")
    ] = None,
    eliminate: Annotated[
        bool,
        typer.Option("--eliminate", help="Drop clearly worse checkpoints early (one task; see docs/checkpoints.md)."),
    ] = False,
    delta: Annotated[
        float, typer.Option(help="--eliminate: guarantee P(chosen more than delta below the best) <= alpha.")
    ] = 0.1,
    first_look: Annotated[
        int,
        typer.Option(
            help="--eliminate: episodes per checkpoint at the first look (then doubling; 2 .. a single look's N_max)."
        ),
    ] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ranking document as JSON.")] = False,
    **options: Any,
) -> None:
    """Find the checkpoints under RUN (lerobot-train's checkpoints/<step>/pretrained_model/, links such as
    checkpoints/last skipped), evaluate each on the same planned episodes into OUT/<step> (resumable), and rank
    them: success rate and 95% interval, paired difference to the best with a Holm-corrected p, a figure of
    success against training step (OUT/checkpoints.png). With --eliminate, the verdict is the elimination's own:
    the chosen step with its guarantee and the look that eliminated each other step (no fixed-N p-values)."""
    from rollbench.checkpoints.discover import find_checkpoints, is_complete
    from rollbench.checkpoints.eliminate import design as elimination_design
    from rollbench.checkpoints.files_record import check_files
    from rollbench.checkpoints.runner import (
        CheckpointObserver,
        CheckpointState,
        Settings,
        Skipped,
        evaluate_all,
        folder_lock,
    )
    from rollbench.checkpoints.watch import Polling
    from rollbench.checkpoints.watch import watch as watch_run
    from rollbench.cli.common import out as stdout
    from rollbench.grading.coverage import CoverageRule
    from rollbench.wire.obs_map import load_policy_options

    try:
        check_out(out_dir)
        fields = {"env": env, "episodes": episodes, "seed": seed, "max_steps": max_steps, "video": video}
        if policy_options:
            fields["policy_options"] = load_policy_options(policy_options)
        rule = CoverageRule(min_coverage=min_coverage, exclude_policy_errors=exclude_policy_errors)
        settings = Settings(fields, policy_template, alpha, rule)
        runner = execution(options)
        settings.check(run)
        found = find_checkpoints(run)
        ready = [c for c in found if is_complete(c)]
        polling = Polling(poll_s, until_idle, max_checkpoints) if watch else None  # bounds checked before anything
        if eliminate and watch:
            raise ConfigError(
                "--eliminate and --watch cannot be combined: elimination needs every checkpoint from the start"
            )
        if not watch and not ready:
            raise ConfigError(f"no complete checkpoint under {run} (a folder with config.json and model.safetensors)")
        plan = (
            elimination_design(len(ready), delta, alpha, first_look) if eliminate else None
        )  # refused before any line
        check_files(ready, out_dir)  # a step whose files changed since its episodes were made (hostile round 11, F6)
        why = "lacks config.json or model.safetensors"
        incomplete = [] if watch else [Skipped(c.step, f"{c.path} {why}") for c in found if not is_complete(c)]
        for s in incomplete:
            console.print(  # the folder's name as written, never as markup (hostile round 9)
                f"skipped step {s.step}: {said(s.why)}",
                highlight=False,
                soft_wrap=True,  # one line, as each event line: a path is never cut at the console's width
            )
    except ConfigError as exc:
        fail(str(exc))

    class Lines(CheckpointObserver):
        """One stderr line per checkpoint event (none with ``--json``)."""

        def on_checkpoint(self, event: CheckpointState) -> None:
            if not as_json:
                console.print(
                    f"step {event.step}: {said(event.state)} ({said(event.run_dir)})", highlight=False, soft_wrap=True
                )

        def on_skipped(self, skipped: Skipped) -> None:  # always: a warning, on stderr (--json's document names it)
            console.print(f"skipped step {skipped.step}: {said(skipped.why)}", highlight=False, soft_wrap=True)

    progress = Lines()

    try:
        with folder_lock(out_dir):  # one command at a time on a folder (hostile round 17, b F4)
            if plan is not None:
                from rollbench.checkpoints.eliminate_run import run_elimination

                doc = run_elimination(ready, out_dir, settings, runner, plan, progress)
            elif watch:
                doc = watch_run(run, out_dir, settings, runner, polling, observer=progress)
            else:
                doc = evaluate_all(ready, out_dir, settings, runner, progress, incomplete)
    except KeyboardInterrupt:
        console.print(
            f"interrupted: the same command resumes {said(out_dir)}; evaluated checkpoints are not run again",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    except ConfigError as exc:
        fail(str(exc))
    except RollbenchError as exc:
        fail(str(exc), code=1)
    if as_json:
        print_json(stdout, json.dumps(doc))
    else:
        print_ranking(stdout, doc)
