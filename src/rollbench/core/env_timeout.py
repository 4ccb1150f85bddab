"""The env deadline: the seconds rollbench waits for any one call into an env that is not rollbench's own.

One value for both kinds of env that have one: envs in another interpreter (env hosts,
:mod:`rollbench.envs.hosted.remote`: every call after the env is built) and in-process envs of a plug-in family or of
``gym:MODULE:ID`` (:mod:`rollbench.run.env_deadline`: build, reset, step, render, success, close; and the one
build/reset/step/close the ``gym`` family makes to describe an env before the run). Default :data:`ENV_TIMEOUT_S`
(120 s); ``$ROLLBENCH_ENV_TIMEOUT_S`` overrides it, and ``$ROLLBENCH_ENV_HOST_TIMEOUT_S`` (its name before the
in-process deadline existed) is still read as a deprecated alias when the new name is unset.

A value must be a finite number of seconds in ``(0, MAX_ENV_TIMEOUT_S]``: ``inf``, ``1e400``, ``nan``, ``0`` or a
negative number is a ConfigError (exit 2, one line) before anything runs (``inf`` used to pass and then crash the
run with an OverflowError: hostile round 10, F17).
"""

from __future__ import annotations

import math
import os

from rollbench.core.contracts import ConfigError

ENV_TIMEOUT_S = 120.0
MAX_ENV_TIMEOUT_S = 86_400.0  # a day: any longer is no deadline at all, and larger values overflow time_t arithmetic
TIMEOUT_ENV = "ROLLBENCH_ENV_TIMEOUT_S"
OLD_TIMEOUT_ENV = "ROLLBENCH_ENV_HOST_TIMEOUT_S"  # deprecated alias, read when TIMEOUT_ENV is unset


def env_timeout_s() -> float:
    """The env deadline in seconds (see the module docstring). Raises ConfigError naming the variable for a value
    that is not a finite number in ``(0, MAX_ENV_TIMEOUT_S]``."""
    name = TIMEOUT_ENV if os.environ.get(TIMEOUT_ENV) else OLD_TIMEOUT_ENV
    raw = os.environ.get(name)
    if not raw:
        return ENV_TIMEOUT_S
    try:
        if not raw.isascii() or "_" in raw or raw != raw.strip():  # float() also takes "٣", "3_0", " 3 " (round 12)
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= MAX_ENV_TIMEOUT_S):
        raise ConfigError(f"{name}={raw!r} must be a number of seconds above 0 and at most {MAX_ENV_TIMEOUT_S:g}")
    return value
