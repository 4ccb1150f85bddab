"""``rollbench compare --sequential``: a sequential paired comparison recomputed from its arms' run directories alone.

Each arm of ``rollbench sequential`` is an ordinary run directory whose run.json has a ``sequential`` block
(:class:`rollbench.core.runlog_model.SequentialRecord`: the rule, its parameters, the partner arm, the family of tasks
and, once decided, the decision and the look that made it). From the two arms of a task this module rebuilds the
pairs in plan order (episode k of A with episode k of B: same task, trial, seed, initial state, instruction, horizon
and success rule, checked on both plans), counts a pair only when both episodes are committed (the counted pairs are
the longest prefix of the plan present in both arms), and replays every look of the rule
(:func:`rollbench.grading.sequential.run_looks`). Errored episodes are failures, as in grade.

Refused (ConfigError, one line naming the file and the reason): a run without the block; a block that is malformed or
whose derived values (thresholds, exact errors) are not what its parameters give (edited); arms that do not name each
other, disagree on the design or the family, or whose plans differ; a recorded decision or stopping look that the
episodes do not give (edited or damaged episodes); a damaged run (grade violations, via
:func:`rollbench.analysis.sources.load_runs`); a decision log next to the arms that disagrees with the recomputation.

Suites: per-task decisions at ``alpha_family / m`` each (Bonferroni: the probability of any false "better" among the
m tasks is at most ``alpha_family``, whatever their dependence), and a pooled decision: the same rule at
``alpha_family`` with a budget of ``m x budget`` on the pairs of every task in family order, each task's up to the
look that decided it, computed once every task has decided (None before). It tests the global null (no task has a difference; then every discordant pair is a fair coin,
whichever tasks stopped when), a different question from the per-task ones, at its own level.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rollbench.core.contracts import ConfigError
from rollbench.core.jsonfile import read_json
from rollbench.core.runlog_model import SequentialRecord
from rollbench.grading.grade import grade, load_run_log
from rollbench.grading.sequential import FINAL, MAX_SEQUENTIAL_PAIRS, SequentialDesign, design, run_looks
from rollbench.record.runlog import find_run_dirs, is_locked
from rollbench.sequential.log_specs import log_spec_problem
from rollbench.sequential.log_specs import shown as _shown

LOG_NAME = "sequential.json"  # the decision log, in the directory holding the arms
DERIVED = ("theta1", "efficacy_llr", "futility_llr", "type1_error", "futility_error", "power", "fixed_n")
PLAN_FIELDS = ("trial", "seed", "initial_state", "instruction", "max_steps", "success_rule")
ARM_FIELDS = ("policy", "policy_options", "action_noise")  # what may differ between A and B; the rest pairs them


@dataclass(frozen=True)
class RunData:
    """One arm as recorded: its path (``source``), run.json (``log``), grade's episode rows and its policy's name."""

    source: str
    log: dict[str, Any]
    episodes: list[dict[str, Any]]

    @property
    def model(self) -> str:
        """The policy's name, with its action noise when it has one (arms often differ only by it)."""
        name = str(((self.log.get("plan") or {}).get("policy") or {}).get("name", "?"))
        noise = (self.log.get("spec") or {}).get("action_noise") or 0
        return f"{name} (action noise {noise:g})" if noise else name


def load_arm(run_dir: Path) -> RunData:
    """An arm's run log and graded episodes; ConfigError when it is still being recorded, unfinished or damaged."""
    log = load_run_log(run_dir)
    if log.get("status") == "RUNNING":
        why = "being recorded" if is_locked(run_dir) else "not finished (its writer stopped)"
        raise ConfigError(f"{run_dir} is {why}: resume it with the same rollbench sequential command")
    result = grade(run_dir, check_videos=False)
    if result["violations"]:
        n = len(result["violations"])
        raise ConfigError(
            f"{run_dir} is damaged ({n} violation(s) by rollbench grade: {result['violations'][0]}); it is not "
            "analysed. Run `rollbench grade` on it for every problem"
        )
    return RunData(str(run_dir), log, result["episodes"])


