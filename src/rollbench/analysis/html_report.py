"""``rollbench report``: one self-contained, offline HTML file (figures inlined as base64 PNG, no script, no
external resource) with the inputs, the task x model summary, success rate per task with interval bars, the
comparison tables and difference plots, episode length and policy latency distributions, and, when a dashboard URL
is given, links to every episode's review page and video. ``--plots DIR`` writes the same figures as PNG and SVG.

The page is ``templates/report.html.j2`` (Jinja2, package data) with autoescaping: this module computes plain
values (:func:`report_context`) and every one of them is escaped by the engine.

The comparison covers the run directories among the inputs (exports carry no horizon or success rule, so they are
summarised but not compared), each pair decided on its own (:func:`rollbench.analysis.compare.compare_where_paired`):
paired statistics where the pair's episodes pair on their common tasks, unpaired statistics (Fisher's exact test)
only where they do not, said in that pair's table; pairs with no task in common are listed, not compared. When any
comparison is unpaired, a warning at the top of the report says which. Summary warnings (repeated episodes pooled in
one cell) are shown at the top too.

Figures are drawn one at a time and closed once written, so any number of runs keeps at most one figure open.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollbench.analysis.checkpoints_section import checkpoint_sections, checkpoint_warnings, without_checkpoint_runs
from rollbench.analysis.latency_sweep import latency_sweeps
from rollbench.analysis.sources import Loaded
from rollbench.analysis.summarize import Labels, run_rows, summarize_runs
from rollbench.core.contracts import RollbenchError
from rollbench.core.format import (
    MISSING,
    interval,
    p_value,
    pct,
    points,
    points_interval,
    template_environment,
)
from rollbench.grading.coverage import DEFAULT_RULE, VERDICT_LABELS, CoverageRule, coverage_lines

if TYPE_CHECKING:
    from jinja2 import Environment


@cache
def _env() -> Environment:
    """The report's environment: ``templates/report.html.j2`` (:func:`~rollbench.core.format.template_environment`)."""
    return template_environment(Path(__file__).with_name("templates"))


def sequential_comparisons(loaded: Loaded, rule: CoverageRule = DEFAULT_RULE) -> tuple[list[dict[str, Any]], list[str]]:
    """The sequential comparisons among the run directories (arms of ``rollbench sequential``, grouped by the
    directory holding them), each recomputed from its arms under ``rule`` (the report's, as its comparisons); and a
    warning per group that cannot be, or whose arms record another coverage rule."""
    from rollbench.sequential.recompute import compare_sequential

    groups: dict[Path, list[Path]] = {}
    for r in loaded.runs:
        if r.run_dir is not None and r.log is not None and r.log.sequential is not None:
            groups.setdefault(r.run_dir.parent, []).append(r.run_dir)
    docs, warnings = [], []
    for parent, dirs in sorted(groups.items()):
        try:
            docs.append(compare_sequential(dirs, rule))
        except RollbenchError as exc:
            warnings.append(f"sequential comparison in {parent} not shown: {exc}")
            continue
        if docs[-1]["coverage_rule_note"]:
            warnings.append(f"sequential comparison in {parent}: {docs[-1]['coverage_rule_note']}")
    return docs, warnings


