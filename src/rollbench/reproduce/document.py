"""``rollbench reproduce``: one or more runs against one reference, as a JSON document and as plain text.

Counts come from rollbench's grade document of each run (``suites[s].successes`` / ``episodes`` for a suite entry,
``tasks[t]`` for a per-task entry), recomputed from the run directory on every call; nothing is recounted here.
Errors follow the coverage rule (docs/analysis.md, "Errors and coverage"): a row's ``episodes`` are the block's
``scored`` episodes (environment and infrastructure errors left out, policy errors as failures; ``attempted`` and
``excluded`` beside them), and below 95% coverage its verdict is ``insufficient_coverage``.
The overall row pools the matched suites' counts (sums of the grade's suite blocks) against the reference's
pooled count when every matched entry states one, else against the unweighted mean of the matched entries' rates
(what a source's "Average" column is); it is present when two or more suites matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.format import interval, p_value, pct
from rollbench.core.grade_model import GradeDocument, PooledBlock, TaskBlock
from rollbench.core.runlog_model import RunLog
from rollbench.grading.coverage import DEFAULT_MIN_COVERAGE, INSUFFICIENT_COVERAGE
from rollbench.reproduce.model import Entry, ReferenceSet, reference_successes
from rollbench.reproduce.protocol import compare_protocol, describe, run_wide_differences
from rollbench.reproduce.verdict import ALPHA, DEFAULT_GAP_PTS, MAX_EPISODES_SCAN, TARGET_POWER, judge


class NoSuiteInCommon(ConfigError):
    """None of the runs has a suite (or task) the reference has an entry for."""


RULE = (
    "below/above: two-sided p < 0.05 (exact binomial against the published rate when the reference's episode count "
    "is unknown, Fisher's exact test when it is known); otherwise consistent when the run's rate is within {gap:g} "
    "points of the reference, else underpowered (too few episodes to tell)"
)


def _graded(run_dir: Path) -> tuple[RunLog, GradeDocument]:
    from rollbench.grading.grade import grade, load_run_log

    return load_run_log(run_dir), grade(run_dir)


def _counts(graded: GradeDocument, entry: Entry) -> tuple[str, TaskBlock | PooledBlock] | None:
    block: TaskBlock | PooledBlock | None
    if entry.task:
        name = f"{entry.benchmark}/{entry.task}"
        block = graded.tasks.get(name)
    else:
        name = f"{entry.benchmark}/{entry.suite}"
        block = graded.suites.get(name)
    return None if block is None else (name, block)


def source_label(ref: ReferenceSet) -> str:
    """Where the reference's numbers were read, in one line: ``Physical-Intelligence/openpi
    examples/libero/README.md@15a9616 lines 69-71`` or ``<paper>, <table>``."""
    s = ref.source
    if s.kind == "repository":
        return f"{s.repository} {s.path}@{(s.commit or '')[:7]} lines {s.lines}"
    return f"{s.paper}, {s.table}" + (f" (arXiv {s.arxiv})" if s.arxiv else "")


def _row(
    entry: Entry,
    name: str,
    block: TaskBlock | PooledBlock,
    run_dir: Path,
    run_log: RunLog,
    graded: GradeDocument,
    ref: ReferenceSet,
    gap_pts: float,
) -> dict[str, Any]:
    ref_k = reference_successes(entry)
    ref_n = entry.episodes if ref_k is not None else None
    attempted = block.episodes
    scored = block.scored if block.scored is not None else attempted  # older grade: no rule
    v = judge(block.successes, scored, entry.success_rate, ref_k, ref_n, gap_pts)
    diffs = [] if entry.task else compare_protocol(run_log, graded, name, entry, ref.protocol)
    row = {
        "suite": name,
        "run_dir": str(run_dir),
        "reference_entry": entry.model_dump(mode="json", exclude_none=True),
        **v.to_dict(),
        "attempted": attempted,
        "excluded": dict(block.excluded or {}),
        "protocol_differences": diffs,
    }
    return _gated(row)


def _gated(row: dict[str, Any]) -> dict[str, Any]:
    """The coverage gate of docs/analysis.md "Errors and coverage" on a row: ``episodes`` counts the scored
    episodes (environment and infrastructure errors left out); below 95% of ``attempted`` the verdict is
    ``insufficient_coverage`` (the numbers stay)."""
    coverage = row["episodes"] / row["attempted"] if row["attempted"] else 0.0
    row["coverage"] = coverage
    row["coverage_gate"] = None
    if coverage < DEFAULT_MIN_COVERAGE:
        row["coverage_gate"] = (
            f"insufficient coverage: {row['episodes']} of {row['attempted']} attempted episodes scored "
            f"({coverage:.1%}); a verdict needs at least {DEFAULT_MIN_COVERAGE:.0%}"
        )
        row["verdict"] = INSUFFICIENT_COVERAGE
    return row


def _overall(rows: list[dict[str, Any]], gap_pts: float) -> dict[str, Any] | None:
    suites = [r for r in rows if "task" not in r["reference_entry"]]
    if len(suites) < 2:
        return None
    k = sum(r["successes"] for r in suites)
    n = sum(r["episodes"] for r in suites)
    attempted = sum(r["attempted"] for r in suites)
    known = all(r["reference_successes"] is not None for r in suites)
    if known:
        ref_k = sum(r["reference_successes"] for r in suites)
        ref_n = sum(r["reference_episodes"] for r in suites)
        ref_rate = 100.0 * ref_k / ref_n
    else:
        ref_k = ref_n = None
        ref_rate = sum(r["reference_rate"] for r in suites) / len(suites)
    v = judge(k, n, round(ref_rate, 10), ref_k, ref_n, gap_pts)
    return _gated(
        {
            "suites": [r["suite"] for r in suites],
            "reference_pooling": "counts" if known else "mean of rates",
            **v.to_dict(),
            "attempted": attempted,
        }
    )


def reproduce(run_dirs: list[str | Path], ref: ReferenceSet, gap_pts: float = DEFAULT_GAP_PTS) -> dict[str, Any]:
    """The reproduction document (keys: ``reference``, ``rule``, ``runs``, ``rows``, ``overall``,
    ``reference_not_in_runs``, ``run_suites_without_reference``). Raises ConfigError for a missing run directory, a
    suite present in two runs, or no suite of the runs in the reference."""
    if not 0 < gap_pts < 100:
        raise ConfigError(f"--gap must be between 0 and 100 points, got {gap_pts:g}")
    runs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    matched: set[str] = set()
    run_suites: set[str] = set()
    for raw in run_dirs:
        run_dir = Path(raw)
        run_log, graded = _graded(run_dir)
        run_suites |= set(graded.suites)
        runs.append(
            {
                "run_dir": str(run_dir),
                "run_id": run_log.run_id,
                "status": graded.status,
                "differences": run_wide_differences(run_log, graded),
            }
        )
        for entry in ref.entries:
            hit = _counts(graded, entry)
            if hit is None:
                continue
            if entry.key in seen:
                raise ConfigError(f"{entry.key} is in two runs ({seen[entry.key]} and {run_dir}); pass one of them")
            seen[entry.key] = str(run_dir)
            matched.add(entry.key)
            rows.append(_row(entry, hit[0], hit[1], run_dir, run_log, graded, ref, gap_pts))
    if not rows:
        wanted = ", ".join(sorted({f"{e.benchmark}/{e.suite}" for e in ref.entries}))
        have = ", ".join(sorted(run_suites)) or "none: no run is of a benchmark suite"
        raise NoSuiteInCommon(
            f"no suite of the runs is in reference {ref.name} (it has {wanted}; the runs have {have})"
        )
    return {
        "reference": {
            "name": ref.name,
            "policy": ref.policy,
            "checkpoint": ref.checkpoint,
            "revision": ref.revision,
            "reported_by": ref.reported_by,
            "source": ref.source.model_dump(mode="json", exclude_none=True),
            "source_label": source_label(ref),
            "protocol": ref.protocol.model_dump(mode="json"),
            "discrepancy": ref.discrepancy,
            "notes": ref.notes,
        },
        "rule": RULE.format(gap=gap_pts),
        "alpha": ALPHA,
        "target_power": TARGET_POWER,
        "gap_pts": gap_pts,
        "runs": runs,
        "rows": rows,
        "overall": _overall(rows, gap_pts),
        "reference_not_in_runs": sorted(e.key for e in ref.entries if e.key not in matched),
        "run_suites_without_reference": sorted(run_suites - {f"{e.benchmark}/{e.suite}" for e in ref.entries}),
    }


def sentence(row: dict[str, Any], doc: dict[str, Any]) -> str:
    """The row's verdict as one sentence (the form docs/reproduce.md shows)."""
    ref = f"the published {row['reference_rate']:g} ({doc['reference']['name']}: {doc['reference']['source_label']})"
    head = {"consistent": "consistent with", "below": "below", "above": "above", "underpowered": "underpowered against"}
    if row["verdict"] == INSUFFICIENT_COVERAGE:
        return f"no verdict against {ref} — {row['coverage_gate']}"
    need = row["episodes_needed"]
    power = f"power {row['power']:.2f} to detect a {row['gap_pts']:g}-point gap (" + (
        f"{need} episodes would give 80%)" if need else f"more than {MAX_EPISODES_SCAN} episodes would be needed)"
    )
    gap = row["detectable_gap_pts"]
    detect = (
        f"{row['episodes']} episodes detect a gap of {gap} points with 80% power"
        if gap
        else f"{row['episodes']} episodes detect no gap with 80% power"
    )
    return f"{head[row['verdict']]} {ref} — p = {p_value(row['p_value'])}; {detect}; {power}"


