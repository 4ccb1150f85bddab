"""Every line a client sends ``rollbench mcp`` over stdio that is a request gets exactly one JSON-RPC answer
(hostile round 12, F7): a line the server cannot read is answered with a JSON-RPC error and the server keeps
serving; a notification is never answered.

A real ``python -m rollbench mcp --root TMP`` subprocess, driven with raw bytes on its stdin (the SDK's client would
refuse to send these lines). Oracle: the JSON-RPC 2.0 specification's error codes (section 5.1: -32700 parse error,
-32600 invalid request, -32602 invalid params; id null when the request's id cannot be read) written out here, and
the answer to a good ``tools/list`` / ``ping`` after each bad line.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_support import server_env
from rollbench.mcp.lines import MAX_LINE_BYTES

pytestmark = pytest.mark.slow  # one server start for the module (~3 s on a loaded machine)

WAIT_S = 60.0  # generous: no assertion depends on how fast the server answers, only on whether it does


class Server:
    """A ``rollbench mcp`` subprocess: raw lines in, parsed answers out (a reader thread, so a read never hangs)."""

    def __init__(self, root: Path) -> None:
        cmd = [sys.executable, "-m", "rollbench", "mcp", "--root", str(root)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server_env()
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1000

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(json.loads(line))

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params else {})}
        self.send(json.dumps(message).encode())
        return self.next_id

    def collect_until(self, done: Any) -> list[dict[str, Any]]:
        """The answers received until ``done(answers)`` holds; fails (never hangs) when it has not in WAIT_S."""
        got: list[dict[str, Any]] = []
        while not done(got):
            try:
                got.append(self.answers.get(timeout=WAIT_S))
            except queue.Empty:
                shown = [(a.get("id"), a.get("error")) for a in got]
                pytest.fail(f"no further answer within {WAIT_S} s; answers so far (id, error): {shown}")
        return got


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("mcp-lines"))
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    first = s.request("initialize", init)
    assert [a["id"] for a in s.collect_until(lambda got: len(got) == 1)] == [first]
    s.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    yield s
    assert s.proc.stdin is not None
    s.proc.stdin.close()  # EOF: the server ends by itself
    try:
        s.proc.wait(timeout=WAIT_S)
    finally:
        s.proc.kill()


ROLLOUT = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run_policy_rollout","arguments":'
DEEP = 100_000

# (bad line, the error answer's id, its code): every one a line the SDK's own reader drops without an answer
BAD_LINES = {
    "lone_surrogate_in_a_tool_argument": (
        ROLLOUT + b'{"policy":"zero","env":"scripted/reach","n_episodes":1,"max_steps":3,"instruction":"\\ud800"}}}',
        5,
        -32602,
    ),
    "lone_low_surrogate_in_a_params_key": (
        b'{"jsonrpc":"2.0","id":"list-7","method":"tools/list","params":{"\\udc00":1}}',
        "list-7",
        -32602,
    ),
    "lone_surrogate_in_the_method": (b'{"jsonrpc":"2.0","id":8,"method":"tools/\\ud83d"}', 8, -32600),
    "lone_surrogate_in_the_id_itself": (b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', None, -32600),
    "truncated_json": (b'{"jsonrpc":"2.0","id":6,', None, -32700),
    "bytes_that_are_not_utf8": (
        b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"x":"\xff\xfe"}}',
        None,
        -32700,
    ),
    "nan_is_not_json": (b'{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"x":NaN}}', None, -32700),
    "a_key_twice": (b'{"jsonrpc":"2.0","id":11,"id":12,"method":"tools/list"}', None, -32700),
    "nested_a_hundred_thousand_deep": (
        b'{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"x":' + b"[" * DEEP + b"]" * DEEP + b"}}",
        None,
        -32700,
    ),
    "longer_than_the_line_bound": (
        b'{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"x":"' + b"a" * MAX_LINE_BYTES + b'"}}',
        None,
        -32600,
    ),
    "not_jsonrpc_no_version": (b'{"id":15,"method":"tools/list"}', 15, -32600),
    "not_jsonrpc_a_null_id": (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', None, -32600),
    "not_jsonrpc_a_fractional_id": (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', None, -32600),
    "not_jsonrpc_a_boolean_id": (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', None, -32600),
    "not_jsonrpc_a_list": (b"[]", None, -32600),
    "not_jsonrpc_a_number": (b"42", None, -32600),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_gets_exactly_one_error_answer_and_the_next_request_is_still_answered(
    server: Server, case: str
) -> None:
    line, want_id, want_code = BAD_LINES[case]
    server.send(line)
    good = server.request("tools/list")

    def has_both(got: list[dict[str, Any]]) -> bool:
        return any(a.get("id") == good for a in got) and any("error" in a for a in got)

    got = server.collect_until(has_both)
    probe = server.request("ping")  # anything the bad line made the server send is in before the probe's answer
    got += server.collect_until(lambda more: any(a.get("id") == probe for a in more))
    errors = [a for a in got if "error" in a]
    assert [(e["jsonrpc"], e["id"], e["error"]["code"]) for e in errors] == [("2.0", want_id, want_code)]
    assert sorted(a["id"] for a in got if "result" in a) == [good, probe]
    assert {t["name"] for t in next(a for a in got if a.get("id") == good)["result"]["tools"]} >= {"run_policy_rollout"}


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"\\ud800"}}',
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":"not an object"}',
        b"",
        b"   \t",
    ],
    ids=["notification_with_a_lone_surrogate", "malformed_notification", "empty_line", "blank_line"],
)
def test_a_refused_notification_or_blank_line_gets_no_answer(server: Server, line: bytes) -> None:
    server.send(line)
    good = server.request("tools/list")
    got = server.collect_until(lambda got: any(a.get("id") == good for a in got))
    probe = server.request("ping")
    got += server.collect_until(lambda more: any(a.get("id") == probe for a in more))
    assert [a.get("id") for a in got] == [good, probe]
    assert not any("error" in a for a in got)
