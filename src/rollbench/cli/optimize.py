"""``rollbench optimize-instruction``: search a task's instruction for a policy, then judge it on held-out seeds.

Registered by :data:`rollbench.cli.main.COMMANDS`; the search itself is :mod:`rollbench.optimize.search`.
Exit codes: 0 = done (whatever the verdict); 1 = a run or the state failed; 2 = bad input, nothing written;
130 = interrupted (re-run the same command to resume).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rollbench.cli.common import make_console, output_console, said
from rollbench.cli.tables import print_table
from rollbench.core.format import interval, p_value, pct, points, points_interval

console = make_console(stderr=True)


def print_search(out: Console, state: dict[str, Any], out_dir: Path) -> None:
    """Rounds table, then the held-out headline (every number read from optimize.json, itself graded from disk)."""
    table = Table(title=f"instruction search on {state['task']} (rounds: paired on each round's seeds)")
    for col in ("round", "seeds", "incumbent", "score", "best candidate", "score ", "decision"):
        table.add_column(col, overflow="fold" if col in ("incumbent", "best candidate") else "ellipsis")
    for r in state["rounds"]:
        if r["status"] != "decided":
            continue
        e = state["config"]["episodes_per_candidate"]
        cands = {c["name"]: c["instruction"] for c in r["candidates"]}
        best = max(r["comparisons"], key=lambda c: (c["variant_successes"], -c["p_value"]))
        table.add_row(  # instructions may come from an LLM: shown as written, never as markup
            str(r["round"]),
            f"{r['seeds'][0]}..{r['seeds'][1] - 1}",
            said(r["incumbent"]),
            f"{r['scores']['incumbent']['successes']}/{e}",
            said(cands[best["variant"]]),
            f"{best['variant_successes']}/{e} (p={p_value(best['p_value'])})",
            f"accepted {r['decision']['accepted']}" if r["decision"]["accepted"] else "kept",
        )
    print_table(out, table)
    out.print(f"stopped: {state['stop_reason']}; search episodes: {state['episodes_used']}", highlight=False)
    h = state["holdout"]
    if not h:
        return
    p = h["paired"]
    lo, hi = p["difference_ci95"]
    out.print(
        f"[bold]held-out[/] (seeds {h['seeds'][0]}..{h['seeds'][1] - 1}, never used in the search):", highlight=False
    )
    for name in ("original", "winner"):
        b = h[name]
        out.print(
            f"  {name:<8} {pct(b['success_rate']):>6} ({b['successes']}/{b['episodes']}, 95% CI "
            f"{interval(b['ci95_low'], b['ci95_high'])})  {b['instruction']!r}",
            highlight=False,
            soft_wrap=True,
        )
    out.print(
        f"  paired difference {points(p['difference'])} pts (95% CI {points_interval(lo, hi)}); "
        f"b={p['variant_only']}, c={p['reference_only']}, one-sided exact McNemar p = {p_value(p['p_value'])}",
        highlight=False,
    )
    out.print(f"  verdict: {h['verdict']}", highlight=False, soft_wrap=True)
    out.print(f"search directory: {out_dir} (optimize.json, rounds/*-rNNN, *-holdout)", highlight=False, soft_wrap=True)


def optimize_instruction(
    env: Annotated[str, typer.Option(help="One task, e.g. metaworld/reach-v3.")],
    policy: Annotated[str, typer.Option(help="Policy name or server URL (ws://, http://).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Search directory (optimize.json and every run).")],
    rounds: Annotated[int, typer.Option(min=1, help="Most rounds.")] = 5,
    candidates: Annotated[int, typer.Option(min=1, help="Candidates proposed per round.")] = 4,
    episodes_per_candidate: Annotated[int, typer.Option(min=1, help="Episodes per instruction per round (E).")] = 10,
    seed: Annotated[int, typer.Option(min=0, help="Held-out seeds seed..seed+H-1; round r: the next E after.")] = 0,
    holdout_episodes: Annotated[int, typer.Option(min=1, help="Held-out episodes per instruction (H).")] = 20,
    proposer: Annotated[str, typer.Option(help="drop, insert, reorder, synonym, template, mix, llm.")] = "mix",
    start: Annotated[str | None, typer.Option(help="Starting instruction (default: the task's own).")] = None,
    alpha: Annotated[float, typer.Option(help="Level of the one-sided exact McNemar test (default rule).")] = 0.05,
    margin: Annotated[
        float | None, typer.Option(help="Instead of the test: accept a success-rate gain of at least this.")
    ] = None,
    patience: Annotated[int, typer.Option(min=1, help="Stop after this many rounds in a row without a change.")] = 3,
    budget: Annotated[int | None, typer.Option(min=1, help="Most search episodes (held-out not counted).")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="Horizon in steps (default: the task's).")] = None,
    policy_options: Annotated[str | None, typer.Option(help="Policy options: a JSON object or a JSON file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print optimize.json instead of the tables.")] = False,
) -> None:
    """Search a task's instruction for a policy on paired seeds; report the winner vs the original on held-out seeds."""
    from rollbench.cli.common import exit_on_errors, print_doc
    from rollbench.optimize.config import build_config
    from rollbench.optimize.search import Search
    from rollbench.wire.obs_map import load_policy_options

    out = output_console()
    try:
        with exit_on_errors():
            from rollbench.record.safe_files import refuse_inside_run

            refuse_inside_run(out_dir)  # a search directory never lands inside a recorded run
            cfg = build_config(
                env=env,
                policy=policy,
                rounds=rounds,
                candidates=candidates,
                episodes_per_candidate=episodes_per_candidate,
                seed=seed,
                holdout_episodes=holdout_episodes,
                proposer=proposer,
                start=start,
                alpha=alpha,
                margin=margin,
                patience=patience,
                budget=budget,
                max_steps=max_steps,
                policy_options=load_policy_options(policy_options),
            )
            log = (lambda m: None) if as_json else (lambda m: console.print(m, highlight=False, soft_wrap=True))
            state = Search(cfg, out_dir, log=log).run()
    except KeyboardInterrupt:
        console.print(f"interrupted: re-run the same command to resume the search in {out_dir}", highlight=False)
        raise typer.Exit(130) from None
    print_doc(out, state, as_json, lambda to, doc: print_search(to, doc, out_dir))
