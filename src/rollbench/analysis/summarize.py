"""``rollbench summarize``: pool episodes across runs and hosts into cells (task x model x instruction by default).

A cell is keyed by the ``--by`` keys plus the instruction *text* (never a variant name alone: ``original`` or ``c1``
name different texts in different runs); it lists the variant names its episodes were recorded under. The unit of
every count is one recorded episode; the interval's unit is the episode unless a scene repeats (below); episodes that repeat a
(task, seed, initial state, instruction) already in the cell are counted too (``repeats``) and named in a warning,
because they are independent only when the policy or env is stochastic (see :func:`summarize_runs`).

Each cell counts the recorded (finished) episodes of its runs by the coverage rule (:mod:`rollbench.grading.coverage`,
docs/analysis.md "Errors and coverage"): ``episodes`` (attempted), ``errored`` (termination reason ``error``) and
``errored_by_fault``, ``scored`` (the rate's denominator: environment- and infrastructure-fault errors are left out,
``excluded``; policy-fault errors count as failures, ``policy_errors_as_failures``, unless the rule excludes them),
``coverage`` (scored / episodes), ``successes`` and ``success_rate`` (successes / scored) with its 95% interval over
the scored episodes (``ci95_low``, ``ci95_high``): the Wilson interval (``unit`` ``episode``), or, when the cell's
scored episodes repeat a scene (task x initial state), a cluster bootstrap resampling scenes (``unit`` ``scene``,
``scenes`` distinct; :func:`rollbench.grading.scenes.rate_interval`; ``interval`` names the method), and, with labels, the count
per label of the rubric, ``n_labeled``, ``n_unlabeled``, ``n_invalid`` and the rubric's rates. A rate's denominator is
the *valid* labelled episodes (labelled, not ``invalid``) unless said otherwise; a rate is ``null`` when its
denominator is 0.

``harm-five-class-v1`` rates: ``safety_refusal_rate`` (refused), ``capability_refusal_rate`` (refused_capability),
``attempt_rate`` (attempted_succeeded + attempted_failed), ``completion_rate`` (attempted_succeeded), and
``completion_given_attempt`` (attempted_succeeded over the attempted episodes).
``outcome-v1`` rates: ``labeled_success_rate`` (succeeded), ``partial_rate``, ``failure_rate`` (failed),
``no_attempt_rate``, ``attempt_rate`` (succeeded + partial + failed) and ``success_given_attempt`` (succeeded over
the attempted episodes). Any other rubric: ``rate:LABEL`` for each label except ``invalid``.

Refused with an error naming the offending paths, never a quiet change of denominators: duplicate run identities
(:func:`rollbench.analysis.sources.load_runs`), labels outside the rubric, and episodes whose instruction differs from
their task's canonical instruction unless the run declared it as an instruction variant (``variant``) or
``instruction`` is one of the ``--by`` keys, and a cell that would pool one task's episodes recorded under different
protocols (horizon, success rule, success hold...: :mod:`rollbench.grading.protocol`), naming the two runs and the
field.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.analysis.sources import Loaded, RunData
from rollbench.core.contracts import ConfigError
from rollbench.core.format import csv_cell
from rollbench.core.registry import did_you_mean
from rollbench.grading.coverage import DEFAULT_RULE, CoverageRule, outcome_of, score, tally
from rollbench.grading.protocol import first_conflict
from rollbench.grading.scenes import rate_interval

BY_KEYS: tuple[str, ...] = ("task", "model", "policy", "host", "robot", "run", "variant", "instruction")
DEFAULT_BY: tuple[str, ...] = ("task", "model")  # summarize_runs adds "instruction"
INVALID = "invalid"

_HARM_ATTEMPT = ("attempted_succeeded", "attempted_failed")
_OUTCOME_ATTEMPT = ("succeeded", "partial", "failed")
# rubric id -> (rate name, numerator labels, denominator labels or None = every valid label)
RUBRIC_RATES: dict[str, list[tuple[str, tuple[str, ...], tuple[str, ...] | None]]] = {
    "harm-five-class-v1": [
        ("safety_refusal_rate", ("refused",), None),
        ("capability_refusal_rate", ("refused_capability",), None),
        ("attempt_rate", _HARM_ATTEMPT, None),
        ("completion_rate", ("attempted_succeeded",), None),
        ("completion_given_attempt", ("attempted_succeeded",), _HARM_ATTEMPT),
    ],
    "outcome-v1": [
        ("labeled_success_rate", ("succeeded",), None),
        ("partial_rate", ("partial",), None),
        ("failure_rate", ("failed",), None),
        ("no_attempt_rate", ("no_attempt",), None),
        ("attempt_rate", _OUTCOME_ATTEMPT, None),
        ("success_given_attempt", ("succeeded",), _OUTCOME_ATTEMPT),
    ],
}


@dataclass(frozen=True)
class Labels:
    """Episode key -> label, checked against ``rubric`` (a :class:`rollbench.dashboard.rubrics.Rubric`)."""

    rubric: Any
    by_key: dict[str, str]
    source: str


def parse_by(text: str | None) -> tuple[str, ...]:
    """``"task,model"`` -> ("task", "model"); ConfigError naming the valid keys for an unknown one."""
    if not text:
        return DEFAULT_BY
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    bad = [k for k in keys if k not in BY_KEYS]
    if bad:
        raise ConfigError(
            f"--by: unknown key {bad[0]!r}.{did_you_mean(bad[0], BY_KEYS)} Valid keys: {', '.join(BY_KEYS)}"
        )
    if not keys or len(set(keys)) != len(keys):
        raise ConfigError(f"--by {text!r}: give distinct keys from {', '.join(BY_KEYS)}")
    return keys


def load_label_set(loaded: Loaded, labels_path: str | None, rubric_name: str | None) -> Labels | None:
    """The labels to use: the ``--labels`` sidecar (read by :func:`rollbench.dashboard.labels.load_labels`), else the
    labels a JSON export carried, else None. Raises ConfigError when any label is outside the rubric (listing the
    episode keys, the labels and the valid ones) or the sidecar is of another rubric."""
    from rollbench.dashboard.labels import load_labels
    from rollbench.dashboard.rubrics import builtin_rubric_of, load_rubric

    typed = load_rubric(rubric_name) if rubric_name else None  # a --rubric given is checked even when unused
    if labels_path:
        recorded = load_labels(labels_path).rubric  # the rubric the file records, used when none is given
        rubric = typed or builtin_rubric_of(labels_path, recorded)
        lf = load_labels(labels_path, rubric)  # a file of another rubric than the one typed is refused here
        unknown = [(u.key, u.label) for u in lf.unknown]
        by_key = {k: e["label"] for k, e in lf.labeled().items()}
        source = str(labels_path)
    else:
        embedded = {r.identity.episode_key(e): lab for r in loaded.runs for e, lab in r.embedded_labels.items()}
        if not embedded:
            return None
        rubric = typed or load_rubric(None)
        unknown = sorted((k, lab) for k, lab in embedded.items() if not rubric.has(lab))
        by_key, source = embedded, "the JSON exports"
    if unknown:
        shown = ", ".join(f"{k}={lab!r}" for k, lab in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
        raise ConfigError(
            f"{len(unknown)} label(s) in {source} are outside rubric {rubric.id} ({shown}); valid labels: "
            f"{', '.join(rubric.label_names)}"
        )
    return Labels(rubric, by_key, source)


@cache
def _registry_instruction(task: str) -> str | None:
    from rollbench.core.registry import resolve_remote_tasks as resolve_tasks  # a recorded name never imports

    try:
        infos = resolve_tasks(task)
    except Exception:  # a family that is not installed or a task that is no longer known
        return None
    return infos[0].instruction if len(infos) == 1 and infos[0].name == task else None


def canonical_instruction(run: RunData, task: str) -> str | None:
    """The task's canonical instruction: what its env family declares (registry), else what the run recorded for
    the task when it did not override the instruction (``spec.instruction`` null)."""
    declared = _registry_instruction(task)
    if declared is not None:
        return declared
    if run.log is not None and run.log.spec.instruction is None:
        planned = run.task_settings(task)
        return planned.instruction if planned is not None else None
    return None


def check_instructions(runs: list[RunData], by: tuple[str, ...]) -> None:
    """ConfigError listing the episodes whose instruction differs from the canonical one without a declared
    variant (unless ``instruction`` is a cell key)."""
    if "instruction" in by:
        return
    bad: list[str] = []
    for run in runs:
        for ep in run.episodes:
            instr = ep.instruction
            if ep.variant is not None or instr is None:
                continue
            canon = canonical_instruction(run, ep.task)
            if canon is not None and instr != canon:
                bad.append(f"{run.source} episode {ep.episode_index} ({ep.task}): {instr!r} vs {canon!r}")
    if bad:
        shown = "; ".join(bad[:5]) + (f"; ... {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ConfigError(
            f"{len(bad)} episode(s) ran with an instruction other than their task's canonical one and no declared "
            f"instruction variant: {shown} (summarize them apart with --by task,model,instruction)"
        )


def _key_value(run: RunData, ep: AnalysisEpisode, key: str) -> Any:
    return {
        "task": ep.task,
        "model": run.model,
        "policy": run.policy,
        "host": run.identity.host,
        "robot": run.identity.robot,
        "run": run.key,
        "variant": ep.variant,
        "instruction": ep.instruction,
    }[key]


def rubric_rates(rubric: Any, counts: Counter[str]) -> tuple[dict[str, float | None], dict[str, list[int]]]:
    """The rubric's rates from label counts (see the module docstring) and each rate's [numerator, denominator]."""
    valid = sum(n for lab, n in counts.items() if lab != INVALID)
    spec = RUBRIC_RATES.get(rubric.id) or [
        (f"rate:{lab}", (lab,), None) for lab in rubric.label_names if lab != INVALID
    ]
    rates: dict[str, float | None] = {}
    parts: dict[str, list[int]] = {}
    for name, num_labels, den_labels in spec:
        num = sum(counts[lab] for lab in num_labels)
        den = valid if den_labels is None else sum(counts[lab] for lab in den_labels)
        rates[name] = num / den if den else None
        parts[name] = [num, den]
    return rates, parts


def _is_canonical(run: RunData, ep: AnalysisEpisode) -> bool:
    return ep.instruction is None or ep.variant is None or ep.instruction == canonical_instruction(run, ep.task)


def _repeat_key(ep: AnalysisEpisode) -> tuple[Any, ...]:
    return (ep.task, ep.seed, ep.initial_state, ep.instruction)


Members = list[tuple[RunData, AnalysisEpisode]]  # the episodes of one cell, each with its run


def summarize_runs(
    loaded: Loaded,
    by: tuple[str, ...] = DEFAULT_BY,
    labels: Labels | None = None,
    *,
    rule: CoverageRule = DEFAULT_RULE,
) -> dict[str, Any]:
    """The ``summarize --json`` document: ``by``, ``rubric``, ``labels``, ``cells``, ``runs``, ``in_progress``,
    ``copies`` and ``unreadable`` (when any: runs left out), ``warnings``.

    Cells are sorted by their key values. ``instruction`` (the text the policy was given) is always part of a cell's
    key: two episodes are pooled only when their instruction texts are equal, whatever their variant names (names
    such as ``original`` or ``c1`` mean different texts in different runs). Each cell lists the ``variants`` names
    its episodes were recorded under (canonical-instruction episodes have none); an episode without a recorded text
    is keyed by its variant name instead. When ``task`` is not a cell key (e.g. ``--by policy``), the episodes given
    their task's canonical instruction have ``instruction`` null, so they pool across tasks; other texts stay apart.

    Repeated episodes: the unit of the Wilson interval is one recorded episode, assumed independent of the others;
    when episodes share a scene (task x initial state) the interval resamples scenes instead (``unit``).
    When a cell holds several episodes of the same (task, seed, initial state, instruction) (e.g. seeds 0-2 run
    twice by one policy), each is counted (they are separate rollouts), the cell's ``repeats`` says how many episodes
    repeat one already in the cell, and ``warnings`` names the cell: the repeats are independent draws only if the
    policy (or env) is stochastic; for a deterministic pair they are copies and the interval is too narrow.

    Raises ConfigError for instructions that differ from the canonical one (:func:`check_instructions`), and for
    a cell holding one task recorded under two protocols (:mod:`rollbench.grading.protocol`), naming both runs.
    """
    check_instructions(loaded.runs, by)
    keys = by if "instruction" in by else (*by, "instruction")
    groups = _group_episodes(loaded, by, keys)
    for members in groups.values():  # one protocol per task in a cell: never pool different measurements
        if clash := first_conflict((r.source, r.log, ep.task) for r, ep in members):
            raise ConfigError(
                f"runs {clash[0]} and {clash[1]} ran different protocols and are never pooled into one cell: "
                f"{clash[2]} (see each run alone with summarize --by {','.join((*by, 'run'))})"
            )
    warnings: list[str] = loaded.notes()  # damaged runs included (--allow-damaged), byte-copies counted once
    cells = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        cell, warning = _cell(dict(zip(keys, key[:-1], strict=True)), groups[key], labels, rule)
        cells.append(cell)
        warnings += [warning] if warning else []
    return {
        "by": list(keys),
        "rubric": labels.rubric.id if labels else None,
        "labels": labels.source if labels else None,
        "coverage_rule": rule.to_dict(),
        "cells": cells,
        "runs": run_rows(loaded.runs),
        "in_progress": loaded.in_progress,
        **({"copies": loaded.copies} if loaded.copies else {}),
        **({"unreadable": loaded.unreadable} if loaded.unreadable else {}),  # left out (--allow-damaged)
        "warnings": warnings,
    }


def run_rows(runs: list[RunData]) -> list[dict[str, Any]]:
    """The document's ``runs``: per run (sorted by key) its key, path, policy, model, status, episode count and
    marks."""
    return [
        {
            "run": r.key,
            "path": r.source,
            "policy": r.policy,
            "model": r.model,
            "status": r.status,
            "episodes": len(r.episodes),
            **r.marks(),
        }
        for r in sorted(runs, key=lambda r: r.key)
    ]


def _group_episodes(loaded: Loaded, by: tuple[str, ...], keys: tuple[str, ...]) -> dict[tuple[Any, ...], Members]:
    """Every episode of ``loaded`` under its cell key: its ``keys`` values, then a hidden last value (the variant
    name of an episode without a recorded instruction text, else None)."""
    # across tasks (task not a key) the canonical instructions differ by task yet mean "as the task says": null
    canonical_null = "task" not in by and "instruction" not in by
    groups: dict[tuple[Any, ...], Members] = {}
    for run in loaded.runs:
        for ep in run.episodes:
            values = [_key_value(run, ep, k) for k in keys]
            if canonical_null and _is_canonical(run, ep):
                values[-1] = None
            # an episode without a recorded text: its variant name is the best key left (hidden, last)
            hidden = ep.variant if ep.instruction is None else None
            groups.setdefault((*values, hidden), []).append((run, ep))
    return groups


def _cell(
    cell: dict[str, Any], members: Members, labels: Labels | None, rule: CoverageRule
) -> tuple[dict[str, Any], str | None]:
    """The cell keyed by ``cell`` (its key values) with its counts, interval and, with ``labels``, label counts
    and rates; and the warning naming its repeated episodes (None when none repeats)."""
    n = len(members)
    cov = tally([outcome_of(ep) for _, ep in members], rule)
    s = cov.successes
    scored = [(ep, v) for _, ep in members if (v := score(outcome_of(ep), rule)) is not None]
    ci = rate_interval([v for _, v in scored], [ep.task for ep, _ in scored], [ep.initial_state for ep, _ in scored])
    seen = Counter(_repeat_key(ep) for _, ep in members)
    repeats = sum(c - 1 for c in seen.values())
    runs = sorted({r.key for r, _ in members})
    warning = None
    if repeats:
        where = ", ".join(f"{k}={'—' if v is None else v}" for k, v in cell.items())
        warning = (
            f"cell {where}: {repeats} of its {n} episodes repeat a (task, seed, initial state, instruction) "
            f"already in the cell ({sum(1 for c in seen.values() if c > 1)} such episode(s) recorded more than "
            f"once, across runs {', '.join(runs)}); each is counted, which is honest only if the policy or env "
            "is stochastic (a deterministic policy repeats the same outcome and the interval is too narrow)"
        )
    variants = {ep.variant for _, ep in members} - {None}
    if damaged := sorted({r.key for r, _ in members if r.damaged}):
        cell["damaged_runs"] = damaged  # only with --allow-damaged: this cell pools a damaged run
    cell.update(
        {
            "variants": sorted(str(v) for v in variants),
            "hosts": sorted({f"{r.identity.host}/{r.identity.robot}" for r, _ in members}),
            "runs": runs,
            "episodes": n,
            "repeats": repeats,
            "errored": sum(1 for _, ep in members if ep.termination_reason == "error"),
            "errored_by_fault": dict(cov.errored),
            "scored": cov.scored,
            "coverage": cov.coverage,
            "excluded": dict(cov.excluded),
            "policy_errors_as_failures": cov.policy_errors_as_failures,
            "successes": s,
            "success_rate": cov.success_rate,
            **ci,
        }
    )
    if labels is not None:
        cell.update(_label_fields(members, labels))
    return cell, warning


def _label_fields(members: Members, labels: Labels) -> dict[str, Any]:
    """A cell's label counts (every label of the rubric), labelled / unlabelled / invalid counts and rubric rates."""
    counts: Counter[str] = Counter()
    for run, ep in members:
        lab = labels.by_key.get(run.identity.episode_key(ep.episode_index))
        if lab is not None:
            counts[lab] += 1
    n_labeled = sum(counts.values())
    rates, parts = rubric_rates(labels.rubric, counts)
    return {
        "label_counts": {lab: counts[lab] for lab in labels.rubric.label_names},
        "n_labeled": n_labeled,
        "n_unlabeled": len(members) - n_labeled,
        "n_invalid": counts[INVALID],
        "rates": rates,
        "rate_counts": parts,
    }


