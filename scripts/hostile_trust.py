"""Hostile-input classes of issue 42 (credentials and the network, outputs, bounds, records checked against their
arms), run by ``scripts/hostile_inputs.py`` on its :class:`Runner` (each class seeded by the runner's RNG):

* a run.json naming a policy server (``http``/``https``/``ws``/``wss``, any host, port, path) or an
  ``agent:PROVIDER/MODEL``, then ``eval --resume``: exit 2 naming ``--trust-run``, nothing connects (a loopback
  recorder sees no request), the run unchanged;
* a run.json whose policy options name a policy (``gpu-standin``'s ``inner``: a server or an agent, nested at any
  depth), resumed with or without ``--policy`` typed again: exit 2 naming ``--trust-run``, nothing connects; a run of
  another spec refused before an agent spends the key; a foreign reply body never echoed;
* a run whose recorded plan or meta/info.json features no longer match what its spec resolves to, then ``eval
  --resume``: exit 2, nothing rewritten;
* an output option pointing inside a run (``robustness --figure``, ``serve-policy --log-requests``, ``release --out``,
  ``sequential --out``, ``mcp --root``, ``dashboard --cache-dir``/``--labels``): exit 2, nothing written;
* out-of-range bounds (``--look-every``, ``--stale-after``, ``--max-steps-ceiling``, ``--session-idle-s``,
  ``--request-timeout-s``): exit 2 stating the range;
* a perturbation whose control is its own task, another family's task or itself perturbed: every reader refuses;
* an MCP peer naming a URL the server was not started with: a tool error, no request reaches the URL, no body back;
* a finished run resumed again: no new ``executions`` entry.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SECRET = "hostile-internal-secret-91b2"


def _recorder() -> tuple[ThreadingHTTPServer, list[str]]:
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(self.path)
            body = SECRET.encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def _edit(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def resume_servers(r: Any, n: int) -> None:
    server, seen = _recorder()
    port = server.server_address[1]
    try:
        for i in range(n):
            scheme = r.rng.choice(["http", "https", "ws", "wss", "agent"])
            host = r.rng.choice(["127.0.0.1", "localhost", "[::1]", "127.1"])
            path = r.rng.choice(["", "/act", "/v1/x?y=1", "/%2e%2e/secret"])
            policy = (f"agent:{r.rng.choice(['openai', 'openrouter'])}/m-{i}" if scheme == "agent"
                      else f"{scheme}://{host}:{port}{path}")  # fmt: skip

            def plant(run: Path, policy: str = policy) -> None:
                _edit(run / "run.json", lambda log: log["spec"].update(policy=policy))

            before = len(seen)
            r.case(f"resume-server-{scheme}-{i}", plant, ["eval", "--resume", "RUN"], {2}, True, "--trust-run")
            if len(seen) != before:
                r.failures.append(f"resume-server-{scheme}-{i}: {policy} was contacted ({seen[before:]})")
    finally:
        server.shutdown()
        server.server_close()


def nested_inners(r: Any, n: int) -> None:
    """A run.json whose policy options name a policy (``gpu-standin``'s ``inner``: a server URL or an agent, at any
    depth), resumed plainly or with only ``--policy gpu-standin`` typed again: exit 2 naming ``--trust-run``, nothing
    connects; a run of another spec is refused before an agent policy spends the key; a foreign reply to the
    readiness probe is never echoed."""
    server, seen = _recorder()
    port = server.server_address[1]
    saved = dict(r.env)
    r.env.update(OPENAI_API_KEY="sk-hostile-nested", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1")
    try:
        for i in range(n):
            scheme = r.rng.choice(["http", "https", "ws", "wss", "agent"])
            inner = "agent:openai/m" if scheme == "agent" else f"{scheme}://127.0.0.1:{port}/act"
            options: dict[str, Any] = r.rng.choice([{"inner": inner}, {"x": [{"inner": inner}], "inner": "zero"}])
            typed = r.rng.choice([[], ["--policy", "gpu-standin"]])

            def plant(run: Path, options: dict[str, Any] = options) -> None:
                _edit(run / "run.json", lambda log: log["spec"].update(policy="gpu-standin", policy_options=options))

            before = len(seen)
            r.case(f"resume-inner-{scheme}-{i}", plant, ["eval", "--resume", "RUN", *typed], {2}, True, "--trust-run")
            if len(seen) != before:
                r.failures.append(f"resume-inner-{scheme}-{i}: {inner} was contacted ({seen[before:]})")
        before = len(seen)
        args = ["eval", "--env", "scripted/reach", "--policy", "agent:openai/m", "--episodes", "2", "--out", "RUN"]
        r.case("other-spec-agent", lambda run: None, args, {2}, True, "different spec")
        if len(seen) != before:
            r.failures.append(f"other-spec-agent: the agent called {seen[before:]} before the refusal")
        if r.pattern not in "foreign-body":
            return
        r.count += 1
        out = r.cli("eval", "--env", "scripted/reach", "--policy", f"http://127.0.0.1:{port}/act", "--out",
                    r.work / "foreign-body", check=False)  # fmt: skip
        if out.returncode != 2 or SECRET in out.stdout + out.stderr:
            r.failures.append(f"foreign-body: exit {out.returncode}, {out.stderr.strip()[-300:]!r}")
    finally:
        r.env.clear()
        r.env.update(saved)
        server.shutdown()
        server.server_close()


def plan_drift(r: Any, n: int) -> None:
    for i in range(n):
        how = r.rng.choice(["instruction", "max_steps", "fps", "cameras", "seed", "trial", "state", "action", "video"])
        value = r.rng.randrange(2, 99)

        def plant(run: Path, how: str = how, value: int = value) -> None:
            if how in ("instruction", "max_steps", "fps", "cameras"):
                own = {"max_steps": 50, "fps": 10}.get(how)  # scripted/reach's own: no drift
                other = value + 1 if value == own else value
                new = {"instruction": f"do {value}", "max_steps": other, "fps": other, "cameras": [f"c{value}"]}[how]
                _edit(run / "run.json", lambda log: log["plan"]["tasks"][0].update({how: new}))
            elif how in ("seed", "trial"):
                _edit(run / "run.json", lambda log: log["plan"]["episodes"][-1].update({how: value + 1000}))
            elif how == "video":
                _edit(
                    run / "meta/info.json", lambda d: d["features"].update({"observation.images.x": {"dtype": "video"}})
                )
            else:
                key = "observation.state" if how == "state" else "action"
                _edit(run / "meta/info.json", lambda d: d["features"][key].update(shape=[value]))

        r.case(f"resume-drift-{how}-{i}", plant, ["eval", "--resume", "RUN"], {2}, True, "no longer resolves")


def outputs_inside(r: Any) -> None:
    inside = r.rng.choice(["meta/info.json", "data/chunk-000/x", "run.json", "meta/new/deep.png", "."])
    place = "RUN" if inside == "." else f"RUN/{inside}"
    seq = ["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b", "random",
           "--budget", "6", "--out", place]  # fmt: skip
    commands = {
        "figure": ["robustness", "RUN", "--figure", place],
        "log-requests": ["serve-policy", "--policy", "zero", "--log-requests", place],
        "release": ["release", str(r.sound), "--out", f"RUN/{inside}-rel"],
        "sequential": seq,
        "mcp-root": ["mcp", "--root", f"RUN/{inside}-mcp"],
        "cache-dir": ["dashboard", "--root", "DIR/canary", "--cache-dir", f"RUN/{inside}-c"],
        "labels": ["dashboard", "--root", "DIR/canary", "--labels", place],
    }
    for name, args in commands.items():
        if name in ("figure", "log-requests", "labels") and inside == ".":
            continue  # a directory, not a file: refused for that first
        r.case(f"output-inside-{name}-{inside}", lambda run: None, args, {2}, True, "lies inside the run directory")


def bounds(r: Any) -> None:
    big = str(r.rng.choice([10**9, 10**12, 2**63]))
    tiny = r.rng.choice(["1e-300", "0.0", "-1", "nan", "0.05"])
    seq = ["sequential", "--env", "scripted/reach", "--delta", "0.2", "--policy-a", "zero", "--policy-b", "random",
           "--budget", "6", "--out", "DIR/seq"]  # fmt: skip
    cases = {
        "look-every": ([*seq, "--look-every", big], "--look-every must be between 1 and the budget"),
        "stale-after": (["dashboard", "--root", "DIR/canary", "--stale-after", r.rng.choice(["nan", "-1", "inf", "0"])],
                        "--stale-after must be"),
        "max-steps-ceiling": (["mcp", "--root", "DIR/mcp", "--max-steps-ceiling", big], "--max-steps-ceiling must be"),
        "session-idle": (["serve-policy", "--policy", "zero", "--session-idle-s", tiny], "--session-idle-s must be"),
        "request-timeout": (["serve-policy", "--policy", "zero", "--request-timeout-s", tiny],
                            "--request-timeout-s must be"),
    }  # fmt: skip
    for name, (args, words) in cases.items():
        r.case(f"bound-{name}", lambda run: None, args, {2}, True, words)


def controls(r: Any, n: int) -> None:
    for i in range(n):
        how = r.rng.choice(["itself", "family", "mutual"])
        k = r.rng.randrange(3)

        def plant(run: Path, how: str = how, k: int = k) -> None:
            def change(log: dict[str, Any]) -> None:
                eps = log["plan"]["episodes"]
                block = {"category": "position", "level": None, "detail": "x"}
                if how == "itself":
                    eps[k]["perturbation"] = {**block, "control": eps[k]["task"]}
                elif how == "family":
                    eps[k]["perturbation"] = {**block, "control": "metaworld/reach-v3"}
                else:
                    eps[0]["task"], eps[1]["task"] = "scripted/push", "scripted/reach"
                    eps[0]["perturbation"] = {**block, "control": "scripted/reach"}
                    eps[1]["perturbation"] = {**block, "control": "scripted/push"}

            _edit(run / "run.json", change)

        for cmd in ("robustness", "summarize", "grade"):
            r.case(f"control-{how}-{cmd}-{i}", plant, [cmd, "RUN"], {2}, True, "control")


def idle_resume(r: Any) -> None:
    cid = "resume-finished-twice"
    if r.pattern not in cid:
        return
    r.count += 1
    run = r.copy(cid) / "run"
    before = json.loads((run / "run.json").read_text())["executions"]
    for _ in range(2):
        r.cli("eval", "--resume", run, check=False)
    after = json.loads((run / "run.json").read_text())["executions"]
    if after != before:
        r.failures.append(f"{cid}: executions grew from {len(before)} to {len(after)}")


def mcp_servers(r: Any, n: int) -> None:
    if r.pattern not in "mcp-server-urls":
        return
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server, seen = _recorder()
    port = server.server_address[1]
    names = [f"{r.rng.choice(['http', 'https', 'ws', 'wss'])}://127.0.0.1:{port}/{i}" for i in range(n)]
    names.append(f"agent:openai/m-{r.rng.randrange(99)}")

    async def main() -> list[tuple[bool, str]]:
        params = StdioServerParameters(command=r.rb, args=["mcp", "--root", str(r.work / "mcp-runs")], env=r.env)
        out = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for name in names:
                res = await s.call_tool("run_policy_rollout", {"policy": name, "env": "scripted/reach",
                                                               "n_episodes": 1, "max_steps": 3})  # fmt: skip
                out.append((res.is_error, " ".join(getattr(c, "text", "") for c in res.content)))
        return out

    try:
        results = anyio.run(main)
    finally:
        server.shutdown()
        server.server_close()
    for name, (is_error, text) in zip(names, results, strict=True):
        r.count += 1
        if not is_error or "--allow-policy" not in text or SECRET in text:
            r.failures.append(f"mcp-server-urls {name}: error={is_error} {text[:200]!r}")
    if seen:
        r.failures.append(f"mcp-server-urls: the MCP server contacted {seen}")


def run_all(r: Any, n: int) -> None:
    """Every class above, ``n`` variants of the randomised ones."""
    resume_servers(r, n)
    nested_inners(r, n)
    plan_drift(r, n)
    outputs_inside(r)
    bounds(r)
    controls(r, max(2, n // 2))
    idle_resume(r)
    mcp_servers(r, max(2, n // 2))
