"""Hostile-reply classes of issue 42 (hostile round 5, F1/F2/F8), run by ``scripts/hostile_inputs.py`` on its
:class:`Runner`: a policy server or model provider that puts the client's credential into what it answers.

A raw loopback TCP server (it can send what no HTTP library would) answers ``rollbench eval`` with one hostile reply
kind at one stage (readiness, reset, act), every reply carrying the ``Authorization`` header it received, transformed
by a seeded choice (as sent, reversed, upper-cased, base16-free words around it). Kinds: a malformed header line
(h11 quotes it), a ``101`` with the token as ``Upgrade`` (websockets quotes it), a dtype, keys, a reset reply or a
batch status that is the token, a body that is not UTF-8, an error body; for ``agent:`` a provider's 400/401/429 body
with the key transformed, a ``Retry-After`` of ``nan``/``inf``/``-1``, a reply over the client's size cap.

Each case holds when: no traceback, exit 1 (the episode ended as an error) or 2 (refused before any episode, one
line), and the credential in none of its forms in stdout, stderr, any byte of the run directory or its decoded
parquet tables.
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

Answer = Callable[[str, str, dict[str, str], bytes], bytes]  # (method, path, headers, body) -> raw reply


def _reply(status: int, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _ok(doc: Any) -> bytes:
    return _reply(200, json.dumps(doc).encode())


class _Raw(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _serve(answer: Answer) -> _Raw:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = self.request.recv(4096)
                if not data:
                    return
                head += data
            raw, _, body = head.partition(b"\r\n\r\n")
            first, *lines = raw.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
            while len(body) < int(headers.get("content-length", "0") or 0):
                data = self.request.recv(65536)
                if not data:
                    break
                body += data
            method, path, *_ = [*first.split(" "), "", ""]
            self.request.sendall(answer(method, path, headers, body))

    server = _Raw(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _policy_peer(stage: str, hostile: Callable[[str], bytes], meta: dict[str, Any]) -> Answer:
    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        auth = headers.get("authorization", "")
        if method == "GET":
            return hostile(auth) if stage == "ready" else _ok({"ready": True, "metadata": meta})
        msg = json.loads(body)
        if "close" in msg:
            return _ok({"closed": True})
        if "reset" in msg and stage != "reset":
            return _ok({"reset": True})
        return hostile(auth)

    return answer


POLICY_KINDS: dict[str, Callable[[str], bytes]] = {
    "h11-header-line": lambda a: f"HTTP/1.1 200 OK\r\nbad-{a}\r\n\r\n".encode(),
    "ws-upgrade": lambda a: f"HTTP/1.1 101 S\r\nUpgrade: {a.replace(' ', '_')}\r\nConnection: Upgrade\r\n\r\n".encode(),
    "dtype": lambda a: _ok({"actions": {"dtype": a, "shape": [1, 2], "data": "AAAAAAAAAAA="}}),
    "keys": lambda a: _ok({a: [[0.0, 0.0]]}),
    "reset": lambda a: _ok({"reset": a}),
    "string-actions": lambda a: _ok({"actions": [[a, a]]}),
    "not-utf8": lambda a: _reply(200, b"\xff" + a.encode()),
    "error-body": lambda a: _reply(500, json.dumps({"error": a}).encode()),
    "batch-status": lambda a: _ok({"batch": [{"error": a, "status": a}, {"error": a, "status": a}]}),
}
HANDSHAKE_KINDS = ("ws-upgrade",)  # answered to the handshake itself
PROVIDER_KINDS: dict[str, Callable[[str], bytes]] = {
    "400-body": lambda a: _reply(400, json.dumps({"error": {"message": a, "type": a}}).encode()),
    "429-retry-after-nan": lambda a: _reply(429, a.encode(), "Retry-After: nan"),
    "429-retry-after-inf": lambda a: _reply(429, a.encode(), "Retry-After: inf"),
    "429-retry-after-negative": lambda a: _reply(429, a.encode(), "Retry-After: -1"),
    "200-not-json": lambda a: _reply(200, f"<p>{a}</p>".encode()),
    "over-the-cap": lambda a: _reply(200, a.encode() * (16 * 2**20 // max(1, len(a)) + 1)),
}
TRANSFORMS: dict[str, Callable[[str], str]] = {
    "as-sent": lambda a: a,
    "reversed": lambda a: a[::-1],
    "upper": lambda a: a.upper(),
    "wrapped": lambda a: f"you sent {a} to me",
}


def _forms(secret: str) -> list[str]:
    return [secret, secret[::-1], secret.upper()]


def _recorded(run: Path) -> str:
    if not run.exists():
        return ""
    parts = [p.read_bytes().decode("latin-1") for p in sorted(run.rglob("*")) if p.is_file()]
    try:
        import pyarrow.parquet as pq

        parts += [json.dumps(pq.read_table(p).to_pylist(), default=str) for p in sorted(run.rglob("*.parquet"))]
    except ImportError:  # the raw bytes above are then all that is checked
        pass
    return "\n".join(parts)


def _check(r: Any, cid: str, secret: str, args: list[str], env: dict[str, str], run: Path) -> None:
    r.count += 1
    try:
        p = subprocess.run(
            [r.rb, *args], capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        r.failures.append(f"{cid}: hung")
        return
    problems = []
    if "Traceback" in p.stdout + p.stderr:
        problems.append("traceback")
    if p.returncode not in (1, 2) or (p.returncode == 2 and len(p.stderr.strip().splitlines()) != 1):
        problems.append(f"exit {p.returncode}")
    seen = p.stdout + p.stderr + _recorded(run)
    if any(form in seen for form in _forms(secret)):
        problems.append("the secret was quoted")
    if problems:
        r.failures.append(f"{cid}: {', '.join(problems)}; stderr {p.stderr.strip()[-300:]!r}")


def policy_replies(r: Any, n: int) -> None:
    """Every policy-server kind once, then ``n`` seeded (kind, stage, transform) variants."""
    plan = [(k, "ready" if k in HANDSHAKE_KINDS else "act", "as-sent") for k in POLICY_KINDS]
    plan += [(r.rng.choice(list(POLICY_KINDS)), r.rng.choice(["ready", "reset", "act"]), r.rng.choice(list(TRANSFORMS)))
             for _ in range(n)]  # fmt: skip
    for i, (kind, stage, how) in enumerate(plan):
        cid = f"reply-policy-{kind}-{stage}-{how}-{i}"
        if r.pattern not in cid:
            continue
        secret = f"RBH5-{r.rng.randrange(16**8):08x}-token"
        hostile, stage = POLICY_KINDS[kind], "ready" if kind in HANDSHAKE_KINDS else stage
        server = _serve(_policy_peer(stage, lambda a, h=hostile, t=TRANSFORMS[how]: h(t(a)),
                                     {"needs_images": False, "reset": True, "max_batch": 2}))  # fmt: skip
        scheme = "ws" if kind == "ws-upgrade" else "http"
        url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        run = r.work / "replies" / cid
        batch = ["--batch-size", "2"] if kind == "batch-status" else []
        args = ["eval", "--env", "scripted/reach", "--policy", url, "--episodes", "2", "--max-steps", "3", *batch,
                "--policy-options", '{"retries": 0, "connect_timeout_s": 3}', "--out", str(run)]  # fmt: skip
        try:
            _check(r, cid, secret, args, {**r.env, "ROLLBENCH_SERVER_TOKEN": secret}, run)
        finally:
            server.shutdown()
            server.server_close()


def provider_replies(r: Any, n: int) -> None:
    """Every provider kind once, then ``n`` seeded (kind, transform) variants, through ``agent:local/m``."""
    plan = [(k, "as-sent") for k in PROVIDER_KINDS]
    plan += [(r.rng.choice(list(PROVIDER_KINDS)), r.rng.choice(list(TRANSFORMS))) for _ in range(n)]
    for i, (kind, how) in enumerate(plan):
        cid = f"reply-provider-{kind}-{how}-{i}"
        if r.pattern not in cid:
            continue
        key = f"sk-rbh5-{r.rng.randrange(16**12):012x}"
        hostile, transform = PROVIDER_KINDS[kind], TRANSFORMS[how]

        def answer(method: str, path: str, headers: dict[str, str], body: bytes, h: Any = hostile,
                   t: Any = transform) -> bytes:  # fmt: skip
            if method == "GET":
                return _ok({"data": [{"id": "m"}]})
            return h(t(headers.get("authorization", "")))

        server = _serve(answer)
        run = r.work / "replies" / cid
        env = {**r.env, "ROLLBENCH_AGENT_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
               "ROLLBENCH_AGENT_API_KEY": key}  # fmt: skip
        env.pop("ROLLBENCH_SERVER_TOKEN", None)
        args = ["eval", "--env", "scripted/reach", "--policy", "agent:local/m", "--episodes", "1", "--max-steps", "3",
                "--policy-options", '{"images": false, "retries": 1, "backoff_s": 0.01}', "--out", str(run)]  # fmt: skip
        try:
            _check(r, cid, key, args, env, run)
        finally:
            server.shutdown()
            server.server_close()


def run_all(r: Any, n: int) -> None:
    """Both classes, ``n`` seeded variants of each beyond one case per kind."""
    os.makedirs(r.work / "replies", exist_ok=True)
    policy_replies(r, n)
    provider_replies(r, n)
