"""Scenes as the unit (issue 40, item 6): the sign-flip test against hand enumeration, scipy's permutation test and
the exact McNemar test it reduces to; the cluster bootstrap; and compare choosing the scene as its unit when a
task's episodes repeat an initial state (and saying so)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binomtest, permutation_test

from rollbench.analysis.compare import compare_pair
from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.analysis.sources import RunData
from rollbench.core.identity import RunIdentity
from rollbench.grading.scenes import (
    cluster_bootstrap_difference,
    repeats_scenes,
    scene_differences,
    sign_flip_test,
)


def test_sign_flip_p_value_equals_a_hand_enumeration_of_every_sign_pattern() -> None:
    diffs = [0.5, 1.0, -0.5, 0.5, 1.0]
    observed = abs(sum(diffs))  # 2.5
    hits = sum(abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed
               for signs in itertools.product((1, -1), repeat=5))  # fmt: skip
    r = sign_flip_test(diffs)
    assert (r.method, r.patterns, r.scenes) == ("exact", 32, 5)
    # by hand: the absolute values sum to 3.5; negating values of total N gives 3.5 - 2N, which reaches |2.5| for
    # N <= 0.5 (1 + 3 patterns: none, or one of the three 0.5s) or N >= 3 (the 4 mirror images): 8 of 32
    assert r.p_value == hits / 32 == 8 / 32


def test_sign_flip_agrees_with_scipys_exact_permutation_test() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        d = rng.integers(-2, 3, size=10) / 2
        ours = sign_flip_test(d).p_value
        ref = permutation_test((d,), np.sum, permutation_type="samples", n_resamples=np.inf).pvalue
        assert ours == pytest.approx(min(1.0, ref), abs=1e-12)


def test_with_one_pair_per_scene_the_sign_flip_test_is_the_exact_mcnemar_test() -> None:
    a = [1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1]
    b = [0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1]
    sd = scene_differences(a, b, list(range(12)))
    a_only, b_only = 1, 7  # by hand
    assert sign_flip_test(sd.diffs).p_value == pytest.approx(binomtest(a_only, a_only + b_only, 0.5).pvalue)


def test_above_sixteen_scenes_random_patterns_are_seeded_and_close_to_the_exact_value() -> None:
    d = np.array([1.0] * 14 + [-1.0] * 6)  # 20 scenes: random; exact = binomial two-sided 14 of 20
    r1, r2 = sign_flip_test(d, seed=3), sign_flip_test(d, seed=3)
    assert r1 == r2 and r1.method == "random" and r1.patterns == 20_000
    assert r1.p_value == pytest.approx(binomtest(14, 20, 0.5).pvalue, abs=0.01)


def test_scene_differences_and_repeats() -> None:
    sd = scene_differences([1, 0, 0, 1], [1, 1, 1, 0], ["s0", "s0", "s1", "s1"])
    assert sd.labels == ["s0", "s1"] and sd.sizes.tolist() == [2, 2] and sd.diffs.tolist() == [0.5, 0.0]
    assert repeats_scenes([("t", 0), ("t", 1), ("t", 0)]) and not repeats_scenes([("t", None), ("t", None)])


def test_cluster_bootstrap_resamples_whole_scenes() -> None:
    # every scene's pairs agree within the scene: B - A is +1 in scenes 0-1 and 0 in scenes 2-3
    a, b = [0, 0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]
    scenes = [0, 0, 1, 1, 2, 2, 3, 3]
    boot = cluster_bootstrap_difference(a, b, scenes, n_resamples=2000, seed=1)
    assert boot.difference == 0.5
    # a resample draws 4 of the 4 scenes; its difference is (scenes drawn from {0, 1}) / 4, a multiple of 1/4
    assert boot.low == 0.0 and boot.high == 1.0
    per_pair = cluster_bootstrap_difference(a, b, list(range(8)), n_resamples=2000, seed=1)
    assert per_pair.high - per_pair.low < boot.high - boot.low  # treating pairs as independent is too narrow


def _run(name: str, outcomes: list[bool], states: list[int]) -> RunData:
    episodes = [
        AnalysisEpisode(episode_index=i, task="t", seed=i, initial_state=s, instruction=None, success=bool(ok),
                        termination_reason="success" if ok else "max_steps", error_fault=None)
        for i, (ok, s) in enumerate(zip(outcomes, states, strict=True))
    ]  # fmt: skip
    return RunData(RunIdentity("h", "r", name), name, name, name, "OK", episodes)


def test_compare_uses_scenes_when_a_task_repeats_initial_states_and_says_so() -> None:
    states = [k % 5 for k in range(20)]  # 20 episodes over 5 stored initial states
    a = [s in (0, 1) and k < 10 for k, s in enumerate(states)]
    b = [s != 4 for s in states]
    c = compare_pair(_run("a", a, states), _run("b", b, states), n_resamples=200)
    block = c["tasks"][0]
    assert (block["unit"], block["scenes"], block["pairs"]) == ("scene", 5, 20)
    # by hand, per scene (4 pairs each): B - A = s0: (4-2)/4, s1: (4-2)/4, s2: 1, s3: 1, s4: 0
    # the 4 nonzero differences sum to 3; only all signs kept or all flipped reach |3|: 2 of 16 patterns
    assert block["p_value"] == 2 / 16 and block["test"].startswith("sign-flip over scenes")
    one_per_scene = compare_pair(_run("a", a, list(range(20))), _run("b", b, list(range(20))), n_resamples=200)
    assert one_per_scene["tasks"][0]["unit"] == "pair"
    assert one_per_scene["pooled"]["test"] == "exact McNemar (two-sided)"
