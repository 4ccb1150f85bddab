"""Follow ``spec`` from the CLI through the calls (issue 41's measure): how often the path returns to a module it left.

Runs ``rollbench eval --env scripted/reach --policy scripted-expert --episodes 2`` in this process (into a temporary
directory) with a profile hook on every thread (``sys.setprofile``/``threading.setprofile``) and records, in call
order, each call of a rollbench function that receives the run's :class:`rollbench.core.spec.EvalSpec`: as an
argument (``self`` included: the spec's own methods), or, with ``--carriers``, inside an argument whose ``spec``
attribute is it (a resolved run, the typed run log), and each return from such a call into a rollbench caller that
holds the spec (so a call into another module and its return are two hops). Consecutive entries in one module are one
visit. The figure is the number of visits to a module the path had already visited and left (the first visit of each
module is not counted); the modules visited and the hops that return most are printed as well.

    PYTHONPATH=src .venv/bin/python scripts/spec_path.py [--carriers] [--hops N]

Deterministic for a given source tree (one process, one worker); the number is in BENCHMARKS.md ("Following the
spec").
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from rollbench.core.spec import EvalSpec

ARGV = ["eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "2"]


def _receives_spec(frame: FrameType, carriers: bool) -> bool:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    values: list[Any] = []
    for name in code.co_varnames[:n]:
        v = frame.f_locals.get(name)
        values.extend(v.values() if isinstance(v, dict) else v if isinstance(v, tuple) else [v])
    return any(isinstance(v, EvalSpec) or (carriers and isinstance(getattr(v, "spec", None), EvalSpec)) for v in values)


def _holds_spec(frame: FrameType, carriers: bool) -> bool:
    return any(
        isinstance(v, EvalSpec) or (carriers and isinstance(getattr(v, "spec", None), EvalSpec))
        for v in frame.f_locals.values()
    )


def trace(carriers: bool) -> list[tuple[str, str]]:
    """(module, function) where the spec's path goes, in order: each call of a rollbench function that receives the
    spec, and each return from one into a rollbench caller that holds it (a local or argument)."""
    from rollbench.cli.main import app

    calls: list[tuple[str, str]] = []
    following: set[int] = set()  # ids of the frames that received the spec, while they run

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("rollbench.") and _receives_spec(frame, carriers):
                following.add(id(frame))
                calls.append((module, frame.f_code.co_qualname))
        elif event == "return" and id(frame) in following:
            following.discard(id(frame))
            back = frame.f_back
            module = back.f_globals.get("__name__", "") if back is not None else ""
            if back is not None and module.startswith("rollbench.") and _holds_spec(back, carriers):
                calls.append((module, back.f_code.co_qualname))

    with tempfile.TemporaryDirectory() as tmp:
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            app([*ARGV, "--out", str(Path(tmp) / "run")], standalone_mode=False)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    return calls


def visits(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Consecutive calls in one module collapsed: (module, first function of the visit)."""
    out: list[tuple[str, str]] = []
    for module, fn in calls:
        if not out or out[-1][0] != module:
            out.append((module, fn))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--carriers", action="store_true", help="also follow the spec inside objects holding it")
    parser.add_argument("--hops", type=int, default=12, help="how many of the most frequent returning hops to list")
    args = parser.parse_args()
    path = visits(trace(args.carriers))
    seen: set[str] = set()
    returns: collections.Counter[tuple[str, str]] = collections.Counter()
    for (before, _), (module, fn) in zip([("<cli>", ""), *path[:-1]], path, strict=True):
        if module in seen:
            returns[(before, f"{module}.{fn}")] += 1
        seen.add(module)
    print(f"modules visited: {len(seen)}; visits: {len(path)}; returns to an already-left module: {returns.total()}")
    print("  modules, in first-visit order: " + ", ".join(dict.fromkeys(m.removeprefix("rollbench.") for m, _ in path)))
    for (before, to), n in returns.most_common(args.hops):
        print(f"  {n:3d}  {before} -> {to}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
