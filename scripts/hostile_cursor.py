"""Cursor-move classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by ``r.rng``): a key a
terminal reassembles by moving its cursor, found by a hostile tester after round 22 and fixed
(``rollbench.release.cursor``):

* a provider key (OpenAI, Anthropic or GitHub form) cut at a random place into a head and a tail, each matching no
  rule, written tail first and put together on the screen by a random trick (CSI D, C, G or ``\\```, ESC 7/8,
  CSI s/u, ``\\r``, 5 to 8 backspaces, CSI A, H or f, ESC M, VT), with words around it, at the start of a text file, a JSON
  string (rollbench's style or compact UTF-8) or a parquet value: ``release`` exits 0, and no released string holds
  the key, as written or as pyte's screen draws it (``\\n`` as CR LF);
* a progress log (tqdm-like ``\\r`` bars in colour, ``ESC[nA``/``ESC[2K`` redraws, backspace counters, spinners) of
  random length: released byte for byte.
"""

from __future__ import annotations

import json
import re
import string
from typing import Any

import hostile_round19

ALNUM = string.ascii_letters + string.digits
WORDS = ["reach", "the", "goal", "then", "stop", "grasp", "cube", "left", "near", "bowl", "after", "lift"]


def _key(rng: Any) -> tuple[str, int]:
    """A key and where to cut it: a head of too few key characters for its rule, a tail under the entropy rule's 32."""
    prefix = rng.choice(["sk-proj-", "sk-ant-api03-", "ghp_"])
    size = 36 if prefix == "ghp_" else rng.randint(28, 34)
    body = "".join(rng.choice(ALNUM) for _ in range(size))
    return prefix + body, len(prefix) + rng.randint(max(4, size - 30), 13)


def _words(rng: Any) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _trick(rng: Any, head: str, tail: str) -> tuple[str, str]:
    """``(name, text)``: text that shows ``"key " + head + tail`` on a row; neither piece is next to the other as
    written, nor with the control sequences removed."""
    n, col = len(head), 4 + len(head) + 1
    back = "\b" * rng.randint(5, 8)
    tricks = {
        "csi-D": f"key \x1b[{n}C{tail} \x1b[{len(tail) + 1 + n}D{head}",
        "csi-G": f"key \x1b[{col}G{tail} \x1b[5G{head}",
        "csi-backtick": f"key \x1b[{col}`{tail} \x1b[5`{head}",
        "esc-7-8": f"key \x1b7\x1b[{n}C{tail} \x1b8{head}",
        "csi-s-u": f"key \x1b[s\x1b[{n}C{tail} \x1b[u{head}",
        "cr": f"key {' ' * n}{tail} \rkey {head}",
        "backspaces": f"key {head}{' ' * len(back)}{back}{tail}",
        "csi-A": f"key {head}\n{_words(rng)}\x1b[1A\r\x1b[{col}G{tail}",
        "csi-H": f"{_words(rng)}\nkey {head}\n\x1b[2;{col}H{tail}",
        "csi-f": f"{_words(rng)}\nkey {head}\n\x1b[2;{col}f{tail}",
        "esc-M": f"key {head}\n{_words(rng)}\n\x1bM\x1bM\x1b[{col}G{tail}",
        "vt": f"\nkey {head}\x1b[A \x0b\x1b[D{tail}",
    }
    name = rng.choice(sorted(tricks))
    return name, tricks[name]


def shown(text: str) -> str:
    """What pyte's screen shows of ``text`` (``\\n`` as CR LF; xterm's ESC[s/ESC[u and HPA as pyte names them)."""
    import pyte

    screen = pyte.Screen(500, 60)
    text = text.replace("\n", "\r\n").replace("\x1b[s", "\x1b7").replace("\x1b[u", "\x1b8")
    for col in range(1, 200):  # pyte reads HPA as CSI ' (ECMA-48: CSI `)
        text = text.replace(f"\x1b[{col}`", f"\x1b[{col}G")
    pyte.Stream(screen).feed(text)
    return "\n".join(row.rstrip() for row in screen.display)


