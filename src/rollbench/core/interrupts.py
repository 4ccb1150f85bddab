"""Telling the user's Ctrl-C (or a SIGTERM) apart from a ``KeyboardInterrupt`` that code under evaluation raised.

Python's default SIGINT handler raises a plain ``KeyboardInterrupt`` wherever the main thread happens to be, so a
policy or env that raises ``KeyboardInterrupt`` (or ``SystemExit``, or any other ``BaseException``) itself would
otherwise stop the whole run as if the user had pressed Ctrl-C. While a run executes, :func:`user_signals`
replaces the SIGINT handler with one raising :class:`UserInterrupt` (a ``KeyboardInterrupt`` subclass, so
everything that handles Ctrl-C still does); :func:`is_user_interrupt` then says which exceptions must stop the
run. Every other ``BaseException`` raised by a policy or env ends that episode as an ``error`` of whoever raised it
(see :mod:`rollbench.run.episode`). That rule is written once, :class:`contained`: every place that runs code under
evaluation (a policy's or env's method, a plug-in's import, a ``close()``) runs it inside one.

When SIGINT was already taken over by another Python handler (``rollbench sequential``'s, a caller's own), that
handler still runs and a ``KeyboardInterrupt`` it raises is the user's too. Outside :func:`user_signals`, a plain
``KeyboardInterrupt`` caught in the main thread while Python's default handler is in place still counts as the
user's, as before; in any other thread (a run started by the MCP server, a Ray actor's method) and in worker
processes, which ignore SIGINT, it never does.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType


class UserInterrupt(KeyboardInterrupt):
    """A signal (SIGINT from Ctrl-C, or SIGTERM through the CLI) asked rollbench to stop: the run ends INTERRUPTED."""


class Terminated(UserInterrupt):
    """SIGTERM during ``rollbench eval``: handled like Ctrl-C (the run ends INTERRUPTED, resumable), exit 143."""


def is_user_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` must stop the run: a :class:`UserInterrupt`, or a plain ``KeyboardInterrupt`` caught in the
    main thread while Python's default SIGINT handler is installed (then it cannot be told apart from Ctrl-C; in any
    other thread it can, as Python delivers signals to the main thread only). Anything else (``SystemExit``,
    ``GeneratorExit``, a ``KeyboardInterrupt`` raised while :func:`user_signals` is active, custom
    ``BaseException`` subclasses) is the fault of the code that raised it."""
    if isinstance(exc, UserInterrupt):
        return True
    return (
        isinstance(exc, KeyboardInterrupt)
        and threading.current_thread() is threading.main_thread()  # Python runs signal handlers there only
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


def _raise_user_interrupt(signum: int, frame: object) -> None:
    raise UserInterrupt()


def _relay(handler: Callable[[int, FrameType | None], object]) -> Callable[[int, FrameType | None], None]:
    """``handler`` (a SIGINT handler installed before the run, e.g. a caller's own), with any ``KeyboardInterrupt``
    it raises turned into :class:`UserInterrupt`: it came from the signal, so it is the user's."""

    def relay(signum: int, frame: FrameType | None) -> None:
        try:
            handler(signum, frame)
        except UserInterrupt:
            raise
        except KeyboardInterrupt as exc:
            raise UserInterrupt(*exc.args) from exc

    return relay


@contextlib.contextmanager
def user_signals() -> Iterator[None]:
    """While inside, SIGINT raises :class:`UserInterrupt`: in place of Python's default handler, or, when another
    Python handler is installed (a caller's own), that handler runs and a ``KeyboardInterrupt`` it raises becomes a
    :class:`UserInterrupt` (so a Ctrl-C is never taken for an error of the code it interrupted). Nothing changes
    outside the main thread, or when SIGINT is ignored or has the system's default action."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    signal.signal(signal.SIGINT, _raise_user_interrupt if previous is signal.default_int_handler else _relay(previous))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class contained:
    """Run a block of code under evaluation: the user's interrupt (:func:`is_user_interrupt`) propagates; any other
    ``BaseException`` raised in the block ends the block and is kept in :attr:`error` (with its traceback), after
    ``on_error(exc)`` is called with it if given (ending the episode as an ``error``, warning, raising a ConfigError).

    ``with contained(lambda exc: run.fail(exc, "environment")) as env: ...`` then ``if env.error: return``.
    """

    def __init__(self, on_error: Callable[[BaseException], object] | None = None) -> None:
        self.on_error = on_error
        self.error: BaseException | None = None

    def __enter__(self) -> contained:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None or is_user_interrupt(exc):
            return False
        self.error = exc
        if self.on_error is not None:
            self.on_error(exc)
        return True
