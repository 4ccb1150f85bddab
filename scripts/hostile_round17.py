"""Hostile rounds 16 and 17's classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``; seeded by
``r.rng``; each found by a hostile round and fixed, so each variant holds on main and fails before the fix):

* r16 F2: an environment secret (``RBH17_…_TOKEN``, 16 to 40 letters and digits) cut in two at a random point (each
  piece at least the piece length: 12, half the secret below 24) with random words around the pieces on two lines of
  an ``--instructions`` file (recorded without the variable set), or in a JSON list's items of ``notes/*.json``;
  ``release`` with it set: no released byte holds either piece, in any letter case;
* r17 F1/F2/F4: ``notes/*.parquet`` of a random column type (``string_view``, ``binary_view``, ``arrow.json``, a
  dictionary's unused entry, ``list<string>`` one character per item, a struct or map the secret is split over)
  holding an e-mail address or an environment secret: no released byte or value read back holds it (or the release
  is refused: exit 1/2, one line, nothing written); a ``list<int64>`` of the secret's bytes is refused, exit 1;
* r17 F3/F6: free-text pairs in ``notes/*.txt`` (``export AB_TOKEN=v``, ``CD_PASSWORD: "v"``; names ending in
  ``_TOKEN``, ``_API_KEY``, ``_ACCESS_KEY``, ``_SECRET_KEY``, ``_PRIVATE_KEY``, ``_PASSWORD``, ``_SECRET``) and a
  secret-named JSON field's value that another file's text holds too: ``release`` keeps none of the values;
* r17 F5: a stand-in peer (stdlib HTTP on loopback) serving a real dashboard's ``/api/runs`` with one run summary field
  of another JSON type: a central ``dashboard --peer`` answers 200 on ``/`` and ``/api/runs``, the peer's host row
  has an ``error``, no traceback on its stderr.
"""

from __future__ import annotations

import http.server
import json
import socket
import string
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ALNUM = string.ascii_letters + string.digits
WORDS = ["reach", "the", "goal", "then", "stop", "slowly", "grasp", "cube", "left", "near", "bowl", "after", "lift"]
RELEASE = ["--date", "2026-01-01", "--allow-violations"]
COLUMN_KINDS = ["string_view", "binary_view", "json", "dictionary", "chars", "struct", "map", "codes"]
SPLIT_KINDS = ("chars", "struct", "map", "codes")  # an environment secret held only as a whole: no e-mail here
KEY_ENDS = ["TOKEN", "API_KEY", "ACCESS_KEY", "SECRET_KEY", "PRIVATE_KEY", "PASSWORD", "SECRET"]
PEER_FIELDS = ["live", "coverage", "scored", "scored_success_rate", "excluded", "policy_errors_as_failures",
               "successes"]  # fmt: skip
SECRET_KEYS = ["password", "secret", "token", "api_key", "client_secret", "passwd"]


def _word(rng: Any, k: int = 0) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(k or rng.randrange(1, 4)))


def _value(rng: Any, lo: int, hi: int, alphabet: str = ALNUM) -> str:
    """Random ``lo`` to ``hi`` characters of ``alphabet`` with a letter and a digit (never an ordinary word)."""
    body = [rng.choice(alphabet) for _ in range(rng.randint(lo, hi) - 2)]
    return "".join([rng.choice(string.ascii_letters), *body, rng.choice(string.digits)])


def _secret(rng: Any) -> tuple[str, str]:
    """An environment variable's name and its secret value: 16 to 40 letters and digits (an even length below 24,
    so both halves have the piece length)."""
    n = rng.randint(16, 40)
    n += n % 2 if n < 24 else 0
    name = "RBH17_" + "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(2, 6))) + "_TOKEN"
    return name, _value(rng, n, n)


def _cut(rng: Any, secret: str) -> tuple[str, str]:
    """``secret`` cut in two at a random point, each piece at least the piece length (12; half below 24)."""
    p = 12 if len(secret) >= 24 else len(secret) // 2
    at = rng.randint(p, len(secret) - p)
    return secret[:at], secret[at:]


def _held(d: Path, needles: list[str]) -> list[str]:
    """``FILE: NEEDLE`` for every file under ``d`` whose bytes hold a needle in any letter case."""
    out = []
    for p in (f for f in sorted(d.rglob("*")) if f.is_file()):
        data = p.read_bytes().lower()
        out += [f"{p.relative_to(d)}: {s}" for s in needles if s.lower().encode() in data]
    return out


