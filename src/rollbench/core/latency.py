"""``--latency MODE``: how long a policy call takes in simulated time, and so how many env steps run while it thinks.

Modes (``EvalSpec.latency``):

* ``none``: the world waits for the policy (every harness's behaviour, rollbench's default);
* ``fixed:MS``: every call takes ``MS`` milliseconds of simulated time (a decimal number, 0 .. 60000);
* ``steps:K``: every call takes ``K`` control steps (0 .. 10000);
* ``measured``: every call takes its measured wall time (the batched call's for a batch); recorded, not
  reproducible: it depends on the machine and its load.

A call made on observation ``t`` delivers its chunk at step ``t + d``, ``d = ceil(latency_s x fps)`` control steps
(``fps``: the task's control frequency). ``fixed`` is computed exactly (decimal milliseconds as a fraction, no
float rounding): ``fixed:100`` at 20 Hz is ``d = 2``, ``fixed:150`` at 20 Hz ``d = 3``, ``fixed:151`` ``d = 4``.
What runs meanwhile, and what happens to the chunk's first ``d`` actions (``--stale skip|execute``), is
:mod:`rollbench.run.schedule`'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction

from rollbench.core.contracts import ConfigError, PolicyInfo, TaskInfo

LATENCY_MODES = ("none", "fixed:MS", "steps:K", "measured")
STALE_RULES = ("skip", "execute")
MAX_FIXED_MS = 60_000
MAX_STEPS = 10_000
_PATTERN = re.compile(r"^(none|measured|fixed:(\d{1,5}(?:\.\d{1,3})?)|steps:(\d{1,5}))$", re.ASCII)  # ASCII digits only


def canonical_latency(text: str) -> str:
    """``text`` as the spec stores it (``fixed:150.0`` -> ``fixed:150``, ``steps:03`` -> ``steps:3``).

    Raises ValueError naming the valid forms when ``text`` is none of them or out of range."""
    m = _PATTERN.match(text.strip())
    if m is None:
        raise ValueError(
            f"latency must be one of {', '.join(LATENCY_MODES)} (MS: milliseconds, up to 3 decimals; K: control "
            f"steps), got {text!r}"
        )
    if m.group(2) is not None:
        ms = Decimal(m.group(2))
        if ms > MAX_FIXED_MS:
            raise ValueError(f"fixed latency must be at most {MAX_FIXED_MS} ms, got {text!r}")
        return f"fixed:{ms.normalize():f}"
    if m.group(3) is not None:
        k = int(m.group(3))
        if k > MAX_STEPS:
            raise ValueError(f"steps latency must be at most {MAX_STEPS} steps, got {text!r}")
        return f"steps:{k}"
    return m.group(1)


def delay_rule(latency: str, fps: int) -> Callable[[float], int] | None:
    """``d(measured_s) -> steps`` for ``latency`` (canonical) at ``fps`` control steps per second; None for ``none``.

    ``fixed``/``steps`` ignore the measured seconds; ``measured`` returns ``ceil(measured_s x fps)`` (at least 1 for
    any call that took time)."""
    kind, _, arg = latency.partition(":")
    if kind == "none":
        return None
    if kind == "steps":
        k = int(arg)
        return lambda _s: k
    if kind == "fixed":
        d = math.ceil(Fraction(Decimal(arg)) * fps / 1000)
        return lambda _s: d
    return lambda s: max(0, math.ceil(s * fps))


def fixed_delay(latency: str, fps: int) -> int | None:
    """The delay in steps of every call for ``fixed``/``steps`` (None for ``none`` and ``measured``)."""
    rule = delay_rule(latency, fps)
    return None if rule is None or latency == "measured" else rule(0.0)


def check_latency(latency: str, stale: str, tasks: Sequence[TaskInfo], info: PolicyInfo) -> list[str]:
    """ConfigError when a task cannot run with ``latency`` (it declares no hold action); the run's warnings
    otherwise: ``measured`` is not reproducible; ``--stale skip`` with chunks no longer than the delay runs no action
    of the policy at all."""
    if latency == "none":
        return []
    no_hold = [t.name for t in tasks if t.hold is None]
    if no_hold:
        raise ConfigError(
            f"--latency {latency} needs a hold action (what the robot does while the policy thinks) and "
            f"{', '.join(no_hold[:5])} declare{'s' if len(no_hold) == 1 else ''} none; run it with --latency none"
        )
    warnings = []
    if latency == "measured":
        warnings.append(
            "--latency measured delays each chunk by the policy call's measured wall time: results depend on this "
            "machine and its load and are not reproducible; use fixed:MS or steps:K to compare runs"
        )
    d = fixed_delay(latency, tasks[0].fps)
    if stale == "skip" and d and info.chunk_size_known and info.chunk_size <= d:
        warnings.append(
            f"policy {info.name} returns chunks of {info.chunk_size} action{'s' if info.chunk_size > 1 else ''} and "
            f"every call is delayed {d} step{'s' if d > 1 else ''}: with --stale skip every action arrives stale and "
            "the robot only holds; --stale execute runs late actions instead"
        )
    return warnings
