"""``rollbench sequential``: a paired A/B evaluation that stops when the answer is known (docs/sequential.md), and
``rollbench compare --sequential`` (:func:`recompute_sequential`), which shares its printing.

Exit codes: 0 = every task decided (B better, A better, futility or budget exhausted); 2 = bad input (nothing ran);
130 / 143 = interrupted (the same command resumes); 1 = a run could not go on.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rollbench.cli.analysis_view import ExcludePolicyErrors, MinCoverage, coverage_rule
from rollbench.cli.common import console, exit_on_errors, fail, print_doc, said, terminate_as_interrupt
from rollbench.cli.run_flags import EXECUTION_FLAGS, IDENTITY_FLAGS, eval_options, execution
from rollbench.cli.tables import print_table
from rollbench.core.contracts import ConfigError
from rollbench.core.format import MISSING
from rollbench.grading.coverage import DEFAULT_MIN_COVERAGE, CoverageRule

SAYS = {
    "b_better": "B better",
    "a_better": "A better",
    "futility": "no difference of delta (futility)",
    "budget_exhausted": "undecided: budget exhausted",
    "insufficient_coverage": "insufficient coverage (no verdict)",
    None: "undecided so far",
}


def print_sequential(out: Console, doc: dict[str, Any]) -> None:
    """One table per comparison: per task the decision, the look that made it, the counts, the design; under it a
    line per task saying what its counts are, and the coverage rule's note when the arms record another rule."""
    from rollbench.sequential.pairs import counts_line

    table = Table(title=f"sequential paired test ({doc['rule']}), family alpha {doc['alpha_family']:g}")
    cols = ("task", "decision", "at pair", "pairs attempted", "pairs tested", "B only", "A only", "llr B", "llr A")
    for col in (*cols, "alpha"):
        table.add_column(col, justify="left" if col in ("task", "decision") else "right")
    for t in doc["tasks"]:
        last = t["looks"][-1] if t["looks"] else {"b_only": 0, "a_only": 0, "llr_b": 0.0, "llr_a": 0.0}
        at = MISSING if t["stopped_at"] is None else str(t["stopped_at"])
        row = [t["task"], SAYS[t["decision"]], at, str(t["errors"]["pairs_to_decision"])]
        row += [str(t["pairs_counted"]), str(last["b_only"]), str(last["a_only"])]
        table.add_row(*row, f"{last['llr_b']:.2f}", f"{last['llr_a']:.2f}", f"{t['design']['alpha']:.3g}")
    if doc.get("pooled"):
        p = doc["pooled"]
        last = p["looks"][-1] if p["looks"] else {"b_only": 0, "a_only": 0, "llr_b": 0.0, "llr_a": 0.0}
        at = MISSING if p["stopped_at"] is None else str(p["stopped_at"])
        row = ["pooled", SAYS[p["decision"]], at, "", "", str(last["b_only"]), str(last["a_only"])]
        table.add_row(*row, f"{last['llr_b']:.2f}", f"{last['llr_a']:.2f}", f"{p['design']['alpha']:.3g}")
    print_table(out, table)
    for line in [*map(counts_line, doc["tasks"]), *filter(None, [doc.get("coverage_rule_note")])]:
        out.print(said(line), highlight=False, soft_wrap=True)
    d = doc["tasks"][0]["design"] if doc["tasks"] else None
    if d:
        out.print(
            f"design: delta {d['delta']:g} at p_a {d['p_a']:g} (theta1 {d['theta1']:.3f}), budget {d['budget']} pairs, "
            f"look every {d['look_every']}; thresholds llr >= {d['efficacy_llr']:.3f} decides, both <= "
            f"{d['futility_llr']:.3f} is futility; exact type-I error {d['type1_error']:.4f}, futility error "
            f"{d['futility_error']:.3f}{'' if d.get('futility') is not False else ' (futility off)'}, power "
            f"{d['power']:.3f}{_wanted(d)} (fixed-N McNemar needs {d['fixed_n']} pairs)",
            highlight=False,
            soft_wrap=False,  # wrapped at words to the width (issue 42, item 20)
        )
    if doc.get("log"):
        out.print(  # one line: a path is never broken across lines
            f"decision log {doc['log']['path']}: agrees with the run directories"
            + (" (under the coverage rule they record)" if doc["coverage_rule_note"] else ""),
            highlight=False,
            soft_wrap=True,
        )