def _release(r: Any, d: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``release d/run --out d/rel`` with ``env`` added to the runner's environment."""
    saved = r.env
    r.env = {**saved, **env}
    try:
        return r.cli("release", d / "run", "--out", d / "rel", *RELEASE, check=False)
    finally:
        r.env = saved


def _report(r: Any, cid: str, res: subprocess.CompletedProcess[str], problems: list[str]) -> None:
    problems += ["hung"] * (res.returncode == -999) + ["traceback"] * ("Traceback" in res.stdout + res.stderr)
    if problems:
        r.failures.append(f"{cid}: exit {res.returncode}, {'; '.join(problems)}; stderr {res.stderr.strip()[-300:]!r}")


def _released_without(r: Any, cid: str, d: Path, env: dict[str, str], values: list[str]) -> None:
    """``release`` of ``d/run`` with ``env`` set exits 0 and no released byte holds any of ``values`` (any case)."""
    res = _release(r, d, env)
    left = _held(d / "rel", values)
    _report(r, cid, res, ["exit not 0"] * (res.returncode != 0) + [f"kept {x}" for x in left[:3]])


def split_instructions(r: Any, n: int) -> None:
    """Round 16 F2: the two pieces of a secret on two ``--instructions`` lines, recorded, then released."""
    for i in range(n):
        cid = f"r17-split-instructions-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        name, secret = _secret(r.rng)
        pieces = list(_cut(r.rng, secret))
        d = r.work / "cases" / cid
        d.mkdir(parents=True)
        (d / "instr.txt").write_text("".join(f"{_word(r.rng)} {p} {_word(r.rng)}\n" for p in pieces))
        made = r.cli("eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "1",
                     "--instructions", d / "instr.txt", "--out", d / "run", check=False)  # fmt: skip
        if made.returncode != 0 or len(_held(d / "run", pieces)) < 2:
            r.failures.append(f"{cid}: the run was not recorded with both pieces ({made.stderr.strip()[-200:]!r})")
            continue
        _released_without(r, cid, d, {name: secret}, pieces)


def split_json_list(r: Any, n: int) -> None:
    """Round 16 F2 in JSON: the two pieces with words around them in a list's items of ``notes/*.json``."""
    for i in range(n):
        cid = f"r17-split-json-list-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        name, secret = _secret(r.rng)
        pieces = list(_cut(r.rng, secret))
        items = [f"{_word(r.rng)} {p} {_word(r.rng)}" for p in pieces]
        items[1:1] = [_word(r.rng) for _ in range(r.rng.randrange(3))]  # other items between the pieces
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        doc = {"note": _word(r.rng, 5), r.rng.choice(["parts", "lines", "steps"]): items}
        (d / f"run/notes/{r.rng.choice(WORDS)}.json").write_text(json.dumps(doc, indent=r.rng.choice([None, 2])))
        _released_without(r, cid, d, {name: secret}, pieces)


def _column(kind: str, value: str, rng: Any) -> Any:
    """A pyarrow array of ``kind`` (:data:`COLUMN_KINDS`) holding ``value`` in its first row (or, for a dictionary,
    in an entry no row uses); split over items, fields or map values for the split kinds."""
    import pyarrow as pa

    text = f"{_word(rng)} {value} {_word(rng)}"
    cuts = sorted(rng.sample(range(1, len(value)), len(value) // rng.randint(2, 5)))  # parts of 2 to 5 on average
    parts = [value[a:b] for a, b in zip([0, *cuts], [*cuts, len(value)], strict=True)]
    if kind in ("string_view", "binary_view"):
        typ = pa.string_view() if kind == "string_view" else pa.binary_view()
        return pa.array([text if kind == "string_view" else text.encode(), "ok"], typ)
    if kind == "json":
        return pa.array([json.dumps({"note": text}), "{}"], pa.json_())
    if kind == "dictionary":
        entries = ["ok", text, _word(rng)]
        rng.shuffle(entries)
        return pa.DictionaryArray.from_arrays(pa.array([entries.index("ok")] * 2, pa.int32()), pa.array(entries))
    if kind == "chars":
        return pa.array([list(value), ["a"]], pa.list_(pa.string()))
    if kind == "struct":
        return pa.array([{f"f{j}": p for j, p in enumerate(parts)}] * 2)
    if kind == "map":
        return pa.array([[(f"k{j}", p) for j, p in enumerate(parts)], []], pa.map_(pa.string(), pa.string()))
    return pa.array([list(value.encode()), [1]], pa.list_(pa.int64()))  # codes


def _texts(v: Any) -> list[str]:
    """Every text a read-back value holds: its strings and bytes, and each list's, struct's or map's strings (or
    small whole numbers as bytes) joined in order."""
    if isinstance(v, str | bytes):
        return [v.decode("latin-1") if isinstance(v, bytes) else v]
    if isinstance(v, dict):
        v = list(v.values())
    if not isinstance(v, list | tuple):
        return []
    out = [t for x in v for t in _texts(x)]
    if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # a map's items: their values joined
        out.append("".join(str(x[1]) for x in v))
    out.append("".join(x for x in v if isinstance(x, str)))
    if v and all(isinstance(x, int) and 0 <= x < 256 for x in v):
        out.append(bytes(v).decode("latin-1"))
    return out


def _read_back(rel: Path, value: str) -> list[str]:
    """The released parquet files whose values (dictionaries included), read back with pyarrow, hold ``value``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for p in (f for f in sorted(rel.rglob("*.parquet")) if f.is_file()):
        texts: list[str] = []
        for col in pq.read_table(p).columns:
            for chunk in col.chunks:
                if pa.types.is_dictionary(chunk.type):
                    texts += [t for x in chunk.dictionary.to_pylist() for t in _texts(x)]
                texts += [t for x in chunk.to_pylist() for t in _texts(x)]
        if any(value.lower() in t.lower() for t in texts):
            out.append(f"{p.relative_to(rel)} (read back): {value}")
    return out


def parquet_columns(r: Any, n: int) -> None:
    """Round 17 F1/F2/F4: a planted value in a random parquet column type is never released."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        kind = r.rng.choice(COLUMN_KINDS)
        cid = f"r17-parquet-{kind}-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        name, secret = _secret(r.rng)
        email = f"{_value(r.rng, 4, 9).lower()}@{r.rng.choice(WORDS)}-{r.rng.choice(WORDS)}.example"
        value = secret if kind in SPLIT_KINDS or r.rng.random() < 0.5 else email
        d = r.copy(cid)
        (d / "run/notes").mkdir(exist_ok=True)
        table = pa.table({r.rng.choice(["who", "note", "cfg", "chars"]): _column(kind, value, r.rng)})
        pq.write_table(table, d / f"run/notes/{r.rng.choice(WORDS)}.parquet", compression="NONE")
        res = _release(r, d, {name: secret})
        refused = res.returncode in (1, 2) and len(res.stderr.strip().splitlines()) == 1 and not (d / "rel").exists()
        problems = [f"kept {x}" for x in (_held(d / "rel", [value]) + _read_back(d / "rel", value))[:3]]
        if kind == "codes" and res.returncode != 1:
            problems.append("a list<int64> of the secret's bytes not refused (exit 1)")
        if res.returncode != 0 and not refused:
            problems.append("a refusal not of exit 1/2, one line, nothing written")
        _report(r, cid, res, problems)


def _pair(rng: Any) -> tuple[str, str]:
    """A free-text ``NAME=value`` line (random name, separator, quoting, ``export`` in random case) and its value."""
    prefix = "_".join("".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(2, 5)))
                      for _ in range(rng.randint(1, 2)))  # fmt: skip
    name = f"{prefix}_{rng.choice(KEY_ENDS)}"
    name = name.lower() if rng.random() < 0.2 else name
    export = "".join(c.upper() if rng.random() < 0.5 else c for c in "export ") if rng.random() < 0.5 else ""
    quote = rng.choice(["", "", '"', "'"])
    value = _value(rng, 8, 30, ALNUM + ("-_. " if quote else "-_."))
    tail = rng.choice(["", " ./push.sh", " psql -h db", "  # set by ci"])
    return f"{export}{name}{rng.choice(['=', ': '])}{quote}{value}{quote}{tail}", value


def text_pairs(r: Any, n: int) -> None:
    """Round 17 F3/F6: free-text secret pairs, and a secret-named JSON field's value repeated in another file."""
    for i in range(n):
        cid = f"r17-text-pairs-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        pairs = [_pair(r.rng) for _ in range(r.rng.randint(2, 4))]
        learnt = _value(r.rng, 8, 30, ALNUM + "-_")
        field: dict[str, Any] = {r.rng.choice(SECRET_KEYS): learnt, "user": "bench"}
        for _ in range(r.rng.randrange(3)):
            field = {r.rng.choice(["db", "service", "cfg"]): field}
        d = r.copy(cid)
        notes = d / "run/notes"
        notes.mkdir(exist_ok=True)
        lines = [_word(r.rng, 4), *(line for line, _ in pairs), _word(r.rng, 3)]
        (notes / f"{r.rng.choice(WORDS)}-setup.txt").write_text("\n".join(lines) + "\n")
        (notes / "config.json").write_text(json.dumps(field, indent=2))
        (notes / f"{r.rng.choice(WORDS)}-log.txt").write_text(f"connecting as bench with {learnt} ... ok\n")
        _released_without(r, cid, d, {}, [v for _, v in pairs] + [learnt])


def _wrong(rng: Any, field: str) -> Any:
    """A random value of another JSON type than a dashboard serves for the run summary's ``field``."""
    word = _value(rng, 3, 8)
    others: dict[str, list[Any]] = {
        "live": [word, rng.randint(1, 99), [rng.randint(0, 9)], True, {"episodes_done": word}, {"eta_s": [1]}],
        "excluded": [[rng.randint(1, 9)], word, rng.randint(1, 9), {"policy": word}, {"policy": 1.5}, None],
    }
    number = [word, [rng.random()], {"a": word}, True]
    count = [*number, rng.random() + rng.randint(0, 5)]
    return rng.choice(others.get(field, number if field in ("coverage", "scored_success_rate") else count))


def _get(url: str, wait_s: float = 0.0) -> tuple[int, bytes]:
    """``GET url``: its status and body (status 0: no answer within ``wait_s`` seconds of retries)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except OSError:
            if time.monotonic() > deadline:
                return 0, b""
            time.sleep(0.2)


def _dashboard(r: Any, d: Path, *args: object) -> tuple[subprocess.Popen[bytes], str]:
    """A ``rollbench dashboard`` on a free loopback port with its labels and cache in ``d``: the process and its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [r.rb, "dashboard", *map(str, args), "--port", str(port), "--labels", str(d / "labels.json"),
           "--cache-dir", str(d / "cache")]  # fmt: skip
    err = open(d / "stderr.txt", "wb")  # noqa: SIM115 - closed by the child's end
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=r.env, stdin=subprocess.DEVNULL)
    err.close()
    return proc, f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _listing(r: Any) -> dict[str, Any] | None:
    """A real dashboard's ``/api/runs`` over the runner's sound run (None when it did not answer)."""
    d = r.work / "r17-peer-listing"
    d.mkdir(exist_ok=True)
    proc, url = _dashboard(r, d, "--root", r.sound)
    try:
        status, body = _get(f"{url}/api/runs", wait_s=60)
    finally:
        _stop(proc)
    return json.loads(body) if status == 200 else None


