"""A policy's output never reaches a command's machine-readable stdout (issue 42, item 12; hostile round 5, F5):
whatever the code under evaluation does - print from a non-daemon thread after the run, leave a child holding the
inherited stdout, print at exit (``atexit``) or in ``__del__``, or print and then raise in its factory - stdout is
exactly the JSON document (or, on an error exit, empty), for every command with ``--json`` that runs user code, and
the MCP stdio wire carries JSON-RPC messages only. Oracle: stdout parsed whole by Python's strict JSON parser, and
the policy's marks found on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_policies import write_checkpoint
from conftest import run_cli
from mcp_support import server_env

POLICY = """
import atexit, os, subprocess, threading, time
import numpy as np
import rollbench

def mark(text):
    print(text, flush=True)
    os.write(1, (text + " (fd 1)\\n").encode())

class P:
    def __init__(self, how):
        self.info = rollbench.PolicyInfo(name="markpol", chunk_size=1, tasks=("scripted/*",))
        self.how = how
        if how == "atexit":
            atexit.register(mark, "MARK from atexit")
        if how in ("thread", "child"):
            def later():
                time.sleep(0.5 if how == "child" else 1.0)
                for _ in range(5):
                    mark("MARK from a thread")
                    time.sleep(0.2)
            threading.Thread(target=later, daemon=False).start()
        if how == "child":  # a helper process that outlives the run, holding the stdout it inherited
            subprocess.Popen(["sh", "-c", "sleep 2; echo MARK from a child"])

    def reset(self, task, seed):
        pass

    def act(self, observation, instruction):
        return np.zeros((1, 2), np.float32)

    def close(self):
        pass

    def __del__(self):
        if self.how == "del":
            mark("MARK from __del__")

def make(name, options):
    how = options.get("how", "atexit")
    if how == "raise":
        atexit.register(mark, "MARK from atexit")
        mark("MARK before raising")
        raise RuntimeError("no model here")
    return P(how)
"""

BEHAVIOURS = ["thread", "child", "atexit", "del", "raise"]
# what reaches stderr (the positive control: the policy did print). The child's own line is not required there: it
# prints 2 s after it starts, and when rollbench has ended by then its write may find no reader (never stdout
# either); the policy's thread in the same "child" case prints through the reserved stdout meanwhile.
SAID = {
    "thread": "MARK from a thread (fd 1)",
    "child": "MARK from a thread (fd 1)",
    "atexit": "MARK from atexit (fd 1)",
}
SAID["del"] = "MARK from __del__ (fd 1)"
COMMANDS = ["eval", "sequential", "optimize-instruction", "checkpoints"]


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(name)

    return json.loads(text, parse_constant=refuse)


def _args(command: str, how: str, tmp_path: Path) -> list[str]:
    options = json.dumps({"how": how})
    short = ["--max-steps", "3", "--json"]
    if command == "eval":
        return ["eval", "--env", "scripted/reach", "--policy", "markpol:make", "--policy-options", options,
                "--episodes", "2", "--out", str(tmp_path / "run"), *short]  # fmt: skip
    if command == "sequential":
        return ["sequential", "--env", "scripted/reach", "--policy-a", "zero", "--policy-b", "markpol:make",
                "--policy-options-b", options, "--budget", "4", "--delta", "0.3", "--out", str(tmp_path / "s"),
                *short]  # fmt: skip
    if command == "optimize-instruction":
        return ["optimize-instruction", "--env", "scripted/reach", "--policy", "markpol:make", "--policy-options",
                options, "--out", str(tmp_path / "o"), "--rounds", "1", "--candidates", "1",
                "--episodes-per-candidate", "1", "--holdout-episodes", "1", *short]  # fmt: skip
    write_checkpoint(tmp_path / "train", 1000, 0.5)
    with_path = json.dumps({"how": how, "checkpoint": "{path}"})
    return ["checkpoints", str(tmp_path / "train"), "--env", "scripted/reach", "--episodes", "2",
            "--policy-template", "markpol:make", "--policy-options", with_path, "--out", str(tmp_path / "c"),
            *short]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("how", BEHAVIOURS)
@pytest.mark.parametrize("command", COMMANDS)
def test_stdout_is_exactly_the_json_document_whatever_the_policy_prints(tmp_path: Path, how: str, command: str) -> None:
    (tmp_path / "markpol.py").write_text(POLICY)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = run_cli(*_args(command, how, tmp_path), env=env, timeout=300)
    if how == "raise":  # nothing to print: the error is on stderr, stdout stays empty even after the exit handlers
        assert r.returncode in (1, 2), r.stderr
        assert r.stdout == ""
        assert "MARK from atexit (fd 1)" in r.stderr
    else:
        assert r.returncode in (0, 1), r.stderr
        assert "MARK" not in r.stdout
        assert isinstance(_strict(r.stdout), dict)
        assert SAID[how] in r.stderr
    assert "Traceback" not in r.stderr


RESERVE = """
import atexit, os, subprocess, sys, threading
from rollbench.core.stdio import document_stream, reserve_stdout, seal_stdout
assert reserve_stdout()
import leaker
leaker.start()
document_stream().write('{"doc": 1}\\n')
seal_stdout()
document_stream().write("AFTER-SEAL\\n")
"""

LEAKER = """
import atexit, os, subprocess, sys, threading