def figure_specs(
    loaded: Loaded,
    summary: dict[str, Any],
    comparison: dict[str, Any] | None,
    sequential: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Name -> (a function drawing the matplotlib Figure, caption) for the report, in report order. Nothing is
    drawn here: call each function when the figure is needed and close its figure once written."""
    from rollbench.analysis import figures

    out: dict[str, Any] = {}
    if summary["cells"]:  # none when every run belongs to a checkpoints folder
        out["success_rate"] = (
            lambda: figures.success_rate_figure(summary),
            "Success rate per task and model (95% Wilson interval).",
        )
    for i, c in enumerate((comparison or {}).get("comparisons", []), 1):
        cap = f"{c['b']} minus {c['a']} per task and pooled ({c['statistics']} bootstrap 95% interval)."
        out[f"difference_{i}"] = (lambda c=c: figures.difference_figure(c), cap)
    for i, doc in enumerate(sequential or [], 1):
        for j, task in enumerate(doc["tasks"], 1):
            cap = f"Sequential test on {task['task']}: statistic against pairs, thresholds and the decision."
            out[f"sequential_{i}_{j}"] = (lambda task=task: figures.sequential_figure(task), cap)
    out["episode_length"] = (lambda: figures.length_figure(loaded.runs), "Episode length (steps) per task and run.")
    for i, sweep in enumerate(latency_sweeps(loaded.runs), 1):  # latency sweeps (issue 25)
        cap = f"Success rate against simulated latency: {sweep['policy']} on {sweep['env']} (95% Wilson interval)."
        out[f"latency_sweep_{i}"] = (lambda sweep=sweep: figures.latency_sweep_figure(sweep), cap)
    for i, (run, study) in enumerate(robustness_studies(loaded), 1):  # robustness studies (issue 31)
        if any(b["levels"] for b in study["categories"].values()):
            cap = f"{run}: success rate against perturbation level, perturbed (95% Wilson) and control over the same pairs."
            out[f"robustness_{i}"] = (lambda study=study: figures.robustness_figure(study), cap)
    dirs = [r for r in loaded.runs if r.run_dir is not None]
    if dirs:
        out["latency"] = (lambda: figures.latency_figure(dirs), "Policy call latency per run (recorded per step).")
    return out


def robustness_studies(loaded: Loaded) -> list[tuple[str, dict[str, Any]]]:
    """``(run label, study)`` for every loaded run with perturbed episodes (:mod:`rollbench.analysis.robustness`)."""
    from rollbench.analysis.robustness import robustness_study

    out = []
    for run in loaded.runs:
        study = robustness_study(run)
        if study is not None:
            out.append((run.key, study))
    return out


def _pair_view(c: dict[str, Any], stopped_early: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One comparison's heading facts and table (head, rows of plain values) for the template. ``stopped_early``:
    keys of runs that are arms of ``rollbench sequential`` (stopped by its test): such a pair's fixed-N p values
    and intervals carry the early-stopping caveat (``sequential_arms``)."""
    paired = c["statistics"] == "paired"
    head = ["task", "A", "B", "B − A (pts)", "95% CI (bootstrap)"]
    head += (["A only", "B only", "McNemar p"] if paired else ["Fisher p"]) + ["p (Holm)", "verdict"]
    rows = []
    for r in [*c["tasks"], {"task": "pooled", **c["pooled"]}]:
        row = [r["task"], pct(r["a"]["success_rate"]), pct(r["b"]["success_rate"]), points(r["difference"])]
        row.append(points_interval(r["diff_ci95_low"], r["diff_ci95_high"]))
        row += [r["a_only"], r["b_only"]] if paired else []
        row += [p_value(r["p_value"]), p_value(r.get("p_holm", r.get("p_holm_pairs"))), VERDICT_LABELS[r["verdict"]]]
        rows.append(row)
    return {
        **{k: c[k] for k in ("a", "b", "model_a", "model_b", "tasks_not_compared")},
        "paired": paired,
        "unpaired_reason": c.get("unpaired_reason", "compare --unpaired"),
        "sequential_arms": [k for k in (c["a"], c["b"]) if k in stopped_early],
        "head": head,
        "rows": rows,
        "coverage": coverage_lines(c["pooled"]),
    }


def _comparison_view(
    comparison: dict[str, Any], figures: list[dict[str, str]], stopped_early: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The comparison section: the bootstrap settings, each pair's view (``stopped_early``: see :func:`_pair_view`),
    the pairs not compared, the ranking (more than two runs only) and the difference figures."""
    ranking = [[r["rank"], r["run"], r["model"], pct(r["success_rate"]), r["episodes"]] for r in comparison["ranking"]]
    return {
        "n_resamples": comparison["bootstrap"]["n_resamples"],
        "seed": comparison["bootstrap"]["seed"],
        "min_coverage": f"{comparison['coverage_rule']['min_coverage']:.0%}",
        "pairs": [_pair_view(c, stopped_early) for c in comparison["comparisons"]],
        "not_compared": "; ".join(
            f"{x['a']} vs {x['b']} ({x['reason']})" for x in comparison.get("not_compared") or []
        ),
        "ranking": ranking if len(ranking) > 2 else [],
        "figures": figures,
    }


SHOWN_PAIRS = 5  # pairs named in the unpaired warning; the rest are counted (each is marked in the report)


def unpaired_warning(comparison: dict[str, Any] | None) -> str | None:
    """The report's top warning when any comparison uses unpaired statistics (naming the first
    :data:`SHOWN_PAIRS` pairs and counting the rest), else None."""
    if not comparison:
        return None
    unpaired = [c for c in comparison["comparisons"] if c["statistics"] != "paired"]
    if not unpaired:
        return None
    shown = unpaired[:SHOWN_PAIRS]
    pairs = "; ".join(f"{c['a']} vs {c['b']} ({c.get('unpaired_reason', 'unpaired')})" for c in shown)
    if len(unpaired) > len(shown):
        pairs += f"; and {len(unpaired) - len(shown)} more, each marked UNPAIRED in the report"
    return (
        f"{len(unpaired)} of {len(comparison['comparisons'])} comparisons use unpaired statistics (Fisher's exact "
        f"test), weaker than the paired McNemar test, because their episodes do not pair: {pairs}"
    )


def report_warnings(comparison: dict[str, Any] | None, summary: dict[str, Any]) -> list[str]:
    """The report's warnings, in order: unpaired comparisons (:func:`unpaired_warning`), then the summary's."""
    return [w for w in [unpaired_warning(comparison)] if w] + summary["warnings"]


def _episode_links(loaded: Loaded, url: str) -> list[dict[str, Any]]:
    """Per run: its key and, per episode, index, task, seed, outcome and the dashboard URLs of its review page and
    of each recorded camera's video (cameras from the run's ``meta/info.json``)."""
    base = url.rstrip("/")
    out = []
    for run in loaded.runs:
        cams = []
        if run.run_dir is not None:
            from rollbench.grading.files import read_info

            feats = read_info(Path(run.run_dir), []).get("features", {})  # regular file, inside the run, or {}
            cams = [k.removeprefix("observation.images.") for k, v in feats.items() if v.get("dtype") == "video"]
        episodes = []
        for ep in run.episodes:
            key = run.identity.episode_key(ep.episode_index)
            episodes.append(
                {
                    "index": ep.episode_index,
                    "task": ep.task,
                    "seed": ep.seed,
                    "outcome": "success" if ep.success else ep.termination_reason,
                    "review": f"{base}/episode/{key}",
                    "media": [(c, f"{base}/media/{key}/{c}") for c in cams],
                }
            )
        out.append({"key": run.key, "episodes": episodes})
    return out


def draw_figures(
    loaded: Loaded,
    summary: dict[str, Any],
    comparison: dict[str, Any] | None,
    plots: dict[str, bytes] | None,
    sequential: list[dict[str, Any]] | None = None,
) -> dict[str, dict[str, str]]:
    """Name -> ``{"caption", "png"}`` (base64) for every figure of :func:`figure_specs`, drawn one at a time (and
    their PNG + SVG files added to ``plots`` when given: file name -> bytes)."""
    from rollbench.analysis import figures

    return {
        name: {"caption": cap, "png": base64.b64encode(figures.render_figure((name, make), plots)).decode()}
        for name, (make, cap) in figure_specs(loaded, summary, comparison, sequential).items()
    }


def report_context(
    loaded: Loaded,
    summary: dict[str, Any],
    comparison: dict[str, Any] | None,
    figures: dict[str, dict[str, str]],
    dashboard_url: str | None,
) -> dict[str, Any]:
    """What ``templates/report.html.j2`` shows, as plain values (the template escapes every one)."""
    from importlib.metadata import version

    cell_rows = [
        [
            *(c.get(k) for k in ("task", "model", "instruction")),
            ", ".join(c["variants"]) or None,
            *(c.get(k) for k in ("episodes", "repeats", "errored", "scored", "successes")),
            pct(c["success_rate"]),
            interval(c["ci95_low"], c["ci95_high"]),
        ]
        for c in summary["cells"]
    ]
    diffs = [f for name, f in figures.items() if name.startswith("difference_")]
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": version("rollbench"),
        "warnings": report_warnings(comparison, summary),
        "runs_rows": [
            [
                *(r[k] for k in ("run", "model", "policy")),
                r["status"] + (" DAMAGED (included with --allow-damaged)" if r.get("damaged") else ""),
                *(r[k] for k in ("episodes", "path")),
            ]
            for r in summary["runs"]
        ],
        "in_progress": ", ".join(f"{p['run']} ({p['why']})" for p in loaded.in_progress),
        "unreadable": "; ".join(f"{u['path']} ({u['why']})" for u in loaded.unreadable),
        "cell_rows": cell_rows,
        "label_rows": _label_rows(summary),
        "label_rubric": summary.get("rubric"),
        "label_source": summary.get("labels"),
        "figures": figures,
        "comparison": _comparison_view(comparison, diffs, _sequential_arms(loaded)) if comparison else None,
        "episodes": _episode_links(loaded, dashboard_url) if dashboard_url else None,
    }


def _label_rows(summary: dict[str, Any]) -> list[list[Any]]:
    """Per cell: task, model, its label counts, labelled / unlabelled / invalid and the rubric's rates (none without
    labels): what ``summarize --labels`` prints, from the same document."""
    cells = summary["cells"] if summary.get("rubric") is not None else []
    return [[c["task"], c["model"], ", ".join(f"{k} {v}" for k, v in c["label_counts"].items() if v) or None,
             *(c[k] for k in ("n_labeled", "n_unlabeled", "n_invalid")),
             ", ".join(f"{k} {pct(v)}" for k, v in c["rates"].items() if v is not None) or None] for c in cells]  # fmt: skip


def render_report(
    loaded: Loaded,
    *,
    labels: Labels | None = None,
    comparison: dict[str, Any] | None = None,
    dashboard_url: str | None = None,
    plots: dict[str, bytes] | None = None,
    summary: dict[str, Any] | None = None,
    reproductions: list[dict[str, Any]] | None = None,
    checkpoints: list[dict[str, Any]] | None = None,
) -> str:
    """The report as one HTML document (str). Figures are PNG data URIs; ``plots`` (file name -> bytes) also gets
    every figure as PNG + SVG, for the caller to write (``report --plots``; nothing is written here).
    ``summary``: ``summarize_runs(loaded, labels=labels)`` when the caller has it already (computed here if not).
    ``reproductions``: :func:`rollbench.reproduce.reproduce` documents, one section each. ``checkpoints``: the
    :func:`~rollbench.analysis.checkpoints_section.checkpoint_sections` when the caller has them (computed if not).
    The sequential decisions are made under the summary's coverage rule (the report's, as its comparisons)."""
    if summary is None:
        summary = report_summary(loaded, labels)
    sequential, seq_warnings = sequential_comparisons(loaded, CoverageRule(**summary["coverage_rule"]))
    figures = draw_figures(loaded, summary, comparison, plots, sequential)
    context = report_context(loaded, summary, comparison, figures, dashboard_url)
    context["warnings"] = [*context["warnings"], *seq_warnings]
    context["sequential"] = [_sequential_view(doc, i) for i, doc in enumerate(sequential, 1)]
    context["latency_sweeps"] = latency_sweeps(loaded.runs)
    context["robustness"] = [{"run": run, **study} for run, study in robustness_studies(loaded)]
    context["checkpoint_runs"] = ", ".join(without_checkpoint_runs(loaded)[1])
    context["checkpoints"] = (
        checkpoints
        if checkpoints is not None
        else checkpoint_sections(loaded, plots, CoverageRule(**summary["coverage_rule"]))
    )
    context["warnings"] += checkpoint_warnings(context["checkpoints"])
    context["reproductions"] = []
    if reproductions:
        from rollbench.reproduce.html import reproduction_html

        context["reproductions"] = [reproduction_html(doc) for doc in reproductions]
    return _env().get_template("report.html.j2").render(context)


def _sequential_arms(loaded: Loaded) -> frozenset[str]:
    """Keys of the runs that are arms of ``rollbench sequential`` (their run.json has a ``sequential`` block)."""
    return frozenset(r.key for r in loaded.runs if r.log is not None and r.log.sequential is not None)


def _sequential_view(doc: dict[str, Any], i: int) -> dict[str, Any]:
    """One sequential comparison for the template: a row per task (and pooled), what each task counts, and its
    figures' names."""
    from rollbench.sequential.pairs import counts_line

    says = {"b_better": "B better", "a_better": "A better", "futility": "futility (no difference of delta)",
            "budget_exhausted": "undecided (budget exhausted)", None: "undecided so far",
            "insufficient_coverage": "insufficient coverage (no verdict)"}  # fmt: skip
    rows = []
    for t in doc["tasks"]:
        last = t["looks"][-1] if t["looks"] else {"b_only": 0, "a_only": 0}
        d = t["design"]
        rows.append([t["task"], t["policy_a"], t["policy_b"], says[t["decision"]], t["stopped_at"] or MISSING,
                     last["b_only"], last["a_only"], f"{d['alpha']:.3g}", d["budget"], d["fixed_n"]])  # fmt: skip
    if doc["pooled"]:
        p = doc["pooled"]
        last = p["looks"][-1] if p["looks"] else {"b_only": 0, "a_only": 0}
        rows.append(["pooled", "", "", says[p["decision"]], p["stopped_at"] or MISSING, last["b_only"], last["a_only"],
                     f"{p['design']['alpha']:.3g}", p["design"]["budget"], ""])  # fmt: skip
    d0 = doc["tasks"][0]["design"]
    return {
        "rows": rows,
        "figures": [f"sequential_{i}_{j}" for j in range(1, len(doc["tasks"]) + 1)],
        "design": f"delta {d0['delta']:g} at p_a {d0['p_a']:g}; exact type-I error {d0['type1_error']:.4f}, "
        f"power {d0['power']:.3f}, futility error {d0['futility_error']:.3f}; look every {d0['look_every']}",
        "correction": doc["correction"],
        "counts": [counts_line(t) for t in doc["tasks"]],
    }


