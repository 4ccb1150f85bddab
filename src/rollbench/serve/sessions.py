"""The served policy behind ``rollbench serve-policy``: sessions, their policy instances, limits, request handling.

A *session* is one websocket connection, or one ``session`` id of the JSON /act protocol. Each live session owns
one policy instance, exclusively: an instance goes back to the idle pool only after its session is closed (under
the session's lock, so a call in flight finishes first), and a closed session can never act again. At most
``max_sessions`` sessions are live: past that, a new session is refused (:class:`SessionRefused`: websocket close
code 1013 "try again later", HTTP 503), except that an HTTP session idle for longer than ``session_idle_s`` is
evicted to make room (its id is remembered, and its next request is answered :class:`SessionGone`, HTTP 410,
never a silent reset). Websocket sessions end when their connection closes and are never evicted, nor is the
JSON protocol's shared session of requests without an id.

Requests are decoded with :mod:`rollbench.wire.decode` (numeric and boolean arrays only, bounded shapes);
observations must be finite. Errors raised to the protocol layers: :class:`ProtocolError` (the request does not
follow the protocol), :class:`SessionRefused`, :class:`SessionGone`, ``ValueError``/``RollbenchError`` (a request
the server cannot serve, e.g. an unknown task), anything else is the served policy's own failure.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rollbench.core.batch import Batchable
from rollbench.core.contracts import ConfigError, Observation, Policy, TaskInfo, describe
from rollbench.core.registry import served_layout
from rollbench.record.safe_files import open_append_private
from rollbench.serve.batch import Batching, Gatherer, SlotPolicy, act_many
from rollbench.serve.limits import (
    Limits,
    SessionGone,
    SessionRefused,
    parse_injection,
)
from rollbench.wire.act_request import check_for_task, check_instruction
from rollbench.wire.decode import ProtocolError
from rollbench.wire.obs_map import check_overrides, jsonable, resolve_obs_map

if TYPE_CHECKING:
    from rollbench.core.batch import Answer

MAX_TASK_NAME = 200
MAX_SHOWN = 40  # characters of a peer's session id quoted in an error
FORGET_AFTER = 4096  # evicted http session ids remembered (so they get 410, not a new session)


class Session:
    """One client's episode state: its own policy instance, its current task, a lock serialising its calls."""

    def __init__(self, host: PolicyHost, key: str, policy: Policy, evictable: bool) -> None:
        self.host, self.key, self.policy, self.evictable = host, key, policy, evictable
        self.task: TaskInfo | None = None
        self.seed: int | None = None
        self.lock = threading.Lock()
        self.closed = False
        self.last_used = time.monotonic()

    def _check_open(self) -> None:  # call with self.lock held
        if self.closed:
            raise SessionGone(self.host._gone_message(self.key))
        self.last_used = time.monotonic()

    def reset(self, request: Any) -> None:
        from rollbench.core.registry import remote_task

        if not isinstance(request, Mapping):
            raise ProtocolError(f'"reset" must be a map, got {type(request).__name__}')
        name, seed = request.get("task"), request.get("seed")
        if not isinstance(name, str) or type(seed) is not int:
            raise ProtocolError(
                f"a reset needs a task name (string) and an integer seed, got {type(name).__name__} and "
                f"{type(seed).__name__}"
            )
        if len(name) > MAX_TASK_NAME or not 0 <= seed < 2**63:
            raise ProtocolError(
                f"a reset needs a task name of at most {MAX_TASK_NAME} characters and a seed in [0, 2**63)"
            )
        instruction = request.get("instruction")
        if instruction is not None and not isinstance(instruction, str):
            raise ProtocolError(f'a reset\'s "instruction" must be a string, got {type(instruction).__name__}')
        self.host.log(
            session=self.key,
            kind="reset",
            task=name,
            seed=seed,
            instruction=None if instruction is None else check_instruction(instruction),
        )
        task = remote_task(name)  # an installed family's named task: a peer can never name a module to import
        with self.lock:
            self._check_open()
            self.policy.reset(task, seed)
            self.task, self.seed = task, seed

    def ensure_reset(self) -> TaskInfo:
        if self.task is None:
            if self.host.default_task is None:
                raise ProtocolError(
                    "no episode was started: send a reset request first, or start the server with --env TASK"
                )
            self.reset({"task": self.host.default_task.name, "seed": 0})
        assert self.task is not None
        return self.task

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """This session's action chunk ``float32 (k, action_dim)`` (see :meth:`PolicyHost.act_many`)."""
        answer = self.host.act_many([(self, observation, instruction)])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


@dataclass(frozen=True)
class ServedPolicy:
    """What ``rollbench serve-policy`` serves: the ``policy`` (a registered name or import path) with its ``options``
    (``--policy-options``), the ``default_env`` task of a session that sends no reset (``--env``, None: none) and the
    ``obs_overrides`` of the observation map (``--obs-map``)."""

    policy: str
    options: Mapping[str, Any] = field(default_factory=dict)
    default_env: str | None = None
    obs_overrides: Mapping[str, Any] = field(default_factory=dict)