def load_arms(paths: list[Path]) -> list[RunData]:
    """The run directories at or below ``paths`` (as ``rollbench runs`` finds them), each read once."""
    seen: set[Path] = set()
    arms = []
    for path in paths:
        if not Path(path).is_dir():
            raise ConfigError(f"{path} is not a directory; give run directories or the directory holding them")
        dirs = find_run_dirs([Path(path)])
        if not dirs:
            raise ConfigError(f"{path} holds no rollbench run (no run.json)")
        for d in dirs:
            if d.resolve() not in seen:
                seen.add(d.resolve())
                arms.append(load_arm(d))
    return arms


@lru_cache(maxsize=16)
def rule_for(
    delta: float, p_a: float, alpha: float, beta: float, budget: int | None, discordant: float | None
) -> SequentialDesign:
    """:func:`rollbench.grading.sequential.design`, cached (it is pure and costs up to seconds)."""
    return design(delta, p_a=p_a, alpha=alpha, beta=beta, budget=budget, discordant=discordant)


def design_record(rule: SequentialDesign, look_every: int) -> dict[str, Any]:
    """The ``design`` block of run.json's ``sequential`` (SequentialDesignRecord) for ``rule``."""
    d = rule.to_dict()
    d.pop("rule")
    return {**d, "look_every": look_every}


def record_of(run: RunData) -> SequentialRecord:
    """The run's ``sequential`` block, validated; ConfigError when absent, malformed or edited."""
    raw = run.log.get("sequential")
    if raw is None:
        raise ConfigError(f"{run.source} is not an arm of rollbench sequential (its run.json has no sequential block)")
    try:
        rec = SequentialRecord.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{run.source}/run.json: sequential.{where}: {first['msg']}") from None
    d = rec.design
    rule = rule_for(d.delta, d.p_a, d.alpha, d.beta, d.budget, d.discordant)
    for name in DERIVED:
        if getattr(rule, name) != getattr(d, name):
            raise ConfigError(
                f"{run.source}/run.json: sequential.design.{name} is {getattr(d, name)!r} but its parameters give "
                f"{getattr(rule, name)!r} (edited)"
            )
    return rec


def paired_outcomes(a: RunData, b: RunData, task: str) -> tuple[list[int], list[int]]:
    """A's and B's 0/1 outcomes on the counted pairs of ``task``, in plan order (lists of equal length).

    ConfigError when the two plans of ``task`` differ (naming the trial and field) or a recorded episode is not the
    planned one."""
    plans = []
    for run in (a, b):
        eps = [e for e in (run.log.get("plan") or {}).get("episodes", []) if e.get("task") == task]
        if not eps:
            raise ConfigError(f"{run.source} did not plan task {task}")
        plans.append(eps)
    if len(plans[0]) != len(plans[1]):
        raise ConfigError(f"arms differ: {a.source} plans {len(plans[0])} episodes, {b.source} {len(plans[1])}")
    for pa, pb in zip(*plans, strict=True):
        for f in PLAN_FIELDS:
            if pa.get(f) != pb.get(f):
                raise ConfigError(
                    f"arms are not paired: trial {pa.get('trial')} of {task} has {f} {pa.get(f)!r} in {a.source}, "
                    f"{pb.get(f)!r} in {b.source}"
                )
    rows = [{e["episode_index"]: e for e in run.episodes if e["task"] == task} for run in (a, b)]
    xa: list[int] = []
    xb: list[int] = []
    for planned in plans[0]:
        ea, eb = (r.get(planned["episode_index"]) for r in rows)
        if ea is None or eb is None:
            break  # a pair counts only when both episodes are committed
        for run, ep in ((a, ea), (b, eb)):
            if (ep["seed"], ep["initial_state"]) != (planned["seed"], planned["initial_state"]):
                raise ConfigError(f"{run.source}: episode {ep['episode_index']} is not the planned one (damaged)")
        xa.append(int(bool(ea["success"])))
        xb.append(int(bool(eb["success"])))
    return xa, xb


