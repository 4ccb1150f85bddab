"""The Ray connection of a run or a study (:func:`ray_session`), made before anything is written.

``rollbench eval --executor ray``, ``robustness`` and ``sequential`` open the session before they create the run (or
study) directory, so an unreachable ``--ray-address``, a refused token or a request no node can hold is exit 2 with
nothing on disk. Inside the session every :func:`rollbench.run.ray_runner.run_ray` uses that one connection (a study
of many runs connects once); it is shut down when the outermost session ends, unless this process was connected to
Ray before (``ray.is_initialized()``), in which case that connection is used and kept.

An address of the form ``HOST:PORT`` (or ``ray://HOST:PORT``) is first probed with one TCP connection
(:data:`PROBE_TIMEOUT_S`): ``ray.init`` itself retries an unreachable GCS for minutes. ``auto`` and ``local`` are
left to Ray. ``ray`` is imported only inside the functions here.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rollbench.core.contracts import ConfigError
from rollbench.run.execution import Execution
from rollbench.run.pool import START_TIMEOUT_S
from rollbench.run.ray_options import RayOptions

PROBE_TIMEOUT_S = 5.0  # one TCP connect to --ray-address before ray.init (which retries for minutes)


@dataclass(frozen=True)
class RaySession:
    """An open connection: ``owned`` (this session started or joined Ray and shuts it down at its end) and
    ``private`` (a local instance this session started, sized for the run; a cluster's env is forwarded to actors)."""

    owned: bool
    private: bool


_ACTIVE: list[RaySession] = []  # the open session of this process (at most one; nested sessions reuse it)


def active_session() -> RaySession | None:
    """The session open in this process, or None."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def ray_session(execution: Execution) -> Iterator[RaySession | None]:
    """Connect to ``execution.ray_address`` (or start a private local instance sized for its workers) and check that
    a node can hold one worker, for the duration of the ``with`` block; yields None for a non-Ray execution and the
    outer session when one is already open. Raises ConfigError (Ray missing, address unreachable, token refused, a
    request no node of a private instance can hold) before the block runs."""
    if execution.executor != "ray" or _ACTIVE:
        yield active_session()
        return
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor ray needs Ray: pip install 'rollbench[ray]'") from None
    owned = not ray.is_initialized()
    if owned:
        _init(ray, execution.ray_address, execution.workers, execution.ray)
    try:
        session = RaySession(owned=owned, private=owned and not execution.ray_address)
        _check_feasible(ray, execution.ray, private=session.private)
        _ACTIVE.append(session)
        try:
            yield session
        finally:
            _ACTIVE.pop()
    finally:
        if owned:
            ray.shutdown()


def probe_address(address: str) -> None:
    """ConfigError unless a TCP connection to ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) opens within
    :data:`PROBE_TIMEOUT_S`; ``auto``/``local`` and addresses without a port are left to Ray."""
    if address in ("auto", "local"):
        return
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ConfigError(f"--ray-address {address!r} is not HOST:PORT ({exc})") from None
    if not host or port is None:
        return
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot reach Ray at {address}: {reason} (is `ray start --head` running there?)") from None


def cluster_token_mode() -> None:
    """Before a driver connects to ``--ray-address``: with ``RAY_AUTH_MODE`` unset and a token at hand
    (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``, which ``ray start --head`` writes), use
    token authentication, as ``ray start`` and a local ``ray.init()`` already do: Ray's driver does not for an
    explicit address, and the cluster then refuses it (InvalidAuthToken; issue 42, item 16). Ray's own C++ start-up
    warnings are kept off the terminal by :func:`_without_native_stderr`."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    named = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
    if named or (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"
        with contextlib.suppress(ImportError, AttributeError):  # Ray caches its config: refresh it (Ray >= 2.60)
            from ray._private.authentication.authentication_token_setup import Config

            Config.initialize("")


@contextlib.contextmanager
def _without_native_stderr() -> Iterator[None]:
    """File descriptor 2 sent to a discarded temporary file meanwhile: Ray's C++ client writes a warning per second
    while a cluster refuses it (``gcs_client.cc ... InvalidAuthToken``, ~20 lines) straight to the descriptor, before
    rollbench's one line says why (issue 42, item 16)."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _init(ray: Any, address: str | None, workers: int, opts: RayOptions) -> None:
    """Connect to ``address`` or start a private instance sized for ``workers``; ConfigError when it fails."""
    if address:
        probe_address(address)
        cluster_token_mode()
    try:
        if address:
            with _without_native_stderr():
                ray.init(address=address, logging_level=logging.WARNING)
        else:
            ray.init(  # GPUs as Ray detects them: asking for more is refused by _check_feasible
                address="local",
                num_cpus=max(workers, math.ceil(workers * opts.cpus)),
                # a node's resources are whole numbers (Ray's rule); fractional requests fit in the rounded-up total
                resources={k: math.ceil(v * workers) for k, v in opts.resources.items()} or None,
                include_dashboard=False,
                logging_level=logging.WARNING,
            )
    except ray.exceptions.AuthenticationError as exc:
        raise ConfigError(
            f"Ray at {address} refused this driver's token ({exc.message}); give the cluster's token with "
            "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH (see docs/cluster.md)"
        ) from None
    except (ConnectionError, ValueError, RuntimeError) as exc:
        hint = ""
        if address and os.environ.get("RAY_AUTH_MODE", "token").lower() != "disabled":
            hint = (
                " (Ray's token authentication is on by default: does this driver have the cluster's token? "
                "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token; see docs/cluster.md)"
            )
        raise ConfigError(f"cannot start or reach Ray at {address or 'a new local instance'}: {exc}{hint}") from None


def _check_feasible(ray: Any, opts: RayOptions, private: bool) -> None:
    """Whether some live node can hold one env worker (and, per node, its policy actor's GPUs). A private instance
    that cannot is a ConfigError; a cluster only gets a warning (an autoscaler may still add such a node)."""
    need = {"CPU": opts.cpus, **opts.resources}
    if opts.gpus:
        need["GPU"] = opts.gpus
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    if any(all(r.get(k, 0.0) >= v for k, v in need.items() if v) for r in nodes):
        return
    asked = ", ".join(f"{k} {v:g}" for k, v in need.items() if v)
    have = "; ".join(", ".join(f"{k} {r.get(k, 0.0):g}" for k in need) for r in nodes) or "no live node"
    message = f"no node of the Ray cluster has what one worker asks for ({asked}); its nodes have: {have}"
    if private:
        raise ConfigError(f"{message} (this machine; without --ray-address the run starts Ray here)")
    print(f"warning: {message}; workers wait for such a node (up to {START_TIMEOUT_S:.0f} s)", file=sys.stderr)
