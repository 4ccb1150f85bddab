"""The instruction search of ``rollbench optimize-instruction``: paired rounds, a held-out verdict, resumable.

Seeds (disjoint by construction, and checked against the recorded episodes at the end): the held-out evaluation
uses seeds ``seed .. seed + H - 1``; round ``r`` uses ``seed + H + r * E .. seed + H + (r + 1) * E - 1``. So no
search round ever sees a held-out scene, and every round sees fresh scenes.

A round is one ordinary rollbench run (``OUT/rounds/NAME-rNNN``, NAME = OUT's own name, so run identities stay
distinct across searches kept under one root; an instruction sweep): variant ``incumbent`` and the
proposed candidates ``c1..cC``, each on the round's E seeds, so every candidate is paired with the incumbent.
Scores come from :func:`rollbench.grade` of that directory. A candidate is *better* when, on the paired episodes,

* default: the one-sided exact McNemar test (candidate better) gives ``p <= alpha`` (``--alpha``, 0.05);
* with ``--margin M``: its success rate exceeds the incumbent's by at least ``M`` (> 0; no test).

Errored episodes count as failures, as in :func:`rollbench.grade` (each variant's ``errors`` is recorded and a
warning printed). Among better candidates the winner is the one with the most successes, then the smallest p, then the shortest text,
then the alphabetically first: deterministic. The incumbent changes only to a better candidate, so it never
regresses on the round it was chosen in. The search stops on a perfect round (the incumbent, or the new
incumbent, solved all E), after ``rounds`` rounds, after ``patience`` rounds in a row without a change, when the
next round would exceed ``budget`` search episodes, or when the proposer has nothing new.

Then ``OUT/NAME-holdout`` runs the original and the winner on the H held-out seeds, and that paired comparison (rates
with Wilson intervals, the difference with a paired bootstrap interval, one-sided exact McNemar) is the headline.

State: ``OUT/optimize.json`` is rewritten atomically after every step (round proposed, round decided, stop, held-out
result). Killed at any point, the same command resumes: a proposed round's run resumes through ``evaluate``, a
decided round is re-graded from disk and must give the recorded decision (else an error says what differs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.format import differences, p_value
from rollbench.core.grade_model import GradeDocument
from rollbench.core.identity import sanitize_segment
from rollbench.core.jsonfile import read_json
from rollbench.core.paths import check_output_path
from rollbench.core.spec import EvalSpec, build_spec
from rollbench.grading.stats import wilson_interval
from rollbench.optimize.compare import paired, paired_interval, successes_by_trial
from rollbench.optimize.config import SearchConfig, is_better
from rollbench.optimize.proposers import Context, proposal
from rollbench.optimize.state import check_names, holdout_dir, read_state, round_dir
from rollbench.record.files import atomic_write_json, check_output_file

STATE = "optimize.json"
INCUMBENT = "incumbent"


class Search:
    """One search in directory ``out``. ``run()`` does (or resumes) it and returns the state document."""

    def __init__(
        self,
        cfg: SearchConfig,
        out: Path,
        log: Callable[[str], None] = lambda _m: None,
        evaluate: Callable[..., GradeDocument] | None = None,
    ) -> None:
        from rollbench.api import evaluate as _evaluate

        self.cfg, self.out, self.log = cfg, out, log
        self.evaluate = evaluate or _evaluate
        self.state: dict[str, Any] = {}
        self._dropped = 0
        self.prefix = sanitize_segment(
            out.resolve().name, "search"
        )  # run directories: rounds/PREFIX-rNNN, PREFIX-holdout

    # ---- state ----
    def _save(self) -> None:
        atomic_write_json(self.out / STATE, self.state)

    def _spec(self, variants: list[tuple[str, str]], seeds: tuple[int, int]) -> EvalSpec:
        c = self.cfg
        return build_spec(
            env=c.env,
            policy=c.policy,
            episodes=seeds[1] - seeds[0],
            seed=seeds[0],
            max_steps=c.max_steps,
            policy_options=c.policy_options,
            instructions=tuple({"name": n, "instruction": t} for n, t in variants),
        )

    def prepare(self) -> None:
        """Validate everything before anything is written; load or create the state. Raises ConfigError."""
        from rollbench.api import prepare_run
        from rollbench.core.registry import resolve_tasks

        tasks = resolve_tasks(self.cfg.env)
        if len(tasks) != 1:
            raise ConfigError(f"--env must name one task, got {len(tasks)} ({self.cfg.env})")
        task = tasks[0]
        check_output_path(self.out, "--out", directory=True)
        path = self.out / STATE
        check_output_file(path, "--out", own="optimize")  # the search state: never a link, FIFO or hard-linked file
        if path.exists() or path.is_symlink():
            state = read_state(read_json(path, "search state"), path)
            if state["config_identity"] != self.cfg.identity() or state["config"] != self.cfg.model_dump(mode="json"):
                diff = differences(state["config"], self.cfg.model_dump(mode="json"))
                raise ConfigError(f"{self.out} holds a search with other options ({diff}); choose another --out")
            if (state["task"], state["original"]) != (task.name, self._start(task.instruction)):
                raise ConfigError(
                    f"search state {path} is damaged: its task or original instruction is not the options'"
                )
            check_names(state, self.prefix, self.cfg, path)
            self.state = state
            return
        if self.out.exists() and any(self.out.iterdir()):
            raise ConfigError(f"{self.out} exists and holds no {STATE}; choose another --out")
        start = self._start(task.instruction)
        # the policy, the task and the round spec are checked here, before the first write (exit 2, nothing written)
        prepare_run(self._spec([(INCUMBENT, start)], self.cfg.round_seeds(0)), self.out / round_dir(self.prefix, 0))
        if self.cfg.proposer == "llm":
            from rollbench.optimize.proposers import LLMProposer

            LLMProposer.from_env()
        self.state = {
            "rollbench_optimize": 1,
            "config": self.cfg.model_dump(mode="json"),
            "config_identity": self.cfg.identity(),
            "task": task.name,
            "task_instruction": task.instruction,
            "original": start,
            "runs_prefix": self.prefix,
            "seeds": {
                "holdout": list(self.cfg.holdout_seeds()),
                "rounds": "round r: [seed + H + r*E, seed + H + (r+1)*E)",
            },
            "status": "RUNNING",
            "incumbent": start,
            "episodes_used": 0,
            "rounds": [],
            "stop_reason": None,
            "holdout": None,
        }
        self.out.mkdir(parents=True, exist_ok=True)
        self._save()

    def _start(self, task_instruction: str) -> str:
        return self.cfg.start if self.cfg.start is not None else task_instruction

    # ---- rounds ----
    def _seen(self) -> frozenset[str]:
        seen = {self.state["original"]}
        for r in self.state["rounds"]:
            seen |= {c["instruction"] for c in r["candidates"]} | {r["incumbent"]}
        return frozenset(seen)

    def _history(self) -> tuple[tuple[str, int, int], ...]:
        out = []
        for r in self.state["rounds"]:
            texts = dict(self._variants(r))
            for name, s in (r.get("scores") or {}).items():
                out.append((texts[name], s["successes"], s["episodes"]))
        return tuple(out)

    def _stop_reason(self) -> str | None:
        c, rounds = self.cfg, self.state["rounds"]
        if rounds and rounds[-1].get("perfect"):
            return "perfect score"
        if len(rounds) >= c.rounds:
            return f"{c.rounds} rounds done"
        idle = 0
        for r in reversed(rounds):
            if r["decision"]["accepted"] is not None:
                break
            idle += 1
        if idle >= c.patience:
            return f"no improvement in {idle} rounds in a row (patience {c.patience})"
        if (
            c.budget is not None
            and self.state["episodes_used"] + (c.candidates + 1) * c.episodes_per_candidate > c.budget
        ):
            return f"episode budget: {self.state['episodes_used']} used, a round needs {(c.candidates + 1) * c.episodes_per_candidate} more than {c.budget}"
        return None

    def _propose(self) -> dict[str, Any] | None:
        r = len(self.state["rounds"])
        inc = self.state["incumbent"]
        ctx = Context(
            self.state["task"], self.state["task_instruction"], r, self.cfg.seed, self._seen(), self._history()
        )
        cands, dropped = proposal(self.cfg.proposer, inc, ctx, self.cfg.candidates)
        for d in dropped:  # the reason only: a dropped text is never shown
            self.log(f"round {r}: line {d['line']} of the proposer's reply {d['reason']}")
        if not cands:
            self._dropped = len(dropped)
            return None
        rnd: dict[str, Any] = {
            "round": r,
            "seeds": list(self.cfg.round_seeds(r)),
            "run_dir": round_dir(self.prefix, r),
            "incumbent": inc,
            "candidates": [{"name": f"c{i + 1}", "instruction": t, "proposer": p} for i, (t, p) in enumerate(cands)],
            "status": "proposed",
        }
        if dropped:
            rnd["dropped"] = dropped
        self.state["rounds"].append(rnd)
        self._save()
        return rnd

    def _variants(self, rnd: dict[str, Any]) -> list[tuple[str, str]]:
        return [(INCUMBENT, rnd["incumbent"])] + [(c["name"], c["instruction"]) for c in rnd["candidates"]]

    def _decide(self, rnd: dict[str, Any], result: GradeDocument) -> dict[str, Any]:
        """Scores, comparisons and the decision of a round, from its graded run (pure: recomputed on resume)."""
        task, e = self.state["task"], self.cfg.episodes_per_candidate
        scores, comparisons = {}, []
        for name, _ in self._variants(rnd):
            won = successes_by_trial(result, task, name)
            errors = sum(1 for x in result.episodes if x.variant == name and x.termination_reason == "error")
            scores[name] = {"successes": sum(won.values()), "episodes": len(won), "errors": errors}
        best = None
        for c in rnd["candidates"]:
            cmp = paired(result, task, INCUMBENT, c["name"], alternative="greater")
            better = cmp.pairs == e and is_better(cmp, self.cfg)
            comparisons.append({**cmp.to_dict(), "better": better})
            key = (-cmp.variant_successes, cmp.p_value, len(c["instruction"]), c["instruction"])
            if better and (best is None or key < best[0]):
                best = (key, c)
        inc_perfect = scores[INCUMBENT]["successes"] == e
        if best is None:
            why = (
                "the incumbent solved every episode"
                if inc_perfect
                else "no candidate was better on the paired episodes"
            )
            decision = {"accepted": None, "instruction": rnd["incumbent"], "reason": why}
        else:
            c = best[1]
            chosen = next(x for x in comparisons if x["variant"] == c["name"])
            rule = (
                f"margin {self.cfg.margin}"
                if self.cfg.margin is not None
                else f"one-sided exact McNemar p <= {self.cfg.alpha}"
            )
            decision = {
                "accepted": c["name"],
                "instruction": c["instruction"],
                "reason": f"{chosen['variant_successes']}/{e} vs {chosen['reference_successes']}/{e} on the same seeds "
                f"(b={chosen['variant_only']}, c={chosen['reference_only']}, p={chosen['p_value']:.4g}; rule: {rule})",
            }
        perfect = inc_perfect or (best is not None and scores[best[1]["name"]]["successes"] == e)
        return {
            "scores": scores,
            "comparisons": comparisons,
            "decision": decision,
            "perfect": perfect,
            "status": result.status,
        }

    def _run_round(self, rnd: dict[str, Any]) -> GradeDocument:
        spec = self._spec(self._variants(rnd), tuple(rnd["seeds"]))
        return self.evaluate(spec, out=self.out / round_dir(self.prefix, rnd["round"]))

    def _verify(self, rnd: dict[str, Any]) -> None:
        """A decided round, re-graded from its run directory, must give the recorded decision."""
        from rollbench.api import grade

        again = self._decide(rnd, grade(self.out / round_dir(self.prefix, rnd["round"]), check_videos=False))
        for key in ("scores", "decision", "perfect"):
            if again[key] != rnd.get(key):
                raise RollbenchError(
                    f"{self.out / STATE}: round {rnd['round']}'s recorded {key} {rnd.get(key)!r} differs from its run "
                    f"directory graded again ({again[key]!r}); the search state and the recorded episodes disagree"
                )

    def run(self) -> dict[str, Any]:
        self.prepare()
        st = self.state
        for rnd in st["rounds"]:
            if rnd["status"] == "decided":
                self._verify(rnd)
        while st["stop_reason"] is None:
            if st["rounds"] and st["rounds"][-1]["status"] == "proposed":
                rnd = st["rounds"][-1]
            else:
                why = self._stop_reason()
                if why is not None:
                    st["stop_reason"] = why
                    break
                rnd = self._propose()
                if rnd is None:
                    st["stop_reason"] = "the proposer has no new candidate" + (
                        f" ({self._dropped} lines of its reply dropped, each logged with its reason)"
                        if self._dropped
                        else ""
                    )
                    break
            self.log(
                f"round {rnd['round']}: incumbent {rnd['incumbent']!r} vs {len(rnd['candidates'])} candidates "
                f"on seeds {rnd['seeds'][0]}..{rnd['seeds'][1] - 1}"
            )
            result = self._run_round(rnd)
            rnd.update(self._decide(rnd, result))
            rnd["status"] = "decided"
            st["episodes_used"] = sum(
                (len(r["candidates"]) + 1) * self.cfg.episodes_per_candidate for r in st["rounds"]
            )
            if rnd["decision"]["accepted"] is not None:
                st["incumbent"] = rnd["decision"]["instruction"]
            self.log(
                f"round {rnd['round']}: {rnd['decision']['accepted'] or 'kept the incumbent'} - {rnd['decision']['reason']}"
            )
            errors = sum(v["errors"] for v in rnd["scores"].values())
            if errors:
                self.log(
                    f"round {rnd['round']}: warning: {errors} episodes ended in error and count as failures "
                    f"(see rollbench grade {self.out / round_dir(self.prefix, rnd['round'])})"
                )
            self._save()
        self._save()
        st["holdout"] = self._holdout()
        st["status"] = "DONE"
        self._save()
        return st

    # ---- held-out ----
    def _holdout(self) -> dict[str, Any]:
        st, task = self.state, self.state["task"]
        seeds = self.cfg.holdout_seeds()
        spec = self._spec([("original", st["original"]), ("winner", st["incumbent"])], seeds)
        self.log(f"held-out: original vs winner on seeds {seeds[0]}..{seeds[1] - 1} (never used in the search)")
        run_dir = holdout_dir(self.prefix)
        result = self.evaluate(spec, out=self.out / run_dir)
        self._check_disjoint(result)
        cmp = paired(result, task, "original", "winner", alternative="greater")
        ref, win = successes_by_trial(result, task, "original"), successes_by_trial(result, task, "winner")
        trials = sorted(set(ref) & set(win))
        lo, hi = paired_interval([ref[k] for k in trials], [win[k] for k in trials], seed=self.cfg.seed)
        n = cmp.pairs

        def block(name: str, s: int) -> dict[str, Any]:
            w = wilson_interval(s, n)
            text = st["original"] if name == "original" else st["incumbent"]
            return {
                "instruction": text,
                "successes": s,
                "episodes": n,
                "success_rate": s / n if n else None,
                "ci95_low": w[0],
                "ci95_high": w[1],
            }

        changed = st["incumbent"] != st["original"]
        significant = cmp.variant_only > cmp.reference_only and cmp.p_value <= self.cfg.alpha
        if not changed:
            verdict = "the search accepted no candidate: the winner is the original instruction"
        elif significant:
            verdict = f"the winner is better than the original on held-out seeds (one-sided exact McNemar p = {p_value(cmp.p_value)} <= {self.cfg.alpha})"
        else:
            verdict = (
                f"no significant gain on held-out seeds (one-sided exact McNemar p = {p_value(cmp.p_value)} > "
                f"{self.cfg.alpha}): the improvement seen during the search did not replicate"
            )
        return {
            "run_dir": run_dir,
            "seeds": list(seeds),
            "status": result.status,
            "original": block("original", cmp.reference_successes),
            "winner": block("winner", cmp.variant_successes),
            "paired": {
                **cmp.to_dict(),
                "difference_ci95": [lo, hi],
                "interval": "paired percentile bootstrap (rollbench.grading.stats.bootstrap_difference), 10000 resamples",
            },
            "significant": significant,
            "verdict": verdict,
        }

    def _check_disjoint(self, holdout: GradeDocument) -> None:
        """No seed of the held-out run appears in any search round's recorded episodes (read from disk)."""
        from rollbench.api import grade

        held = {e.seed for e in holdout.episodes}
        for rnd in self.state["rounds"]:
            used = {e.seed for e in grade(self.out / round_dir(self.prefix, rnd["round"]), check_videos=False).episodes}
            if used & held:
                raise RollbenchError(
                    f"held-out seeds {sorted(used & held)} were used in search round {rnd['round']}; "
                    "the held-out comparison would not be held out"
                )