def report_comparison(
    loaded: Loaded, seed: int = 0, n_resamples: int = 10_000, rule: CoverageRule = DEFAULT_RULE
) -> dict[str, Any] | None:
    """The comparison a report shows: :func:`rollbench.analysis.compare.compare_where_paired` over the run
    directories outside ``rollbench checkpoints`` folders (those are compared in the Checkpoints section only;
    pairing decided per pair; errors by the coverage ``rule``); None with fewer than two such run directories."""
    from rollbench.analysis.compare import compare_where_paired

    dirs = [r for r in without_checkpoint_runs(loaded)[0].runs if r.run_dir is not None]
    if len(dirs) < 2:
        return None
    return compare_where_paired(dirs, seed=seed, n_resamples=n_resamples, rule=rule)


def report_summary(loaded: Loaded, labels: Labels | None = None, rule: CoverageRule = DEFAULT_RULE) -> dict[str, Any]:
    """The summary a report shows: :func:`summarize_runs` over the runs outside ``rollbench checkpoints`` folders
    (those are ranked in the Checkpoints section only: never pooled into one cell under their shared model name),
    with ``runs`` listing every run and ``warnings`` every damaged run and copy among them."""
    generic, _ = without_checkpoint_runs(loaded)
    summary = summarize_runs(generic, labels=labels, rule=rule)
    summary["runs"] = run_rows(loaded.runs)
    summary["warnings"] = [w for w in loaded.notes() if w not in summary["warnings"]] + summary["warnings"]
    return summary
