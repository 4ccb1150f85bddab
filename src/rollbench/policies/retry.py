"""The one retry loop of rollbench's network clients (``ws://`` and ``http://`` policies, the agent's model API).

:func:`with_retries` calls a function up to ``retries + 1`` times, waiting between tries with exponential backoff:
``first_wait_s * 2**k`` seconds after the ``k``-th failed try (``k`` from 0), capped at ``max_wait_s``, unless the
error names its own wait (:class:`RetryAfter`, e.g. from an HTTP ``Retry-After`` header). Only errors that
``retry_on`` accepts are retried; any other error is raised at once, and after the last try the last error is
raised as it is (the caller turns it into its own message). The loop is :mod:`tenacity` (``Retrying`` with
``stop_after_attempt``, ``wait_exponential`` and ``reraise=True``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tenacity import RetryCallState

T = TypeVar("T")


class RetryAfter(Exception):
    """A retryable failure that says how long to wait before the next try (``wait_s``, seconds, >= 0)."""

    def __init__(self, wait_s: float, message: str = "") -> None:
        super().__init__(message)
        self.wait_s = wait_s


def with_retries(
    call: Callable[[int], T],
    *,
    retries: int,
    first_wait_s: float,
    retry_on: Callable[[BaseException], bool],
    max_wait_s: float = math.inf,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call(attempt)`` for ``attempt`` = 0, 1, ... ``retries`` until one returns; its return value.

    Between tries it sleeps ``min(first_wait_s * 2**(attempt - 1), max_wait_s)`` seconds before ``attempt``, or
    the ``wait_s`` of a :class:`RetryAfter` the previous try raised. Raises the first error ``retry_on`` rejects,
    or the last try's error once ``retries`` retries have failed. ``sleep`` does the waiting (seconds).
    """
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential  # ~60 ms: on first use

    exponential = wait_exponential(multiplier=first_wait_s, max=max_wait_s)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        return error.wait_s if isinstance(error, RetryAfter) else exponential(state)

    retrying = Retrying(
        stop=stop_after_attempt(retries + 1), wait=wait, retry=retry_if_exception(retry_on), reraise=True, sleep=sleep
    )
    for attempt in retrying:
        with attempt:
            return call(attempt.retry_state.attempt_number - 1)
    raise AssertionError("unreachable: tenacity either returns the call's value or raises")
