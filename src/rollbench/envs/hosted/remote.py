"""The near side of an env in its own interpreter (docs/env-host.md): find the venv, start the env host, call it.

An :class:`EnvHost` is one far-side process (:mod:`rollbench.envs.hosted.far.host` run by the benchmark's venv
Python, a :class:`~rollbench.wire.pipe.child.ChildProcess`), owned by one env at a time. :func:`open_host` starts
one, or, for a family that allows it (``reuse=True``), takes an idle one of the same command and environment from
this process's :data:`POOL`; :func:`release_host` hands a closed env's host back to the pool when every call it
made succeeded (a host that failed, crashed or missed a deadline is stopped, and the next env gets a fresh one),
else stops it. So a worker, a batch slot or a Ray actor keeps one far-side process across tasks and episodes
instead of paying its start-up (imports, 10-20 s for LIBERO-Plus) per task. The far side builds each env anew in
the kept process (its ``make`` closes the previous env), and the scene is seeded from the episode's seed right
before its reset, so an episode is the same whether its host is fresh or reused (tested bit for bit). Idle hosts
are stopped at interpreter exit (and exit by themselves when rollbench's process dies: their input pipe closes).

Faults: a host that exits, closes its pipe, breaks the frame format or misses a deadline, and an ``error`` reply
(the benchmark's own code raised), are :class:`~rollbench.core.contracts.EpisodeError` with fault ``environment`` and
the host's reason (its last log lines), never the run's end. A host that cannot start, or whose adapter refuses to
start, is a ConfigError (exit 2 before any episode, or, for a later rebuild, the episode's ``infrastructure``
fault like any env that cannot be built).

Deadlines (seconds): :data:`START_TIMEOUT_S` for the host's ``hello`` (imports), :data:`MAKE_TIMEOUT_S` for
building a task's env, and for every other call the env deadline shared with in-process plug-in envs
(:func:`rollbench.core.env_timeout.env_timeout_s`: 120 s, ``$ROLLBENCH_ENV_TIMEOUT_S``).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError
from rollbench.core.env_timeout import env_timeout_s
from rollbench.wire.decode import ProtocolError, described, loads_json
from rollbench.wire.pipe.child import ChildFailed, ChildProcess

HOST_SCRIPT = Path(__file__).with_name("far") / "host.py"
START_TIMEOUT_S = 180.0
MAKE_TIMEOUT_S = 600.0


def checkout_root() -> Path | None:
    """The rollbench checkout this package runs from (the folder holding ``src/rollbench`` and ``scripts/``), where
    the set-up scripts (``scripts/*_setup.sh``) build the benchmarks' venvs; None for an installed (non-editable)
    rollbench, whose venvs are named by ``$<python_env>``."""
    package = Path(__file__).resolve().parents[2]  # .../src/rollbench
    root = package.parent.parent
    if package.parent.name == "src" and (root / "scripts").is_dir() and (root / "pyproject.toml").is_file():
        return root
    return None


def venv_python(venv: str, python_env: str) -> Path | None:
    """The interpreter of a benchmark's venv: ``$<python_env>`` when set, else ``<venv>/bin/python`` in the rollbench
    checkout (:func:`checkout_root`, where its set-up script builds it); None when there is none. Never the current
    directory's: ``cd DIR && rollbench eval`` runs no interpreter DIR holds (issue 42, item 3)."""
    explicit = os.environ.get(python_env)
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    root = checkout_root()
    candidate = root / venv / "bin" / "python" if root is not None else None
    return candidate if candidate is not None and candidate.is_file() else None


MAX_VERSION_CHARS = 200  # one distribution's version string (PEP 440 versions are a few dozen characters)
MAX_PROBE_BYTES = 64 * 1024  # the version probe's whole output


@cache
def venv_versions(python: str, dists: tuple[str, ...]) -> dict[str, str | None]:
    """Installed versions of ``dists`` in another interpreter (``importlib.metadata``, no package imported): each
    a string of at most :data:`MAX_VERSION_CHARS` characters, or None (not installed). All None when the probe
    cannot run or exits non-zero; ConfigError (one line naming ``python``) when it prints anything but one strict
    JSON object mapping exactly ``dists`` to such values (hostile round 13 F16: its output is another program's)."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(d):\n"
        "    try: return m.version(d)\n"
        "    except m.PackageNotFoundError: return None\n"
        "print(json.dumps({d: v(d) for d in sys.argv[1:]}))"
    )
    try:
        out = subprocess.run([python, "-c", code, *dists], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return dict.fromkeys(dists)
    found = _probe_reading(out.stdout, dists)
    if isinstance(found, str):
        raise ConfigError(
            f"the env host interpreter {python}: its version probe printed {found}; expected one JSON object mapping "
            f"{', '.join(dists)} to a version string (at most {MAX_VERSION_CHARS} characters) or null"
        )
    return found


def _probe_reading(stdout: bytes, dists: tuple[str, ...]) -> dict[str, str | None] | str:
    """A version probe's output as ``{dist: version or None}``, or what is wrong with it (a few words, never its
    text)."""
    if len(stdout) > MAX_PROBE_BYTES:
        return f"{len(stdout):,} bytes (at most {MAX_PROBE_BYTES:,} are read)"
    try:
        found = loads_json(stdout)
    except ProtocolError as exc:
        return f"output that is not strict JSON ({exc})"
    if not isinstance(found, dict):
        return described(found)
    if set(found) != set(dists):
        return f"{described(found)} whose keys are not the distributions asked for"
    for d in dists:
        v = found[d]
        if not (v is None or (isinstance(v, str) and 0 < len(v) <= MAX_VERSION_CHARS)):
            return f"{described(v)} as the version of {d}"
    return {d: found[d] for d in dists}


class EnvHost:
    """One env host: ``python host.py --adapter ADAPTER ARGS...``; :meth:`call` returns the reply or raises
    EpisodeError (fault ``environment``). ``name`` names it in messages (``"libero_ref env host"``)."""

    def __init__(self, name: str, python: str, adapter: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        cmd = [python, str(HOST_SCRIPT), "--adapter", adapter, *args]
        child_env = {**os.environ, "PYTHONNOUSERSITE": "1", "PYTHONHASHSEED": "0", **env}
        try:
            self.child = ChildProcess(name, cmd, START_TIMEOUT_S, child_env)
        except ChildFailed as exc:
            raise ConfigError(f"{exc}") from None
        self.info: dict[str, Any] = self.child.info
        self.pid = self.child.pid
        self.key = host_key(python, adapter, args, env)
        self.timeout_s = env_timeout_s()
        self.round_trip_s = 0.0  # sums over every call: wall time of the call, and the far side's own share
        self.far_s = 0.0
        self.healthy = True  # False after any failed call: such a host is never reused
        self.uses = 0  # envs built in this host so far (``make`` calls)

    def call(
        self, op: str, arrays: dict[str, np.ndarray] | None = None, timeout_s: float | None = None, **fields: Any
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        t0 = time.perf_counter()
        try:
            reply, out = self.child.call({"op": op, **fields}, arrays, timeout_s or self.timeout_s)
        except ChildFailed as exc:
            self.healthy = False
            raise EpisodeError(str(exc), "environment") from None
        self.round_trip_s += time.perf_counter() - t0
        self.far_s += float(reply.get("host_s", 0.0)) if isinstance(reply.get("host_s"), int | float) else 0.0
        if reply.get("op") == "error":
            self.healthy = False
            raise EpisodeError(f"{self.name}: {op} raised {reply.get('message')}", "environment")
        return reply, out

    def close(self) -> None:
        self.healthy = False
        self.child.close()


def host_key(python: str, adapter: str, args: list[str], env: dict[str, str]) -> tuple[Any, ...]:
    """What makes two hosts interchangeable: the interpreter, the adapter and its arguments, the variables set."""
    return (python, adapter, tuple(args), tuple(sorted(env.items())))


class HostPool:
    """Idle env hosts of this process by :func:`host_key`, at most :attr:`max_idle` in all (the oldest beyond it
    are stopped); thread-safe. :meth:`close_all` stops every idle host (registered with ``atexit``)."""

    max_idle = 4

    def __init__(self) -> None:
        self._idle: list[EnvHost] = []
        self._lock = threading.Lock()

    def take(self, key: tuple[Any, ...]) -> EnvHost | None:
        """An idle, live host of ``key`` (removed from the pool), or None."""
        with self._lock:
            for host in self._idle:
                if host.key == key and host.child.alive():
                    self._idle.remove(host)
                    return host
        return None

    def give(self, host: EnvHost) -> None:
        """Keep ``host`` for the next env of its key (its caller has dropped its env)."""
        with self._lock:
            self._idle.append(host)
            extra, self._idle = self._idle[: -self.max_idle], self._idle[-self.max_idle :]
        for old in extra:
            old.close()

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for host in idle:
            host.close()

    def __len__(self) -> int:
        return len(self._idle)


POOL = HostPool()
atexit.register(POOL.close_all)


def open_host(name: str, python: str, adapter: str, args: list[str], env: dict[str, str], reuse: bool) -> EnvHost:
    """An env host for a new env: with ``reuse``, an idle one of the same :func:`host_key` from :data:`POOL` when
    there is one, else a newly started one (ConfigError when it cannot start, as :class:`EnvHost`)."""
    if reuse:
        host = POOL.take(host_key(python, adapter, args, env))
        if host is not None:
            return host
    return EnvHost(name, python, adapter, args, env)


def release_host(host: EnvHost, reuse: bool) -> None:
    """The env of ``host`` is closed: with ``reuse`` and a host whose calls all succeeded, the far side drops its
    env (``drop``, frees its memory) and the host waits in :data:`POOL`; otherwise, or when the drop fails, the
    host is stopped."""
    if reuse and host.healthy and host.child.alive():
        try:
            host.call("drop")
        except EpisodeError:
            host.close()
            return
        POOL.give(host)
        return
    host.close()


def offscreen_gl_env() -> dict[str, str]:
    """Environment variables a far-side simulator needs from rollbench's process (offscreen GL)."""
    from rollbench.core.gl import configure_offscreen_gl

    configure_offscreen_gl()
    return {k: os.environ[k] for k in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "EGL_PLATFORM") if k in os.environ}
