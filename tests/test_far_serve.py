"""The far sides' one request loop (``frames.serve``, rollbench/wire/pipe/frames.py) as the LeRobot policy host runs
it: real pipes, the host script's own handler and error replies, in a thread of this interpreter. lerobot cannot
run in the core venv, so its ``Host`` is replaced by a stand-in with the same three methods (the real host against
lerobot's own loop: tests/compat/test_lerobot_policy.py); the env host runs the same loop in tests/test_env_host.py.
Expected replies are written out by hand from the protocol in the hosts' docstrings."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rollbench"


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the host puts wire/pipe on sys.path itself, as in its own interpreter
    return module


LEROBOT_HOST = _module("rollbench_lerobot_host_loop", SRC / "policies" / "lerobot" / "host.py")
frames = LEROBOT_HOST.frames


class StandInHost:
    """What the loop calls on lerobot's Host: ``load``, ``reset``, ``act`` (slot 2 fails, ``load`` of ``aloha``
    fails), each call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def load(self, family: str, env_task: str, seed_once: int | None = None) -> None:
        self.calls.append(("load", family, env_task, seed_once))
        if family == "aloha":
            raise ValueError("this host serves pusht; one run cannot mix it with aloha")

    def reset(self, slot: int, seed: int) -> None:
        self.calls.append(("reset", slot, seed))

    def act(self, slot: int, raw: dict[str, Any], task: str) -> np.ndarray:
        self.calls.append(("act", slot, sorted(raw), task))
        if slot == 2:
            raise RuntimeError("slot 2 broke")
        return raw["agent_pos"][0] * 10.0


@pytest.fixture
def served() -> Iterator[tuple[Any, Any, StandInHost, threading.Thread]]:
    """(send, receive, the stand-in, the loop's thread): the LeRobot host's loop on a fresh pair of pipes."""
    to_far_r, to_far_w = os.pipe()
    from_far_r, from_far_w = os.pipe()
    host = StandInHost()
    loop = threading.Thread(
        target=frames.serve,
        args=(LEROBOT_HOST.handler(host), LEROBOT_HOST.OPS, frames.FrameReader(to_far_r), from_far_w),
        kwargs={"error": LEROBOT_HOST._error},
        daemon=True,
    )
    loop.start()
    reader = frames.FrameReader(from_far_r)

    def send(message: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
        frames.write_frame(to_far_w, frames.encode(message, arrays))

    def receive() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        return reader.read(timeout_s=30)

    yield send, receive, host, loop
    for fd in (to_far_w, from_far_r):
        os.close(fd)
    loop.join(timeout=30)
    for fd in (to_far_r, from_far_w):
        os.close(fd)


def test_the_lerobot_host_answers_load_reset_and_act_per_slot_and_a_failing_slot_alone_is_an_error(served) -> None:
    send, receive, host, _ = served
    send({"op": "load", "family": "pusht", "env_task": "PushT-v0"})
    assert receive() == ({"op": "ok"}, {})
    send({"op": "reset", "slot": 0, "seed": 7})
    assert receive() == ({"op": "ok"}, {})
    pos = np.array([1.5, -2.0], dtype=np.float32)
    send({"op": "act", "items": [{"slot": 0, "task": "push"}, {"slot": 2, "task": "push"}]}, {"0/agent_pos": pos})
    reply, arrays = receive()
    assert reply["op"] == "actions" and reply["items"][0] == {"slot": 0}
    failed = reply["items"][1]
    assert {k: failed[k] for k in ("slot", "op", "where", "message")} == {
        "slot": 2,
        "op": "error",
        "where": "policy",
        "message": "RuntimeError: slot 2 broke",
    }
    assert failed["traceback"].rstrip().endswith("RuntimeError: slot 2 broke")
    assert list(arrays) == ["0"] and arrays["0"].tolist() == [15.0, -20.0]  # slot 0's observation, nested, x10
    assert host.calls == [
        ("load", "pusht", "PushT-v0", None),
        ("reset", 0, 7),
        ("act", 0, ["agent_pos"], "push"),
        ("act", 2, [], "push"),
    ]


def test_an_exception_is_that_request_s_error_and_the_loop_goes_on_until_close(served) -> None:
    send, receive, host, loop = served
    send({"op": "load", "family": "aloha", "env_task": "AlohaInsertion-v0", "seed_once": 3})
    reply, arrays = receive()
    assert (reply["op"], reply["where"], reply["message"], arrays) == (
        "error",
        "load",
        "ValueError: this host serves pusht; one run cannot mix it with aloha",
        {},
    )
    assert "host_s" not in reply  # only the env host times its replies
    send({"op": "reset", "slot": 1, "seed": 9})
    assert receive() == ({"op": "ok"}, {})
    send({"op": "close"})
    assert receive() == ({"op": "ok"}, {})
    loop.join(timeout=30)
    assert not loop.is_alive()
    assert host.calls == [("load", "aloha", "AlohaInsertion-v0", 3), ("reset", 1, 9)]


@pytest.mark.parametrize("op", ["nope", None, 3])
def test_an_unknown_op_is_a_protocol_error_as_on_the_env_host(served, op: Any) -> None:
    send, receive, host, _ = served
    send({"op": op} if op is not None else {"slot": 0})
    assert receive() == ({"op": "error", "where": "protocol", "message": f"unknown op {op!r}"}, {})
    assert host.calls == []


def test_the_loop_returns_quietly_when_rollbench_closes_its_end_of_the_pipe() -> None:
    to_far_r, to_far_w = os.pipe()
    from_far_r, from_far_w = os.pipe()
    done: list[str] = []

    def run() -> None:
        frames.serve(LEROBOT_HOST.handler(StandInHost()), LEROBOT_HOST.OPS, frames.FrameReader(to_far_r), from_far_w,
                     LEROBOT_HOST._error)  # fmt: skip
        done.append("returned")

    loop = threading.Thread(target=run, daemon=True)
    loop.start()
    os.close(to_far_w)  # rollbench exited: end of input, no reply, no exception
    loop.join(timeout=30)
    assert done == ["returned"]
    os.close(from_far_w)
    assert os.read(from_far_r, 1) == b""  # nothing was written
    for fd in (to_far_r, from_far_r):
        os.close(fd)
