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
* ``mcpsess-busy-i``: a cap of 1 to 3, every session holding an open event stream (a request in flight): a new
  ``initialize`` is answered 503 ``{"error": ...}`` naming ``--max-sessions``; once the streams close, a new one is
  answered 200 within 15 s.
"""

from __future__ import annotations

import contextlib
import time
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
        proc, port, err = h19._start(r, "mcp", r.work / "mcpsess" / cid, "--max-sessions", cap)
        problems: list[str] = []
        try:
            if not port:
                r.failures.append(f"{cid}: the server did not start: {err.read_text()[-400:]!r}")
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


def busy(r: Any, n: int) -> None:
    """mcpsess-busy: ``n`` variants."""
    import httpx

    for i in range(n):
        cid, cap = f"mcpsess-busy-{i}", r.rng.randint(1, 3)
        if r.pattern not in cid:
            continue
        r.count += 1
        proc, port, err = h19._start(r, "mcp", r.work / "mcpsess" / cid, "--max-sessions", cap)
        problems: list[str] = []
        try:
            if not port:
                r.failures.append(f"{cid}: the server did not start: {err.read_text()[-400:]!r}")
                continue
            url = f"http://127.0.0.1:{port}/mcp"
            with httpx.Client(timeout=30) as client:
                sessions = [_open(client, url)[1] for _ in range(cap)]
                with contextlib.ExitStack() as streams:
                    for s in sessions:
                        streams.enter_context(client.stream("GET", url, headers={**s, "accept": "text/event-stream"}))
                    refused = client.post(url, json=h19.INITIALIZE, headers=HEADERS)
                deadline = time.monotonic() + 15
                while (later := _open(client, url)[0]) == 503 and time.monotonic() < deadline:
                    time.sleep(0.2)
            said = refused.json().get("error", "") if refused.status_code == 503 else ""
            if f"limit of {cap} MCP sessions (--max-sessions)" not in said:
                problems.append(f"a new session while all were busy got {refused.status_code} {refused.text[:200]!r}")
            if later != 200:
                problems.append(f"a new session after the streams closed got {later}")
        finally:
            h19._stop(proc)
        _judge(r, cid, f"--max-sessions {cap}, all busy", problems, err)


def _judge(r: Any, cid: str, what: str, problems: list[str], err: Any) -> None:
    if "Traceback" in err.read_text(errors="replace"):
        problems.append(f"a traceback on stderr: {err.read_text(errors='replace')[-300:]!r}")
    if problems:
        r.failures.append(f"{cid} ({what}): {'; '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """Both classes: ``n`` flood variants and ``max(1, n // 4)`` busy ones (a server each)."""
    flood(r, n)
    busy(r, max(1, n // 4))
