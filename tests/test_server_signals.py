"""Every server ends by the one rule of docs/status.md: Ctrl-C (SIGINT) is exit 130, SIGTERM ends the process by the
signal (the shell reports 143), as for every other rollbench command. Real servers on loopback; each child gets
SIGINT's default disposition back (a background test job ignores SIGINT, which the child would inherit)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import rollbench_bin
from served_policy import free_port, wait_listening

pytestmark = pytest.mark.slow

SERVERS: dict[str, Callable[[Path, int], list[str]]] = {
    "dashboard": lambda w, p: ["dashboard", "--root", str(w), "--labels", str(w / "l.json"), "--cache-dir",
                               str(w / "cache"), "--port", str(p)],
    "serve-policy-ws": lambda w, p: ["serve-policy", "--policy", "zero", "--port", str(p)],
    "serve-policy-http": lambda w, p: ["serve-policy", "--policy", "zero", "--protocol", "http", "--port", str(p)],
    "mcp-http": lambda w, p: ["mcp", "--transport", "http", "--root", str(w / "runs"), "--port", str(p)],
}  # fmt: skip


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("server", sorted(SERVERS))
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_server_stopped_by_a_signal_exits_by_the_one_rule(server: str, sig: int, code: int, tmp_path: Path) -> None:
    port = free_port()
    cmd = [rollbench_bin(), *SERVERS[server](tmp_path, port)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint, cwd=tmp_path
    )
    try:
        wait_listening(proc, port, 120, lambda: proc.stderr.read() if proc.stderr else "")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
