"""The one check of a built policy's :class:`~rollbench.core.contracts.PolicyInfo`, before anything uses it.

``PolicyInfo`` is a plain frozen dataclass a plug-in fills in itself, so nothing stops
``PolicyInfo(chunk_size=-1)``, ``chunk_size="3"``, ``tasks="scripted/*"`` (a string, read as ten one-character
patterns) or ``provenance={"k": object()}`` (which run.json cannot record). :func:`check_policy_info` is called
where a policy is built (:func:`rollbench.core.registry.make_policy`: plug-ins, built-ins, served and agent
policies alike; :class:`rollbench.run.in_memory.Borrowed`: an object handed to ``rollbench.evaluate``) and refuses
the first field that is not what the run can use with a ConfigError of one line naming the policy, the field, the
value and what is allowed (exit 2 before any episode: hostile round 12, F4/F6). The bounds are the ones the rest of
rollbench already uses (:mod:`rollbench.core.bounds`): ``MAX_CHUNK_SIZE`` (the scripted expert's ``chunk_size``
option too), the spec's ``MAX_REPLAN_EVERY`` and ``--image-size``'s sides (``image_side_ok``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from rollbench.core.bounds import MAX_CHUNK_SIZE, MAX_IMAGE_SIDE, MAX_REPLAN_EVERY, MIN_IMAGE_SIDE, image_side_ok
from rollbench.core.contracts import ConfigError, PolicyInfo
from rollbench.core.format import described

MAX_PROVENANCE_BYTES = 1 << 20  # provenance as JSON: recorded in run.json, so bounded (a server's metadata: 64 KiB)


def _whole(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and low <= v <= high  # type(): bool is an int subclass, and not a count


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _flag(v: Any) -> bool:
    return type(v) is bool


def _texts(v: Any) -> bool:
    return isinstance(v, tuple | list) and all(isinstance(t, str) for t in v)


def _sizes(v: Any) -> bool:
    return isinstance(v, Mapping) and all(
        isinstance(k, str) and isinstance(s, tuple | list) and len(s) == 2 and all(image_side_ok(n) for n in s)
        for k, s in v.items()
    )


def _provenance_problem(v: Any) -> str | None:
    """Why ``v`` cannot be recorded as run.json's ``plan.policy.provenance`` ("" when it is no mapping), else None."""
    if not isinstance(v, Mapping):
        return ""
    if not all(isinstance(k, str) for k in v):
        return "a key is not a str"
    try:
        size = len(json.dumps(dict(v), allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode())
    except (TypeError, ValueError, RecursionError) as exc:  # not JSON, NaN/inf, a cycle, nested too deep
        return f"{type(exc).__name__}: {exc}"  # json's own words: a type name, never the value
    return None if size <= MAX_PROVENANCE_BYTES else f"{size} bytes as JSON"


_SIDES = f"even whole numbers of pixels from {MIN_IMAGE_SIDE} to {MAX_IMAGE_SIDE}, as --image-size takes"
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (lambda v: isinstance(v, str) and bool(v), "a non-empty str"),
    "chunk_size": (_whole(1, MAX_CHUNK_SIZE), f"an int from 1 to {MAX_CHUNK_SIZE} (not a bool, str or float)"),
    "replan_every": (
        lambda v: v is None or _whole(1, MAX_REPLAN_EVERY)(v),
        f"None or an int from 1 to {MAX_REPLAN_EVERY} (not a bool, str or float)",
    ),
    "needs_images": (_flag, "True or False"),
    "io_bound": (_flag, "True or False"),
    "chunk_size_known": (_flag, "True or False"),
    "bounded": (_flag, "True or False"),
    "tasks": (_texts, "a tuple or list of str patterns such as ('scripted/*',)"),
    "image_sizes": (_sizes, f"a mapping of env family (str) to (height, width), {_SIDES}"),
    "one_stream": (_text, "a str"),
    "warnings": (_texts, "a tuple or list of str"),
}
"""Each PolicyInfo field but ``provenance``: its test and what is allowed, as the error says it."""

PROVENANCE_ALLOWED = (
    f"a mapping of str keys to JSON values (no NaN or infinity), at most {MAX_PROVENANCE_BYTES} bytes as JSON"
)


def check_policy_info(name: str, info: PolicyInfo) -> None:
    """ConfigError (one line: the policy ``name``, the field, its value and what is allowed) for the first field of
    ``info`` that is not of its declared type and bounds (:data:`FIELDS`, and ``provenance``: JSON-serialisable,
    str keys, at most :data:`MAX_PROVENANCE_BYTES`); nothing when every field is."""
    for field, (ok, allowed) in FIELDS.items():
        value = getattr(info, field, None)
        if not _holds(ok, value):
            raise ConfigError(f"policy {name!r}: its PolicyInfo {field}={_shown(value)}; {field} must be {allowed}")
    try:
        why = _provenance_problem(info.provenance)
    except Exception as exc:  # a plug-in's mapping whose iteration or items raise
        why = f"reading it raised {type(exc).__name__}"
    if why is not None:
        raise ConfigError(
            f"policy {name!r}: its PolicyInfo provenance={_shown(info.provenance)}{f' ({why})' if why else ''}; "
            f"provenance must be {PROVENANCE_ALLOWED}"
        )


def _holds(ok: Callable[[Any], bool], value: Any) -> bool:
    """``ok(value)``, False when the test raises (a plug-in's mapping or sequence whose iteration raises)."""
    try:
        return ok(value)
    except Exception:
        return False


def _shown(value: Any) -> str:
    """``value`` as the error quotes it (:func:`~rollbench.core.format.described`); its type alone when its repr
    raises (a plug-in's object)."""
    try:
        return described(value)
    except Exception:
        return f"a {type(value).__name__}"
