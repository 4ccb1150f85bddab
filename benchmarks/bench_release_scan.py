"""release's scanner on adversarial strings: work at n and 4n characters (hostile8 F4; linear work shows a ratio near
4, quadratic near 16). Optionally the same for another checkout's sources side by side (the old rules).

Reproduce: PYTHONPATH=src .venv/bin/python benchmarks/bench_release_scan.py 50000 [OLD_SRC_DIR]

The scanner holds 1,001 learnt values (hostile17 F6; the old rules' run holds none), and the last unit is a prefix of
one of them, so the trie of learnt values is walked 13 characters deep at every position.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

UNITS = ["a.", "a@a.", "x-", "x-auth-", "a://", "-----BEGIN RSA PRIVATE KEY-----", "Authorization: a,", "bearer ",
         'cookie: ="', "github_pat_", "C:\\", "é.", "base64,A 0123456789abcdef0123456789abcdefa ", "a=", 'HF_TOKEN="',
         "x_token='a ", "Blue-Falcon-7"]  # fmt: skip


LEARNT = "--no-learnt" not in sys.argv  # the old rules have no learnt values


def measure(n: int) -> None:
    from rollbench.release.rules import Scanner

    scanner = Scanner(set(), set(), environ={})
    if LEARNT:  # values learnt as credentials (hostile17 F6): 1,000 seeded random ones and a prefix of one repeated
        import random

        rng = random.Random(17)
        for value in ["Blue-Falcon-77"] + ["".join(rng.choices("abcdefXYZ0123-", k=20)) for _ in range(1000)]:
            scanner.learnt.add(value, "credential", "secret_field")
        scanner.learnt.compile()
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
        argv = [sys.executable, __file__, str(n), sys.argv[2], "--child", "--no-learnt"]
        subprocess.run(argv, env=env, check=False, timeout=3000)