def recompute_sequential(out: Console, runs: list[Path], as_json: bool, refused: list[str], rule: CoverageRule) -> None:
    """``compare --sequential``: the decision and every look recomputed from the arms under ``rule`` (the user's
    --min-coverage / --exclude-policy-errors, else the defaults); ConfigError (exit 2) for ``refused`` options, which
    a sequential test has no use for (never silently ignored: hostile round 15, F5)."""
    from rollbench.sequential.recompute import compare_sequential

    if refused:
        raise ConfigError(
            f"{', '.join(refused)} appl{'ies' if len(refused) == 1 else 'y'} to a fixed-N comparison of runs; "
            f"--sequential recomputes a sequential test (its coverage gate: --min-coverage, --exclude-policy-errors): "
            f"drop {'it' if len(refused) == 1 else 'them'}, or drop --sequential"
        )
    if not runs:
        raise ConfigError("--sequential needs the two arms of a rollbench sequential run, or its --out directory")
    doc = compare_sequential(list(runs), rule)
    print_doc(out, doc, as_json, print_sequential)


def _wanted(d: dict[str, Any]) -> str:
    target = d.get("power_target")
    return "" if target is None else f" at these looks (a fixed-N McNemar test of this budget: {target:.3f})"


def _spec(env: str, policy: str, noise: float, options: str | None, common: dict[str, Any]) -> Any:
    from rollbench.core.spec import build_spec
    from rollbench.wire.obs_map import load_policy_options

    opts = load_policy_options(options) if options else {}
    return build_spec(env=env, policy=policy, action_noise=noise, policy_options=opts, **common)


