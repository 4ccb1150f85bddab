"""The MCP session lockout class for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``;
each flood variant fails before the fix, when ``rollbench mcp --transport http`` had no ``--max-sessions`` and kept
the MCP SDK's defaults: about 10,000 ``initialize`` requests, sessions never used again, made it answer 503 to every
client for 30 minutes).
Each variant is its own ``mcp --transport http`` with a random ``--max-sessions``:

* ``mcpsess-flood-i``: a cap of 1 to 8 and a client opening 5 to 25 times as many sessions, each followed at random
  by nothing, ``notifications/initialized`` or a ping, and now and then a ping in a random earlier session (which
  may have been evicted): every ``initialize`` is answered 200; then a fresh client initializes and lists the tools;
  the session used least recently before it is answered 404 (evicted) while the fresh one answers; the server is
  still running and printed no traceback;
* ``mcpsess-busy-i``: a cap of 1 to 3, every session answering a call (a long rollout): a new ``initialize`` is
  answered 503 ``{"error": ...}`` naming ``--max-sessions``; once the calls' connections close (which cancels them),
  a new one is answered 200 within 15 s;
* ``mcpsess-streams-i`` (hostile round 24, F1: each new client got 503 for as long as the streams stayed open): a
  cap of 1 to 6, every session holding an idle standalone event stream (``GET /mcp``) that the client never reads
  from: a fresh client initializes and lists the tools; the stream of the session opened first is ended by the
  server, the others stay open;
* ``mcpsess-rollouts-i`` (hostile round 24, F2 and F3: a rollout cancelled while it waited for a worker thread held
  one for good, 40 of them hung every tool and SIGTERM; a closed call's rollout ran on): ``--max-rollouts`` 1 to 3,
  that many long rollouts running, as many waiting, one more refused with a tool error naming the option; the
  waiting ones cancelled at random by ``notifications/cancelled`` or by closing their connection: each released
  within 10 s (an answer -32800, or its connection closed) with no run directory; ``list_runs`` answers within 10
  s; the running ones' connections closed: each run stops within 30 s with ``run.json`` status PARTIAL; a waiting
  one's run name runs to OK; SIGTERM ends the server within 15 s.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import hostile_round19_http as h19  # the HTTP surfaces' start and stop, beside this script

VERSION = "2025-06-18"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


def _open(client: Any, url: str) -> tuple[int, dict[str, str]]:
    """An ``initialize``: (its status, the headers naming its session; empty if none)."""
    answer = client.post(url, json=h19.INITIALIZE, headers=HEADERS)
    sid = answer.headers.get("mcp-session-id")
    return answer.status_code, ({**HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION} if sid else {})


def _ping(client: Any, url: str, session: dict[str, str]) -> int:
    return int(client.post(url, json=PING, headers=session).status_code)


def flood(r: Any, n: int) -> None:
    """mcpsess-flood: ``n`` variants."""
    import httpx

    for i in range(n):
        cid, cap = f"mcpsess-flood-{i}", r.rng.randint(1, 8)
        count = cap * r.rng.randint(5, 25)
        follow = [r.rng.choice(["none", "initialized", "ping", "old"]) for _ in range(count)]
        if r.pattern not in cid:
            continue
        r.count += 1
        problems: list[str] = []
        proc, port, err = _served(r, cid, "--max-sessions", cap)
        try:
            if not port:
                continue
            url, used = f"http://127.0.0.1:{port}/mcp", []  # sessions, least recently used first
            with httpx.Client(timeout=30) as client:
                statuses = []
                for what in follow:
                    status, session = _open(client, url)
                    statuses.append(status)
                    used.append(session)
                    if what == "initialized":
                        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                        client.post(url, json=note, headers=session)
                    elif what in ("ping", "old"):
                        other = session if what == "ping" else r.rng.choice(used)
                        if _ping(client, url, other) == 200:
                            used.remove(other)
                            used.append(other)
                if set(statuses) != {200}:
                    problems.append(f"initialize answered {sorted(set(statuses))}, not only 200")
                status, fresh = _open(client, url)
                tools = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=fresh)
                if status != 200 or tools.status_code != 200 or '"run_policy_rollout"' not in tools.text:
                    problems.append(f"a fresh client got {status}, then {tools.status_code} for tools/list")
                seen = (_ping(client, url, used[-cap]), _ping(client, url, fresh))  # used[-cap]: least recent held
                if seen != (404, 200):
                    problems.append(f"the least recently used session and the fresh one answered {seen}")
            if proc.poll() is not None:
                problems.append(f"the server ended ({proc.returncode})")
        finally:
            h19._stop(proc)
        _judge(r, cid, f"--max-sessions {cap}, {count} initializes", problems, err)


LONG = {"policy": "zero", "env": "scripted/reach", "n_episodes": 1000, "max_steps": 1000}  # minutes: never ends here
SHORT = {"policy": "scripted-expert", "env": "scripted/reach", "n_episodes": 1, "max_steps": 20}


def _call(url: str, session: dict[str, str], rid: int, args: dict[str, Any]) -> tuple[Any, Any]:
    """A run_policy_rollout POST on a connection of its own, its answer not read yet: (client, open response)."""
    import httpx

    client = httpx.Client(timeout=httpx.Timeout(30, read=None))
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": "run_policy_rollout", "arguments": args},
    }
    return client, client.send(client.build_request("POST", url, json=body, headers=session), stream=True)


def _answer(response: Any, rid: int) -> dict[str, Any]:
    """The JSON-RPC answer to ``rid`` in an event stream ({} if it ended without one)."""
    with contextlib.suppress(Exception):
        for line in response.iter_lines():
            if line.startswith("data: ") and (message := json.loads(line[6:])).get("id") == rid:
                return dict(message)
    return {}


def _until(what: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := what()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def _live(run: Any) -> int:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return int(json.loads((run / "run.live.json").read_text())["episodes_done"])
    return 0


def _served(r: Any, cid: str, *options: object) -> tuple[Any, int | None, Path]:
    """``rollbench mcp`` started for case ``cid`` with ``options``: (process, port or None, its stderr file); a
    server that did not start is the case's failure, said here."""
    proc, port, err = h19._start(r, "mcp", r.work / "mcpsess" / cid, *options)
    if not port:
        r.failures.append(f"{cid}: the server did not start: {err.read_text()[-400:]!r}")
    return proc, port, err


