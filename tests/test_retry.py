"""The one retry loop of the network clients (rollbench.policies.retry): how many tries, which waits, which errors."""

from __future__ import annotations

import pytest

from rollbench.policies.retry import RetryAfter, with_retries


def _failing(errors: list[BaseException], value: str = "ok"):
    """A call that raises ``errors`` in turn, then returns ``value``; records the attempt numbers it was given."""
    seen: list[int] = []

    def call(attempt: int) -> str:
        seen.append(attempt)
        if errors:
            raise errors.pop(0)
        return value

    return call, seen


def test_dropped_connections_are_retried_with_doubling_waits_then_the_value_is_returned() -> None:
    call, seen = _failing([ConnectionError("a"), ConnectionError("b"), ConnectionError("c")])
    waits: list[float] = []
    got = with_retries(
        call, retries=3, first_wait_s=0.25, retry_on=lambda e: isinstance(e, OSError), sleep=waits.append
    )
    assert (got, seen, waits) == ("ok", [0, 1, 2, 3], [0.25, 0.5, 1.0])


def test_after_the_last_retry_the_last_error_is_raised_as_it_is() -> None:
    call, seen = _failing([ConnectionError(str(i)) for i in range(5)])
    waits: list[float] = []
    with pytest.raises(ConnectionError, match=r"^2$"):
        with_retries(call, retries=2, first_wait_s=1.0, retry_on=lambda e: isinstance(e, OSError), sleep=waits.append)
    assert (seen, waits) == ([0, 1, 2], [1.0, 2.0])


def test_an_error_the_caller_does_not_retry_is_raised_at_once() -> None:
    call, seen = _failing([ValueError("malformed")])
    waits: list[float] = []
    with pytest.raises(ValueError, match="malformed"):
        with_retries(call, retries=3, first_wait_s=0.25, retry_on=lambda e: isinstance(e, OSError), sleep=waits.append)
    assert (seen, waits) == ([0], [])


def test_no_retries_means_one_try() -> None:
    call, seen = _failing([ConnectionError("down")])
    with pytest.raises(ConnectionError):
        with_retries(call, retries=0, first_wait_s=0.25, retry_on=lambda e: True, sleep=lambda s: None)
    assert seen == [0]


def test_a_server_named_wait_replaces_the_backoff_and_the_backoff_is_capped() -> None:
    call, seen = _failing([RetryAfter(7.0), RetryAfter(0.0), ConnectionError("x"), ConnectionError("y")])
    waits: list[float] = []
    got = with_retries(call, retries=4, first_wait_s=1.0, max_wait_s=3.0, retry_on=lambda e: True, sleep=waits.append)
    # tries 0 and 1 name their waits; after try 2 the backoff is 1 * 2**2 = 4, capped at 3; after try 3, 8 -> 3
    assert (got, seen, waits) == ("ok", [0, 1, 2, 3, 4], [7.0, 0.0, 3.0, 3.0])