def _serve(body: bytes) -> http.server.ThreadingHTTPServer:
    """A stand-in peer on a free loopback port: ``body`` at ``/api/runs``, ``{}`` elsewhere."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            out = body if self.path.startswith("/api/runs") else b"{}"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def peer_fields(r: Any, n: int) -> None:
    """Round 17 F5: a peer's run summary with one field of another JSON type never breaks the central dashboard."""
    cids = [f"r17-peer-{i}" for i in range(n)]
    if not any(r.pattern in c for c in cids):
        return
    listing = _listing(r)
    if listing is None or not listing.get("runs"):
        r.failures.append("r17-peer: the real dashboard gave no /api/runs listing to serve")
        return
    for cid in cids:
        field = r.rng.choice(PEER_FIELDS)
        value = _wrong(r.rng, field)
        if r.pattern not in cid:
            continue
        r.count += 1
        doc = json.loads(json.dumps(listing))
        doc["runs"][r.rng.randrange(len(doc["runs"]))][field] = value
        d = r.work / "cases" / cid
        d.mkdir(parents=True)
        peer = _serve(json.dumps(doc).encode())
        proc, url = _dashboard(r, d, "--peer", f"http://127.0.0.1:{peer.server_address[1]}")
        try:
            listed, body = _get(f"{url}/api/runs", wait_s=60)
            page, _ = _get(f"{url}/")
        finally:
            _stop(proc)
            peer.shutdown()
            peer.server_close()
        hosts = json.loads(body).get("hosts", []) if listed == 200 else []
        problems = [
            f"{what} answered {status}" for what, status in (("/api/runs", listed), ("/", page)) if status != 200
        ]
        if listed == 200 and not any(h.get("error") for h in hosts if h.get("source") != "local"):
            problems.append(f"the peer's host row has no error ({hosts})")
        if "Traceback" in (d / "stderr.txt").read_text(errors="replace"):
            problems.append("a traceback on the central's stderr")
        if problems:
            r.failures.append(f"{cid} ({field}={value!r}): {'; '.join(problems)}")


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of the release classes (each records or copies a run and
    releases it), ``n`` parquet columns, ``max(2, n // 4)`` peers (each starts a dashboard)."""
    m = max(2, n // 2)
    split_instructions(r, m)
    split_json_list(r, m)
    parquet_columns(r, n)
    text_pairs(r, m)
    peer_fields(r, max(2, n // 4))
