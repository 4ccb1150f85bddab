"""Decoding of act requests on the server side (``rollbench serve-policy``): wire values -> (Observation, prompt).

Arrays arrive already decoded by :mod:`rollbench.wire.decode` (numeric and boolean only, bounded shapes);
here they are checked to be finite and mapped with the task family's observation map. Everything wrong raises
:class:`~rollbench.wire.decode.ProtocolError` with a message safe to send back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import Observation, TaskInfo
from rollbench.core.format import quoted
from rollbench.core.spec import MAX_INSTRUCTION_CHARS
from rollbench.wire.decode import ProtocolError


def finite_array(value: Any, what: str) -> np.ndarray:
    """``value`` if it is a decoded numeric array with only finite values; else ProtocolError naming ``what``."""
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        kind = f"{value.dtype} array" if isinstance(value, np.ndarray) else type(value).__name__
        raise ProtocolError(f"{what} must be a numeric array, got {kind}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        bad = np.argwhere(~np.isfinite(value))
        raise ProtocolError(
            f"{what} has {len(bad)} non-finite value(s) (NaN or infinity), first at index {bad[0].tolist()}; "
            "the server does not act on it"
        )
    return value


STATE_LIMIT = 2.0**64  # |value| below it: its square is a finite float32 (the largest float32 below is 2**64 - 2**40)


def observation(state: Any, images: dict[str, Any]) -> Observation:
    """The decoded state and images -> Observation; images finite numeric arrays; the state a numeric vector that
    is a float32 vector (``observation.state``'s declared dtype) without loss: integers exactly representable in
    float32 (uint64 ``2**64 - 1`` is not; ``2**62`` is), floats finite in float32, every value of magnitude below
    :data:`STATE_LIMIT` (2**64, so a policy's squares and differences of it stay finite: ±3e38 is refused). Else
    ProtocolError naming the rule and the first offending index (never the value)."""
    raw = finite_array(state, "the state")
    if raw.ndim != 1:
        raise ProtocolError(f"the state must be a vector, got shape {list(raw.shape)}")
    checked = {cam: finite_array(v, f"image {cam!r}"[:80]) for cam, v in images.items()}
    if raw.dtype.kind in "iu":
        inexact = np.flatnonzero(~_exact_in_float32(raw))
        if inexact.size:
            raise ProtocolError(
                f"the state holds {inexact.size} integer(s) float32 cannot hold exactly, first at index "
                f"{int(inexact[0])}; observation.state is float32"
            )
    with np.errstate(over="ignore", invalid="ignore"):
        state = raw.astype(np.float32)
    outside = np.flatnonzero(~(np.abs(state.astype(np.float64)) < STATE_LIMIT))
    if outside.size:
        raise ProtocolError(
            f"the state holds {outside.size} value(s) of magnitude 2**64 or more (or outside the finite float32 "
            f"range), first at index {int(outside[0])}; the server does not act on it"
        )
    return Observation(state=state, images=checked, raw=raw)


def _exact_in_float32(values: np.ndarray) -> np.ndarray:
    """Per element of an integer array: whether float32 holds it exactly (its significant bits fit in float32's 24:
    ``|v|`` divided by its lowest set bit is below 2**24), computed in uint64 without any rounding."""
    if values.dtype.kind == "i":
        wide = values.astype(np.int64)
        negative = wide < 0
        magnitude = np.where(negative, (-(wide + 1)).astype(np.uint64) + np.uint64(1), wide.astype(np.uint64))
    else:
        magnitude = values.astype(np.uint64)
    lowest = magnitude & (~magnitude + np.uint64(1))  # the lowest set bit (0 for 0)
    return (magnitude == 0) | (magnitude // np.maximum(lowest, np.uint64(1)) < np.uint64(2**24))


def check_instruction(instruction: str) -> str:
    """``instruction`` if it has at most an eval's :data:`~rollbench.core.spec.MAX_INSTRUCTION_CHARS` characters,
    else ProtocolError: the one bound on every instruction the server takes (an act's, a reset's), each of which is
    logged (hostile round 10 F7, round 13 F7)."""
    if len(instruction) > MAX_INSTRUCTION_CHARS:
        raise ProtocolError(
            f"the instruction is {len(instruction):,} characters; at most {MAX_INSTRUCTION_CHARS:,} are taken"
        )
    return instruction


def check_for_task(obs: Observation, task: TaskInfo, m: Any, instruction: str = "") -> Observation:
    """``obs`` if it is what ``task`` declares: a state of ``task.state_dim`` values (unless obs map ``m`` says the
    client sends the simulator's raw observation, whose size the task does not declare) and images of known
    cameras, each ``uint8 (H, W, 3)``, with an ``instruction`` of at most an eval's
    :data:`~rollbench.core.spec.MAX_INSTRUCTION_CHARS` characters (each is logged: hostile round 10, F7); else
    ProtocolError naming the difference (a 3-value state for ``scripted/reach``, which has 4, is refused, not
    answered)."""
    check_instruction(instruction)
    if getattr(m, "state_source", "state") != "raw" and obs.state.shape != (task.state_dim,):
        raise ProtocolError(f"the state of {task.name} has {task.state_dim} values, got shape {list(obs.state.shape)}")
    for cam, img in obs.images.items():
        if task.cameras and cam not in task.cameras:
            raise ProtocolError(f"{task.name} has no camera {quoted(cam)}; its cameras: {', '.join(task.cameras)}")
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3 or 0 in img.shape:
            raise ProtocolError(f"image {quoted(cam)} must be uint8 (H, W, 3), got {img.dtype} {list(img.shape)}")
    return obs


def decode_openpi(request: Mapping[str, Any], m: Any) -> tuple[Observation, str]:
    """An openpi-style flat observation dict (arrays already decoded by :mod:`rollbench.wire.decode`) -> (Observation, prompt)."""
    images = {cam: v for k, v in request.items() if isinstance(k, str) and (cam := m.camera_of(k)) is not None}
    for key in (m.state_key, m.prompt_key):
        if key not in request:
            keys = sorted(quoted(k, as_text=True) for k in list(request)[:40])
            raise ProtocolError(f"the observation has no {key!r}; its keys: {keys}")
    if not isinstance(request[m.prompt_key], str):
        raise ProtocolError(f"{m.prompt_key!r} must be a string")
    return observation(request[m.state_key], images), request[m.prompt_key]


def decode_json(request: Mapping[str, Any], m: Any) -> tuple[Observation, str]:
    """A JSON /act request body (already parsed by :mod:`rollbench.wire.decode`) -> (Observation, instruction)."""
    from rollbench.wire.decode import decode_array

    if not isinstance(request.get("instruction"), str) or "state" not in request:
        raise ProtocolError('an act request needs "instruction" (a string) and "state" (an array)')
    images_in = request.get("images") or {}
    if not isinstance(images_in, Mapping):
        raise ProtocolError('"images" must map names to arrays')
    images = {(m.camera_of(k) or k): decode_array(v) for k, v in images_in.items()}
    return observation(decode_array(request["state"]), images), request["instruction"]
