"""Hostile-input classes of issue 42's last credential leaks, run by ``scripts/hostile_inputs.py`` on its
:class:`Runner` (each variant drawn from the runner's RNG, so another ``--seed`` gives new ones):

* a policy URL (as ``--policy`` or nested in ``--policy-options``) with a fragment (``#tok=S``, ``#S``) or a secret
  in its path (``/NAME=S/act``, ``/v1;NAME=S``, ``/NAME/S``; a secret name in any case): ``eval`` exits 2 with one
  line, the secret's bytes nowhere in its output, nothing written;
* a recorded run (as an older version wrote it) with header values nested at random depth under a credential
  container or a secret-named key in its policy options, ``Cookie:``/``Set-Cookie:`` text in its warnings, notes and
  a parquet text column, and a policy URL with a path or fragment secret: ``release`` exits 0 and no released file
  (parquet included) holds a byte of any planted secret.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

NAMES = ["token", "api_key", "API-KEY", "access_token", "Secret", "password", "sig", "auth"]
CONTAINERS = ["headers", "Headers", "extra_headers", "cookies", "credentials", "auth", "http_headers"]
HEADERS = ["X-Auth", "x-api-key", "Authorization", "Proxy-Authorization", "X-Session-Token", "Cookie", "ApiKey"]
PLAIN = ["X-Custom", "X-Tenant", "traceparent"]  # ordinary header names: credentials only under a container


def _secret(rng: Any) -> str:
    """A short secret of letters and digits (no format or entropy rule would catch it: only its place does)."""
    body = "".join(rng.choice(string.ascii_letters) for _ in range(5))
    return f"{body}{rng.randrange(10, 99)}q"


def _url(rng: Any, secret: str) -> tuple[str, str]:
    """A policy URL hiding ``secret``, and the words its refusal says."""
    name, base = (
        rng.choice(NAMES),
        f"{rng.choice(['http', 'https', 'ws', 'wss'])}://127.0.0.1:{rng.randrange(1, 65535)}",
    )
    form = rng.randrange(5)
    if form == 0:
        return f"{base}/act#{name}={secret}", "has a fragment"
    if form == 1:
        return f"{base}/v1/act#{secret}", "has a fragment"
    if form == 2:
        return f"{base}/{name}={secret}/act", "carries credentials"
    if form == 3:
        return f"{base}/v1;{name}={secret}", "carries credentials"
    return f"{base}/act/{name}/{secret}", "carries credentials"


def refused_urls(r: Any, n: int) -> None:
    """``eval`` refuses each URL in one line that never shows its secret; nothing is written."""
    for i in range(n):
        secret = _secret(r.rng)
        url, words = _url(r.rng, secret)
        cid = f"cred-url-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        out = r.work / "cases" / cid / "t"
        nested = r.rng.random() < 0.5
        where = ["--policy", "gpu-standin", "--policy-options", json.dumps({"inner": url})] if nested else [
            "--policy", url]  # fmt: skip
        res = r.cli("eval", "--env", "scripted/reach", *where, "--episodes", "1", "--out", out, check=False)
        said = res.stdout + res.stderr
        problems = [
            p
            for p, bad in (
                ("exit not 2", res.returncode != 2),
                ("not one line", len(res.stderr.strip().splitlines()) != 1),
                ("traceback", "Traceback" in said),
                (f"{words!r} not said", words not in said),
                ("the secret was echoed", secret in said),
                ("something was written", out.exists()),
            )
            if bad
        ]
        if problems:
            r.failures.append(f"{cid} ({url}): {', '.join(problems)}; stderr {res.stderr.strip()[-300:]!r}")


def _nest(rng: Any, value: str) -> dict[str, Any]:
    """``value`` under a credential container or a secret-named header, at a random depth."""
    inner: dict[str, Any] = {rng.choice(HEADERS): value}
    if rng.random() < 0.7:
        inner = {rng.choice(CONTAINERS): {rng.choice(HEADERS + PLAIN): value}}
    for _ in range(rng.randrange(3)):
        inner = {rng.choice(["client", "transport", "cfg"]): inner if rng.random() < 0.5 else [inner]}
    return inner


def released_leaks(r: Any, n: int) -> None:
    """``release`` of a run planted with header values, cookie text and URL secrets leaves no byte of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i in range(n):
        cid = f"cred-release-{i}"
        if r.pattern not in cid:
            continue
        r.count += 1
        secrets = [_secret(r.rng) for _ in range(4)]
        d = r.copy(cid)
        run = d / "run"
        url, _ = _url(r.rng, secrets[2])
        cookie = f"{r.rng.choice(['Cookie', 'Set-Cookie', 'cookie'])}: sid={secrets[1]}; Path=/"
        log = json.loads((run / "run.json").read_text())
        log["spec"].update(policy=url, policy_options={**_nest(r.rng, secrets[0]), "note": cookie})
        log["warnings"] = [f"the server answered 401 to {cookie}", f"served at {url}"]
        (run / "run.json").write_text(json.dumps(log, indent=2))
        (run / "notes.txt").write_text(f"{cookie}\n{url}\nX-Auth: {secrets[3]}\n")
        rows = run / "meta/episodes/chunk-000/file-000.parquet"
        pq.write_table(pq.read_table(rows).append_column("reason_text", pa.array([cookie])), rows)
        res = r.cli("release", run, "--out", d / "rel", "--date", "2026-01-01", "--allow-violations", check=False)
        leaked = [_around(p, s, d) for p in _files(d / "rel") for s in secrets if s.encode() in p.read_bytes()]
        if res.returncode != 0 or leaked or "Traceback" in res.stderr:
            r.failures.append(f"{cid}: exit {res.returncode}, secrets left in {leaked}; {res.stderr.strip()[-300:]!r}")


def _around(p: Path, secret: str, d: Path) -> str:
    """Where ``secret`` was left: the file and the text around it."""
    data = p.read_bytes()
    at = data.index(secret.encode())
    return f"{p.relative_to(d)}: {data[max(0, at - 60) : at + 20]!r}"


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.is_dir() else []


def run_all(r: Any, n: int) -> None:
    """Both classes above, ``n`` variants of each (half as many releases: each copies and scans a run)."""
    refused_urls(r, n)
    released_leaks(r, max(2, n // 2))
