""":class:`rollbench.mcp.slots.RolloutSlots` in the event loop, with real worker threads: the cancellation protocol
of hostile round 24, F2 (a call cancelled while it waited for a worker thread used to wait, in another worker
thread, for a signal only its never-started work could give, for good), stated on the states
:class:`rollbench.mcp.progress.Active` goes through."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from cli_in_process import invoke
from rollbench.core.contracts import ConfigError
from rollbench.mcp.progress import Active
from rollbench.mcp.slots import RolloutSlots

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
]  # a wait that never ends is shielded: fail_after cannot end it


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def until_stopped(active: Active, began: threading.Event) -> str:
    """A rollout's work as the server's: it goes until told to stop (between its "episodes" of 10 ms)."""
    began.set()
    while not active.stop.is_set():
        time.sleep(0.01)
    return "stopped"


async def wait_for(event: threading.Event) -> None:
    while not event.is_set():
        await anyio.sleep(0.01)


async def test_a_call_cancelled_while_waiting_for_a_worker_thread_is_released_at_once_and_never_runs() -> None:
    slots, began = RolloutSlots(1), threading.Event()
    _, threads = slots._limiters()
    holder = object()
    await threads.acquire_on_behalf_of(holder)  # the worker threads are all taken: the call waits for one
    active = Active()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slots.run, active, lambda: until_stopped(active, began))
            while threads.statistics().tasks_waiting == 0:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        threads.release_on_behalf_of(holder)
        await anyio.sleep(0.2)  # a worker thread that picked the call up now would begin it
    assert (active.state, active.ended.is_set(), active.stop.is_set(), began.is_set()) == ("dropped", True, True, False)
    assert slots.busy() is None  # its slot is free again


async def test_a_running_call_cancelled_stops_its_work_and_returns_once_the_thread_has_ended() -> None:
    slots, began, default_threads = RolloutSlots(1), threading.Event(), anyio.to_thread.current_default_thread_limiter()
    active, waiter = Active(), Active()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slots.run, active, lambda: until_stopped(active, began))
            await wait_for(began)
            tg.start_soon(slots.run, waiter, lambda: "never")
            while slots._limiters()[0].statistics().tasks_waiting == 0:
                await anyio.sleep(0.01)
            borrowed = default_threads.borrowed_tokens  # a rollout takes none of the quick tools' threads
            busy = slots.busy()
            tg.cancel_scope.cancel()
    assert (active.state, active.ended.is_set()) == ("ended", True)  # returned only after its thread ended
    assert (waiter.state, waiter.ended.is_set()) == ("dropped", True)
    assert borrowed == 0 and busy == "1 rollout(s) already running in this server (--max-rollouts 1) and 1 waiting"


async def test_a_call_past_the_waiting_ones_is_refused_at_once_naming_the_option() -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    slots, began = RolloutSlots(2), threading.Event()
    actives = [Active() for _ in range(4)]
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for a in actives:
                tg.start_soon(slots.run, a, lambda a=a: until_stopped(a, began))
            while slots._limiters()[0].statistics().tasks_waiting < 2:
                await anyio.sleep(0.01)
            with pytest.raises(ToolError) as refused:
                await slots.run(Active(), lambda: "never")
            tg.cancel_scope.cancel()
    assert str(refused.value) == (
        "2 rollout(s) already running in this server (--max-rollouts 2) and 2 waiting, the most that may wait; try "
        "again when one has finished (list_runs and get_run show them)"
    )
    assert sorted(a.state for a in actives) == ["dropped", "dropped", "ended", "ended"]


@pytest.mark.parametrize("value", [0, -1, 257, True])
def test_max_rollouts_out_of_range_is_refused_naming_the_option(value: int) -> None:
    with pytest.raises(ConfigError) as refused:
        RolloutSlots(value)
    assert str(refused.value) == f"--max-rollouts must be between 1 and 256, got {value}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "--max-rollouts must be between 1 and 256, got 0"),
        ("257", "--max-rollouts must be between 1 and 256, got 257"),
        ("nan", "--max-rollouts 'nan': must be a whole number"),
    ],
)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_out_of_range_max_rollouts_is_refused_in_one_line_before_anything_is_created(
    tmp_path: Path, transport: str, value: str, expected: str
) -> None:
    proc = invoke("mcp", "--transport", transport, "--root", tmp_path / "mcp", "--max-rollouts", value)
    assert (proc.returncode, proc.stdout + proc.stderr) == (2, f"error: {expected}\n")
    assert list(tmp_path.iterdir()) == []