def _holds(s: str, key: str) -> bool:
    """Whether ``s`` holds ``key`` as written or as pyte's screen shows it (drawn only when it holds a control)."""
    return key in s or (re.search(r"[\x08\x0b\x0c\r\x1b\x84\x85\x8d\x9b]", s) is not None and key in shown(s))


def reassembled(r: Any, n: int) -> None:
    """A key a terminal reassembles, in a log, a JSON string or a parquet value, is in no released string."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        (key, cut), where = _key(r.rng), r.rng.choice(["log", "json-rollbench", "json-utf8", "parquet"])
        name, trick = _trick(r.rng, key[:cut], key[cut:])
        cid = f"cursor-{name}-{where}-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        if where == "parquet":
            pq.write_table(pa.table({"note": [_words(r.rng), trick, None]}), d / "run/notes/t.parquet")
        elif where == "log":  # first: the absolute positions count rows from the file's first line
            (d / "run/notes/console.log").write_bytes(f"{trick}\n{_words(r.rng)}\n".encode())
        else:
            doc = {"note": _words(r.rng), r.rng.choice(["msg", "text", "detail"]): trick}
            text = json.dumps(doc, indent=2) if where == "json-rollbench" else json.dumps(doc, ensure_ascii=False)
            (d / "run/notes/n.json").write_text(text)
        res = r.cli("release", d / "run", "--out", d / "rel", "--allow-violations", check=False)
        files = [p for p in sorted((d / "rel").rglob("*")) if p.is_file()]
        kept = [
            str(p.relative_to(d / "rel")) for p in files if any(_holds(s, key) for s in hostile_round19._strings(p))
        ]
        problems = ["the case does not show the key"] * (f"key {key}" not in shown(trick))  # the generator's own check
        problems += ["exit not 0"] * (res.returncode != 0) + ["traceback"] * ("Traceback" in res.stderr)
        problems += [f"kept the key in {k} (as written or as a terminal shows it)" for k in kept]
        if problems:
            r.failures.append(f"{cid}: exit {res.returncode}, {'; '.join(problems)}; {res.stderr.strip()[-300:]!r}")


def _progress_log(rng: Any) -> str:
    parts = []
    for _ in range(rng.randint(1, 6)):
        kind, total = rng.choice(["tqdm", "redraw", "counter", "spinner"]), rng.randint(3, 60)
        if kind == "tqdm":
            parts.append("".join(f"\r\x1b[32m{100 * k // total:3d}%\x1b[0m|{'█' * (10 * k // total):10s}| {k}/{total}"
                                 for k in range(total + 1)) + "\n")  # fmt: skip
        elif kind == "redraw":
            parts.append(
                "".join("\x1b[2A" * (k > 0) + f"\x1b[2K => step {k}\n\x1b[2K => copy {k}s\n" for k in range(total))
            )
        elif kind == "counter":
            parts.append("done " + "".join(f"{k:3d}%" + "\b" * 4 for k in range(total)) + "100%\n")
        else:
            parts.append("wait " + "".join(f"{'|/-'[k % 3]}\b" for k in range(total)) + "ok\n")
        parts.append(f"{_words(rng)}\r\n")
    return "".join(parts)


def progress(r: Any, n: int) -> None:
    """A progress log of carriage returns, colours, redraws and backspaces is released byte for byte."""
    for i in range(n):
        cid = f"cursor-progress-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        log = _progress_log(r.rng).encode()
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        (d / "run/notes/train.log").write_bytes(log)
        res = r.cli("release", d / "run", "--out", d / "rel", "--allow-violations", check=False)
        released = d / "rel/run/notes/train.log"
        problems = ["exit not 0"] * (res.returncode != 0) + ["traceback"] * ("Traceback" in res.stderr)
        problems += ["the log changed"] * (not released.is_file() or released.read_bytes() != log)
        if problems:
            r.failures.append(f"{cid}: exit {res.returncode}, {'; '.join(problems)}; {res.stderr.strip()[-300:]!r}")


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n)`` keys and ``max(2, n // 2)`` progress logs (each copies a run, releases it)."""
    reassembled(r, max(2, n))
    progress(r, max(2, n // 2))
