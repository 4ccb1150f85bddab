"""What drawing a text as a terminal shows it costs ``rollbench release`` (``rollbench.release.cursor``): CPU
seconds of ``Scanner.find(text, lines=True)`` (every rule, as a text file is scanned) and of ``cursor.render`` alone,
on logs that move the cursor (tqdm-style ``\\r`` bars in colour; docker-style ``ESC[nA``/``ESC[2K`` redraws) and on
hostile floods (given up: ``withheld``). With ``--old SRC`` (a ``git archive`` of another commit's ``src``), the same
``find`` on that source in a subprocess, for the cost before.

    PYTHONPATH=src python benchmarks/bench_release_cursor.py 1 10 --old /tmp/base/src
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIB = 1 << 20


def tqdm_log(mib: float) -> str:
    parts, size, i = [], 0, 0
    while size < mib * MIB:
        n = i % 100
        s = f"\r\x1b[32m{n:3d}%\x1b[0m|{'█' * (n // 10)}{' ' * (10 - n // 10)}| {i}/100000 [00:{i % 60:02d}<00:10]"
        s += f"\nepoch {i // 100} loss=0.{i % 997:03d} done\n" if n == 99 else ""
        parts.append(s)
        size, i = size + len(s), i + 1
    return "".join(parts)


def docker_log(mib: float) -> str:
    parts, size, i = [], 0, 0
    while size < mib * MIB:
        s = ("\x1b[5A" if i else "") + "".join(f"\x1b[2K => [{k}/5] RUN step {k} {i}.{k}s\n" for k in range(5))
        parts.append(s)
        size, i = size + len(s), i + 1
    return "".join(parts)


FLOODS = {  # a MiB each
    "far columns (ESC[9999C x)": "\x1b[9999Cx" * (MIB // 8),
    "save/restore (ab ESC 7 cd ESC 8)": "ab\x1b7cd\x1b8" * (MIB // 8),
    "reverse index at the top of 131,072 rows": "row\n" * (MIB // 8) + "\x1b[H" + "\x1bM" * (MIB // 4),
    "insert line over 131,072 rows": "row\n" * (MIB // 8) + "\x1b[H" + "\x1b[L" * (MIB // 6),
    "1 MiB of backspaces": "x" * 1000 + "\b" * (MIB - 1000),
}


def cpu(f: object) -> float:
    start = time.process_time()
    f()  # type: ignore[operator]
    return time.process_time() - start


def old_find(src: str, text: str) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    code = (
        "import sys, time; from rollbench.release.rules import Scanner; t = open(sys.argv[1]).read(); "
        "s = Scanner(set(), set(), environ={}); c = time.process_time(); s.find(t, lines=True); "
        "print(time.process_time() - c)"
    )
    env = {**os.environ, "PYTHONPATH": src}
    try:
        out = subprocess.run([sys.executable, "-c", code, f.name], env=env, capture_output=True, text=True, check=True)
    finally:
        Path(f.name).unlink()
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mib", nargs="*", type=float, default=[1.0])
    ap.add_argument("--old", help="another commit's src, for find's cost before")
    a = ap.parse_args()
    from rollbench.release import cursor
    from rollbench.release.rules import Scanner

    print("| text | MiB | render s | µs/char | find s (now) | find s (before) | withheld |")
    print("|---|---:|---:|---:|---:|---:|---|")
    cases = [(f"{name} log", make(m)) for m in a.mib for name, make in (("tqdm", tqdm_log), ("docker", docker_log))]
    for label, text in cases + list(FLOODS.items()):
        shown: list[object] = []
        render_s = cpu(lambda t=text, out=shown: out.append(cursor.render(t)))
        find_s = cpu(lambda t=text: Scanner(set(), set(), environ={}).find(t, lines=True))
        before = f"{old_find(a.old, text):.2f}" if a.old else ""
        per = render_s / len(text) * 1e6
        print(f"| {label} | {len(text) / MIB:.1f} | {render_s:.2f} | {per:.2f} | {find_s:.2f} | {before} | "
              f"{'yes' if shown[0] is None else 'no'} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