def _status(run: Any) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(json.loads((run / "run.json").read_text()).get("status"))
    return ""


def busy(r: Any, n: int) -> None:
    """mcpsess-busy: ``n`` variants."""
    import httpx

    for i in range(n):
        cid, cap = f"mcpsess-busy-{i}", r.rng.randint(1, 3)
        if r.pattern not in cid:
            continue
        r.count += 1
        problems: list[str] = []
        proc, port, err = _served(r, cid, "--max-sessions", cap)
        try:
            if not port:
                continue
            url = f"http://127.0.0.1:{port}/mcp"
            with httpx.Client(timeout=30) as client:
                sessions = [_open(client, url)[1] for _ in range(cap)]
                calls = [_call(url, s, 3, {**LONG, "run_name": f"long{k}"}) for k, s in enumerate(sessions)]
                runs = r.work / "mcpsess" / cid / "runs"
                _until(lambda runs=runs, cap=cap: all(_live(runs / f"long{k}") for k in range(cap)), 60)
                refused = client.post(url, json=h19.INITIALIZE, headers=HEADERS)
                for c, _ in calls:
                    c.close()
                deadline = time.monotonic() + 15
                while (later := _open(client, url)[0]) == 503 and time.monotonic() < deadline:
                    time.sleep(0.2)
            said = refused.json().get("error", "") if refused.status_code == 503 else ""
            if f"limit of {cap} MCP sessions (--max-sessions)" not in said:
                problems.append(f"a new session while all were busy got {refused.status_code} {refused.text[:200]!r}")
            if later != 200:
                problems.append(f"a new session after the calls' connections closed got {later}")
        finally:
            h19._stop(proc)
        _judge(r, cid, f"--max-sessions {cap}, all busy", problems, err)


def _hold(url: str, session: dict[str, str]) -> tuple[threading.Event, Any]:
    """Open the session's standalone event stream and hold it in a thread, reading only pings: (set once the server
    ended it, the client to close); returns once the stream is open (or ended)."""
    import httpx

    opened, ended = threading.Event(), threading.Event()
    client = httpx.Client(timeout=httpx.Timeout(30, read=None))

    def hold() -> None:
        with (
            contextlib.suppress(Exception),
            client.stream("GET", url, headers={**session, "accept": "text/event-stream"}) as stream,
        ):
            if stream.status_code == 200:
                opened.set()
                for _ in stream.iter_bytes():
                    pass
        ended.set()

    threading.Thread(target=hold, daemon=True).start()
    _until(lambda: opened.is_set() or ended.is_set(), 30)
    return ended, client


