"""The body of a Ray env actor (:class:`EpisodeActor`): one EpisodeWorker built in the actor's own process.

Two calls start it: :meth:`EpisodeActor.place` says where Ray put it (pid, node, GPUs, whether it sees the driver's
run directory), then :meth:`EpisodeActor.build` builds the worker, with its own policy or with a client of its node's
policy actor (:mod:`rollbench.run.ray_policy`). A policy that fails to build is reported by ``build`` (a run-level
error), not by killing the actor, so it is not mistaken for a lost node.

Each finished episode is either *shipped* (the default: its staged files as bytes in the reply,
:mod:`rollbench.record.shipping`; the actor never writes the run directory) or, with ``--ray-shared-fs`` on an actor
that sees the run directory at the driver's path, staged straight into it. With ``batch_size`` B > 1 the actor is a
threaded Ray actor: :meth:`run` calls (up to B at once) hand their episode to one stepping thread that runs them in
lockstep (:mod:`rollbench.run.lockstep`), and each call returns when its own episode is done.
"""

from __future__ import annotations

import os
import queue
import threading
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from rollbench.core.contracts import describe
from rollbench.core.episode import EpisodeRecord
from rollbench.core.plan import PlannedEpisode
from rollbench.record.lerobot import STAGING
from rollbench.record.shipping import ShippedEpisode, pack_episode
from rollbench.run.observer import EpisodeSummary, RunObserver
from rollbench.run.ray_policy import NodePolicyClient
from rollbench.run.worker import EpisodeWorker, WorkerSetup

PROBE = ".tmp-ray-probe-{token}"  # a directory in .staging the driver makes for --ray-shared-fs (removed as a leftover)


def probe_dir(run_dir: Path, token: str) -> Path:
    return run_dir / STAGING / PROBE.format(token=token)


class EpisodeActor:
    """See the module docstring. ``shared_token``: the token of the driver's probe (``--ray-shared-fs``), else None;
    ``max_bytes``: the largest episode this actor ships."""

    def __init__(self, setup: WorkerSetup, shared_token: str | None, max_bytes: int) -> None:
        self.setup, self.max_bytes = setup, max_bytes
        self.shared = False
        if shared_token is not None:
            probe = probe_dir(setup.run_dir, shared_token) / "token"
            try:
                self.shared = not probe.is_symlink() and probe.read_text() == shared_token
            except OSError:
                self.shared = False
        self.worker: EpisodeWorker | None = None
        self._shipped: dict[int, ShippedEpisode] = {}
        self._inbox: queue.Queue[PlannedEpisode | None] = queue.Queue()
        self._waiting: dict[int, Future[EpisodeSummary]] = {}
        self._lock = threading.Lock()
        self._stepper: threading.Thread | None = None

    def place(self) -> dict[str, Any]:
        """``{"pid", "ip", "node", "gpu_ids", "cuda_visible_devices", "episodes": "shared" | "shipped"}``."""
        import ray

        ctx = ray.get_runtime_context()
        return {
            "pid": os.getpid(),
            "ip": ray.util.get_node_ip_address(),
            "node": ctx.get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "episodes": "shared" if self.shared else "shipped",
        }

    def build(self, policy_actor: Any = None, base: int = 0, info: Any = None) -> str | None:
        """Build the worker (with a client of ``policy_actor``'s slots from ``base`` when given); the error text of a
        policy that cannot be built, else None."""
        setup = self.setup
        client = None
        if policy_actor is not None:
            client = lambda: NodePolicyClient(policy_actor, base, info)  # noqa: E731
        try:
            self.worker = EpisodeWorker(
                setup, _Answers(self._lock, self._waiting), recorder=None if self.shared else self, policy=client
            )
        except Exception as exc:
            return f"could not build the policy: {describe(exc)}\n{traceback.format_exc()}"
        if setup.batch_size > 1:
            self._stepper = threading.Thread(target=self._step_loop, name="rollbench-lockstep", daemon=True)
            self._stepper.start()
        return None

    def commit(self, rec: EpisodeRecord, render_failure: str | None) -> bool:
        """Record an episode by packing its files to ship (a :class:`~rollbench.run.worker.Recorder`)."""
        fps = self.setup.tasks[rec.planned.task].fps
        shipped = pack_episode(rec, fps, render_failure, self.max_bytes)
        with self._lock:
            self._shipped[rec.planned.episode_index] = shipped
        return True

    def run(self, planned: PlannedEpisode) -> tuple[EpisodeSummary, ShippedEpisode | None]:
        """Run one episode: its summary and, unless staged on a shared run directory, its shipped files."""
        assert self.worker is not None
        if self._stepper is None:
            summary = self.worker.run(planned)
        else:
            future: Future[EpisodeSummary] = Future()
            with self._lock:
                self._waiting[planned.episode_index] = future
            self._inbox.put(planned)
            summary = future.result()
        with self._lock:
            return summary, self._shipped.pop(planned.episode_index, None)

    def _step_loop(self) -> None:
        assert self.worker is not None

        def next_episode(block: bool) -> PlannedEpisode | None:
            try:
                return self._inbox.get(block=block)
            except queue.Empty:
                return None

        try:
            while True:  # run_stream returns when every slot is idle and the inbox said stop
                self.worker.run_stream(next_episode)
                if self._inbox.empty():
                    return
        except BaseException as exc:  # reported to every waiting call (a run-level failure)
            with self._lock:
                waiting = list(self._waiting.values())
                self._waiting.clear()  # the same dict _Answers holds
            for future in waiting:
                future.set_exception(exc)

    def close(self) -> None:
        if self._stepper is not None:
            self._inbox.put(None)
            self._stepper.join(timeout=30)
        if self.worker is not None:
            self.worker.close()


class _Answers(RunObserver):
    """The actor's worker observer: each episode's end answers the ``run`` call waiting for it (batched actors; a
    one-slot actor's ``run`` returns the summary itself and nothing waits)."""

    def __init__(self, lock: threading.Lock, waiting: dict[int, Future[EpisodeSummary]]) -> None:
        self.lock, self.waiting = lock, waiting

    def on_episode_end(self, summary: EpisodeSummary) -> None:
        with self.lock:
            future = self.waiting.pop(summary.episode_index, None)
        if future is not None:
            future.set_result(summary)
