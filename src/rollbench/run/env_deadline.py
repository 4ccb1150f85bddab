"""Every call into an in-process env whose code is not rollbench's own has a deadline (the env deadline,
:func:`rollbench.core.env_timeout.env_timeout_s`: 120 s, ``$ROLLBENCH_ENV_TIMEOUT_S``).

Which envs: those of a family whose ``EnvFamily.inline`` is False, the default: every family loaded from a
``rollbench.envs`` entry point that is not rollbench's own, and ``gym`` (``gym:MODULE:ID`` runs a user's module).
:class:`EpisodeWorker <rollbench.run.worker.EpisodeWorker>` builds such an env through :class:`EnvDeadline`, in
whichever process runs the episodes (in-process, each ``--workers`` process, each Ray actor). rollbench's own
families (scripted, MetaWorld, Fetch, PushT, ALOHA, robosuite, in-process LIBERO) are called inline, with no
deadline and no hand-off cost: a built-in simulator that deadlocks in-process is not bounded. Envs in an env host
(``hostedgym``, ``libero_ref``, ``liberoplus``) have the same deadline on their host's side
(:mod:`rollbench.envs.hosted.remote`).

:class:`EnvDeadline` presents the env's own interface (``task``, ``reset``, ``step``, ``render``, ``success``,
``close``, and any other attribute of the env: an optional hook such as ``expect_images`` is a bounded call too,
and absent when the env has none). The env is built and every call runs on one helper thread of its own (a daemon,
so a call that never returns never keeps the process from exiting; one thread, so an env whose GL context is bound
to the thread that made it renders on that thread), while the caller waits at most the deadline. Past it the call
raises :class:`EnvTimeout` (an ``EpisodeError``, fault ``environment``, naming the call and the deadline): the
episode ends as ``error`` and the run goes on. The env is then abandoned: its state is unknown and its thread may
still be inside the call, so it is never called again (a later call raises :class:`EnvTimeout` at once), its
``close()`` is skipped, and the worker builds a fresh env for the next episode (an errored episode's env is always
closed and rebuilt). A live env's ``close()`` has the same deadline: past it the worker warns and goes on.

A thread rather than ``signal.alarm`` for the reasons of :mod:`rollbench.run.deadline`; and, as there, a call that
holds the interpreter's lock forever (a C extension looping without releasing it) stops every thread, the waiting
one included: no in-process deadline bounds that; an env host does (``hostedgym``).
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

import numpy as np

from rollbench.core.call_thread import CallThread, MissedDeadline
from rollbench.core.contracts import Env, ExpectsImages, Fault, Observation, StepResult
from rollbench.core.env_timeout import TIMEOUT_ENV


class EnvTimeout(MissedDeadline):
    """An in-process env's call did not return within the env deadline (fault ``environment``), or the env was
    abandoned after an earlier call of it did not."""

    def __init__(self, message: str, fault: Fault = "environment") -> None:
        super().__init__(message, fault)


class EnvDeadline:
    """An :class:`~rollbench.core.contracts.Env` built by ``build()`` on a helper thread of its own, whose every
    call waits at most ``timeout_s`` seconds (see the module docstring). ``name`` names the env in messages (its
    task). Building past the deadline raises :class:`EnvTimeout` from the constructor.

    Attributes:
        inner: the env itself.
        task: the env's ``task``.
        abandoned: the call that missed the deadline (``"step"``...), or None while the env is live.
    """

    def __init__(self, build: Callable[[], Env], timeout_s: float, name: str) -> None:
        self.timeout_s, self.name = float(timeout_s), name
        self.abandoned: str | None = None
        self._closed = False
        self._thread = CallThread("rollbench-env-call")
        self.inner: Env = self._call("make", build)
        self.task = self.inner.task
        if isinstance(self.inner, ExpectsImages):  # set here: Python 3.12's isinstance of a protocol reads attributes
            self.expect_images = self.__getattr__("expect_images")  # statically, never through __getattr__

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.abandoned is not None:
            raise EnvTimeout(
                f"{self.name}: env.{what}() not called: this env was abandoned after its {self.abandoned}() missed "
                f"the env deadline of {self.timeout_s:g} s"
            )
        try:
            return self._thread.call(self.timeout_s, fn, *args)
        except queue.Empty:
            self.abandoned = what  # never called again; its thread is left inside the call (a daemon)
            raise EnvTimeout(
                f"{self.name}: env.{what}() did not return within the env deadline of {self.timeout_s:g} s "
                f"(${TIMEOUT_ENV}); the env was abandoned"
            ) from None

    def reset(self, seed: int, initial_state: int | None = None) -> Observation:
        observation: Observation = self._call("reset", self.inner.reset, seed, initial_state)
        return observation

    def step(self, action: np.ndarray) -> StepResult:
        result: StepResult = self._call("step", self.inner.step, action)
        return result

    def render(self, camera: str) -> np.ndarray:
        image: np.ndarray = self._call("render", self.inner.render, camera)
        return image

    def success(self) -> bool:
        return bool(self._call("success", self.inner.success))

    def close(self) -> None:
        """Close the env, waiting at most the deadline (:class:`EnvTimeout` past it, its close() left running); an
        abandoned env is not closed (its close() could block behind the call it never returned from)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.abandoned is None:
                self._thread.call(self.timeout_s, self.inner.close)
        except queue.Empty:
            self.abandoned = "close"
            raise EnvTimeout(
                f"env.close() did not return within the env deadline of {self.timeout_s:g} s (${TIMEOUT_ENV}); "
                "rollbench went on without it"
            ) from None
        finally:
            self._thread.stop()

    def __getattr__(self, name: str) -> Any:
        """Any other attribute of the env (an optional hook such as ``expect_images``): a method becomes a call with
        the deadline; a missing one raises AttributeError, so ``isinstance(env, Hook)`` sees what the env has."""
        if name.startswith("__") or name in ("inner", "abandoned", "name", "timeout_s", "_thread", "_closed"):
            raise AttributeError(name)  # not set yet (during __init__): never looked up on the env
        value = getattr(self.inner, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: self._call(name, lambda: value(*args, **kwargs))
