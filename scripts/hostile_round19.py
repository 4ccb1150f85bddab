"""Hostile round 19's encoding classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``; found by hostile round 19, attacker a, and fixed: each variant holds on main, and fails before the fix
but a file of no text suffix whose first NUL byte is in its first 8 KiB, which was refused before too):

* F1 (text): secrets (an OpenAI- or GitHub-form key, an e-mail address, a ``password=`` pair, a home path) as text in
  a random encoding that is ASCII with NUL bytes between (UTF-16LE/BE, UTF-32LE/BE, no byte order mark), after 0 to
  12 KiB of ASCII, in ``notes/NAME`` of a random text suffix or none: ``release`` refuses, exit 2, one line, nothing
  written;
* F1 (strings): a key interleaved with a random invisible character (NUL, zero-width space or joiner, word joiner,
  soft hyphen, byte order mark, a bidirectional mark, a variation selector, ESC) after every character or at random
  places, in a JSON file of a random style (rollbench's, or compact UTF-8) or a parquet string column, with words
  around it: ``release`` exits 0 and no released string, read back (json, pyarrow) with that character removed,
  holds the key;
* F3: an environment secret (ASCII, or with letters outside ASCII) in a random letter case and encoding (UTF-8,
  UTF-16LE, UTF-16BE), or an e-mail address, home path or ``token=`` pair in UTF-16LE/BE, appended to a run's video
  in an mp4 ``free`` box after random bytes: ``release`` refuses, exit 1, naming the rule, nothing written.
"""

from __future__ import annotations

import json
import shutil
import string
import struct
from pathlib import Path
from typing import Any

