"""A policy rollbench is done with is finalised on a daemon thread of its own, never on a thread rollbench needs.

A plug-in's ``__del__`` is code under evaluation like its ``act``: it can block for ever. Python runs it on whichever
thread drops the last reference, which after a run was a race between the main thread (unwinding the run's frames)
and the daemon threads that had called the policy; when the main thread lost it, ``eval`` recorded every episode and
then never exited, run.json left RUNNING (hostile round 12, F1). So once a policy is closed (or abandoned after a
missed deadline), :func:`finalize_elsewhere` hands it to a daemon thread that holds a reference until it is the
only holder left, then drops it: ``__del__`` runs there. rollbench's own threads never hold the last reference.

At exit (an ``atexit`` handler: after the run is recorded, its document printed and non-daemon threads joined), the
finalisers still pending are woken at once; one whose policy is held only by it drops it, and exit waits for those
``__del__`` calls at most the longest policy deadline handed over, capped at :data:`EXIT_WAIT_CAP_S` (a ``__del__``
that prints still prints, one that never returns is left behind on its daemon thread and the exit status is kept).
A policy still held elsewhere at exit (by a call that never returned) is left to that holder, as before.

In a long-lived process (``rollbench mcp``) each closed policy is freed as soon as its finaliser is its only holder;
one held elsewhere (a reference cycle, a hung call's thread) is given back after :data:`GIVE_UP_S` seconds, when its
finaliser ends, so neither threads nor policies accumulate without bound. An object in a reference cycle is then
finalised by Python's cycle collector on whichever thread runs it: not covered.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time

POLL_S = 0.02  # the first pause between looks at who still holds the policy (doubling up to MAX_POLL_S)
MAX_POLL_S = 0.5
GIVE_UP_S = 600.0  # a policy still held elsewhere after this long is given back to its other holders
EXIT_WAIT_CAP_S = 30.0  # the longest exit waits for pending __del__ calls, whatever the policy deadline

_lock = threading.Lock()
_pending: dict[threading.Thread, float] = {}  # finaliser -> the policy deadline it was handed with
_exiting = threading.Event()


def finalize_elsewhere(policy: object, timeout_s: float) -> None:
    """Hand ``policy`` to a daemon finaliser thread (see the module docstring); the caller then drops its own
    references. ``timeout_s``: the policy's deadline, the longest exit waits for its ``__del__``."""
    box = [policy]
    del policy
    thread = threading.Thread(target=_drop_when_last, args=(box,), name="rollbench-policy-finalizer", daemon=True)
    with _lock:
        _pending[thread] = max(0.0, float(timeout_s))
    thread.start()


def _drop_when_last(box: list[object]) -> None:
    policy = box.pop()
    pause, give_up = POLL_S, time.monotonic() + GIVE_UP_S
    # 2: this frame's name and getrefcount's argument; more: someone else still holds it
    while sys.getrefcount(policy) > 2 and time.monotonic() < give_up and not _exiting.is_set():
        _exiting.wait(pause)
        pause = min(2 * pause, MAX_POLL_S)
    del policy  # its __del__ runs here when this was the last reference
    with _lock:
        _pending.pop(threading.current_thread(), None)


@atexit.register
def _wait_at_exit() -> None:
    """Wake every pending finaliser and wait for the ``__del__`` calls they run (bounded: module docstring)."""
    _exiting.set()
    with _lock:
        waiting = dict(_pending)
    if not waiting:
        return
    end = time.monotonic() + min(EXIT_WAIT_CAP_S, max(waiting.values()))
    for thread in waiting:
        thread.join(max(0.0, end - time.monotonic()))