@eval_options((*EXECUTION_FLAGS, *IDENTITY_FLAGS))
def sequential_cmd(
    env: Annotated[str, typer.Option(help="Task, suite or comma-separated tasks (both arms run the same).")],
    policy_a: Annotated[str, typer.Option("--policy-a", help="Policy A (the baseline): a name or server URL.")],
    policy_b: Annotated[str, typer.Option("--policy-b", help="Policy B (the candidate): a name or server URL.")],
    delta: Annotated[
        float, typer.Option(help="Smallest difference in success rate worth detecting, a fraction (0.2 = 20 pts).")
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the two arms and the decision log.")],
    alpha: Annotated[float, typer.Option(help="Family-wise two-sided level (split over a suite's tasks).")] = 0.05,
    beta: Annotated[float, typer.Option(help="Futility error at delta (1 - power).")] = 0.2,
    p_a: Annotated[float, typer.Option("--p-a", help="Expected success rate of A (sets the design).")] = 0.5,
    discordant: Annotated[
        float | None, typer.Option(help="Expected P(exactly one succeeds) (default: independent policies).")
    ] = None,
    budget: Annotated[
        int | None, typer.Option(min=1, help="Most pairs per task (default: the smallest with the wanted power).")
    ] = None,
    look_every: Annotated[
        int, typer.Option(min=1, help="Pairs between looks (any schedule keeps alpha; the budget is sized for it).")
    ] = 1,
    futility: Annotated[
        bool,
        typer.Option(
            "--futility/--no-futility", help="Stop for futility (non-binding: alpha holds either way; off: more power)."
        ),
    ] = True,
    min_coverage: MinCoverage = DEFAULT_MIN_COVERAGE,
    exclude_policy_errors: ExcludePolicyErrors = False,
    action_noise_a: Annotated[float, typer.Option(min=0.0, help="Action noise std of arm A.")] = 0.0,
    action_noise_b: Annotated[float, typer.Option(min=0.0, help="Action noise std of arm B.")] = 0.0,
    policy_options_a: Annotated[str | None, typer.Option(help="Policy options of A (JSON or file).")] = None,
    policy_options_b: Annotated[str | None, typer.Option(help="Policy options of B (JSON or file).")] = None,
    seed: Annotated[int, typer.Option(min=0, help="Base seed; episode k uses seed + k in both arms.")] = 0,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Horizon (default: the task's).")] = None,
    video: Annotated[bool, typer.Option("--video/--no-video", help="Record an mp4 per episode.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision document as JSON.")] = False,
    **options: Any,
) -> None:
    """Run policies A and B on the same planned episodes pair by pair, update a sequential paired test after every
    pair, and stop at the first decision: B better or A better at level alpha, futility at delta, or the budget.
    Each arm is an ordinary run directory; `rollbench compare --sequential OUT` recomputes the decision."""
    from rollbench.cli.common import out as stdout
    from rollbench.core.interrupts import Terminated
    from rollbench.core.stdio import isolated_output
    from rollbench.sequential.runner import SequentialConfig, SequentialObserver, run_sequential

    common = {"seed": seed, "max_steps": max_steps, "video": video, "episodes": 1}
    if not 0 < delta < 1:  # False for NaN too
        fail(
            f"--delta {delta:g}: give the difference in success rate as a fraction between 0 and 1 (0.2 = 20 "
            "percentage points)"
        )
    try:
        spec_a = _spec(env, policy_a, action_noise_a, policy_options_a, common)
        spec_b = _spec(env, policy_b, action_noise_b, policy_options_b, common)
        run = execution(options)
        coverage = coverage_rule(min_coverage, exclude_policy_errors)
    except ConfigError as exc:
        fail(str(exc))

    class Lines(SequentialObserver):
        """Each look as one line and the power warning (stdout is the JSON document's alone under --json); once a
        signal was received (``seen``) no new episode starts, whatever became of the exception it raised."""

        def __init__(self, seen: list[int]) -> None:
            self.seen = seen

        def should_stop(self) -> bool:
            return bool(self.seen)

        def on_look(self, task: str, look: dict[str, Any]) -> None:
            if not as_json:
                console.print(
                    f"{task}: pair {look['pairs']}: B only {look['b_only']}, A only {look['a_only']}, llr B "
                    f"{look['llr_b']:+.2f}, llr A {look['llr_a']:+.2f} -> {look['decision']}",
                    highlight=False,
                    soft_wrap=True,
                )

        def on_warning(self, text: str) -> None:
            console.print(f"warning: {said(text)}", highlight=False, soft_wrap=True)

    try:
        with (
            exit_on_errors(),
            _signals_seen() as seen,
            isolated_output(),
        ):  # the policies' output and children: never stdout
            config = SequentialConfig(
                delta=delta, alpha=alpha, beta=beta, p_a=p_a, discordant=discordant, budget=budget,
                look_every=look_every, futility=futility, coverage=coverage, execution=run,
                host_label=options["host_label"], robot=options["robot"],
            )  # fmt: skip
            doc = _interruptible(seen, lambda: run_sequential(spec_a, spec_b, out_dir, config, Lines(seen)))
    except KeyboardInterrupt as exc:
        console.print(
            f"interrupted: committed episodes are kept; the same command resumes {out_dir} and reaches the same "
            "decision",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130) from None
    print_doc(stdout, doc, as_json, print_sequential)


@contextlib.contextmanager
def _signals_seen() -> Iterator[list[int]]:
    """SIGINT raises UserInterrupt and SIGTERM Terminated, as in ``rollbench eval`` (the user's, never an error of
    the episode they land in: :mod:`rollbench.core.interrupts`), and both are noted in the list yielded: a signal
    that arrives inside DuckDB (grading) comes out as its RuntimeError("Query interrupted")."""
    from rollbench.core.interrupts import UserInterrupt

    seen: list[int] = []
    previous = signal.getsignal(signal.SIGINT)

    def on_int(signum: int, frame: Any) -> None:
        seen.append(signum)
        raise UserInterrupt

    signal.signal(signal.SIGINT, on_int)
    try:
        with terminate_as_interrupt():
            inner = signal.getsignal(signal.SIGTERM)

            def on_term(signum: int, frame: Any) -> None:
                seen.append(signum)
                if callable(inner):
                    inner(signum, frame)

            signal.signal(signal.SIGTERM, on_term)
            yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _interruptible(seen: list[int], call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``call()``; any error raised after a signal was received is that interruption, and so is a return after one
    (the comparison stopped starting episodes once it was received: it is not finished)."""
    from rollbench.core.interrupts import Terminated, UserInterrupt

    def interruption() -> UserInterrupt:
        return Terminated() if seen[-1] == signal.SIGTERM else UserInterrupt()

    try:
        doc = call()
    except Exception:
        if seen:
            raise interruption() from None
        raise
    if seen:
        raise interruption()
    return doc
