"""Hostile round 10's classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F5: a plug-in policy that changes the working directory in ``act``: its episodes end as policy errors and nothing
  is written where it went;
* F6: a policy whose ``close()`` never returns costs ``--policy-timeout`` seconds, not the run;
* F1/F12/F15 and digits of other scripts: a huge ``chunk_size``, ``compare --alpha`` without ``--power``, the
  user's token typed into an instruction, ``fixed:１０`` latencies and repeated cameras are refused, exit 2;
* F3: ``$COLUMNS``/``$LINES`` written in other scripts' digits change nothing;
* F11: ``dashboard --peer`` URLs carrying credentials are refused without printing them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKEN = "tok_ZXCVBN98765432qwer"
POLICIES = """\
import os, time
import numpy as np
from rollbench import PolicyInfo
class Chdir:
    info = PolicyInfo(name="chdir")
    def __init__(self, to): self.to = to
    def reset(self, task, seed): pass
    def act(self, obs, instruction):
        os.chdir(self.to)
        return np.zeros((1, 2), np.float32)
    def close(self): pass
class CloseHangs(Chdir):
    def act(self, obs, instruction): return np.zeros((1, 2), np.float32)
    def close(self): time.sleep(86400)
def chdir(name, options): return Chdir(options["to"])
def close_hangs(name, options): return CloseHangs(".")
"""
ODD_DIGITS = ["²", "①", "٣", "𝟙", "１"]


def _nothing(run: Path) -> None:
    pass


def policies(r: Any) -> None:
    (r.planted / "rbh10_policies.py").write_text(POLICIES)
    r.case("r10-policy-chdir", _nothing, ["eval", "--env", "scripted/reach", "--policy", "rbh10_policies:chdir",
           "--policy-options", json.dumps({"to": "DIR/canary"}), "--episodes", "2", "--max-steps", "3", "--out",
           "DIR/new"], {1}, True, "changed rollbench's working directory")  # fmt: skip
    r.case("r10-policy-close-hangs", _nothing, ["eval", "--env", "scripted/reach", "--policy",
           "rbh10_policies:close_hangs", "--policy-timeout", "2", "--episodes", "2", "--max-steps", "3", "--out",
           "DIR/new"], {0}, True, "close() did not return within --policy-timeout 2 s")  # fmt: skip


def refusals(r: Any, n: int) -> None:
    for i in range(n):
        chunk = r.rng.choice([0, -1, 1001, 10 ** r.rng.randrange(4, 12)])
        r.case(f"r10-chunk-size-{i}", _nothing, ["eval", "--env", "scripted/reach", "--policy", "scripted-expert",
               "--policy-options", json.dumps({"chunk_size": chunk}), "--episodes", "1", "--out", "DIR/new"], {2},
               True, "chunk_size must be between 1 and 1000")  # fmt: skip
        alpha = r.rng.choice(["1e-12", "0", "-1", "nan", "5", "0.05"])
        r.case(f"r10-compare-alpha-{i}", _nothing, ["compare", "RUN", "RUN", "--alpha", alpha], {2}, True,
               "--alpha plan a comparison with --power")  # fmt: skip
        digit = r.rng.choice(ODD_DIGITS)
        r.case(f"r10-latency-digits-{i}", _nothing, ["eval", "--env", "scripted/reach", "--policy", "zero",
               "--latency", f"fixed:{digit}", "--episodes", "1", "--out", "DIR/new"], {2}, True,
               "latency must be one of")  # fmt: skip
    r.case("r10-cameras-repeated", _nothing, ["eval", "--env", "scripted/reach", "--policy", "zero", "--cameras",
           ",".join(["top"] * 500), "--episodes", "1", "--out", "DIR/new"], {2}, True, "each camera once")  # fmt: skip


def token_in_spec(r: Any) -> None:
    saved = r.env
    r.env = {**saved, "ROLLBENCH_SERVER_TOKEN": TOKEN}
    try:
        for form, text in [("plain", TOKEN), ("reversed", TOKEN[::-1]), ("upper", TOKEN.upper())]:
            r.case(f"r10-token-instruction-{form}", _nothing, ["eval", "--env", "scripted/reach", "--policy", "zero",
                   "--instruction", f"please {text}", "--episodes", "1", "--out", "DIR/new"], {2}, True,
                   "holds the value of $ROLLBENCH_SERVER_TOKEN")  # fmt: skip
    finally:
        r.env = saved


def terminal_sizes(r: Any) -> None:
    saved = r.env
    try:
        for i, digit in enumerate(ODD_DIGITS):
            r.env = {**saved, r.rng.choice(["COLUMNS", "LINES"]): digit * r.rng.randrange(1, 4)}
            r.case(f"r10-terminal-size-{i}", _nothing, ["grade", "RUN"], {0}, True, "status: OK")
    finally:
        r.env = saved


def peer_credentials(r: Any) -> None:
    for i, peer in enumerate([
        f"http://alice:{TOKEN}@127.0.0.1:1", f"http://127.0.0.1:2/?token={TOKEN}", f"http://127.0.0.1:3/;token={TOKEN}",
        f"ftp://127.0.0.1#{TOKEN}",
    ]):  # fmt: skip
        r.case(f"r10-dashboard-peer-{i}", _nothing, ["dashboard", "--peer", peer, "--port", "1"], {2}, True, "--peer")
        if r.pattern in f"r10-dashboard-peer-{i}":
            said = r.cli("dashboard", "--peer", peer, "--port", "1", check=False)
            if TOKEN in said.stdout + said.stderr:
                r.failures.append(f"r10-dashboard-peer-{i}: the peer's token was printed")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    policies(r)
    refusals(r, max(2, n // 2))
    token_in_spec(r)
    terminal_sizes(r)
    peer_credentials(r)