def task_document(a: RunData, b: RunData, rec: SequentialRecord) -> dict[str, Any]:
    """Every look of the task's test and its decision, recomputed from the two arms."""
    d = rec.design
    rule = rule_for(d.delta, d.p_a, d.alpha, d.beta, d.budget, d.discordant)
    xa, xb = paired_outcomes(a, b, rec.task)
    looks = [lk.to_dict() for lk in run_looks(rule, xa, xb, d.look_every)]
    last = looks[-1]["decision"] if looks else "continue"
    decided = last in FINAL
    counted = looks[-1]["pairs"] if decided else len(xa)
    return {
        "task": rec.task,
        "a": a.source,
        "b": b.source,
        "policy_a": a.model,
        "policy_b": b.model,
        "design": d.model_dump(),
        "looks": looks,
        "decision": last if decided else None,
        "stopped_at": looks[-1]["pairs"] if decided else None,
        "pairs_counted": counted,
        "episodes_recorded": {"a": len(a.episodes), "b": len(b.episodes)},
        "outcomes": {"a": xa[:counted], "b": xb[:counted]},
        "recorded": {"decision": rec.decision, "stopped_at": rec.stopped_at},
    }


def _pooled(tasks: list[dict[str, Any]], d: Any, alpha_family: float) -> dict[str, Any]:
    budget = min(len(tasks) * d.budget, MAX_SEQUENTIAL_PAIRS)
    rule = rule_for(d.delta, d.p_a, alpha_family, d.beta, budget, d.discordant)
    xa = [x for t in tasks for x in t["outcomes"]["a"]]
    xb = [x for t in tasks for x in t["outcomes"]["b"]]
    looks = [lk.to_dict() for lk in run_looks(rule, xa, xb, d.look_every)]
    last = looks[-1]["decision"] if looks else "continue"
    return {
        "design": design_record(rule, d.look_every),
        "looks": looks,
        "decision": last if last in FINAL else None,
        "stopped_at": looks[-1]["pairs"] if last in FINAL else None,
        "complete": all(t["decision"] for t in tasks),
    }


def _pair_up(runs: list[RunData]) -> list[tuple[RunData, RunData, SequentialRecord]]:
    """(A, B, A's record) per task, checking that each arm names the other and that they agree."""
    by_id = {r.log.get("run_id"): (r, record_of(r)) for r in runs}
    pairs = []
    for run, rec in by_id.values():
        if rec.arm != "a":
            continue
        if rec.partner not in by_id:
            raise ConfigError(f"{run.source}: its B arm {rec.partner!r} was not given (give both arms)")
        other, orec = by_id[rec.partner]
        if orec.arm != "b" or orec.partner != run.log.get("run_id"):
            raise ConfigError(f"{run.source} and {other.source} are not the two arms of one comparison")
        for f in ("rule", "task", "family", "alpha_family", "design"):
            if getattr(rec, f) != getattr(orec, f):
                raise ConfigError(f"arms {run.source} and {other.source} record different sequential.{f}")
        sa, sb = (r.log.get("spec") or {} for r in (run, other))
        if diff := [k for k in sorted({*sa, *sb}) if k not in ARM_FIELDS and sa.get(k) != sb.get(k)]:
            raise ConfigError(
                f"arms {run.source} and {other.source} are not paired: their run.json spec.{diff[0]} differ"
            )
        pairs.append((run, other, rec))
    paired_ids = {id(x) for a, b, _ in pairs for x in (a, b)}
    lone = [r.source for r in runs if id(r) not in paired_ids]
    if lone:
        raise ConfigError(f"{lone[0]}: its A arm was not given (give both arms)")
    return pairs


