"""Bounds that the run spec and a policy's :class:`~rollbench.core.contracts.PolicyInfo` share, one of each: a
chunk's rows, a replan interval, a rendered image's sides (``--image-size``, ``PolicyInfo.image_sizes``, a policy
server's advertised ``image_sizes``). Imports nothing of rollbench's, so any core module may use it."""

from __future__ import annotations

MAX_CHUNK_SIZE = 1000  # rows of one action chunk (any policy; the scripted expert's option): real chunks are tens
MAX_REPLAN_EVERY = 1_000_000  # actions per chunk executed: at most a horizon (max_steps)
MIN_IMAGE_SIDE, MAX_IMAGE_SIDE = 16, 4096  # pixels of a rendered image's height and width (--image-size)


def image_side_ok(pixels: object) -> bool:
    """Whether ``pixels`` can be a rendered image's height or width: an even int (not a bool) from
    :data:`MIN_IMAGE_SIDE` to :data:`MAX_IMAGE_SIDE` (``--image-size``, a policy's ``PolicyInfo.image_sizes``, a
    server's advertised ``image_sizes``: one rule for every size a run renders at)."""
    return type(pixels) is int and MIN_IMAGE_SIDE <= pixels <= MAX_IMAGE_SIDE and pixels % 2 == 0
