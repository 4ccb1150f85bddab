"""release's scanner on adversarial strings: work at n and 4n characters (hostile8 F4; linear work shows a ratio near
4, quadratic near 16). Optionally the same for another checkout's sources side by side (the old rules).

Reproduce: PYTHONPATH=src .venv/bin/python benchmarks/bench_release_scan.py 50000 [OLD_SRC_DIR]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

UNITS = ["a.", "a@a.", "x-", "x-auth-", "a://", "-----BEGIN RSA PRIVATE KEY-----", "Authorization: a,", "bearer ",
         'cookie: ="', "github_pat_", "C:\\", "é.", "base64,A 0123456789abcdef0123456789abcdefa "]  # fmt: skip


def measure(n: int) -> None:
    from rollbench.release.rules import Scanner

    scanner = Scanner(set(), set(), environ={})
    for unit in UNITS:
        times = []
        for size in (n, 4 * n):
            text = (unit * (size // len(unit) + 1))[:size] + "é"
            runs = []
            for _ in range(3):
                t = time.process_time()
                scanner.find(text)
                runs.append(time.process_time() - t)
            times.append(statistics.median(runs))
        print(f"| {unit[:20]!r} | {times[0]:.3f} | {times[1]:.3f} | {times[1] / max(times[0], 1e-9):.1f} |", flush=True)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    if len(sys.argv) > 3 and sys.argv[3] == "--child":
        measure(n)
        sys.exit(0)
    print(f"load average {os.getloadavg()[0]:.1f}; n = {n}")
    print("| unit repeated | s at n | s at 4n | ratio |\n|---|---:|---:|---:|")
    measure(n)
    if len(sys.argv) > 2:
        print(f"\nthe rules of {sys.argv[2]}:")
        env = {**os.environ, "PYTHONPATH": sys.argv[2]}
        subprocess.run([sys.executable, __file__, str(n), sys.argv[2], "--child"], env=env, check=False, timeout=3000)
