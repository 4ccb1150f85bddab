"""Hostile round 9's ``optimize-instruction`` classes for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``;
seeded by ``r.rng``):

* F5/F11: a finished search's ``optimize.json`` doctored (wrong types, missing or unknown keys, run directories or a
  prefix pointing outside ``--out`` or into the case's canary, moved seeds, an incumbent no round chose, an
  over-long text), then the same command: exit 2, one line ("is damaged"), nothing outside ``--out`` touched;
* F1/F2: an OpenAI-compatible endpoint on loopback whose reply echoes the API key (plain, reversed, upper case,
  base64, base32, hex, split over two lines, inside an over-long line) or whose ``content`` is not a string: the
  search exits 0 (or 1 for a non-string content, one line) and no form of the key is in any file it wrote or in
  what it printed.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KEY = "tok_QWERTY1234567890zxcv"
SEARCH = ["optimize-instruction", "--env", "scripted/reach", "--policy", "scripted-expert", "--rounds", "1"]
SEARCH += ["--candidates", "2", "--episodes-per-candidate", "2", "--holdout-episodes", "2", "--max-steps", "5"]
FORMS = [KEY, KEY[::-1], KEY.upper(), base64.b64encode(KEY.encode()).decode(), base64.b32encode(KEY.encode()).decode()]
FORMS += [KEY.encode().hex()]


def _edit(doc: dict[str, Any], how: str, canary: str) -> None:
    rnd = doc["rounds"][0]
    if how in ("run-dir-canary", "prefix-up", "seeds-moved"):  # a resumable state: the round would run again
        doc.update(status="RUNNING", stop_reason=None, holdout=None, episodes_used=0)
        rnd["status"] = "proposed"
        for k in ("scores", "comparisons", "decision", "perfect"):
            rnd.pop(k, None)
    edits = {
        "rounds-int": lambda: doc.update(rounds=5),
        "round-no-status": lambda: rnd.pop("status"),
        "candidate-other-keys": lambda: rnd.update(candidates=[{"x": 1}]),
        "unknown-key": lambda: doc.update(evil=1),
        "run-dir-canary": lambda: rnd.update(run_dir=f"{canary}/victim"),
        "prefix-up": lambda: doc.update(runs_prefix="../../escaped"),
        "holdout-dir": lambda: doc["holdout"].update(run_dir="/tmp/rbh-holdout"),
        "seeds-moved": lambda: rnd.update(seeds=[0, 2]),
        "incumbent": lambda: doc.update(incumbent="jump"),
        "long-text": lambda: rnd.update(incumbent=KEY + "a" * 5000),
        "episodes-used": lambda: doc.update(episodes_used="6"),
        "decision-null": lambda: rnd.update(decision=None),
    }
    edits[how]()


def doctored_states(r: Any, n: int) -> None:
    sound = r.work / "opt-sound" / "s"
    r.cli(*SEARCH, "--out", sound, "--proposer", "drop", "--start", "reach the goal")
    kinds = ["rounds-int", "round-no-status", "candidate-other-keys", "unknown-key", "run-dir-canary", "prefix-up",
             "holdout-dir", "seeds-moved", "incumbent", "long-text", "episodes-used", "decision-null"]  # fmt: skip
    for i in range(max(n, len(kinds))):
        how = kinds[i] if i < len(kinds) else r.rng.choice(kinds)

        def plant(run: Path, how: str = how) -> None:
            out = run.parent / "s"
            shutil.copytree(sound, out)
            doc = json.loads((out / "optimize.json").read_text())
            _edit(doc, how, str(run.parent / "canary"))
            (out / "optimize.json").write_text(json.dumps(doc))

        args = [*SEARCH, "--out", "DIR/s", "--proposer", "drop", "--start", "reach the goal"]
        r.case(f"r9-opt-state-{how}-{i}", plant, args, {2}, True, "is damaged")


class _Echo(BaseHTTPRequestHandler):
    form = "plain"

    def log_message(self, *_a: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        k = self.headers.get("authorization", "").removeprefix("Bearer ")
        content: Any = {
            "plain": f"move to the goal {k}\nreach it",
            "reversed": f"move {k[::-1]} now\nreach it",
            "upper": f"{k.upper()}\nreach it",
            "base64": f"go {base64.b64encode(k.encode()).decode()}\nreach it",
            "base32": f"go {base64.b32encode(k.encode()).decode()}\nreach it",
            "hex": f"go {k.encode().hex()}\nreach it",
            "split": f"reach {k[:12]}\n{k[12:]} now",
            "long": f"{k} " + "a" * 5000 + "\nreach it",
            "object": {"k": k},
            "null": None,
        }[type(self).form]
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def echoing_provider(r: Any, n: int) -> None:
    forms = ["plain", "reversed", "upper", "base64", "base32", "hex", "split", "long", "object", "null"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    saved = dict(r.env)
    r.env.update(ROLLBENCH_LLM_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}/v1", ROLLBENCH_LLM_API_KEY=KEY)
    try:
        for i in range(max(n, len(forms))):
            _Echo.form = forms[i] if i < len(forms) else r.rng.choice(forms)
            cid = f"r9-opt-llm-{_Echo.form}-{i}"
            exits = {1} if _Echo.form in ("object", "null") else {0}
            before = len(r.failures)
            r.case(cid, lambda _run: None, [*SEARCH, "--out", "DIR/s", "--proposer", "llm", "--json"], exits, True)
            out = r.work / "cases" / cid / "s"
            if len(r.failures) == before and out.exists():
                for p in (q for q in out.rglob("*") if q.is_file()):
                    if any(f.encode() in p.read_bytes() for f in FORMS):
                        r.failures.append(f"{cid}: the API key is in {p}")
    finally:
        r.env.clear()
        r.env.update(saved)
        server.shutdown()


def run_all(r: Any, n: int) -> None:
    doctored_states(r, n)
    echoing_provider(r, n)
