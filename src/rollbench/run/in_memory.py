"""A policy object that lives in the caller's process (``rollbench.evaluate(policy=<object>)``, a training loop's
model): its name in the spec, the binding that lets this process's workers use it, and the borrowed view they get.

The object never leaves the process and is never pickled: the spec names it ``in-memory:<module.QualName>`` (plus
``@<checkpoint id>`` when the caller gives one), which is what run.json records, with the same facts in the policy's
provenance (``in_memory``). While :func:`bound` holds, :func:`borrowed` hands the object to
:func:`rollbench.run.worker.build_policy`; outside it (a later ``rollbench eval --resume`` of such a run) the name
cannot be built and the error says to pass the object again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from rollbench.core.batch import Batchable, BatchPolicy
from rollbench.core.contracts import (
    ChecksTasks,
    ConfigError,
    FinishesEpisodes,
    Observation,
    PolicyInfo,
    TaskInfo,
)
from rollbench.core.policy_info import check_policy_info

PREFIX = "in-memory:"
MAX_CHECKPOINT_ID = 200  # characters of a user-supplied checkpoint id

_BOUND: dict[str, object] = {}
_LOCK = threading.Lock()


def class_name(policy: object) -> str:
    """``module.QualName`` of ``policy``'s class (``__main__.MyPolicy`` for one defined in a script)."""
    cls = type(policy)
    return f"{cls.__module__}.{cls.__qualname__}"


def policy_name(policy: object, checkpoint_id: str | None = None) -> str:
    """The spec's policy name of an in-memory object: ``in-memory:pkg.mod.Class`` or ``...@<checkpoint_id>``.
    ConfigError for an object that is not a policy or whose ``info`` a built policy's would fail
    (:func:`~rollbench.core.policy_info.check_policy_info`), or a checkpoint id that is empty, too long or has whitespace."""
    missing = [m for m in ("reset", "act", "close") if not callable(getattr(policy, m, None))]
    info = getattr(policy, "info", None)
    if not isinstance(info, PolicyInfo) or missing:
        raise ConfigError(
            f"policy= got a {type(policy).__name__}, which is not a rollbench.Policy "
            "(it needs info: rollbench.PolicyInfo and reset, act, close methods)"
        )
    name = PREFIX + class_name(policy)
    check_policy_info(name, info)  # the check every built policy's info passes (rollbench.core.policy_info)
    if checkpoint_id is None:
        return name
    if not checkpoint_id or len(checkpoint_id) > MAX_CHECKPOINT_ID or any(c.isspace() for c in checkpoint_id):
        raise ConfigError(
            f"checkpoint_id {checkpoint_id!r} must be 1 to {MAX_CHECKPOINT_ID} characters without whitespace"
        )
    return f"{name}@{checkpoint_id}"


def is_in_memory(name: str) -> bool:
    """Whether the spec's policy ``name`` is an in-memory object's (:func:`policy_name`)."""
    return name.startswith(PREFIX)


def refuse_execution(name: str, policy: object, workers: int, executor: str, batch_size: int) -> None:
    """ConfigError (one line, why) when an in-memory object cannot run this way: in other processes (``workers``
    > 1 or the Ray executor: the object is never pickled), or in several batch slots when it has no
    ``batched(size)`` (one instance cannot hold several episodes' state)."""
    if workers > 1 or executor != "local":
        where = f"workers={workers}" if workers > 1 else f"executor={executor!r}"
        raise ConfigError(
            f"policy {name} is an in-memory object: {where} would run it in other processes, and rollbench never "
            "pickles it; give workers=1 (batch_size=B batches it in this process)"
        )
    if batch_size > 1 and not isinstance(policy, Batchable):
        raise ConfigError(
            f"policy {name} is one in-memory object without batched(size): it cannot hold {batch_size} episodes' "
            "state at once; give batch_size=1 or define batched(size) -> rollbench.BatchPolicy"
        )


@contextmanager
def bound(name: str, policy: object) -> Iterator[None]:
    """Make ``policy`` the object :func:`borrowed` returns for ``name`` while the block runs (this process only).
    ConfigError when ``name`` is already bound to another object (two concurrent evaluations of one name)."""
    with _LOCK:
        if _BOUND.get(name, policy) is not policy:
            raise ConfigError(f"policy {name} is already being evaluated with another object in this process")
        _BOUND[name] = policy
    try:
        yield
    finally:
        with _LOCK:
            _BOUND.pop(name, None)


def borrowed(name: str) -> Borrowed:
    """The bound object of ``name`` seen through :class:`Borrowed`. ConfigError when none is bound: such a run
    continues only through ``rollbench.evaluate(policy=<the object>, out=RUN_DIR)``."""
    with _LOCK:
        policy = _BOUND.get(name)
    if policy is None:
        raise ConfigError(
            f"policy {name} was an in-memory object; it cannot be rebuilt from its name: resume the run with "
            "rollbench.evaluate(policy=<the object>, out=RUN_DIR) in Python"
        )
    return Borrowed(policy, name)


class Borrowed:
    """The caller's policy object as rollbench uses it: every call forwarded, ``close`` a no-op (the caller owns the
    object and keeps using it), ``info`` named as the spec names it and carrying ``provenance.in_memory``
    (``{"class": "module.QualName", "checkpoint_id": str | None}``). The optional hooks forward when the object has
    them: ``batched`` (None without one), ``check_tasks`` (nothing to check without one), ``finish_episode`` (no
    files without one)."""

    def __init__(self, policy: Any, name: str) -> None:
        self.policy = policy
        _, _, checkpoint = name.partition("@")
        facts = {"class": class_name(policy), "checkpoint_id": checkpoint or None}
        info: PolicyInfo = policy.info
        self.info = dataclasses.replace(info, name=name, provenance={**info.provenance, "in_memory": facts})

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.policy.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return np.asarray(self.policy.act(observation, instruction))

    def close(self) -> None:
        """Nothing: the object is the caller's, who may evaluate it again."""

    def batched(self, size: int) -> BatchPolicy | None:
        return self.policy.batched(size) if isinstance(self.policy, Batchable) else None

    def check_tasks(self, tasks: Sequence[TaskInfo], image_size_of: Callable[[TaskInfo], tuple[int, int]]) -> None:
        if isinstance(self.policy, ChecksTasks):
            self.policy.check_tasks(tasks, image_size_of)

    def finish_episode(self, outcome: Mapping[str, Any]) -> Mapping[str, bytes]:
        return self.policy.finish_episode(outcome) if isinstance(self.policy, FinishesEpisodes) else {}
