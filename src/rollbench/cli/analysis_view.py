"""The tables of ``rollbench summarize`` and ``rollbench compare``, and the coverage options those commands (and
``report``, ``robustness``, ``reproduce``) share: ``--min-coverage`` and ``--exclude-policy-errors`` build the one
:class:`rollbench.grading.coverage.CoverageRule` (docs/analysis.md, "Errors and coverage")."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rollbench.cli.common import said
from rollbench.cli.tables import print_table
from rollbench.core.format import MISSING, interval, p_value, pct, points, points_interval
from rollbench.grading.coverage import (
    DEFAULT_MIN_COVERAGE,
    EXCLUDE_POLICY_ERRORS_HELP,
    MIN_COVERAGE_HELP,
    CoverageRule,
    coverage_lines,
)

MinCoverage = Annotated[
    float,
    typer.Option(
        "--min-coverage",
        help=MIN_COVERAGE_HELP,
    ),
]
ExcludePolicyErrors = Annotated[
    bool,
    typer.Option(
        "--exclude-policy-errors",
        help=EXCLUDE_POLICY_ERRORS_HELP,
    ),
]


def coverage_rule(min_coverage: float = DEFAULT_MIN_COVERAGE, exclude_policy_errors: bool = False) -> CoverageRule:
    """The rule the options give (ConfigError for a bound outside [0, 1])."""
    return CoverageRule(min_coverage=min_coverage, exclude_policy_errors=exclude_policy_errors)


def print_summary(out: Console, doc: dict[str, Any]) -> None:
    """The summarize document as a table (one row per cell), then the runs left out."""
    table = Table(title="rollbench summarize (episodes pooled across runs and hosts)")
    for k in doc["by"]:
        table.add_column(k, overflow="fold" if k == "instruction" else "ellipsis")
    cols = ("variants", "hosts", "runs", "episodes", "repeats", "errored", "scored", "successes", "success rate")
    for col in (*cols, "95% CI"):
        table.add_column(
            col,
            justify="right" if col not in ("hosts", "variants") else "left",
            overflow="fold" if col in ("hosts", "variants") else "ellipsis",
        )
    labelled = doc["rubric"] is not None
    if labelled:
        table.add_column(f"labels ({doc['rubric']})", overflow="fold")
        table.add_column("rates", overflow="fold")
    for c in doc["cells"]:
        row = [MISSING if c[k] is None else said(c[k]) for k in doc["by"]]
        row += [said(", ".join(c["variants"])) or MISSING, said(", ".join(c["hosts"])), str(len(c["runs"]))]
        row += [str(c["episodes"])]
        row += [str(c["repeats"]), str(c["errored"]), str(c["scored"])]
        row += [str(c["successes"]), pct(c["success_rate"]), interval(c["ci95_low"], c["ci95_high"])]
        if labelled:
            counts = " ".join(f"{k}={v}" for k, v in c["label_counts"].items() if v)
            row.append(f"{counts} (labelled {c['n_labeled']}, unlabelled {c['n_unlabeled']}, invalid {c['n_invalid']})")
            row.append(" ".join(f"{k}={pct(v)}" for k, v in c["rates"].items()))
        table.add_row(*row)
    print_table(out, table, keys=len(doc["by"]))
    by_scene = [c for c in doc["cells"] if c.get("unit") == "scene"]
    if by_scene:
        out.print(
            f"95% CI unit: {len(by_scene)} of {len(doc['cells'])} cell(s) repeat a scene (task x initial state), so "
            f"their interval is a {by_scene[0]['interval']}; the others: Wilson over episodes",
            highlight=False,
            soft_wrap=True,
        )
    for p in doc["in_progress"]:
        out.print(f"left out: {said(p['run'])} ({said(p['path'])}) is {said(p['why'])}", highlight=False)
    for u in doc.get("unreadable", []):
        out.print(f"left out: {said(u['path'])} is unreadable: {said(u['why'])}", highlight=False)


def print_comparison(out: Console, doc: dict[str, Any]) -> None:
    """Each pair as a table (per task and pooled), then the ranking when there are more than two runs."""
    if doc["statistics"] == "unpaired":
        out.print("[bold yellow]unpaired statistics[/] (Fisher's exact test, unpaired bootstrap): --unpaired was given")
    damaged = {r["run"] for r in doc["runs"] if r.get("damaged")}
    for c in doc["comparisons"]:
        paired = c["statistics"] == "paired"
        a, b = f"{said(c['a'])} ({said(c['model_a'])})", f"{said(c['b'])} ({said(c['model_b'])})"
        table = Table(title=f"A = {a}   vs   B = {b}")
        cols = ["task", "A", "B", "B − A (pts)", "95% CI (bootstrap)"]
        cols += (["A only", "B only", "McNemar p"] if paired else ["Fisher p"]) + ["p (Holm)"]
        for col in cols:
            table.add_column(col, justify="left" if col == "task" else "right")
        for r in [*c["tasks"], {"task": "pooled", **c["pooled"]}]:
            row = [said(r["task"]), pct(r["a"]["success_rate"]), pct(r["b"]["success_rate"]), points(r["difference"])]
            row.append(points_interval(r["diff_ci95_low"], r["diff_ci95_high"]))
            row += [str(r["a_only"]), str(r["b_only"])] if paired else []
            row += [p_value(r["p_value"]), p_value(r.get("p_holm", r.get("p_holm_pairs")))]
            table.add_row(*row)
        print_table(out, table)
        for r in [*c["tasks"], {"task": "pooled", **c["pooled"]}]:
            if len(c["tasks"]) > 1 or r["task"] == "pooled":
                head = "pooled" if r["task"] == "pooled" else f"task {said(r['task'])}"
                out.print(f"{head}:", highlight=False)
                for line in coverage_lines(r, damaged=bool(damaged & {c["a"], c["b"]})):
                    out.print(f"  {said(line)}", highlight=False, soft_wrap=True)
        if c["tasks_not_compared"]:
            not_compared = said(", ".join(c["tasks_not_compared"]))
            out.print(f"tasks not in both runs (not compared): {not_compared}", highlight=False)
    if len(doc["runs"]) > 2:
        table = Table(title="ranking by pooled success rate (see the pairwise p-values above)")
        for col in ("rank", "run", "model", "success rate", "95% CI", "episodes"):
            table.add_column(col)
        for r in doc["ranking"]:
            ci = interval(r["ci95_low"], r["ci95_high"])
            table.add_row(
                str(r["rank"]), said(r["run"]), said(r["model"]), pct(r["success_rate"]), ci, str(r["episodes"])
            )
        print_table(out, table)
