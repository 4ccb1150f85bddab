"""Shared helpers for the sequential-comparison tests: the command line of a scripted comparison (run as a process or
in this one), and an independent replay of the rule from two graded run directories (hand pairing and hand counts,
logs from ``math``)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rollbench.api import grade

ROLLBENCH = [sys.executable, "-m", "rollbench"]


def sequential_argv(
    out: Path, *extra: str, noise_a: str = "6", noise_b: str = "0", env: str = "scripted/reach"
) -> list[str]:
    """``rollbench sequential`` of the scripted expert with action noise ``noise_a`` (A) against ``noise_b`` (B)."""
    return [
        *ROLLBENCH, "sequential", "--env", env, "--policy-a", "scripted-expert", "--action-noise-a", noise_a,
        "--policy-b", "scripted-expert", "--action-noise-b", noise_b, "--delta", "0.2", "--out", str(out), *extra,
    ]  # fmt: skip


def run_cli(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def invoke(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``rollbench argv`` in this process (Typer's CliRunner, stderr apart, 200 columns): for checks that are not
    about the process boundary. Returns what :func:`run_cli` returns (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from rollbench.cli.main import app

    r = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(argv, r.exit_code, r.stdout, r.stderr)


def replay(a_dir: Path, b_dir: Path, design: dict[str, Any]) -> dict[str, Any]:
    """The rule replayed by hand from ``rollbench grade`` of both arms: pairs by seed in plan (episode index) order,
    counts, the likelihood ratios with ``math.log``, the first look at which a threshold is reached."""
    ga = grade(a_dir, check_videos=False).episodes
    ea = {e.seed: e for e in ga}
    eb = {e.seed: e for e in grade(b_dir, check_videos=False).episodes}
    t1 = design["theta1"]
    d = k = 0
    for n, seed in enumerate([e.seed for e in sorted(ga, key=lambda e: e.episode_index)], start=1):
        if seed not in eb:
            break
        sa, sb = bool(ea[seed].success), bool(eb[seed].success)
        d += sa != sb
        k += sb and not sa
        if n % design["look_every"] and n != design["budget"]:
            continue
        llr_b = k * math.log(2 * t1) + (d - k) * math.log(2 * (1 - t1))
        llr_a = (d - k) * math.log(2 * t1) + k * math.log(2 * (1 - t1))
        if llr_b >= design["efficacy_llr"]:
            return {"decision": "b_better", "stopped_at": n, "b_only": k, "a_only": d - k}
        if llr_a >= design["efficacy_llr"]:
            return {"decision": "a_better", "stopped_at": n, "b_only": k, "a_only": d - k}
        if max(llr_a, llr_b) <= design["futility_llr"]:
            return {"decision": "futility", "stopped_at": n, "b_only": k, "a_only": d - k}
        if n == design["budget"]:
            return {"decision": "budget_exhausted", "stopped_at": n, "b_only": k, "a_only": d - k}
    return {"decision": None, "stopped_at": None, "b_only": k, "a_only": d - k}
