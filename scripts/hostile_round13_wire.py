"""Hostile round 13's wire classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``), each through the real executable with a stand-in env host interpreter:

* F16: an env host interpreter whose version probe prints anything but a JSON object of version strings or nulls
  (a list, deep JSON, a number as a version, seeded junk): refused, exit 2, one line naming the interpreter;
* F17: an env host whose hello frame header is nested past 32, holds a 5000-digit integer or a key twice: refused,
  exit 2, one line naming the frame error (never a RecursionError/ValueError traceback).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

EVAL = ["eval", "--env", "hostedgym:DIR/python:CartPole-v1", "--policy", "random", "--episodes", "1",
        "--max-steps", "3", "--out", "DIR/new"]  # fmt: skip


def _interpreter(run: Path, python: str, probe: str, host: str | None) -> None:
    """``DIR/python``: its ``-c`` probe prints ``probe``; anything else runs ``host`` (or the real interpreter)."""
    (run.parent / "probe.txt").write_text(probe)
    rest = f"{python} {run.parent / 'host.py'}" if host is not None else python
    if host is not None:
        (run.parent / "host.py").write_text(host)
    script = run.parent / "python"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "-c" ]; then cat {run.parent / "probe.txt"}; exit 0; fi\nexec {rest} "$@"\n'
    )
    script.chmod(0o755)


def version_probe(r: Any, n: int) -> None:
    python = sys.executable  # the runner's own interpreter: the venv rollbench runs in
    outputs = ["[1,2,3]", "[" * 20000 + "]" * 20000, "[" * 100000 + "]" * 100000, '{"gymnasium": 1, "numpy": null}',
               '{"gymnasium": "1"}', "9" * 5000, "null"]  # fmt: skip
    outputs += ["".join(r.rng.choice('[]{}":,1an') for _ in range(r.rng.randint(1, 60))) for _ in range(n)]
    for i, out in enumerate(outputs):
        r.case(f"r13-version-probe-{i}", lambda run, out=out: _interpreter(run, python, out, None), EVAL, {2}, True,
               "its version probe printed")  # fmt: skip


HELLO = """import os, struct, sys
a = sys.argv[1:]
h = {header!r}
os.write(int(a[a.index('--out-fd') + 1]), b'RBLR' + struct.pack('>I', len(h)) + h)
"""


def hello_header(r: Any) -> None:
    python = sys.executable  # the runner's own interpreter: the venv rollbench runs in
    probe = '{"gymnasium": "1.0", "numpy": "2.0"}'
    headers = {
        "deep": b'{"op": "hello", "info": ' + b"[" * 100000 + b"]" * 100000 + b"}",
        "33-deep": b'{"op": "hello", "info": ' + b"[" * 32 + b"]" * 32 + b"}",
        "digits": b'{"op": "hello", "info": ' + b"9" * 5000 + b"}",
        "key-twice": b'{"op": "hello", "op": "hello", "info": {}}',
    }
    for name, header in headers.items():
        host = HELLO.format(header=header)
        r.case(f"r13-hello-header-{name}", lambda run, host=host: _interpreter(run, python, probe, host), EVAL, {2},
               True, "did not start (frame header")  # fmt: skip


def run_all(r: Any, n: int) -> None:
    version_probe(r, n)
    hello_header(r)