def streams(r: Any, n: int) -> None:
    """mcpsess-streams: ``n`` variants."""
    import httpx

    for i in range(n):
        cid, cap = f"mcpsess-streams-{i}", r.rng.randint(1, 6)
        if r.pattern not in cid:
            continue
        r.count += 1
        problems: list[str] = []
        held: list[tuple[threading.Event, Any]] = []
        proc, port, err = _served(r, cid, "--max-sessions", cap)
        try:
            if not port:
                continue
            url = f"http://127.0.0.1:{port}/mcp"
            with httpx.Client(timeout=30) as client:
                held = [_hold(url, _open(client, url)[1]) for _ in range(cap)]
                if any(e.is_set() for e, _ in held):
                    problems.append("an event stream ended as soon as it opened")
                status, fresh = _open(client, url)
                tools = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=fresh)
                if status != 200 or tools.status_code != 200 or '"run_policy_rollout"' not in tools.text:
                    problems.append(f"a fresh client got {status}, then {tools.status_code} for tools/list")
                _until(held[0][0].is_set, 15)
                time.sleep(0.5)
                closed = [e.is_set() for e, _ in held]
                if closed != [True] + [False] * (cap - 1):
                    problems.append(f"the streams the server ended (first opened first): {closed}")
        finally:
            for _, c in held:
                c.close()
            h19._stop(proc)
        _judge(r, cid, f"--max-sessions {cap}, an idle event stream on each", problems, err)


def rollouts(r: Any, n: int) -> None:
    """mcpsess-rollouts: ``n`` variants."""
    import httpx

    for i in range(n):
        cid, slots = f"mcpsess-rollouts-{i}", r.rng.randint(1, 3)
        how = [r.rng.choice(["notification", "close"]) for _ in range(slots)]
        if r.pattern not in cid:
            continue
        r.count += 1
        runs = r.work / "mcpsess" / cid / "runs"
        problems: list[str] = []
        calls: list[tuple[Any, Any]] = []
        proc, port, err = _served(r, cid, "--max-rollouts", slots)
        try:
            if not port:
                continue
            url = f"http://127.0.0.1:{port}/mcp"
            with httpx.Client(timeout=30) as client:
                s = _open(client, url)[1]
                calls = [_call(url, s, 10 + k, {**LONG, "run_name": f"long{k}"}) for k in range(slots)]
                if not _until(lambda runs=runs, slots=slots: all(_live(runs / f"long{k}") for k in range(slots)), 60):
                    problems.append("the long rollouts did not all start within 60 s")
                waiting = [_call(url, s, 20 + k, {**SHORT, "run_name": f"w{k}"}) for k in range(slots)]
                time.sleep(1)  # they wait for a slot
                more = _answer(_call(url, s, 30, {**SHORT, "run_name": "more"})[1], 30)
                if f"(--max-rollouts {slots}) and {slots} waiting" not in json.dumps(more):
                    problems.append(f"one more than the waiting ones got {json.dumps(more)[:300]}")
                for k, ((c, response), way) in enumerate(zip(waiting, how, strict=True)):
                    started = time.monotonic()
                    if way == "close":
                        c.close()
                    else:
                        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 20 + k}}
                        client.post(url, json=note, headers=s)
                        if _answer(response, 20 + k).get("error", {}).get("code") != -32800:
                            problems.append(f"waiting call {k}, cancelled, was not answered -32800")
                    if time.monotonic() - started > 10 or (runs / f"w{k}").exists():
                        problems.append(f"waiting call {k} ({way}) was not released at once with nothing recorded")
                started = time.monotonic()
                listed = client.post(
                    url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 40,
                        "method": "tools/call",
                        "params": {"name": "list_runs", "arguments": {}},
                    },
                    headers=s,
                )
                if listed.status_code != 200 or time.monotonic() - started > 10:
                    problems.append(f"list_runs got {listed.status_code} after {time.monotonic() - started:.0f} s")
                for c, _ in calls:
                    c.close()
                stopped = [runs / f"long{k}" for k in range(slots)]
                if not _until(lambda stopped=stopped: all(_status(d) == "PARTIAL" for d in stopped), 30):
                    problems.append(f"closed rollouts' status: {[_status(runs / f'long{k}') for k in range(slots)]}")
                again = _answer(_call(url, s, 50, {**SHORT, "run_name": "w0"})[1], 50)
                if '"status":"OK"' not in json.dumps(again, separators=(",", ":")):
                    problems.append(f"the cancelled run name w0, run again, got {json.dumps(again)[:300]}")
            proc.terminate()
            if not _until(lambda proc=proc: proc.poll() is not None, 15):
                problems.append("SIGTERM did not end the server within 15 s")
        finally:
            for c, _ in calls:
                c.close()
            h19._stop(proc)
        _judge(r, cid, f"--max-rollouts {slots}, cancelled by {how}", problems, err)


def _judge(r: Any, cid: str, what: str, problems: list[str], err: Any) -> None:
    if "Traceback" in err.read_text(errors="replace"):
        problems.append(f"a traceback on stderr: {err.read_text(errors='replace')[-300:]!r}")
    if problems:
        r.failures.append(f"{cid} ({what}): {'; '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """``n`` flood variants and ``max(1, n // 4)`` of each other class (a server each)."""
    flood(r, n)
    busy(r, max(1, n // 4))
    streams(r, max(1, n // 4))
    rollouts(r, max(1, n // 4))
