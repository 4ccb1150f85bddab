"""Batches in ``rollbench serve-policy``: batch requests, and one policy call for requests of several clients.

**Batch requests** (both protocols; the wire format is in :mod:`rollbench.policies.remote.http` and
:mod:`rollbench.policies.remote.ws`). The server's metadata says ``"max_batch": N``: it accepts a request holding up
to ``N`` act items, each for its own session, and answers one entry per item, in order: ``{"actions": ARRAY}`` or
``{"error": "message", "status": S}`` (``S`` the HTTP status the item would have had alone: 400 protocol, 410
unknown session, 500 the policy raised, 503 busy). One item's failure ends only that item's episode. A request of
more than ``N`` items, an empty one, or one naming a session twice breaks the protocol and is refused whole (HTTP
400 ``{"error"}``, websocket error text frame and close 1008), saying the counts. Every other limit of the server
(request size, sessions, safe decoding) applies to batch requests as to single ones.

* HTTP: ``{"batch": [{"session": S, "instruction", "state", "images"}, ...]}``; every item's session must have been
  started by a reset, as for single requests.
* websocket: one connection serves several *slots*, each its own session (own policy instance, own episode):
  ``{"slot": i, "reset": {...}}`` starts slot ``i``'s episode (``0 <= i < --max-sessions``), then ``{"batch":
  [{"slot": i, "observation": {openpi observation dict}}, ...]}``. The slots' sessions end with the connection,
  and the connection's own session (opened on connect, for openpi clients) is given back at the first slot reset
  if it was never used (:class:`WsConnection`), so B slots hold B sessions.

**Gathering** (``--max-batch N`` with N > 1, ``--batch-window-ms W``): every act of every session, single or batch
item, joins one queue; a :class:`Gatherer` thread takes up to N of them and calls the policy once. It waits at most
W ms after the oldest waiting item for more to arrive, and goes at once when N items wait or every started session
(one that has had a reset) has an item waiting. A policy with a native batched form (``batched(size)``, see
:mod:`rollbench.run.lockstep`) is built once as ``batched(--max-sessions)``, every session holds one of its slots
(:class:`SlotPolicy`), and a gathered batch is one ``act_batch`` call; any other policy keeps one instance per
session and a gathered batch calls them in turn. With ``--max-batch 1`` (the default) there is no gathering: each
request calls its session's own instance in its own thread, as before batches existed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rollbench.core.contracts import ConfigError, Observation, Policy, RollbenchError, TaskInfo, describe
from rollbench.serve.limits import DIE_EXIT_CODE, MalformedReply, SessionGone, SessionRefused
from rollbench.wire.decode import ProtocolError

if TYPE_CHECKING:
    from rollbench.core.batch import Answer, BatchPolicy

MAX_BATCH = 256
MAX_SESSION_ID = 128  # characters of an HTTP session id


def session_key(sid: Any, context: str = "") -> str:
    """The host's key of HTTP session id ``sid``; ProtocolError unless it is a string of 1 to
    :data:`MAX_SESSION_ID` characters (``context`` starts the message, e.g. for a batch item)."""
    if not isinstance(sid, str) or not 1 <= len(sid) <= MAX_SESSION_ID:
        raise ProtocolError(f'{context}"session" must be a string of 1 to {MAX_SESSION_ID} characters')
    return f"id:{sid}"


Call = tuple[Policy, Observation, str]  # a session's policy (instance or SlotPolicy), observation, instruction


@dataclass(frozen=True)
class Batching:
    """How a server batches; recorded in its metadata as ``max_batch`` and ``batch_window_ms``.

    Attributes:
        max_batch: most act items in one request and in one policy call (1: no gathering).
        window_ms: milliseconds a gathered call waits, after its oldest item arrived, for more items.
    """

    max_batch: int = 1
    window_ms: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch <= MAX_BATCH:
            raise ConfigError(f"--max-batch must be between 1 and {MAX_BATCH}, got {self.max_batch}")
        if not 0 <= self.window_ms <= 10_000:
            raise ConfigError(f"--batch-window-ms must be between 0 and 10000, got {self.window_ms:g}")


class SlotPolicy:
    """Slot ``slot`` of a natively batched policy, standing in for one session's policy instance. Every call on
    the batched policy holds ``lock`` (its calls are never concurrent)."""

    def __init__(self, batch: BatchPolicy, slot: int, lock: threading.Lock) -> None:
        self.batch, self.slot, self.lock = batch, slot, lock
        self.info = batch.info

    def reset(self, task: TaskInfo, seed: int) -> None:
        with self.lock:
            self.batch.reset_slot(self.slot, task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        answer = run_calls([(self, observation, instruction)])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        pass


def run_calls(calls: Sequence[Call]) -> list[Answer]:
    """One answer per call: an action chunk, or the exception the policy raised for it. Calls on slots of one
    natively batched policy are one ``act_batch``; others are made in turn. Raises RuntimeError when ``act_batch``
    returns the wrong number of answers (every call of the batch then fails)."""
    first = calls[0][0]
    if isinstance(first, SlotPolicy) and all(isinstance(p, SlotPolicy) and p.batch is first.batch for p, _, _ in calls):
        with first.lock:
            answers = list(
                first.batch.act_batch(
                    [p.slot for p, _, _ in calls],  # type: ignore[attr-defined]
                    [o for _, o, _ in calls],
                    [i for _, _, i in calls],
                )
            )
        if len(answers) != len(calls):
            raise RuntimeError(
                f"the served policy's act_batch returned {len(answers)} answers for {len(calls)} observations"
            )
        return answers
    out: list[Answer] = []
    for policy, obs, instruction in calls:
        try:
            out.append(np.asarray(policy.act(obs, instruction)))
        except Exception as exc:
            out.append(exc)
    return out


class Gatherer:
    """Gathers act calls of all sessions and runs up to ``max_batch`` of them as one batch (see the module
    docstring for when a batch goes). ``started()`` counts the sessions that may still send an item;
    ``log(keys)`` is told the session keys of each batch, in order, before it runs."""

    def __init__(
        self, batching: Batching, started: Callable[[], int], log: Callable[[list[str]], None] | None = None
    ) -> None:
        self.max_batch, self.window_s = batching.max_batch, batching.window_ms / 1000
        self._started, self._log = started, log
        self._queue: list[tuple[float, Call, str, Future[Answer]]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._serve, name="rollbench-gatherer", daemon=True).start()

    def run(self, calls: Sequence[Call], keys: Sequence[str]) -> list[Answer]:
        """Queue ``calls`` (of the sessions ``keys``) and wait for their answers (never raises their exceptions)."""
        now = time.monotonic()
        futures: list[Future[Answer]] = [Future() for _ in calls]
        with self._cond:
            self._queue.extend(zip([now] * len(calls), calls, keys, futures, strict=True))
            self._cond.notify()
        out: list[Answer] = []
        for f in futures:
            exc = f.exception()
            out.append(exc if exc is not None else f.result())
        return out

    def _take(self) -> list[tuple[float, Call, str, Future[Answer]]]:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            deadline = self._queue[0][0] + self.window_s
            while len(self._queue) < min(self.max_batch, max(1, self._started())):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            taken, self._queue[:] = self._queue[: self.max_batch], self._queue[self.max_batch :]
            return taken

    def _serve(self) -> None:
        while True:
            taken = self._take()
            try:
                if self._log is not None:
                    self._log([key for _, _, key, _ in taken])
                answers: list[Answer] = run_calls([call for _, call, _, _ in taken])
            except BaseException as exc:  # the batch call itself failed: every item of it fails
                answers = [exc] * len(taken)
            for (_, _, _, future), answer in zip(taken, answers, strict=True):
                future.set_result(answer)


class ActingSession(Protocol):
    """What :func:`act_many` needs of a session (:class:`rollbench.serve.sessions.Session`)."""

    key: str
    lock: threading.Lock
    policy: Policy

    def _check_open(self) -> None: ...


class ActingHost(Protocol):
    """What :func:`act_many` needs of the server (:class:`rollbench.serve.sessions.PolicyHost`)."""

    injection: tuple[str, float] | None

    def count_act(self) -> int: ...


def act_many(
    host: ActingHost, items: Sequence[tuple[ActingSession, Observation, str]], gatherer: Gatherer | None
) -> list[Answer]:
    """Act for each ``(session, observation, instruction)`` of distinct sessions (e.g. the items of one batch
    request): one answer per item, in order, the session's chunk ``float32 (k, action_dim)`` or the exception that
    ends that item (``SessionGone`` for a closed session, the policy's own exception). With a ``gatherer``
    (``--max-batch`` above 1) the calls join one policy call with other sessions' acts; else each session's own
    instance is called in turn, in this thread. ``--inject`` applies per item, except ``slow`` (one sleep per
    request); ``malformed`` raises MalformedReply after the calls."""
    injection = host.injection
    for _ in items:
        if host.count_act() > (injection[1] if injection and injection[0] == "die-after" else float("inf")):
            os._exit(DIE_EXIT_CODE)  # a crash: no reply, no clean close
    if injection and injection[0] == "slow":
        time.sleep(injection[1])
    if injection and injection[0] == "error":
        return [RuntimeError("injected failure (--inject error): the policy failed") for _ in items]
    answers: list[Answer | None] = []
    with contextlib.ExitStack() as held:
        for s in sorted({s.key: s for s, _, _ in items}.values(), key=lambda s: s.key):  # one order: no deadlock
            held.enter_context(s.lock)  # the instance stays this session's until its call returns
        for s, _, _ in items:
            try:
                s._check_open()  # its lock is held
                answers.append(None)
            except SessionGone as gone:
                answers.append(gone)
        live = [i for i, a in enumerate(answers) if a is None]
        if live:
            calls = [(items[i][0].policy, items[i][1], items[i][2]) for i in live]
            keys = [items[i][0].key for i in live]
            got = gatherer.run(calls, keys) if gatherer is not None else run_calls(calls)
            for i, answer in zip(live, got, strict=True):
                answers[i] = answer
    out: list[Answer] = []
    for got_one in answers:
        answer = got_one if got_one is not None else RuntimeError("no answer")  # never: every item was answered
        if isinstance(answer, BaseException):
            out.append(answer)
            continue
        try:
            actions = np.atleast_2d(np.asarray(answer, dtype=np.float32))
        except (TypeError, ValueError) as exc:
            out.append(exc)
            continue
        if injection and injection[0] == "wrong-shape":
            actions = np.concatenate([actions, np.zeros((actions.shape[0], 1), np.float32)], axis=1)
        out.append(actions)
    if injection and injection[0] == "malformed":
        raise MalformedReply
    return out


# ------------------------------------------------------------------------------------------- batch requests


def item_error(exc: BaseException) -> dict[str, Any]:
    """One item's error entry ``{"error", "status"}``: the status its request would have had alone."""
    if isinstance(exc, SessionGone):
        status = 410
    elif isinstance(exc, SessionRefused):
        status = 503
    elif isinstance(exc, ValueError | RollbenchError):
        status = 400
    else:
        return {"error": "".join(traceback.format_exception(exc, limit=6)), "status": 500}
    return {"error": f"{describe(exc)}", "status": status}
