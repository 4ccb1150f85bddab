"""``--executor ray [--ray-address ADDR]``: one Ray actor per worker, each holding one EpisodeWorker (one simulator).

Without ``--ray-address`` a private local Ray instance is started for the run (``ray.init(address="local")`` with
the CPUs, GPUs and custom resources the workers ask for, no dashboard) and shut down afterwards; with it, the run joins
that cluster (``ray start --head`` prints the address). Ray >= 2.60 turns token authentication on by default: the
driver needs the cluster's token (``~/.ray/auth_token``, ``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``); a refused
token is a ConfigError naming those.

**No shared file system.** Actors ship each finished episode back in their reply (:mod:`rollbench.record.shipping`:
the staged files as bytes, size-bounded, SHA-256-checked) and this process, the only writer of the run directory,
stages it (temp dir + rename, first-wins) and commits it in order, exactly as it commits a local worker's. With
``--ray-shared-fs`` an actor that sees the run directory at the driver's path (it reads a random token the driver
wrote into ``.staging``) stages its episodes itself; every other actor still ships. run.json's ``executions[].ray``
records, per actor, which it did. A reply that fails its checks is recorded as that episode's ``infrastructure``
error (re-run by a resume with the default ``--retry-errors infra``), never as the episode.

**Resources and placement** (:class:`rollbench.run.ray_options.RayOptions`): ``--ray-cpus``/``--ray-gpus``/
``--ray-resources`` per worker, ``--ray-placement spread|pack``, ``--ray-policy-per-node`` (one policy actor per node,
:mod:`rollbench.run.ray_policy`). What was asked and where every actor ran (node, pid, GPU ids) is recorded in
``executions[].ray``, never in the spec.

Requirements on a real cluster: every node runs the same Python environment with rollbench installed (actors import
it by name). Failures: an actor that dies (its node removed, its process killed) is replaced by a new actor and its
episode re-run from the planned seed (:mod:`rollbench.run.pool`); Ray's own retries are off (``max_restarts=0,
max_task_retries=0``) so there is one retry policy. ``ray`` is imported only inside this package's Ray modules.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from typing import Any

from rollbench.core.plan import PlannedEpisode
from rollbench.run.execution import Execution
from rollbench.run.observer import RunObserver
from rollbench.run.pool import Event, run_pool
from rollbench.run.ray_actor import EpisodeActor, probe_dir
from rollbench.run.ray_options import RayOptions
from rollbench.run.ray_reply import ReplyChecker
from rollbench.run.ray_session import ray_session
from rollbench.run.worker import WorkerSetup

FORWARDED_ENV = ("MUJOCO_GL", "PYOPENGL_PLATFORM")  # offscreen GL choice of the driver, given to actors on a cluster


class RayBackend:
    """Worker slots backed by Ray actors (see the module docstring). ``actor_class``: the env actor's body (default
    :class:`~rollbench.run.ray_actor.EpisodeActor`, looked up when the backend is made)."""

    def __init__(
        self,
        setup: WorkerSetup,
        opts: RayOptions,
        workers: int,
        forward_env: bool = True,
        actor_class: type | None = None,
    ) -> None:
        import ray

        from rollbench.run.ray_nodes import NodePolicies

        self._ray, self._setup, self.opts = ray, setup, opts
        env_vars = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        self._options: dict[str, Any] = {}
        if env_vars and forward_env:
            self._options["runtime_env"] = {"env_vars": env_vars}
        if setup.batch_size > 1:  # a threaded actor: B concurrent run() calls feed one lockstep loop
            self._options["max_concurrency"] = setup.batch_size + 2
        gpus = opts.gpus if opts.policy == "worker" else 0.0
        self._resources = dict(num_cpus=opts.cpus, num_gpus=gpus, resources=dict(opts.resources))
        self._pg = None
        if opts.placement == "pack":
            bundle = {"CPU": opts.cpus, "GPU": gpus, **opts.resources}
            self._pg = ray.util.placement_group(
                [{k: v for k, v in bundle.items() if v} for _ in range(workers)], "PACK"
            )
        self._cls: Any = ray.remote(max_restarts=0, max_task_retries=0)(actor_class or EpisodeActor)
        self._token: str | None = None
        if opts.shared_fs:
            self._token = uuid.uuid4().hex
            probe = probe_dir(setup.run_dir, self._token)
            probe.mkdir(parents=True)
            (probe / "token").write_text(self._token)
        self.replies = ReplyChecker(setup, opts.max_episode_bytes)
        self.policies = NodePolicies(ray, setup, workers, self._options, opts.gpus) if opts.policy == "node" else None
        self.actors: dict[int, Any] = {}
        self.placed: dict[int, dict[str, Any]] = {}
        self.record: dict[str, Any] = {**opts.record(), "actors": [], "policy_actors": []}
        self._pending: dict[Any, tuple[int, str, PlannedEpisode | None]] = {}

    def _actor_options(self, slot: int) -> dict[str, Any]:
        options = {**self._options, **self._resources}
        if self._pg is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(self._pg, slot)
        else:
            options["scheduling_strategy"] = "SPREAD"
        return options

    def start(self, slot: int) -> None:
        self._kill(slot)
        actor = self._cls.options(**self._actor_options(slot)).remote(
            self._setup, self._token, self.opts.max_episode_bytes
        )
        self.actors[slot] = actor
        self._pending[actor.place.remote()] = (slot, "place", None)
        if self.policies is None:
            self._pending[actor.build.remote()] = (slot, "build", None)

    def submit(self, slot: int, planned: PlannedEpisode) -> None:
        self._pending[self.actors[slot].run.remote(planned)] = (slot, "run", planned)

    def wait(self, timeout: float) -> list[Event]:
        ray = self._ray
        if not self._pending:
            time.sleep(timeout)
            return []
        done, rest = ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        if done and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            done += more
        events: list[Event] = []
        for ref in done:
            if ref not in self._pending:  # dropped with its dead actor
                continue
            slot, kind, planned = self._pending.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # raised by our code inside a live actor
                events.append(Event("fatal", slot, detail=str(exc)))
            except ray.exceptions.RayError as exc:  # the actor (or its node) is gone
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                where = self.placed.get(slot, {}).get("ip", "not yet placed")
                what = "its node's policy actor" if kind == "policy" else "actor"
                events.append(Event("died", slot, detail=f"{what} on {where} lost: {first}"))
                self._kill(slot)
            else:
                events += self._reply(slot, kind, planned, value)
        return events

    def _reply(self, slot: int, kind: str, planned: PlannedEpisode | None, value: Any) -> list[Event]:
        if kind == "run":
            assert planned is not None
            summary, shipped = value
            shared = self.placed.get(slot, {}).get("episodes") == "shared"
            return [Event("done", slot, summary=self.replies.record(planned, summary, shipped, shared))]
        if kind == "place":
            self.placed[slot] = {"slot": slot, **value}
            self.record["actors"].append(self.placed[slot])
            if self.policies is not None:
                return self._attach(self.policies.place(slot, value["node"]))
            return []
        if kind == "policy":
            error, started = self.policies.ready(value) if self.policies is not None else (None, [])
            if error is not None:
                return [Event("fatal", slot, detail=error)]
            entry = next(p for p in self.record["policy_actors"] if p["node"] == value["node"])
            entry.update({k: v for k, v in value.items() if k not in ("error", "info")})
            return self._attach(started)
        if value is not None:  # build: the policy could not be built
            return [Event("fatal", slot, detail=value)]
        return [Event("ready", slot)]

    def _attach(self, todo: list[tuple[Any, ...]]) -> list[Event]:
        """Ask for a policy actor's readiness, or build env actors on a ready policy actor (NodePolicies' orders)."""
        for order in todo:
            if order[0] == "policy":  # recorded when started: it holds the node's GPU share whether or not it answers
                _, slot, ref, node = order
                self._pending[ref] = (slot, "policy", None)
                self.record["policy_actors"].append({"node": node})
            else:
                _, slot, handle, base, info = order
                if slot in self.actors:
                    self._pending[self.actors[slot].build.remote(handle, base, info)] = (slot, "build", None)
        return []

    def _kill(self, slot: int) -> None:
        for ref in [r for r, (s, k, _) in self._pending.items() if s == slot and k != "policy"]:
            del self._pending[ref]
        actor = self.actors.pop(slot, None)
        self.placed.pop(slot, None)
        if self.policies is not None:
            self.policies.release(slot)
        if actor is not None:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)

    def close(self) -> None:
        for slot in list(self.actors):
            self._kill(slot)
        if self.policies is not None:
            self.policies.close()
        if self._pg is not None:
            with contextlib.suppress(Exception):
                self._ray.util.remove_placement_group(self._pg)
        if self._token is not None:
            shutil.rmtree(probe_dir(self._setup.run_dir, self._token), ignore_errors=True)
        with contextlib.suppress(Exception):
            nodes = {a["node"] for a in self.record["actors"]} | {a["node"] for a in self.record["policy_actors"]}
            self.record["nodes"] = {
                n["NodeID"]: {"ip": n["NodeManagerAddress"], "alive": n["Alive"], "resources": n["Resources"]}
                for n in self._ray.nodes()
                if n["NodeID"] in nodes
            }


def run_ray(
    setup: WorkerSetup, todo: list[PlannedEpisode], execution: Execution, observer: RunObserver
) -> dict[str, Any]:
    """Run ``todo`` on ``execution.workers`` Ray actors, telling ``observer`` (see :mod:`rollbench.run.pool`); connects
    to ``execution.ray_address`` or starts a private local Ray instance. Returns the pool's counters and ``ray``: the options, ``actors`` and ``policy_actors`` (where
    each ran: node id, ip, pid, GPU ids, ``episodes`` shipped or shared) and ``nodes`` (their ip and resources).

    Inside an open :func:`~rollbench.run.ray_session.ray_session` (``evaluate`` opens one before it creates the run
    directory) that connection is used; else one is opened for this call. Raises ConfigError when Ray is not
    installed or the cluster cannot be reached.
    """
    with ray_session(execution) as session:
        assert session is not None  # an Execution with executor "ray"
        # a private instance inherits this process's environment; a cluster gets the GL choice via runtime_env
        backend = RayBackend(setup, execution.ray, execution.workers, forward_env=not session.private)
        counters: dict[str, Any] = run_pool(backend, setup, todo, observer, slots=execution.workers)
        return {**counters, "ray": backend.record}
