"""How much the order of test files could shorten the README's test command (``pytest -n 2 --dist loadfile``).

A model of pytest-xdist 3.8's ``LoadFileScheduling`` (``xdist/scheduler/loadscope.py``): the files are the work
units, queued by number of tests, most first (``--loadscope-reorder``, the default; ties in collection order); each
of the 2 workers gets one unit, then units while it has at most 2 tests pending, and again after each test it
finishes. Fed with the per-test durations of a CI log (``--durations=0``: setup + call + teardown per test id; a
test under the log's 1 s cut-off counts 0.3 s) and the collection (``pytest --collect-only -q``), it prints the
makespan of that order and of longest-file-first, beside the sum / 2, the bound of any order.

    .venv/bin/python -m pytest --collect-only -q | grep '::' > /tmp/collect.txt
    python benchmarks/xdist_schedule.py CI_LOG /tmp/collect.txt
"""

from __future__ import annotations

import re
import sys
from collections import OrderedDict, defaultdict, deque
from pathlib import Path

HIDDEN_S = 0.3
LINE = re.compile(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S.*)$")


def durations(log: str) -> dict[str, float]:
    """Test id -> seconds summed over its phases, from the first ``slowest durations`` block of ``log``."""
    block = log.split("slowest durations", 1)[1].split(" passed", 1)[0]
    out: dict[str, float] = defaultdict(float)
    for line in block.splitlines():
        if m := LINE.match(line):
            out[m.group(2)] += float(m.group(1))
    return out


def makespan(units: list[tuple[str, list[str]]], cost: dict[str, float], workers: int = 2) -> float:
    """Seconds until the last worker is done when the units are handed out in this order (the model above)."""
    queue = OrderedDict(units)
    pending: list[deque[str]] = [deque() for _ in range(workers)]
    clock = [0.0] * workers

    def top_up(n: int) -> None:
        while queue and len(pending[n]) <= 2:
            pending[n].extend(queue.popitem(last=False)[1])

    for n in range(workers):
        pending[n].extend(queue.popitem(last=False)[1])
    for n in range(workers):
        top_up(n)
    while any(pending):
        n = min((i for i in range(workers) if pending[i]), key=lambda i: clock[i])
        clock[n] += cost.get(pending[n].popleft(), HIDDEN_S)
        top_up(n)
    return max(clock)


def main(log_path: Path, collect_path: Path) -> None:
    cost = durations(log_path.read_text())
    files: dict[str, list[str]] = OrderedDict()
    for test in (line.strip() for line in collect_path.read_text().splitlines() if "::" in line):
        files.setdefault(test.split("::", 1)[0], []).append(test)
    by_count = sorted(files.items(), key=lambda kv: -len(kv[1]))
    by_cost = sorted(files.items(), key=lambda kv: -sum(cost.get(t, HIDDEN_S) for t in kv[1]))
    total = sum(cost.get(t, HIDDEN_S) for tests in files.values() for t in tests)
    print(f"{len(files)} files, {sum(map(len, files.values()))} tests, {total:.0f} test-s")
    print(f"xdist's order (most tests first): {makespan(by_count, cost):.0f} s")
    print(f"longest file first:               {makespan(by_cost, cost):.0f} s")
    print(f"sum / 2 (no order does better):   {total / 2:.0f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
