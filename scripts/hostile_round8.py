"""Hostile round 8's classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``):

* F4: a run.json string of 200,000 characters built to make a regex backtrack (``a.a.a…`` for the e-mail rule,
  ``x-x-…``, ``x-auth-…``, PEM headers, ``scheme.scheme…``, random mixes of separators), then ``release``: it must
  finish (exit 0) within the runner's timeout, as every rule's work is linear;
* F5: a run given through a link, a link with a trailing ``/``, a dangling link, to ``release`` (also ``--dry-run``)
  and ``eval --resume``: exit 2, one line, nothing changed;
* F6: a run directory or ``--out`` whose name is not valid UTF-8, to every command taking one: exit 2, one line
  naming it escaped, nothing written; ``runs ROOT`` lists it as unreadable and keeps the sound run;
* F7: ``--workers`` and ``--batch-size`` above their bounds (1024, 256): exit 2, one line;
* F8: ``PYTHONIOENCODING=ascii`` with a run named in non-ASCII letters: no traceback, ``runs --json`` stays JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

UNITS = ["a.", "x-", "x-auth-", "-----BEGIN RSA PRIVATE KEY-----", "h.t://u:", "%+", "Authorization: a,"]


def _long_string(rng: Any) -> str:
    unit = rng.choice([*UNITS, "".join(rng.choice("a.-_@:/%+x") for _ in range(rng.randrange(2, 40)))])
    return unit * (200_000 // len(unit))


def backtracking(r: Any, n: int) -> None:
    for i in range(n):
        text = _long_string(r.rng)

        def plant(run: Path, text: str = text) -> None:
            log = json.loads((run / "run.json").read_text())
            log["warnings"] = [text]
            (run / "run.json").write_text(json.dumps(log, indent=2))

        r.case(f"r8-release-backtracking-{i}", plant, ["release", "RUN", "--out", "DIR/rel"], {0}, True)


def links(r: Any) -> None:
    def link(run: Path) -> None:
        (run.parent / "ln").symlink_to("run")

    def dangling(run: Path) -> None:
        (run.parent / "ln").symlink_to("gone")

    for cid, plant, args, words in [
        ("release", link, ["release", "DIR/ln", "--out", "DIR/rel"], "is a link (to run)"),
        ("release-dry-run", link, ["release", "DIR/ln", "--dry-run", "--out", "DIR/rel"], "is a link (to run)"),
        ("release-slash", link, ["release", "DIR/ln/", "--out", "DIR/rel"], "is a link (to run)"),
        ("release-dangling", dangling, ["release", "DIR/ln", "--out", "DIR/rel"], "which does not exist"),
        ("resume", link, ["eval", "--resume", "DIR/ln"], "is a link (to run)"),
        ("resume-slash", link, ["eval", "--resume", "DIR/ln/"], "is a link (to run)"),
    ]:
        r.case(f"r8-link-{cid}", plant, args, {2}, True, words)


def counts(r: Any, n: int) -> None:
    run = ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "2", "--out", "DIR/t"]
    for i in range(max(2, n // 2)):
        workers = str(r.rng.choice([1025, 10**6, 99999999999, 2**63]))
        r.case(f"r8-workers-{i}", lambda _run: None, [*run, "--workers", workers], {2}, True, "--workers must be")
    r.case("r8-batch-size", lambda _run: None, [*run, "--batch-size", "257"], {2}, True, "--batch-size must be")


def _cli(r: Any, args: list[Any], **env: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([r.rb, *args], capture_output=True, timeout=120, env={**r.env, **env}, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -999, b"", b"HANG")


def names(r: Any) -> None:
    """F6 and F8: byte names through the real executable (``r.case`` passes text arguments only)."""
    if r.pattern not in "r8-names":
        return
    root = r.work / "cases" / "r8-names"
    root.mkdir(parents=True)
    shutil.copytree(r.sound, root / "ok")
    bad = os.fsencode(root) + b"/run\xff"
    shutil.copytree(r.sound, os.fsdecode(bad))
    new = os.fsencode(root) + b"/new\xff"
    before = sorted(os.walk(os.fsencode(root)))
    for args in (["grade", bad], ["eval", "--resume", bad], ["runs", bad], ["summarize", bad],
                 ["release", bad, "--out", new], ["report", bad, "--out", str(root / "r.html")],
                 ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", new]):  # fmt: skip
        r.count += 1
        done = _cli(r, args)
        err = done.stderr.decode("utf-8", "replace")
        if done.returncode != 2 or len(err.strip().splitlines()) != 1 or "not valid UTF-8" not in err:
            r.failures.append(f"r8-names {args[0]}: exit {done.returncode}; stderr {err[-300:]!r}")
    if sorted(os.walk(os.fsencode(root))) != before:
        r.failures.append("r8-names: a refused command wrote into the root")
    r.count += 1
    listed = _cli(r, ["runs", str(root), "--json"])
    try:
        rows = {row["run"]: row for row in json.loads(listed.stdout.decode("utf-8"))}
        assert rows["ok"]["status"] == "OK" and "not valid UTF-8" in rows["run\\xff"]["error"]
    except (ValueError, KeyError, AssertionError) as exc:
        r.failures.append(f"r8-names runs ROOT: {type(exc).__name__}: {listed.stdout[-300:]!r}")
    shutil.copytree(r.sound, root / "übung")
    for args in (["runs", str(root)], ["runs", str(root), "--json"], ["grade", str(root / "übung")]):
        r.count += 1
        done = _cli(r, args, PYTHONIOENCODING="ascii")
        if b"Traceback" in done.stderr + done.stdout or done.returncode not in (0, 1):
            r.failures.append(f"r8-names ascii {args}: exit {done.returncode}; {done.stderr[-300:]!r}")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    backtracking(r, max(2, n // 2))
    links(r)
    counts(r, n)
    names(r)
