"""openpi's own ``WebsocketPolicyServer`` (PyPI ``openpi-server``) on loopback around a recording policy, shared by
the LIBERO oracle tests (``test_libero_oracle.py``: in-process LIBERO; ``test_libero_ref_oracle.py``: the reference
stack). The policy's answer is a float64 ``(10, 7)`` chunk drawn from a hash of everything it was sent, so any
difference in what a client sends shows up in the actions too, and trajectories are closed-loop."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openpi_server
import pyarrow.parquet as pq


class RecordingPolicy:
    """openpi ``BasePolicy``: records each observation, answers ``float64 (10, 7)`` drawn from its hash."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.replies: list[np.ndarray] = []

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(obs)
        h = hashlib.sha256()
        for key in sorted(obs):
            value = obs[key]
            h.update(key.encode() + (value.tobytes() if isinstance(value, np.ndarray) else str(value).encode()))
        rng = np.random.default_rng(int.from_bytes(h.digest()[:8], "little"))
        actions = rng.uniform(-1.0, 1.0, size=(10, 7))
        self.replies.append(actions)
        return {"actions": actions}

    def reset(self) -> None:
        pass

    def take(self) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
        """``(calls, replies)`` recorded so far; the record starts empty again (for the next client)."""
        taken = (self.calls[:], self.replies[:])
        self.calls.clear()
        self.replies.clear()
        return taken


class Server:
    """openpi's WebsocketPolicyServer on loopback, in a thread with its own event loop."""

    def __init__(self, policy: Any) -> None:  # an openpi BasePolicy (``infer``, ``reset``)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        server = openpi_server.WebsocketPolicyServer(policy, host="127.0.0.1", port=self.port)
        self.loop = asyncio.new_event_loop()
        self.task = self.loop.create_task(server.run())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            self.loop.run_until_complete(self.task)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.task.cancel)
        self.thread.join(timeout=10)


@contextlib.contextmanager
def recording_server() -> Iterator[tuple[Server, RecordingPolicy]]:
    """A recording policy behind a running server; the server stops on exit."""
    policy = RecordingPolicy()
    srv = Server(policy)
    try:
        yield srv, policy
    finally:
        srv.close()


OPENPI_LIBERO_KEYS = sorted(["observation/image", "observation/wrist_image", "observation/state", "prompt"])


def assert_same_episode(
    ours: RecordingPolicy, reference: tuple[list[dict[str, Any]], list[np.ndarray]], run_dir: Any, horizon: int
) -> None:
    """rollbench's calls (``ours``) equal the reference loop's (openpi's LIBERO keys, prompt, state and images with
    their dtypes and shapes), the replies too, and the run at ``run_dir`` recorded exactly the first 5 rows of each
    reply, ``horizon`` actions in all."""
    reference_calls, reference_replies = reference
    assert len(ours.calls) == len(reference_calls)
    for mine, theirs in zip(ours.calls, reference_calls, strict=True):
        assert sorted(mine) == sorted(theirs) == OPENPI_LIBERO_KEYS
        assert mine["prompt"] == theirs["prompt"]
        for key in ("observation/image", "observation/wrist_image", "observation/state"):
            assert mine[key].dtype == theirs[key].dtype and mine[key].shape == theirs[key].shape, key
            np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)
        assert theirs["observation/state"].dtype == np.float64
    # the same replies (they are a function of what was sent), and exactly their first 5 rows executed and recorded
    for mine_reply, theirs_reply in zip(ours.replies, reference_replies, strict=True):
        np.testing.assert_array_equal(mine_reply, theirs_reply)
    executed = np.concatenate([r[:5] for r in reference_replies])[:horizon]
    recorded = np.asarray(pq.read_table(run_dir / "data").to_pydict()["action"], dtype=np.float64)
    np.testing.assert_array_equal(recorded, executed)


def evaluate_episode(env: str, port: int, seed: int, trial: int, horizon: int, run_dir: Path) -> dict[str, Any]:
    """One rollbench episode of ``env`` (trial ``trial`` of a run seeded ``seed``, ``horizon`` steps) against the
    server on ``port``, written to ``run_dir``; asserts it ended OK and returns its run.json."""
    from rollbench.api import evaluate

    result = evaluate(
        env=env,
        policy=f"ws://127.0.0.1:{port}",
        episodes=1,
        seed=seed,
        first_trial=trial,
        max_steps=horizon,
        out=run_dir,
    )
    assert result.status == "OK", result.reasons
    return json.loads((run_dir / "run.json").read_text())
