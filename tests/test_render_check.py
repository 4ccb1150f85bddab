"""render_failure: all-black and frozen-frame detection on synthetic frames."""

from __future__ import annotations

import numpy as np
import pytest

from rollbench.run.render_check import render_failure


def _frames(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8) for _ in range(n)]


def _states(n: int) -> list[np.ndarray]:
    return [np.full(3, float(i), dtype=np.float32) for i in range(n)]


def test_sound_frames_pass() -> None:
    assert render_failure(_frames(5), _states(5)) is None
    assert render_failure([]) is None


def test_one_black_frame_is_a_fault() -> None:
    frames = _frames(5)
    frames[3] = np.zeros((8, 8, 3), dtype=np.uint8)
    why = render_failure(frames)
    assert why is not None and why.startswith("black:") and "1 of 5" in why and "3" in why


def test_near_black_counts_and_threshold_is_adjustable() -> None:
    dim = [np.full((4, 4, 3), 5, dtype=np.uint8)] * 2
    assert render_failure(dim) is not None
    assert render_failure(dim, black_level=4) is None


def test_frozen_while_state_changes_is_a_fault() -> None:
    frame = _frames(1)[0]
    why = render_failure([frame.copy() for _ in range(4)], _states(4))
    assert why is not None and why.startswith("frozen:") and "step 1" in why


def test_identical_frames_of_a_still_scene_are_fine() -> None:
    frame = _frames(1)[0]
    still = [np.ones(3, dtype=np.float32)] * 4
    assert render_failure([frame] * 4, still) is None
    assert render_failure([frame] * 4) is None  # no states: no frozen judgement


def test_one_changed_frame_is_not_frozen() -> None:
    frames = [_frames(1)[0]] * 4
    frames = [*frames[:3], _frames(1, seed=1)[0]]
    assert render_failure(frames, _states(4)) is None


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="pair up"):
        render_failure(_frames(3), _states(2))