ALNUM = string.ascii_letters + string.digits
WORDS = ["reach", "the", "goal", "then", "stop", "grasp", "cube", "left", "near", "bowl", "after", "lift", "👍"]
SUFFIXES = [".txt", ".md", ".log", ".csv", ".yaml", ".dat", ".bin", ""]
WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
INVISIBLE = ["\0", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u200e", "\u202e", "\ufe0f", "\x1b"]
UMLAUTS = "äöüßéñåøÄÖÜÉ"


def _key(rng: Any) -> str:
    body = "".join(rng.choice(ALNUM) for _ in range(rng.randint(32, 44)))
    return rng.choice(["sk-proj-" + body, "sk-" + body, "ghp_" + body[:36]])


def _words(rng: Any) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _refused(r: Any, cid: str, plant: Any, code: int, env: dict[str, str], words: str) -> None:
    saved = r.env
    r.env = {**saved, **env}
    try:
        r.case(cid, plant, ["release", "RUN", "--out", "DIR/rel", "--allow-violations"], {code}, True, words)
    finally:
        r.env = saved


def wide_text(r: Any, n: int) -> None:
    """F1: a text file of ASCII with NULs between (UTF-16/32 without a BOM) is refused by name."""
    for i in range(n):
        codec, suffix = r.rng.choice(WIDE), r.rng.choice(SUFFIXES)
        secrets = [_key(r.rng), "alice@corp-secret.example", f"password={_key(r.rng)[-16:]}", "/home/alice/x"]
        text = "\n".join(f"{_words(r.rng)} {s}" for s in r.rng.sample(secrets, r.rng.randint(1, 4))) + "\n"
        pad = b"header " * r.rng.randrange(0, 1800)
        name = f"notes/{r.rng.choice(['export', 'dump', 'notes'])}{suffix}"

        def plant(run: Path, data: bytes = pad + text.encode(codec), name: str = name) -> None:
            (run / name).parent.mkdir(exist_ok=True)
            (run / name).write_bytes(data)

        _refused(r, f"r19-wide-text-{codec}{suffix or '-nosuffix'}-{i}", plant, 2, {}, name.split("/")[-1])


def _interleave(rng: Any, key: str, sep: str) -> str:
    """``key`` with ``sep`` after every character but the last, or after a random third of them (at least one)."""
    if rng.random() < 0.5:
        return sep.join(key)
    cut = rng.randrange(8, len(key) - 1)  # one inside the key's body, so the rule cannot find it whole as written
    return "".join(c + sep * (i == cut or rng.random() < 0.3) for i, c in enumerate(key[:-1])) + key[-1]


def _strings(path: Path) -> list[str]:
    """Every string a released file holds as read back: JSON values and keys, parquet values; else its text."""
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        return [str(v) for col in pq.read_table(path).to_pydict().values() for v in col if v is not None]
    text = path.read_bytes().decode(errors="replace")  # not read_text: a "\r" stays as written
    if path.suffix == ".json":
        out: list[str] = []

        def walk(o: Any) -> None:
            if isinstance(o, dict):
                out.extend(map(str, o))
                list(map(walk, o.values()))
            elif isinstance(o, list):
                list(map(walk, o))
            elif isinstance(o, str):
                out.append(o)

        walk(json.loads(text))
        return out
    return [text]


def interleaved(r: Any, n: int) -> None:
    """F1: a key interleaved with an invisible character in a JSON string or a parquet value is not released."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        sep, where = r.rng.choice(INVISIBLE), r.rng.choice(["json-rollbench", "json-utf8", "parquet"])
        cid = f"r19-interleaved-{where}-U+{ord(sep):04X}-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        key = _key(r.rng)
        value = f"{_words(r.rng)} {_interleave(r.rng, key, sep)} {_words(r.rng)}"
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        if where == "parquet":
            rows = [_words(r.rng), value, _words(r.rng)]
            pq.write_table(pa.table({"note": rows}), d / "run/notes/t.parquet")
        else:
            doc = {"note": _words(r.rng), r.rng.choice(["msg", "text", "detail"]): value}
            text = json.dumps(doc, indent=2) if where == "json-rollbench" else json.dumps(doc, ensure_ascii=False)
            (d / "run/notes/n.json").write_text(text)
        res = r.cli("release", d / "run", "--out", d / "rel", "--allow-violations", check=False)
        files = [p for p in sorted((d / "rel").rglob("*")) if p.is_file()]
        kept = [str(p.relative_to(d / "rel")) for p in files if any(key in s.replace(sep, "") for s in _strings(p))]
        problems = ["exit not 0"] * (res.returncode != 0) + ["traceback"] * ("Traceback" in res.stderr)
        problems += [f"kept the key in {k}" for k in kept]
        if problems:
            r.failures.append(f"{cid}: exit {res.returncode}, {'; '.join(problems)}; {res.stderr.strip()[-300:]!r}")


def video_encodings(r: Any, n: int) -> None:
    """F3: an environment secret in another encoding, or UTF-16 text, in a video's bytes refuses the release."""
    cases = []
    for i in range(n):
        alphabet = ALNUM + (UMLAUTS if r.rng.random() < 0.5 else "")
        secret = "".join(r.rng.choice(alphabet) for _ in range(r.rng.randint(14, 30))) + r.rng.choice(string.digits)
        cased = "".join(c.upper() if r.rng.random() < 0.5 else c.lower() for c in secret)
        text = r.rng.choice(
            [f"env {cased}", "by alice@corp-secret.example", "in /home/alice/proj x", "login token=Hunter2Hunter2xyz"]
        )
        codecs = ["utf-16-le", "utf-16-be"] + ["utf-8"] * (text.startswith("env") and not cased.isascii())
        codec = r.rng.choice(codecs)  # an ASCII value's UTF-8 is its Latin-1, found before round 19
        payload = bytes(r.rng.randrange(256) for _ in range(r.rng.randrange(1, 24))) + text.encode(codec)
        cases.append((f"r19-video-{codec}-{text.split()[0]}-{i}", payload, secret))
    if not any(r.pattern in cid for cid, _, _ in cases):
        return
    video_run = r.work / "r19-video"
    if not video_run.exists():
        r.cli("eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--max-steps", "3",
              "--video", "--out", video_run)  # fmt: skip
    for cid, payload, secret in cases:

        def plant(run: Path, payload: bytes = payload) -> None:
            shutil.rmtree(run)
            shutil.copytree(video_run, run)
            video = next(iter(sorted(run.glob("videos/*/chunk-*/file-*.mp4"))))
            with open(video, "ab") as f:
                f.write(struct.pack(">I", 8 + len(payload)) + b"free" + payload)

        _refused(r, cid, plant, 1, {"RBH19_SERVICE_TOKEN": secret}, "the video holds a match of rule")


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each (each copies a run and releases it)."""
    m = max(2, n // 2)
    wide_text(r, m)
    interleaved(r, m)
    video_encodings(r, m)
