"""The driver's bookkeeping of ``--ray-policy-per-node``: one policy actor per node (:mod:`rollbench.run.ray_policy`)
and which of its slots each env actor holds."""

from __future__ import annotations

import contextlib
from typing import Any

from rollbench.run.ray_policy import PolicyActor
from rollbench.run.worker import WorkerSetup

Order = tuple[Any, ...]
"""``("policy", slot, ready_ref, node)``: wait for a new policy actor, pinned to ``node``; ``("build", slot, handle,
base, info)``: build env actor ``slot`` on slots ``base..`` of a ready policy actor."""


class NodePolicies:
    """Policy actors by node id, started on the first env actor placed on a node (see :mod:`rollbench.run.ray_policy`)."""

    def __init__(self, ray: Any, setup: WorkerSetup, workers: int, options: dict[str, Any], gpus: float) -> None:
        self._ray, self._setup = ray, setup
        self.size = workers * setup.batch_size  # every env actor might land on one node
        extra = {k: v for k, v in options.items() if k == "runtime_env"}
        self._cls = ray.remote(max_restarts=0, max_task_retries=0)(PolicyActor)
        self._extra = {**extra, "max_concurrency": self.size + 4}
        self.gpus = gpus
        self.actors: dict[str, Any] = {}
        self.info: dict[str, Any] = {}  # node -> PolicyInfo once ready
        self.waiting: dict[str, list[int]] = {}  # node -> env slots placed, policy actor not ready yet
        self.held: dict[int, tuple[str, int]] = {}  # env slot -> (node, base)

    def place(self, slot: int, node: str) -> list[Order]:
        """Env actor ``slot`` was placed on ``node``: start its policy actor, or build the env actor on it."""
        if node in self.info:
            return [self._build(slot, node)]
        self.waiting.setdefault(node, []).append(slot)
        if node in self.actors:
            return []
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self._cls.options(
            num_cpus=0,
            num_gpus=self.gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            **self._extra,
        ).remote(self._setup.spec, self.size)
        self.actors[node] = actor
        return [("policy", slot, actor.ready.remote(), node)]

    def ready(self, value: dict[str, Any]) -> tuple[str | None, list[Order]]:
        """A policy actor answered ``ready``: its error, else the env actors to build on it."""
        if value["error"] is not None:
            return value["error"], []
        node = value["node"]
        self.info[node] = value["info"]
        return None, [self._build(s, node) for s in self.waiting.pop(node, [])]

    def _build(self, slot: int, node: str) -> Order:
        used = {base for n, base in self.held.values() if n == node}
        base = next(b for b in range(0, self.size, self._setup.batch_size) if b not in used)
        self.held[slot] = (node, base)
        self.actors[node].attach.remote(1)
        return ("build", slot, self.actors[node], base, self.info[node])

    def release(self, slot: int) -> None:
        """Env actor ``slot`` is gone: its policy slots are free again."""
        for waiting in self.waiting.values():
            if slot in waiting:
                waiting.remove(slot)
        held = self.held.pop(slot, None)
        if held is not None and held[0] in self.actors:
            with contextlib.suppress(Exception):
                self.actors[held[0]].attach.remote(-1)

    def close(self) -> None:
        for actor in self.actors.values():
            with contextlib.suppress(Exception):
                self._ray.get(actor.close.remote(), timeout=30)
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
