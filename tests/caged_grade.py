"""``grade`` of a run directory in a child process under a 4 GiB address-space limit, for the tests of bounded
readers: what it found, how long it took and its own peak resident memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_GRADE_IN_A_CAGE = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from rollbench.api import grade
t = time.monotonic()
violations = grade(sys.argv[1]).violations
# VmHWM: this process image's own peak. ru_maxrss is not: Linux carries it across execve, so a child forked from a
# large pytest worker reports the worker's size (CI read 1.7 GiB there for a 0.27 GiB grade).
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"violations": violations, "s": time.monotonic() - t, "peak_rss_kib": int(hwm.split()[1])}))
"""


def grade_in_a_cage(run: Path) -> dict[str, Any]:
    """``{"violations": [...], "s": seconds, "peak_rss_kib": KiB}`` of ``rollbench.api.grade(run)`` run in a fresh
    interpreter limited to 4 GiB of address space (a read of a whole huge file is a MemoryError there)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run(
        [sys.executable, "-c", _GRADE_IN_A_CAGE, str(run)], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])  # type: ignore[no-any-return]
