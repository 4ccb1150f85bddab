"""rollbench's env host: runs in a benchmark's own interpreter (its venv), never imports rollbench (docs/env-host.md).

Started by :mod:`rollbench.envs.hosted.remote` as ``PYTHON host.py --adapter NAME [ARG ...] --in-fd R --out-fd W``;
speaks :mod:`rollbench.wire.pipe.frames` over the two pipe descriptors (its request loop is ``frames.serve``, the
LeRobot host's too) and exits when its input pipe closes (so it
never outlives the rollbench process that started it). Its stdout and stderr are rollbench's log file for it, never
the protocol.

``NAME`` is an adapter: a module of this folder (``libero_far``), or, for a third-party benchmark, a ``.py`` file
path the plug-in names (``--adapter /path/to/adapter.py``). The name comes from rollbench's command line, never from
the wire. An adapter module defines ``start(args: list[str]) -> (adapter, info)``; ``adapter.OPS`` is the set of op
names it answers and ``adapter.handle(op, message, arrays) -> (reply, reply_arrays)`` answers one. The host adds
the lifecycle: ``hello`` {info} (or ``error`` {message, where: "start"}) once, then one reply per request, ``close``
-> ``ok`` and exit 0; an exception raised by the adapter is replied as ``error`` {message, where: op} (the
benchmark's own fault, which rollbench records as the episode's ``environment`` fault); an unknown op is ``error``
{where: "protocol"}. Every reply to an adapter op carries ``host_s``: the seconds the adapter took (so the
boundary's own cost can be told apart, ``benchmarks/bench_env_host.py``). A malformed frame ends the host (exit 3).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import sys
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "wire" / "pipe"))  # rollbench's frame format
import frames

_HERE = Path(__file__).resolve().parent


def _load_adapter(name: str) -> Any:
    if name.endswith(".py"):
        spec = importlib.util.spec_from_file_location("rollbench_env_adapter", name)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load adapter file {name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or not (_HERE / f"{name}.py").is_file():
        raise ImportError(f"no adapter {name!r} in {_HERE}")
    return importlib.import_module(name)


def _error(where: str, exc: BaseException) -> dict[str, Any]:
    traceback.print_exc()  # into the log file
    return {"op": "error", "where": where, "message": f"{type(exc).__name__}: {exc}"[:4000]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    args, rest = parser.parse_known_args(argv)
    reader = frames.FrameReader(args.in_fd)
    try:
        adapter, info = _load_adapter(args.adapter).start(rest)
    except Exception as exc:
        frames.write_frame(args.out_fd, frames.encode(_error("start", exc)))
        return 2
    frames.write_frame(args.out_fd, frames.encode({"op": "hello", "info": info}))
    try:
        frames.serve(adapter.handle, adapter.OPS, reader, args.out_fd, _error, timed=True)
    except frames.FrameError as exc:
        print(f"env host: malformed frame from rollbench: {exc}", file=sys.stderr)
        return 3
    except frames.PeerGone:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