class PolicyHost:
    """The served policy: builds instances, keeps sessions within the limits, decodes observations, logs."""

    def __init__(
        self,
        served: ServedPolicy,
        log_path: Path | None,
        injection: str | None,
        protocol: str,
        limits: Limits | None = None,
        batching: Batching | None = None,
    ) -> None:
        from rollbench.core.registry import family_of, make_policy

        policy, default_env = served.policy, served.default_env
        self.name, self.options, self.protocol = policy, dict(served.options), protocol
        self.limits = limits or Limits()
        self.batching = batching or Batching()
        self.injection = parse_injection(injection)
        self.obs_overrides = check_overrides(served.obs_overrides)
        self.default_task = family_of(default_env).task(default_env) if default_env else None
        template = make_policy(policy, self.options)  # unknown names fail here, before the port opens
        self.info = template.info
        if self.info.one_stream:  # its episodes must run in order in one run (run/prepare.py check_one_stream)
            template.close()
            raise ConfigError(f"{self.info.one_stream}, so it cannot be served (run it with rollbench eval)")
        self._idle: list[Policy] = [template]
        # --max-batch > 1: a natively batched policy serves every session from one batched form, one slot each
        self._native = None
        if self.batching.max_batch > 1 and isinstance(template, Batchable):
            self._native = template.batched(self.limits.max_sessions)
        self._native_lock = threading.Lock()
        self._slots_made = 0
        if self._native is not None:
            self._idle = []
        self._gatherer = (
            Gatherer(self.batching, self.started_sessions, self._log_call) if self.batching.max_batch > 1 else None
        )
        self._calls = 0
        self._sessions: dict[str, Session] = {}
        self._gone: OrderedDict[str, None] = OrderedDict()
        self._pending = 0
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # notified when a session ends
        self._acts = 0
        self._log = open_append_private(log_path, "--log-requests") if log_path else None

    def _injection_text(self) -> str | None:
        return f"{self.injection[0]}:{self.injection[1]:g}" if self.injection else None

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "server": "rollbench serve-policy",
            "rollbench": version("rollbench"),
            "policy": self.name,
            "protocol": self.protocol,
            "reset": True,
            "chunk_size": self.info.chunk_size,
            "tasks": list(self.info.tasks),  # what the served policy drives: the client refuses other tasks
            "needs_images": self.info.needs_images,
            "env": self.default_task.name if self.default_task else None,
            "provenance": jsonable(self.info.provenance),
            "injection": self._injection_text(),  # --inject
            "fault": self._injection_text(),  # deprecated name of "injection" (issue 29), the same value
            "limits": asdict(self.limits),
            # it accepts batch requests of up to max_batch items (rollbench.serve.batch); clients batch when >= 2
            "max_batch": self.batching.max_batch,
            "batch_window_ms": self.batching.window_ms,
            "batched_form": self._native is not None,
        }
        if self.info.replan_every is not None:
            meta["replan_every"] = self.info.replan_every
        if self.info.image_sizes:  # family -> [height, width] the policy needs rendered (a LeRobot checkpoint's)
            meta["image_sizes"] = {k: list(v) for k, v in self.info.image_sizes.items()}
        return meta

    # ---------------------------------------------------------------------------------------- sessions

    def open_session(self, key: str, evictable: bool, revive: bool = False, wait_s: float = 0.0) -> Session:
        """The live session ``key``, or a new one with its own policy instance.

        Raises SessionRefused when ``max_sessions`` are live, none can be evicted and none ends within ``wait_s``
        seconds (a websocket client that just closed may still be ending its session), SessionGone for an id that
        was evicted unless ``revive`` (a reset request, which starts a new episode anyway).
        """
        with self._lock:
            live = self._sessions.get(key)
            if live is not None:
                return live
            if key in self._gone:
                if not revive:
                    raise SessionGone(self._gone_message(key))
                del self._gone[key]
            deadline = time.monotonic() + wait_s
            while len(self._sessions) + self._pending >= self.limits.max_sessions and not self._evict_idle():
                if self._freed.wait(timeout=max(0.0, deadline - time.monotonic())):
                    continue
                raise SessionRefused(
                    f"server busy: {self.limits.max_sessions} sessions are open (serve-policy --max-sessions); "
                    "try again later"
                )
            self._pending += 1
            policy = self._idle.pop() if self._idle else None
        try:
            if policy is None:
                policy = self._new_instance()
        except BaseException:
            with self._lock:
                self._pending -= 1
                self._freed.notify()
            raise
        session = Session(self, key, policy, evictable)
        with self._lock:
            self._pending -= 1
            raced = self._sessions.get(key)
            if raced is None:
                self._sessions[key] = session
                return session
            self._idle.append(policy)  # two first requests of one id at once: both use the first session
            return raced

    def _new_instance(self) -> Policy:
        """A policy instance for a new session: a fresh one, or the next slot of the natively batched form."""
        from rollbench.core.registry import make_policy

        if self._native is None:
            return make_policy(self.name, self.options)
        with self._lock:
            slot, self._slots_made = self._slots_made, self._slots_made + 1
        return SlotPolicy(self._native, slot, self._native_lock)

    def get_session(self, key: str) -> Session:
        """The live session ``key``; SessionGone if there is none (evicted, never reset, or before a restart)."""
        with self._lock:
            live = self._sessions.get(key)
            if live is not None:
                return live
            if key in self._gone:
                raise SessionGone(self._gone_message(key))
        name = key.removeprefix("id:")
        raise SessionGone(
            f"unknown session {name[:MAX_SHOWN]!r}: a session is started by a reset request (this server may have "
            "restarted since); its episode cannot continue"
        )

    def _gone_message(self, key: str) -> str:
        return (
            f"session {key.removeprefix('id:')[:MAX_SHOWN]!r} expired: idle more than "
            f"{self.limits.session_idle_s:g} s, it was evicted to make room for another client; its episode "
            "cannot continue"
        )

    def _evict_idle(self) -> bool:
        """Close the longest-idle evictable session not in use, if idle long enough (call with self._lock)."""
        cutoff = time.monotonic() - self.limits.session_idle_s
        for s in sorted(self._sessions.values(), key=lambda s: s.last_used):
            if not s.evictable or s.last_used > cutoff or not s.lock.acquire(blocking=False):
                continue
            try:
                s.closed = True
            finally:
                s.lock.release()
            del self._sessions[s.key]
            self._idle.append(s.policy)
            self._gone[s.key] = None
            while len(self._gone) > FORGET_AFTER:
                self._gone.popitem(last=False)
            return True
        return False

    def end_session(self, key: str) -> None:
        """Close session ``key`` (its connection ended); its policy instance returns to the idle pool."""
        with self._lock:
            s = self._sessions.pop(key, None)
        if s is None:
            return
        with s.lock:  # a call still running on this instance finishes first
            s.closed = True
        with self._lock:
            self._idle.append(s.policy)
            self._freed.notify()

    def started_sessions(self) -> int:
        """Live sessions that have had a reset (those that may send an act)."""
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.task is not None)

    # ---------------------------------------------------------------------------------------- requests

    def count_act(self) -> int:
        with self._lock:
            self._acts += 1
            return self._acts

    def obs_map_for(self, task: TaskInfo) -> Any:
        return resolve_obs_map(served_layout(task.family), self.protocol, self.obs_overrides)

    def log(self, **record: Any) -> None:
        if self._log is None:
            return
        line = json.dumps(jsonable({"time": time.time(), "protocol": self.protocol, **record}))
        with self._lock:
            self._log.write(line + "\n")
            self._log.flush()

    def handle(self, session: Session, request: Any, decode: Any) -> dict[str, Any]:
        """Serve one decoded request (reset or act); ``decode(request, obs_map) -> (Observation, instruction)``."""
        if not isinstance(request, Mapping):
            raise ProtocolError(f"a request must be a map, got {type(request).__name__}")
        if "reset" in request:
            session.reset(request["reset"])
            return {"reset": True}
        task = session.ensure_reset()
        obs_map = self.obs_map_for(task)
        obs, instruction = decode(request, obs_map)
        check_for_task(obs, task, obs_map, instruction)
        record = self.act_record(session, task, obs, instruction)
        t0 = time.perf_counter()
        try:
            actions = session.act(obs, instruction)
        except BaseException as exc:
            self.log(**record, outcome=f"{describe(exc)}")
            raise
        infer_ms = 1e3 * (time.perf_counter() - t0)
        self.log(**record, outcome=f"actions {list(actions.shape)}")
        return {"actions": actions, "server_timing": {"infer_ms": infer_ms}}

    def act_record(self, session: Session, task: TaskInfo, obs: Observation, instruction: str) -> dict[str, Any]:
        """What ``--log-requests`` writes of one act (the outcome is added once known)."""
        return {
            "session": session.key,
            "kind": "act",
            "task": task.name,
            "seed": session.seed,
            "instruction": instruction,
            "state": [str(obs.raw.dtype), list(obs.raw.shape)],
            "images": {c: list(v.shape) for c, v in obs.images.items()},
        }

    def _log_call(self, keys: list[str]) -> None:
        """``--log-requests`` of one gathered policy call: its number and the sessions it answers, in order."""
        self._calls += 1
        self.log(kind="call", call=self._calls, size=len(keys), sessions=keys)

    def act_many(self, items: Sequence[tuple[Session, Observation, str]]) -> list[Answer]:
        """Act for each ``(session, observation, instruction)``: see :func:`rollbench.serve.batch.act_many`."""
        return act_many(self, items, self._gatherer)
