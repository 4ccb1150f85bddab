"""Hostile round 12's MCP stdio class (F7) for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``): lines a client sends ``rollbench mcp`` over stdio that the MCP SDK's reader cannot read. Each is sent
to one real server, followed by a ``ping``; the case holds when exactly one error answer comes back for the bad line
(JSON-RPC 2.0 §5.1 codes: -32700 with id null for a line that is not UTF-8, not JSON or nested too deep; -32602
with the request's id for a lone surrogate in its params; -32600 for an over-long line, an id MCP forbids or JSON
that is not a JSON-RPC message) and the ping is still answered. Variants: the surrogate's code point and place, the
truncation point, the stray byte and its place, the depth, the id's type, the over-long line's length.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

MAX_LINE = 4 * 1024 * 1024  # the server's stated bound (docs/mcp.md)
WAIT_S = 60.0
ROLLOUT = {"policy": "zero", "env": "scripted/reach", "n_episodes": 1, "max_steps": 3, "instruction": "pick it up"}


class _Server:
    def __init__(self, r: Any) -> None:
        root = r.work / "mcp-lines-root"
        cmd = [r.rb, "mcp", "--root", str(root)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=r.env
        )
        self.answers: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                self.answers.put({"not JSON": line[:80].decode("utf-8", "replace")})

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def until(self, ping_id: int) -> list[Any] | None:
        """Every answer up to the one with ``ping_id``; None when it does not come within WAIT_S."""
        got: list[Any] = []
        while not any(isinstance(a, dict) and a.get("id") == ping_id for a in got):
            try:
                got.append(self.answers.get(timeout=WAIT_S))
            except queue.Empty:
                return None
        return got


def _variants(rng: Any, n: int) -> list[tuple[str, bytes, Any, int]]:
    """(case id, bad line, expected id, expected code) for each class, ``n`` variants each."""
    out: list[tuple[str, bytes, Any, int]] = []
    for k in range(n):
        rid = rng.randrange(1, 2**31)
        call = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "run_policy_rollout"}}
        line = json.dumps({**call, "params": {**call["params"], "arguments": ROLLOUT}}).encode()
        escape = f"\\u{rng.randrange(0xD800, 0xE000):04x}".encode()
        field = rng.choice([b'"pick it up"', b'"zero"', b'"scripted/reach"', b'"instruction"'])
        at = rng.randrange(1, len(field) - 1)
        out.append((f"mcp-lines-surrogate-{k}", line.replace(field, field[:at] + escape + field[at:], 1), rid, -32602))
        out.append((f"mcp-lines-truncated-{k}", line[: rng.randrange(1, len(line) - 1)], None, -32700))
        stray = bytes([rng.choice([*range(0x80, 0xC2), *range(0xF5, 0x100)])])
        at = line.index(b"pick") + rng.randrange(0, 10)
        out.append((f"mcp-lines-not-utf8-{k}", line[:at] + stray + line[at:], None, -32700))
        depth = rng.choice([33, 40, 1000, 10**5, 2 * 10**5])
        deep = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":%s%s}}' % (rid, b"[" * depth, b"]" * depth)
        out.append((f"mcp-lines-deep-{k}", deep, None, -32700))
        bad_id = rng.choice(["null", "1.5", "true", "false", "[1]", '{"a":1}', "-0.5e3"])
        out.append((f"mcp-lines-id-{k}", b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % bad_id.encode(), None, -32600))
        version = rng.choice([None, "1.0", "2", 2.0])
        other = {"id": rid, "method": "ping", **({} if version is None else {"jsonrpc": version})}
        out.append((f"mcp-lines-not-jsonrpc-{k}", json.dumps(other).encode(), rid, -32600))
        size = MAX_LINE + rng.randrange(1, 100_000)
        long = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":"%s"}}' % (rid, b"a" * size)
        out.append((f"mcp-lines-long-{k}", long, None, -32600))
    return out


def run_all(r: Any, n: int) -> None:
    cases = [c for c in _variants(r.rng, n) if r.pattern in c[0]]
    if not cases:
        return
    server = _Server(r)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}
    server.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode())
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    ready = server.until(0)
    try:
        for number, (cid, line, want_id, want_code) in enumerate(cases, start=1):
            r.count += 1
            if ready is None:
                r.failures.append(f"{cid}: the server did not answer initialize")
                continue
            ping = -number  # never one of the generated ids
            server.send(line)
            server.send(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % ping)
            got = server.until(ping)
            if got is None:
                r.failures.append(f"{cid}: no answer to the ping after the bad line within {WAIT_S} s (a hang)")
                ready = None
                continue
            seen = [(a.get("id"), a.get("error", {}).get("code")) for a in got if isinstance(a, dict)]
            if sorted(seen, key=str) != sorted([(want_id, want_code), (ping, None)], key=str) or len(got) != 2:
                r.failures.append(
                    f"{cid}: answers (id, error code) {seen}, expected ({want_id}, {want_code}) and the ping"
                )
    finally:
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        try:
            server.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            r.failures.append("mcp-lines: the server did not end at EOF on its stdin")
            server.proc.kill()