def start():
    print("MARK print", flush=True)
    os.write(1, b"MARK fd1\\n")
    subprocess.run(["sh", "-c", "echo MARK child"])
    atexit.register(lambda: print("MARK atexit", flush=True))
    t = threading.Thread(target=lambda: print("MARK thread", flush=True))
    t.start()
    t.join()
"""


def test_a_reserved_stdout_receives_only_the_document(tmp_path: Path) -> None:
    (tmp_path / "leaker.py").write_text(LEAKER)
    env = server_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    r = subprocess.run([sys.executable, "-c", RESERVE], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == '{"doc": 1}\n'
    got = r.stderr.splitlines()
    assert [m for m in got if m.startswith("MARK")] == [
        "MARK print",
        "MARK fd1",
        "MARK child",
        "MARK thread",
        "MARK atexit",
    ]
    assert "AFTER-SEAL" in got  # after the seal, even rollbench's own writes go to stderr


MCP_LEAKING_PLUGIN = """
import sys
import rollbench.cli.main as m
reserve = m.reserve_document_stdout

def reserve_then_load_a_noisy_plugin(args):
    reserve(args)
    import atexit, threading, time
    print("MARK at import", flush=True)
    atexit.register(lambda: print("MARK atexit", flush=True))
    def later():
        for _ in range(10):
            print("MARK thread", flush=True)
            time.sleep(0.1)
    threading.Thread(target=later).start()

m.reserve_document_stdout = reserve_then_load_a_noisy_plugin
sys.argv = ["rollbench", "mcp", "--root", sys.argv[1]]
m.main()
"""


def _message(n: int, method: str, params: dict[str, object] | None = None) -> str:
    msg: dict[str, object] = {"jsonrpc": "2.0", "method": method, **({"id": n} if n else {})}
    return json.dumps({**msg, "params": params or {}})


def test_the_mcp_stdio_wire_carries_only_json_rpc_whatever_a_plugin_prints(tmp_path: Path) -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    proc = subprocess.Popen(
        [sys.executable, "-c", MCP_LEAKING_PLUGIN, str(tmp_path / "root")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies = []
    try:  # one request at a time, each answer read before the next is sent (an EOF never races a queued request)
        for sent in (
            [_message(1, "initialize", init)],
            [_message(0, "notifications/initialized"), _message(2, "tools/list")],
        ):
            proc.stdin.write("\n".join(sent) + "\n")
            proc.stdin.flush()
            replies.append(json.loads(proc.stdout.readline()))
        rest, stderr = proc.communicate(timeout=120)  # closes stdin: the server ends
    finally:
        proc.kill()
    replies += [json.loads(line) for line in rest.splitlines()]
    assert [m.get("id") for m in replies] == [1, 2]
    assert "run_policy_rollout" in [t["name"] for t in replies[1]["result"]["tools"]]
    assert "MARK atexit" in stderr and "MARK thread" in stderr and "MARK at import" in stderr