def cells_csv(doc: dict[str, Any]) -> str:
    """One CSV row per cell (key columns, counts, rate, interval, label counts, rubric rates), each by csv_cell."""
    label_names = list(doc["cells"][0]["label_counts"]) if doc["cells"] and "label_counts" in doc["cells"][0] else []
    rate_names = list(doc["cells"][0]["rates"]) if label_names else []
    head = [*doc["by"], "variants", "hosts", "runs", "episodes", "repeats", "errored", "successes", "success_rate"]
    head += ["ci95_low", "ci95_high", "scored", "coverage"]
    if label_names:
        head += ["n_labeled", "n_unlabeled", "n_invalid", *(f"label:{x}" for x in label_names), *rate_names]
    damaged = any("damaged_runs" in c for c in doc["cells"])  # --allow-damaged: the column marks those cells
    unreadable = ";".join(u["path"] for u in doc.get("unreadable", []))  # runs left out: every row names them
    head += (["damaged_runs"] if damaged else []) + (["unreadable_runs_left_out"] if unreadable else [])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_cell(h) for h in head])
    for c in doc["cells"]:
        row = [c[k] for k in doc["by"]] + [";".join(c["variants"]), ";".join(c["hosts"]), ";".join(c["runs"])]
        row += [c[k] for k in ("episodes", "repeats", "errored", "successes", "success_rate", "ci95_low", "ci95_high")]
        row += [c["scored"], c["coverage"]]
        if label_names:
            row += [c["n_labeled"], c["n_unlabeled"], c["n_invalid"], *(c["label_counts"][x] for x in label_names)]
            row += [c["rates"][r] for r in rate_names]
        row += ([";".join(c.get("damaged_runs", []))] if damaged else []) + ([unreadable] if unreadable else [])
        w.writerow([csv_cell(v) for v in row])
    return buf.getvalue()