def render_text(doc: dict[str, Any]) -> str:
    """The document as plain text: one block per suite (and overall), then what did not match."""
    out = [
        f"reference {doc['reference']['name']}: {doc['reference']['policy']} ({doc['reference']['reported_by']}; "
        f"{doc['reference']['source_label']})",
        f"rule: {doc['rule']}",
    ]
    blocks = [*doc["rows"], *([{**doc["overall"], "suite": "overall"}] if doc["overall"] else [])]
    for r in blocks:
        out.append("")
        out.append(
            f"{r['suite']}: {r['successes']}/{r['episodes']} = {pct(r['rate'])} "
            f"[95% Wilson {interval(r['ci95_low'], r['ci95_high'])}] vs {r['reference_rate']:g}% "
            f"({r['difference_pts']:+.1f} points): {r['verdict'].upper()}"
        )
        out.append(f"  {sentence(r, doc)}")
        out.append(f"  test: {r['test']}")
        for d in r.get("protocol_differences", []):
            out.append(f"  protocol differs: {describe(d)}")
    for run in doc["runs"]:
        for d in run["differences"]:
            out.append(f"run {run['run_dir']} departs from the benchmark: {describe(d)}")
    if doc["reference_not_in_runs"]:
        out.append(f"not in the runs: {', '.join(doc['reference_not_in_runs'])}")
    if doc["run_suites_without_reference"]:
        out.append(f"no reference entry: {', '.join(doc['run_suites_without_reference'])}")
    if doc["reference"]["discrepancy"]:
        out.append(f"note on the source: {doc['reference']['discrepancy']}")
    for r in doc["rows"]:
        if r["reference_entry"].get("discrepancy"):
            out.append(f"note on {r['suite']}: {r['reference_entry']['discrepancy']}")
    return "\n".join(out) + "\n"
