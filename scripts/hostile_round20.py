"""Hostile round 20's sequential-study classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``; each found by hostile round 20, attacker b, and fixed, so each variant holds on main and fails before the
fix). One real ``rollbench sequential`` (zero against the scripted expert, ``--delta 0.3``: B better at pair 8 of
55) is made once and copied per variant:

* r20b F1: the same command re-run on the decided study and killed (SIGKILL) at a random time from 0.3 to 6 s: both
  arms' run.json bytes are unchanged and ``compare --sequential`` exits 0;
* r20b F2: arm a's ``plan.trial_order.populations`` entry replaced by a random damaged value (reversed, a first or end
  beyond any plan up to 2**70, another length, a non-integer item, or a range in bounds but shorter than the 55
  planned trials): ``compare --sequential``, ``report`` and the resume each exit 2 with one line naming the field,
  under a 2 GiB address-space limit, and neither arm's run.json changes.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

AS_LIMIT = 2 << 30  # bytes of address space each command gets
DEADLINE_S = 120
STUDY = [
    "sequential",
    "--env",
    "scripted/reach",
    "--policy-a",
    "zero",
    "--policy-b",
    "scripted-expert",
    "--delta",
    "0.3",
]
ARMS = ("a-scripted_reach", "b-scripted_reach")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _cli(r: Any, *args: object, limited: bool = True) -> subprocess.CompletedProcess[str]:
    """``rollbench ARGS`` within :data:`DEADLINE_S` (a hang: exit -999) and, when ``limited``, :data:`AS_LIMIT`."""
    cmd = [r.rb, *map(str, args)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S, env=r.env,
                              stdin=subprocess.DEVNULL, preexec_fn=_limited if limited else None)  # fmt: skip
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -999, "", "HANG")


def _study(r: Any) -> Path:
    """The decided study (made on first use), under ``r.work``."""
    out = r.work / "r20-study"
    if not out.exists():
        res = _cli(r, *STUDY, "--out", out, limited=False)  # it runs episodes: no address-space limit
        if res.returncode != 0:
            raise SystemExit(f"setup command failed: rollbench sequential\n{res.stderr}")
    return out


def _copy(r: Any, cid: str) -> Path:
    d = r.work / "cases" / cid
    shutil.copytree(_study(r), d / "cmp", symlinks=True)
    return d / "cmp"


def _arm_bytes(out: Path) -> list[bytes]:
    return [(out / arm / "run.json").read_bytes() for arm in ARMS]


def _damaged(r: Any) -> Any:
    big = r.rng.choice([2**31, 2**63, 2**70, 10**12, 200_001, 10**6])
    first = r.rng.randrange(0, 100)
    return r.rng.choice([
        [55 + first, first],
        [big, 55],
        [first, first + big],
        [first],
        [first, 55, 0],
        [str(first), 55],
        [float(first), 55.0],
        [first, first + r.rng.randrange(0, 55)],  # in bounds, fewer than the 55 planned trials
    ])  # fmt: skip


def populations(r: Any, n: int) -> None:
    """Round 20 b F2: a damaged trial population is one line (exit 2) in compare, report and the resume."""
    for i in range(n):
        cid = f"r20b-population-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        value = _damaged(r)
        out = _copy(r, cid)
        f = out / ARMS[0] / "run.json"
        doc = json.loads(f.read_text())
        doc["plan"]["trial_order"]["populations"]["scripted/reach"] = value
        f.write_text(json.dumps(doc))
        before = _arm_bytes(out)
        problems = []
        for args in (["compare", "--sequential", out], ["report", out, "--out", out.parent / "r.html"],
                     [*STUDY, "--out", out]):  # fmt: skip
            res = _cli(r, *args)
            both = res.stdout + res.stderr
            if res.returncode != 2 or "Traceback" in both or len(res.stderr.strip().splitlines()) != 1:
                problems.append(f"{args[0]}: exit {res.returncode}, stderr {res.stderr.strip()[-300:]!r}")
            elif "plan.trial_order.populations" not in res.stderr:
                problems.append(f"{args[0]}: the field is not named: {res.stderr.strip()!r}")
        if _arm_bytes(out) != before:
            problems.append("an arm's run.json changed")
        if problems:
            r.failures.append(f"{cid} (populations {value!r}): {'; '.join(problems)}")


def killed_reruns(r: Any, n: int) -> None:
    """Round 20 b F1: a re-run of a decided study killed at any time leaves both arms' run.json as they were."""
    for i in range(n):
        cid = f"r20b-rerun-killed-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        at = round(r.rng.uniform(0.3, 6.0), 2)
        out = _copy(r, cid)
        before = _arm_bytes(out)
        p = subprocess.Popen([r.rb, *STUDY, "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=r.env, stdin=subprocess.DEVNULL)  # fmt: skip
        time.sleep(at)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()
        problems = ["an arm's run.json changed"] * (_arm_bytes(out) != before)
        res = _cli(r, "compare", "--sequential", out)
        problems += [f"compare --sequential exit {res.returncode}: {res.stderr.strip()[-200:]!r}"] * (
            res.returncode != 0
        )
        if problems:
            r.failures.append(f"{cid} (SIGKILL at {at} s): {'; '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each."""
    m = max(2, n // 2)
    populations(r, m)
    killed_reruns(r, m)
