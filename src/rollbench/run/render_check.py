"""Detect render failures in an episode's frames: all-black frames, or a picture frozen while the scene moved.

Offscreen renderers fail quietly: an EGL/OSMesa context lost during a long run returns buffers of zeros, and a
renderer bound to a stale simulator (robosuite's hard reset re-creates the simulation; a forked GL context) keeps
returning the same picture while the physics goes on. Neither raises, so the episode would be recorded and graded
with a useless video. :func:`render_failure` is the one check: a pure function over the frames of one camera (and,
optionally, the ``observation.state`` rows of the same steps), returning ``None`` when the frames look sound or a
one-line reason when they do not. :class:`RenderWatch` applies the same rules step by step to the images the
policy is given (with or without ``--video``); the episode loop ends an episode with a render failure as an
``error`` of fault ``environment`` (:class:`RenderFailure`) and records the reason in its ``render_failure`` column
(``rollbench/render_failure``; runs recorded before issue 29 call it ``rollbench/render_fault``, still read).

Inputs:
    frames: sequence of ``uint8 (H, W, 3)`` arrays (or ``(H, W)``), one per recorded step, one camera.
    states: optional sequence of ``float32 (state_dim,)`` arrays, one per frame.

Rules (deliberately simple):
    * **black**: a frame whose brightest pixel is ``<= black_level`` (default 8 of 255). A real scene always has
      something brighter; a lost GL context gives exact zeros. Any such frame is a failure.
    * **frozen**: at least 2 frames, every frame bit-identical to the first, *and* the state changed (some state
      row differs from the first by more than ``state_atol``). Without ``states`` no frozen check is made, since a
      still scene under a zero policy legitimately renders identical frames.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rollbench.core.contracts import EpisodeError, Fault

BLACK_LEVEL = 8  # max pixel value (0..255) at or below which a frame counts as black
STATE_ATOL = 1e-6  # absolute tolerance for "the state changed"


def render_failure(
    frames: Sequence[np.ndarray],
    states: Sequence[np.ndarray] | None = None,
    *,
    black_level: int = BLACK_LEVEL,
    state_atol: float = STATE_ATOL,
) -> str | None:
    """Return why the frames of one camera failed (``"black: ..."`` / ``"frozen: ..."``), or None if sound.

    Raises ValueError when ``states`` is given with a different length than ``frames``.
    """
    if states is not None and len(states) != len(frames):
        raise ValueError(f"render_failure: {len(frames)} frames but {len(states)} states; they must pair up")
    if len(frames) == 0:
        return None
    black = [i for i, f in enumerate(frames) if np.asarray(f).size == 0 or int(np.asarray(f).max()) <= black_level]
    if black:
        shown = ", ".join(str(i) for i in black[:5]) + (", ..." if len(black) > 5 else "")
        return (
            f"black: {len(black)} of {len(frames)} frames have no pixel brighter than {black_level} "
            f"(frame indices {shown})"
        )
    if states is None or len(frames) < 2:
        return None
    first = np.asarray(frames[0])
    if not all(np.array_equal(first, np.asarray(f)) for f in frames[1:]):
        return None
    s0 = np.asarray(states[0], dtype=np.float64)
    moved = [
        i
        for i, s in enumerate(states[1:], start=1)
        if np.asarray(s).shape != s0.shape or not np.allclose(np.asarray(s, dtype=np.float64), s0, atol=state_atol)
    ]
    if moved:
        return (
            f"frozen: all {len(frames)} frames are identical while the state changed (first change at step {moved[0]})"
        )
    return None


class RenderFailure(EpisodeError):
    """The renderer returned black or frozen frames (see :func:`render_failure`): the episode ends as an ``error`` of
    the ``environment`` (a lost GL context is not the policy's failure)."""

    def __init__(self, message: str, fault: Fault = "environment") -> None:
        super().__init__(message, fault)


class RenderWatch:
    """:func:`render_failure`'s rules applied one step at a time to the images a policy is given, keeping only the
    first image of each camera (not every frame), so they hold with or without ``--video``.

    :meth:`add` takes the images of one step (camera -> ``uint8 (H, W, 3)``) with that step's ``float32
    (state_dim,)`` state and returns the black-frame failure at once; :meth:`frozen` returns the frozen-picture
    failure, which only the whole episode can show."""

    def __init__(self, black_level: int = BLACK_LEVEL, state_atol: float = STATE_ATOL) -> None:
        self.black_level, self.state_atol = black_level, state_atol
        self.steps = 0
        self._first: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # camera -> (first image, state then)
        self._seen: dict[str, int] = {}  # images of the camera given so far (a policy may get them on some steps)
        self._same: dict[str, bool] = {}
        self._moved_at: dict[str, int] = {}  # first step whose image came with a state unlike the first image's

    def add(self, images: dict[str, np.ndarray], state: np.ndarray) -> str | None:
        """Record one step; ``"CAMERA: black: ..."`` when an image of it is black, else None. A step may carry no
        image (the policy is given images only on the steps it is asked for a chunk)."""
        step, self.steps = self.steps, self.steps + 1
        s = np.asarray(state, dtype=np.float64)
        for cam, image in images.items():
            img = np.asarray(image)
            if img.size == 0 or int(img.max()) <= self.black_level:
                return f"{cam}: black: the frame of step {step} has no pixel brighter than {self.black_level}"
            if cam not in self._first:
                self._first[cam], self._seen[cam], self._same[cam] = (img.copy(), s.copy()), 1, True
                continue
            self._seen[cam] += 1
            first, state0 = self._first[cam]
            if self._same[cam] and not np.array_equal(first, img):
                self._same[cam] = False
            if cam not in self._moved_at and (
                s.shape != state0.shape or not np.allclose(s, state0, atol=self.state_atol)
            ):
                self._moved_at[cam] = step
        return None

    def frozen(self) -> str | None:
        """``"CAMERA: frozen: ..."`` when at least 2 images of a camera were all identical while the state at
        those images changed; else None."""
        for cam, same in self._same.items():
            if same and self._seen[cam] >= 2 and cam in self._moved_at:
                return (
                    f"{cam}: frozen: all {self._seen[cam]} frames are identical while the state changed (first "
                    f"change at step {self._moved_at[cam]})"
                )
        return None
        for cam, same in self._same.items():
            if same:
                return (
                    f"{cam}: frozen: all {self.steps} frames are identical while the state changed (first change at "
                    f"step {self._moved_at})"
                )
        return None
