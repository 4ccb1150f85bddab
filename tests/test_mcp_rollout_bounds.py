"""``rollbench mcp``'s rollouts cannot take the server from its other clients (hostile round 24, F2 and F3): at most
``--max-rollouts`` run at once, in threads of their own, as many wait and one more is refused
(:mod:`rollbench.mcp.slots`); a call cancelled before its work began is released at once, and closing the
connection of a call stops its rollout between episodes (:mod:`rollbench.mcp.inflight`). Each test starts the real
``rollbench mcp --transport http`` on 127.0.0.1 and drives it with httpx; the run directories are graded from disk."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli_in_process import invoke
from mcp_http_support import answer_of, call, mcp_http, open_session, poll, tool_request, tool_text

LONG = {"policy": "zero", "env": "scripted/reach", "n_episodes": 1000, "max_steps": 1000}  # minutes: never ends here
SHORT = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 2, "max_steps": 20}


def recorded_status(run: Path) -> str | None:
    """run.json's status, once it has one other than RUNNING (None before)."""
    with_status = run / "run.json"
    status = json.loads(with_status.read_text()).get("status") if with_status.exists() else None
    return None if status in (None, "RUNNING") else str(status)


def episodes_done(run: Path) -> int:
    """Episodes the running run says it has finished (its run.live.json; 0 before it has one)."""
    try:
        return int(json.loads((run / "run.live.json").read_text())["episodes_done"])
    except (OSError, ValueError, KeyError):
        return 0


def start_call(url: str, session: dict[str, str], request_id: int, args: dict[str, Any]) -> tuple[Any, Any]:
    """A run_policy_rollout POST on a connection of its own, its answer not yet read: (client, open response)."""
    client = httpx.Client(timeout=httpx.Timeout(60, read=None))
    response = client.send(
        client.build_request("POST", url, json=tool_request(request_id, "run_policy_rollout", args), headers=session),
        stream=True,
    )
    assert response.status_code == 200
    return client, response


@pytest.mark.slow
def test_a_rollout_cancelled_while_waiting_for_a_slot_is_released_at_once_and_quick_tools_keep_answering(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    with mcp_http(root, "--max-rollouts", "1") as (url, err, proc), httpx.Client(timeout=30) as client:
        s = open_session(client, url)
        hog = start_call(url, s, 3, {**LONG, "run_name": "hog"})
        poll(lambda: episodes_done(root / "hog") >= 1, 60, "the long rollout running")
        waiting = [start_call(url, s, 4 + i, {**SHORT, "run_name": f"q{i}"}) for i in range(2)]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:  # one waits for the slot, the other is refused
            answers = [pool.submit(answer_of, response, 4 + i) for i, (_, response) in enumerate(waiting)]
            done, _ = concurrent.futures.wait(answers, timeout=30, return_when=concurrent.futures.FIRST_COMPLETED)
            (refused,) = (f.result() for f in done)
            i = 1 - answers.index(next(iter(done)))  # the one waiting
            note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4 + i}}
            assert client.post(url, json=note, headers=s).status_code == 202
            cancelled = answers[i].result(timeout=10)  # released at once: its work never began
        never_began = not (root / f"q{i}").exists()
        started = time.monotonic()
        listed = call(client, url, s, "list_runs", {})
        quick_s = time.monotonic() - started
        hog[0].close()  # the long one's connection closed: it stops, its slot is free
        poll(lambda: recorded_status(root / "hog"), 60, "the long rollout stopping")
        again = call(client, url, s, "run_policy_rollout", {**SHORT, "run_name": f"q{i}"})  # the name is free
        hog2 = start_call(url, s, 9, {**LONG, "run_name": "hog2"})
        poll(lambda: episodes_done(root / "hog2") >= 1, 60, "another long rollout running")
        proc.send_signal(signal.SIGTERM)
        stopped = poll(lambda: proc.poll() is not None, 15, "the server ending on SIGTERM")
        for c, _ in (*waiting, hog2):
            c.close()
    assert refused["result"]["isError"] is True
    assert tool_text(refused) == (
        "Error executing tool run_policy_rollout: 1 rollout(s) already running in this server (--max-rollouts 1) "
        "and 1 waiting, the most that may wait; try again when one has finished (list_runs and get_run show them)"
    )
    assert cancelled["error"]["code"] == -32800
    assert never_began
    assert quick_s < 10 and listed["result"]["isError"] is False
    assert again["result"]["structuredContent"]["status"] == "OK"
    assert again["result"]["structuredContent"]["episodes_recorded_before_this_call"] == 0
    assert stopped and "Traceback" not in err.read_text()


@pytest.mark.slow
def test_closing_the_connection_of_a_rollout_stops_it_and_leaves_a_consistent_partial_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with mcp_http(root) as (url, err, _), httpx.Client(timeout=30) as client:
        s = open_session(client, url)
        caller, _ = start_call(url, s, 3, {**LONG, "run_name": "gone"})
        poll(lambda: episodes_done(root / "gone") >= 1, 60, "the rollout running")
        caller.close()  # the client goes away: no notifications/cancelled, only the closed connection
        closed = time.monotonic()
        status = poll(lambda: recorded_status(root / "gone"), 30, "the rollout stopping")
        took = time.monotonic() - closed
        info = call(client, url, s, "get_run", {"run_id": "gone"})["result"]["structuredContent"]
    graded = invoke("grade", root / "gone", "--json")
    out = json.loads(graded.stdout)
    recorded = out["episodes_recorded"]
    assert status == "PARTIAL" and took < 30
    assert info["state"] == "finished"
    assert graded.returncode == 1 and out["status"] == "PARTIAL" and out["violations"] == []
    assert 1 <= recorded < 1000 and out["episodes_requested"] == 1000
    assert "Traceback" not in err.read_text()
