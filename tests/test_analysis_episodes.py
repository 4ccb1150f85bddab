"""An analysis episode (rollbench.analysis.episodes.AnalysisEpisode): a dashboard export's episode read tolerantly
(unknown keys ignored, absent ones None, the label carried, a wrongly typed field named), and a graded episode's
facts carried over unchanged. Oracles: the values written into the hand-made JSON and the graded episode."""

from __future__ import annotations

import pytest

from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.core.contracts import ConfigError
from rollbench.core.grade_model import GradedEpisode


def test_an_exported_episode_keeps_its_facts_and_label_and_ignores_unknown_keys() -> None:
    ep = {"episode_index": 3, "task": "t", "seed": 7, "success": True, "trial": None, "error_fault": "policy",
          "termination_reason": "error", "label": "failed", "thumbnail": "x.png", "nested": {"a": [1]}}  # fmt: skip
    got = AnalysisEpisode.from_export(ep, "runs.json (runs[0])")
    assert got == AnalysisEpisode(
        episode_index=3, task="t", success=True, trial=None, seed=7, initial_state=None, instruction=None,
        variant=None, length=None, termination_reason="error", error_fault="policy", label="failed",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ep", "message"),
    [
        ({"task": "t"}, "runs.json (runs[1]): an episode lacks episode_index or task"),
        ({"episode_index": 0}, "runs.json (runs[1]): an episode lacks episode_index or task"),
        ([1, 2], "runs.json (runs[1]): an episode lacks episode_index or task"),
        ({"episode_index": 2, "task": "t", "success": True, "seed": "4"}, "runs.json (runs[1]): episode 2 has seed '4' (expected int or NoneType)"),
        ({"episode_index": 2, "task": "t", "success": False, "length": True}, "runs.json (runs[1]): episode 2 has length True (expected int or NoneType)"),
        ({"episode_index": 2, "task": "t"}, "runs.json (runs[1]): episode 2 has success None (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": "false"}, "runs.json (runs[1]): episode 2 has success 'false' (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": "0"}, "runs.json (runs[1]): episode 2 has success '0' (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": [0]}, "runs.json (runs[1]): episode 2 has success [0] (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": 0.5}, "runs.json (runs[1]): episode 2 has success 0.5 (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": 1}, "runs.json (runs[1]): episode 2 has success 1 (expected bool)"),
        ({"episode_index": 2, "task": "t", "success": True, "trial": "1"}, "runs.json (runs[1]): episode 2 has trial '1' (expected int or NoneType)"),
        ({"episode_index": 2, "task": "t", "success": True, "trial": True}, "runs.json (runs[1]): episode 2 has trial True (expected int or NoneType)"),
        ({"episode_index": 2, "task": "t", "success": True, "return": "1.5"}, "runs.json (runs[1]): episode 2 has return '1.5' (expected int or float or NoneType)"),
        ({"episode_index": 2, "task": "t", "success": True, "return": 1e999}, "runs.json (runs[1]): episode 2 has return inf (expected finite)"),
        ({"episode_index": 2, "task": "t", "success": True, "label": 5}, "runs.json (runs[1]): episode 2 has label 5 (expected str or NoneType)"),
    ],
)  # fmt: skip
def test_an_exported_episode_without_its_identity_or_with_a_mistyped_field_is_named(ep: object, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        AnalysisEpisode.from_export(ep, "runs.json (runs[1])")
    assert str(exc.value) == message


def test_a_graded_episode_carries_its_facts_over_and_no_label() -> None:
    graded = GradedEpisode.model_validate(
        {"episode_index": 4, "task": "t", "trial": 2, "seed": 9, "initial_state": 1, "instruction": "go",
         "variant": "v1", "success": False, "success_at_reset": False, "length": 12, "return": 0.5,
         "termination_reason": "error", "error": "boom", "error_fault": "policy", "render_failure": None,
         "render_fault": None, "transcript": None}
    )  # fmt: skip
    assert AnalysisEpisode.from_graded(graded) == AnalysisEpisode(
        episode_index=4, task="t", success=False, trial=2, seed=9, initial_state=1, instruction="go", variant="v1",
        length=12, termination_reason="error", error_fault="policy", label=None,
    )  # fmt: skip
