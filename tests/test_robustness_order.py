"""Shuffled robustness plans: a perturbed task draws its control task's seeded permutation, so each perturbed
episode keeps its control's (seed, initial state); the recomputed study checks the recorded order. The expected
orders are drawn here from numpy's PCG64 directly (not through rollbench's trial_order)."""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import numpy as np
import pytest

from rollbench.core import plan as plan_mod
from rollbench.core.contracts import ConfigError
from rollbench.core.perturbation import Perturbation
from rollbench.core.registry import resolve_tasks
from rollbench.core.runlog_model import PlannedEpisode, TrialOrder
from rollbench.core.spec import build_spec
from rollbench.grading.robustness import check_trial_order

SEED = 11


def _oracle(seed: int, name: str, first: int, end: int, n: int) -> list[int]:
    """numpy's PCG64 permutation of first..end-1 from the seed sequence [seed, crc32(name)], first n."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, zlib.crc32(name.encode())])))
    return [int(x) for x in rng.permutation(np.arange(first, end))[:n]]


def _tasks(monkeypatch: pytest.MonkeyPatch, perturbed_states: int) -> None:
    """scripted/reach-init as the control (20 stored initial states) and two perturbed copies of it."""
    base = dataclasses.replace(resolve_tasks("scripted/reach-init")[0], initial_states=20)
    pos = dataclasses.replace(
        base, name="scripted/reach-pos", initial_states=perturbed_states,
        perturbation=Perturbation(category="position", control=base.name),
    )  # fmt: skip
    lan = dataclasses.replace(
        base, name="scripted/reach-lan", perturbation=Perturbation(category="language", control=base.name)
    )
    monkeypatch.setattr(plan_mod, "resolve_tasks", lambda env: [base, pos, lan])


def _records(plan: Any) -> list[PlannedEpisode]:
    """The plan's episodes as run.json records them (what the recomputation reads)."""
    return [PlannedEpisode.model_validate(e.to_dict()) for e in plan.episodes]


def _plan(episodes: int, seed: int | None) -> Any:
    spec = build_spec(env="scripted/reach-init", policy="zero", episodes=episodes, seed=SEED, trial_order_seed=seed)
    return plan_mod.make_plan(spec), spec


def test_perturbed_and_control_tasks_share_one_permutation_and_each_pair_its_seed_and_initial_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _tasks(monkeypatch, perturbed_states=20)
    plan, spec = _plan(6, seed=5)
    want = _oracle(5, "scripted/reach-init", 0, 20, 6)
    assert want == [9, 6, 16, 7, 17, 13]  # the oracle's draw, pinned (numpy's PCG64 stream is stable)
    by_task: dict[str, list[Any]] = {}
    for e in plan.episodes:
        by_task.setdefault(e.task, []).append(e)
    for task in ("scripted/reach-init", "scripted/reach-pos", "scripted/reach-lan"):
        eps = by_task[task]
        assert [e.trial for e in eps] == want
        assert [(e.seed, e.initial_state) for e in eps] == [(SEED + k, k) for k in want]
    # the perturbed tasks' own streams would give other orders: the sharing is what pairs them
    assert _oracle(5, "scripted/reach-pos", 0, 20, 6) != want
    log = plan_mod.trial_order_log(spec, plan)
    assert log["populations"] == {t: [0, 20] for t in by_task}
    assert check_trial_order(_records(plan), TrialOrder.model_validate(log)) == (
        "shuffled (seed 5; each perturbed task shares its control's permutation)"
    )


def test_a_perturbed_task_with_fewer_states_narrows_the_shared_population(monkeypatch: pytest.MonkeyPatch) -> None:
    _tasks(monkeypatch, perturbed_states=12)
    plan, spec = _plan(4, seed=3)
    want = _oracle(3, "scripted/reach-init", 0, 12, 4)
    assert want == [9, 4, 3, 5]
    assert {e.task: [] for e in plan.episodes}.keys() == {"scripted/reach-init", "scripted/reach-pos",
                                                          "scripted/reach-lan"}  # fmt: skip
    for task in ("scripted/reach-init", "scripted/reach-pos", "scripted/reach-lan"):
        assert [e.trial for e in plan.episodes if e.task == task] == want
    assert plan_mod.trial_order_log(spec, plan)["populations"]["scripted/reach-pos"] == [0, 12]


def test_fixed_n_robustness_plans_stay_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    _tasks(monkeypatch, perturbed_states=20)
    plan, _ = _plan(5, seed=None)
    for task in ("scripted/reach-init", "scripted/reach-pos", "scripted/reach-lan"):
        assert [e.trial for e in plan.episodes if e.task == task] == [0, 1, 2, 3, 4]
    assert check_trial_order(_records(plan), None) == "plan order"


def test_an_edited_shuffled_robustness_plan_is_refused_naming_the_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    _tasks(monkeypatch, perturbed_states=20)
    plan, spec = _plan(6, seed=5)
    planned = _records(plan)
    pos = [p for p in planned if p.task == "scripted/reach-pos"]
    pos[2].trial, pos[3].trial = pos[3].trial, pos[2].trial
    with pytest.raises(ConfigError, match=r"planned trial 2 of scripted/reach-pos is 7, but .* gives 16 \(edited\)"):
        check_trial_order(planned, TrialOrder.model_validate(plan_mod.trial_order_log(spec, plan)))
