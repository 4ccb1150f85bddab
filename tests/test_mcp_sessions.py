"""``rollbench mcp --transport http`` holds at most ``--max-sessions`` MCP sessions and closes one idle for
``--session-idle-s`` (:mod:`rollbench.mcp.sessions`): a client that opens sessions without end (each ``initialize``
POST opens one), or holds an idle event stream open on each (:mod:`rollbench.mcp.inflight`), no longer locks every
other client out. Each test starts the real command on 127.0.0.1 and drives
it with httpx; which sessions are alive is seen only from the server's answers (200, or the SDK's 404
``Session not found``). Out-of-range bounds are refused in one line here; with ``--transport stdio`` the options
are refused as the other http-only ones are (tests/test_bad_input_table.py)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import httpx
import pytest

from cli_in_process import invoke
from mcp_http_support import HEADERS, INITIALIZE, mcp_http, open_session, ping, poll, tool_request

LONG = {"policy": "zero", "env": "scripted/reach", "n_episodes": 1000, "max_steps": 1000}  # minutes: never ends here


@pytest.mark.slow
def test_after_ten_times_the_cap_of_initializes_a_fresh_client_initializes_and_lists_the_tools(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "4") as (url, err, _), httpx.Client(timeout=30) as client:
        flood = [client.post(url, json=INITIALIZE, headers=HEADERS).status_code for _ in range(40)]
        session = open_session(client, url)
        tools = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
    assert flood == [200] * 40
    assert tools.status_code == 200 and '"name":"run_policy_rollout"' in tools.text
    assert "Traceback" not in err.read_text()


@pytest.mark.slow
def test_a_session_past_the_cap_evicts_the_least_recently_used_one_and_no_other(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "4") as (url, _, _), httpx.Client(timeout=30) as client:
        a, b, c, d = (open_session(client, url) for _ in range(4))
        assert ping(client, url, a) == 200  # a is now used more recently than b
        e = open_session(client, url)  # the fifth: b, the least recently used, is evicted
        first = [ping(client, url, s) for s in (b, a, c, d, e)]  # the order they were last used now: a, c, d, e
        f = open_session(client, url)  # a is the least recently used now
        second = [ping(client, url, s) for s in (a, b, c, d, e, f)]
    assert first == [404, 200, 200, 200, 200]
    assert second == [404, 404, 200, 200, 200, 200]


@pytest.mark.slow
def test_a_session_idle_for_session_idle_s_is_closed_and_one_in_use_is_not(tmp_path: Path) -> None:
    idle_s = 2.0
    with (
        mcp_http(tmp_path / "runs", "--session-idle-s", str(idle_s)) as (url, _, _),
        httpx.Client(timeout=30) as client,
    ):
        session = open_session(client, url)
        started, kept = time.monotonic(), []
        while time.monotonic() - started < 1.5 * idle_s:  # used every idle_s / 4: never idle for idle_s
            kept.append(ping(client, url, session))
            time.sleep(idle_s / 4)
        time.sleep(idle_s + 1)  # (a ping while waiting would be a use: it starts the idle time again)
        after = ping(client, url, session)
        fresh = ping(client, url, open_session(client, url))
    assert set(kept) == {200} and len(kept) >= 5
    assert (after, fresh) == (404, 200)


@pytest.mark.slow
def test_with_every_session_answering_a_call_a_new_one_gets_503_naming_the_option(tmp_path: Path) -> None:
    with mcp_http(tmp_path / "runs", "--max-sessions", "2") as (url, _, _), httpx.Client(timeout=30) as client:
        a, b = open_session(client, url), open_session(client, url)
        with contextlib.ExitStack() as calls:
            for n, s in enumerate((a, b)):  # a call being answered (a long rollout) keeps its session busy
                caller = calls.enter_context(httpx.Client(timeout=30))
                body = tool_request(3, "run_policy_rollout", {**LONG, "run_name": f"long{n}"})
                answer = calls.enter_context(caller.stream("POST", url, json=body, headers=s))
                assert answer.status_code == 200
            poll(lambda: (tmp_path / "runs" / "long1" / "run.json").exists(), 60, "the second rollout starting")
            refused = client.post(url, json=INITIALIZE, headers=HEADERS)
        # the calls' connections closed: the rollouts are cancelled and the sessions idle again
        later = poll(
            lambda: (r := client.post(url, json=INITIALIZE, headers=HEADERS)).status_code != 503 and r,
            30,
            "a new session",
        )
        alive = sorted(ping(client, url, s) for s in (a, b))
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json() == {
        "error": "this server already holds its limit of 2 MCP sessions (--max-sessions), each with a call in "
        "progress; try again in a moment"
    }
    assert later.status_code == 200 and alive == [200, 404]  # one of a and b made room


def hold_stream(url: str, session: dict[str, str]) -> tuple[threading.Event, httpx.Client]:
    """Open ``session``'s standalone event stream and hold it in a thread, reading nothing but its pings: (set once
    the server ended it, the client to close at the end). Returns once the stream is open."""
    opened, ended = threading.Event(), threading.Event()
    client = httpx.Client(timeout=httpx.Timeout(30, read=None))

    def hold() -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            client.stream("GET", url, headers={**session, "accept": "text/event-stream"}) as stream,
        ):
            assert stream.status_code == 200
            opened.set()
            for _ in stream.iter_bytes():
                pass
        ended.set()

    threading.Thread(target=hold, daemon=True).start()
    poll(lambda: opened.is_set() or ended.is_set(), 30, "the event stream opening")
    assert not ended.is_set(), "the event stream ended at once"
    return ended, client


@pytest.mark.slow
def test_sessions_holding_only_an_idle_event_stream_do_not_keep_a_new_client_out(tmp_path: Path) -> None:
    """A client holding an idle GET event stream on every one of --max-sessions sessions (hostile round 24, F1: each
    new client got 503 for as long as they stayed open): the new client gets in, and one stream is closed."""
    with mcp_http(tmp_path / "runs", "--max-sessions", "4") as (url, err, _), httpx.Client(timeout=30) as client:
        held = [open_session(client, url) for _ in range(4)]
        ended, readers = zip(*(hold_stream(url, s) for s in held), strict=True)  # held[0]'s opened first
        fresh = open_session(client, url)
        tools = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=fresh)
        poll(lambda: any(e.is_set() for e in ended), 15, "the evicted session's stream closing")
        alive = [ping(client, url, s) for s in held]
        closed = [e.is_set() for e in ended]
        for reader in readers:
            reader.close()
    assert tools.status_code == 200 and '"name":"run_policy_rollout"' in tools.text
    assert sorted(alive) == [200, 200, 200, 404] and alive[0] == 404  # the least recently used one went
    assert closed == [True, False, False, False]
    assert "Traceback" not in err.read_text()


@pytest.mark.slow
def test_a_session_whose_only_activity_is_an_open_event_stream_idles_out_and_its_stream_ends(tmp_path: Path) -> None:
    idle_s = 2.0
    with (
        mcp_http(tmp_path / "runs", "--session-idle-s", str(idle_s)) as (url, _, _),
        httpx.Client(timeout=30) as client,
    ):
        session = open_session(client, url)
        started = time.monotonic()
        ended, reader = hold_stream(url, session)
        poll(ended.is_set, 10 * idle_s, "the idle session's stream ending")
        took = time.monotonic() - started
        after = ping(client, url, session)
        reader.close()
    assert after == 404 and took >= idle_s * 0.9


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--max-sessions", "0", "--max-sessions must be between 1 and 1024, got 0"),
        ("--max-sessions", "-1", "--max-sessions must be between 1 and 1024, got -1"),
        ("--max-sessions", "1025", "--max-sessions must be between 1 and 1024, got 1025"),
        ("--max-sessions", "10000000000000000000000", "--max-sessions must be between 1 and 1024, got 10000000000000000000000"),
        ("--max-sessions", "nan", "--max-sessions 'nan': must be a whole number"),
        ("--session-idle-s", "0", "--session-idle-s must be between 0.1 and 86400 seconds, got 0"),
        ("--session-idle-s", "-1", "--session-idle-s must be between 0.1 and 86400 seconds, got -1"),
        ("--session-idle-s", "nan", "--session-idle-s must be between 0.1 and 86400 seconds, got nan"),
        ("--session-idle-s", "inf", "--session-idle-s must be between 0.1 and 86400 seconds, got inf"),
        ("--session-idle-s", "1e9", "--session-idle-s must be between 0.1 and 86400 seconds, got 1e+09"),
    ],
)  # fmt: skip
def test_an_out_of_range_session_bound_is_refused_in_one_line_before_anything_is_created(
    tmp_path: Path, option: str, value: str, expected: str
) -> None:
    proc = invoke("mcp", "--transport", "http", "--root", tmp_path / "mcp", option, value)
    assert (proc.returncode, proc.stdout + proc.stderr) == (2, f"error: {expected}\n")
    assert list(tmp_path.iterdir()) == []


def test_a_session_whose_answer_went_out_but_whose_countdown_is_not_restored_yet_is_evicted_before_refusing() -> None:
    """hostile runner, mcpsess-flood-0 (``--max-sessions 1``): the SDK restores a session's idle countdown only after
    its handler returns, after the client may already have the answer and sent the next ``initialize``; with no POST
    in flight that session is evictable (after every one idle with a countdown), not a reason for 503."""
    import math
    from types import SimpleNamespace

    from rollbench.mcp.sessions import least_recent_idle

    def transport(deadline: float) -> SimpleNamespace:
        return SimpleNamespace(idle_scope=SimpleNamespace(deadline=deadline, cancel_called=False))

    sessions = {"answered": transport(math.inf), "idle-late": transport(20.0), "idle-early": transport(10.0)}
    assert least_recent_idle(sessions) == "idle-early"
    assert least_recent_idle({"answered": transport(math.inf)}) == "answered"
    assert least_recent_idle({"answered": transport(math.inf)}, posting=lambda s: s == "answered") is None
    assert least_recent_idle({"new": SimpleNamespace(idle_scope=None)}) is None