def compare_sequential(paths: list[Path]) -> dict[str, Any]:
    """The sequential comparison held by the run directories under ``paths`` (the two arms of a task, or every arm of
    a suite, or the directory holding them), recomputed from the arms alone; see the module docstring.

    Returns ``{"statistics": "sequential", "rule", "alpha_family", "correction", "tasks": [task documents, family
    order], "pooled": {...} or None (one task), "log": {"path", "agrees"} or None}``. Raises ConfigError (see
    the module docstring)."""
    pairs = _pair_up(load_arms(paths))
    if not pairs:
        raise ConfigError("no arm of a rollbench sequential comparison was given")
    family = pairs[0][2].family
    by_task = {rec.task: (a, b, rec) for a, b, rec in pairs}
    if any(rec.family != family for *_, rec in pairs) or len(by_task) != len(pairs):
        raise ConfigError("the runs given belong to more than one sequential comparison; give one at a time")
    missing = [t for t in family if t not in by_task]
    tasks = [task_document(*by_task[t]) for t in family if t in by_task]
    for t in tasks:
        rec = t["recorded"]
        if rec["decision"] is not None and (rec["decision"], rec["stopped_at"]) != (t["decision"], t["stopped_at"]):
            raise ConfigError(
                f"{t['a']}/run.json records {rec['decision']} at pair {rec['stopped_at']} but the episodes give "
                f"{t['decision'] or 'no decision'} at pair {t['stopped_at'] or t['pairs_counted']} (edited or damaged)"
            )
    for a, b, rec in pairs:  # after the check above: an edited decision is named as such first
        if (theirs := record_of(b)).decision != rec.decision or theirs.stopped_at != rec.stopped_at:
            raise ConfigError(
                f"arms {a.source} and {b.source} record different decisions ({rec.decision} at {rec.stopped_at}, "
                f"{theirs.decision} at {theirs.stopped_at}): one was edited or removed"
            )
    rec0 = pairs[0][2]
    complete = not missing and all(t["decision"] for t in tasks)
    doc: dict[str, Any] = {
        "statistics": "sequential",
        "rule": rec0.rule,
        "alpha_family": rec0.alpha_family,
        "correction": "bonferroni" if len(family) > 1 else "none",
        "family": family,
        "tasks_missing": missing,
        "tasks": tasks,
        # the pooled test is defined once every task has stopped (its pairs are each task's counted ones, in family
        # order: while tasks advance in turns, an earlier task's new pairs would shift a later task's)
        "pooled": _pooled(tasks, rec0.design, rec0.alpha_family) if len(family) > 1 and complete else None,
        "log": None,
    }
    specs = {rec.task: (a.log.get("spec") or {}, b.log.get("spec") or {}) for a, b, rec in pairs}
    doc["log"] = check_log(doc, {Path(t["a"]).parent for t in tasks}, specs)
    return doc


def log_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What the decision log records and a recomputation must reproduce: per task every look and the decision."""
    return {
        "tasks": {t["task"]: {"looks": t["looks"], "decision": t.get("decision")} for t in doc["tasks"]},
        "pooled": None if doc["pooled"] is None else {k: doc["pooled"].get(k) for k in ("looks", "decision")},
    }


def _log_shape_problem(logged: dict[str, Any]) -> str | None:
    """What keeps ``logged`` (a parsed decision log) from :func:`log_view`: each task entry an object with a string
    ``task`` and a list ``looks``, ``pooled`` null or an object with a list ``looks``; None when nothing does."""
    for i, t in enumerate(logged["tasks"]):
        if not isinstance(t, dict) or not isinstance(t.get("task"), str) or not isinstance(t.get("looks"), list):
            return f"its tasks[{i}] is not an object with a string task and a list of looks"
    pooled = logged.get("pooled")
    if pooled is not None and (not isinstance(pooled, dict) or not isinstance(pooled.get("looks"), list)):
        return "its pooled entry is neither null nor an object with a list of looks"
    return None


# the decision log's parameters: their ranges (SequentialDesignRecord's; discordant: a probability or null)
_RANGES: dict[str, tuple[type, float, float, bool]] = {  # name -> (type, low, high, ends included)
    "alpha": (float, 0.0, 0.5, False),
    "beta": (float, 0.0, 0.5, False),
    "delta": (float, 0.0, 1.0, False),
    "p_a": (float, 0.0, 1.0, False),
    "discordant": (float, 0.0, 1.0, True),
    "budget": (int, 1, MAX_SEQUENTIAL_PAIRS, True),
    "look_every": (int, 1, MAX_SEQUENTIAL_PAIRS, True),
}


def _out_of_range(name: str, v: Any) -> str | None:
    kind, low, high, closed = _RANGES[name]
    if v is None and name == "discordant":
        return None
    numeric = isinstance(v, int | float) and not isinstance(v, bool) and (kind is float or type(v) is int)
    inside = numeric and (low <= v <= high if closed else low < v < high)  # NaN is inside no range
    if inside:
        return None
    bounds = f"[{low}, {high}]" if closed else f"({low}, {high})"
    return f"its parameters.{name} is {_shown(v)}, not {'an integer' if kind is int else 'a number'} in {bounds}"


def _log_parameter_problem(logged: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """What in the decision log's ``parameters`` and header is out of range or differs from the arms' run.json
    ``sequential`` blocks (``doc``, the recomputation): the family and its level, the rule, and per task the design
    (alpha, beta, delta, p_a, discordant, budget, look schedule, and the values they give); None when nothing."""
    params = logged.get("parameters")
    if not isinstance(params, dict):
        return "it has no parameters object"
    for name in _RANGES:
        if why := _out_of_range(name, params.get(name)):
            return why
    d = doc["tasks"][0]["design"]
    want = {"alpha": doc["alpha_family"], "tasks": doc["family"]}
    want |= {k: d[k] for k in ("beta", "delta", "p_a", "discordant", "budget", "look_every")}
    for name, value in want.items():
        if params.get(name) != value or type(params.get(name)) is not type(value):
            return f"its parameters.{name} is {_shown(params.get(name))} but the arms' run.json record {_shown(value)}"
    for name in ("rule", "alpha_family", "family", "correction"):
        if name in logged and logged[name] != doc[name]:
            return f"its {name} is {_shown(logged[name])} but the arms' run.json give {_shown(doc[name])}"
    designs = {t["task"]: t.get("design") for t in logged["tasks"]}
    for t in doc["tasks"]:
        got = designs.get(t["task"])
        if got is not None and got != t["design"]:
            diff = next((k for k in t["design"] if not isinstance(got, dict) or got.get(k) != t["design"][k]), "")
            return f"its design of task {t['task']} differs from the arms' run.json ({diff or 'its keys'})"
    return None


def check_log(
    doc: dict[str, Any], dirs: set[Path], specs: dict[str, tuple[dict[str, Any], dict[str, Any]]] | None = None
) -> dict[str, Any] | None:
    """Compare the decision log found next to the arms (one directory) with ``doc``: None when there is none,
    ``{"path", "agrees": True}`` when it agrees; ConfigError naming the first difference otherwise."""
    if len(dirs) != 1:
        return None
    path = next(iter(dirs)) / LOG_NAME
    if not path.is_file() or path.is_symlink():
        return None
    logged = read_json(path, "decision log")
    if not isinstance(logged, dict) or not isinstance(logged.get("tasks"), list):
        raise ConfigError(f"{path} is not a rollbench sequential decision log")
    if problem := (
        _log_shape_problem(logged)
        or _log_parameter_problem(logged, doc)
        or log_spec_problem(logged["parameters"], specs or {})
    ):
        raise ConfigError(f"{path} is not a rollbench sequential decision log: {problem}")
    mine = log_view(doc)
    theirs = log_view({"tasks": logged["tasks"], "pooled": logged.get("pooled")})
    items = [(f"task {t}", theirs["tasks"].get(t), want) for t, want in mine["tasks"].items()]
    items.append(("the pooled test", theirs["pooled"], mine["pooled"]))
    behind = False
    if absent := [t for t in mine["tasks"] if t not in theirs["tasks"]]:  # the log lists every task from its start
        raise ConfigError(f"{path} disagrees with the run directories: it lists no entry for task {absent[0]}")
    for what, got, want in items:
        if got is None or want is None:
            behind |= got is None and want is not None  # the log was written before this test had looks
            continue
        n = next((i for i, (x, y) in enumerate(zip(got["looks"], want["looks"], strict=False)) if x != y), None)
        if n is not None:
            raise ConfigError(f"{path} disagrees with the run directories on {what} at look {n + 1}")
        if len(got["looks"]) > len(want["looks"]) or got["decision"] not in (None, want["decision"]):
            raise ConfigError(f"{path} disagrees with the run directories on {what}: its decision or looks")
        behind |= len(got["looks"]) < len(want["looks"])
    return {"path": str(path), "agrees": True, "up_to_date": not behind}
