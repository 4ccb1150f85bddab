"""Text from outside never reaches a terminal, a run file or an MCP client as it was sent (hostile round 3: F3, F7,
F8): a recorded error with terminal escapes is graded through the CLI as one line with visible escapes; a policy
server's error reply (echoing the client's token, escapes and newlines) is named by its status and size only, in the
run files, the CLI's output and MCP ``get_run``; a server's metadata over 64 KiB is refused before any episode.

Real parts: ``rollbench`` CLI subprocesses, a loopback ``ThreadingHTTPServer`` policy server, the real writer (the
tampered column is edited afterwards with pyarrow, as someone handing over a run could), a real MCP server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rollbench
from mcp_support import mcp_session, structured
from rollbench.core.format import printable

SRC = str(Path(rollbench.__file__).resolve().parents[1])
TOKEN = "TOPSECRETTOKEN123456-foreign-text"
ESC = "\x1b"
# what a hostile error text does on a terminal: up a line, erase it (three times), then a green "status: OK"
REPAINT = f"x{ESC}[1A{ESC}[2K{ESC}[1A{ESC}[2K{ESC}[32mstatus: OK - all recorded{ESC}[0m\n[bold]styled[/bold]\u202eevil"


def rb(*args: object, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), "COLUMNS": "200"}
    env.pop("ROLLBENCH_SERVER_TOKEN", None)
    if token is not None:
        env["ROLLBENCH_SERVER_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "rollbench", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@contextmanager
def policy_server(metadata: dict[str, Any], echo_error: bool) -> Iterator[str]:
    """A loopback JSON /act server: GET answers ready with ``metadata``; POST answers HTTP 500 whose ``error`` echoes
    the request's Authorization header with escapes and newlines (``echo_error``), else a zero action."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, doc: dict[str, Any]) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._reply(200, {"ready": True, "metadata": metadata})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if echo_error:
                said = f"SECRET-REPLY-{self.headers.get('Authorization')}\n{ESC}[31mred{ESC}[0m [bold]x[/bold]"
                self._reply(500, {"error": said})
            else:
                self._reply(200, {"actions": [[0.0, 0.0]]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/act"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _eval(url: str, out: Path, token: str | None = None) -> subprocess.CompletedProcess[str]:
    return rb(
        "eval", "--env", "scripted/reach", "--policy", url, "--episodes", "2", "--max-steps", "3", "--out", out,
        token=token,
    )  # fmt: skip


def _tamper_errors(run: Path, text: str) -> None:
    """Replace every recorded ``rollbench/error`` value of ``run`` by ``text``, as bin/tamper.py of the round did."""
    for f in sorted(run.glob("meta/episodes/**/*.parquet")):
        table = pq.read_table(f)
        rows = table.to_pylist()
        for r in rows:
            if r["rollbench/error"]:
                r["rollbench/error"] = text
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), f)


def _all_bytes(run: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file())


def test_printable_escapes_controls_escapes_newlines_and_bidi_and_keeps_other_text() -> None:
    assert (
        printable("a\x1b[31mb\nc\u202ed\x85e\x7f\tf\u2066g é ✓") == "a\\x1b[31mb\\nc\\u202ed\\x85e\\x7f\\tf\\u2066g é ✓"
    )
    assert printable("two\nlines\x1b", keep_newlines=True) == "two\nlines\\x1b"


@pytest.mark.slow
def test_a_tampered_error_column_is_graded_through_the_cli_as_one_escaped_line_per_error(tmp_path: Path) -> None:
    with policy_server({"needs_images": False}, echo_error=True) as url:
        made = _eval(url, tmp_path / "run")
    assert made.returncode == 1, made.stderr  # FAILED: both episodes ended in error
    _tamper_errors(tmp_path / "run", REPAINT)
    graded = rb("grade", tmp_path / "run")
    shown = graded.stdout + graded.stderr
    assert ESC not in shown and "\u202e" not in shown
    error_lines = [line for line in shown.splitlines() if "ended in error" in line]
    expected = (
        "x\\x1b[1A\\x1b[2K\\x1b[1A\\x1b[2K\\x1b[32mstatus: OK - all recorded\\x1b[0m\\n[bold]styled[/bold]\\u202eevil"
    )
    assert error_lines == [
        f"  - episode {i} (scripted/reach, seed {i}) ended in error (policy fault): {expected}" for i in (0, 1)
    ]
    assert [line for line in shown.splitlines() if line.startswith("status:")] == [
        "status: FAILED — 2 of 2 requested episodes recorded"
    ]
    as_json = json.loads(rb("grade", tmp_path / "run", "--json").stdout)
    assert [e["error"] for e in as_json["episodes"]] == [REPAINT, REPAINT]  # the data itself is kept as recorded


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_servers_error_reply_reaches_no_run_file_cli_output_or_mcp_result(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with policy_server({"needs_images": False}, echo_error=True) as url:
        made = _eval(url, root / "echo", token=TOKEN)
    assert made.returncode == 1, made.stderr
    recorded = json.loads(rb("grade", root / "echo", "--json").stdout)
    said = "HTTP 500, a reply of {} bytes (not shown: a server's text is never quoted)"
    errors = [e["error"] for e in recorded["episodes"]]
    size = len(
        json.dumps(
            {"error": f"SECRET-REPLY-Bearer {TOKEN}\n{ESC}[31mred{ESC}[0m [bold]x[/bold]"}
        ).encode()  # the server's body, built here as the handler builds it
    )
    assert errors == [f"EpisodeError: server error from {url}: {said.format(size)}"] * 2
    graded = rb("grade", root / "echo")
    with anyio.fail_after(120):
        async with mcp_session(root) as s:
            got = structured(await s.call_tool("get_run", {"run_id": "echo"}))
    mcp_text = json.dumps(got, ensure_ascii=False)
    for where in (made.stdout + made.stderr, graded.stdout + graded.stderr, mcp_text):
        assert TOKEN not in where and "SECRET-REPLY" not in where and ESC not in where
    assert TOKEN.encode() not in _all_bytes(root / "echo") and b"SECRET-REPLY" not in _all_bytes(root / "echo")
    assert said.format(size) in mcp_text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
def test_server_metadata_over_64_kib_is_refused_before_any_episode_and_below_it_is_recorded_whole(
    tmp_path: Path,
) -> None:
    big = {"needs_images": False, "junk": "A" * (64 * 1024)}
    with policy_server(big, echo_error=False) as url:
        refused = _eval(url, tmp_path / "big")
    size = len(json.dumps(big, separators=(",", ":")).encode())  # 65,571 bytes as compact JSON
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert lines[0] == (
        f"error: the policy server {url} sent metadata of {size} bytes as JSON, more than the 65536 bytes rollbench "
        "records in run.json; nothing was run"
    )
    assert not (tmp_path / "big").exists()
    fits = {"needs_images": False, "junk": "A" * (60 * 1024)}
    with policy_server(fits, echo_error=False) as url:
        made = _eval(url, tmp_path / "fits")
    assert made.returncode == 0, made.stderr
    run = json.loads((tmp_path / "fits" / "run.json").read_text())
    assert run["plan"]["policy"]["provenance"]["server_metadata"] == fits


@pytest.mark.slow
def test_a_server_echoing_the_clients_token_in_its_metadata_never_gets_it_recorded(tmp_path: Path) -> None:
    token = "zqTOKzq7788-echoed-back"
    echoed = {"needs_images": False, "note": f"you sent Bearer {token}", token: "as a key", "tok": [token]}
    with policy_server(echoed, echo_error=False) as url:
        made = _eval(url, tmp_path / "run", token=token)
    assert made.returncode == 0, made.stderr
    assert token.encode() not in _all_bytes(tmp_path / "run") and token not in made.stdout + made.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["plan"]["policy"]["provenance"]["server_metadata"] == {
        "needs_images": False,
        "note": "you sent Bearer <ROLLBENCH_SERVER_TOKEN>",
        "<ROLLBENCH_SERVER_TOKEN>": "as a key",
        "tok": ["<ROLLBENCH_SERVER_TOKEN>"],
    }


# A token with a padded base64 form whose standard and URL-safe alphabets differ ("/" and "+" vs "_" and "-");
# every echoed form below was written out by hand from ``printf %s "$T" | base64`` and ``xxd -p``.
ECHOED = "zq?TOK>zq7788-echoed~~"
ECHOED_FORMS = [
    ("exact", f"a {ECHOED} b"),
    ("upper", "a ZQ?TOK>ZQ7788-ECHOED~~ b"),
    ("lower", "a zq?tok>zq7788-echoed~~ b"),
    ("base64", "a enE/VE9LPnpxNzc4OC1lY2hvZWR+fg== b"),
    ("base64 unpadded", "a enE/VE9LPnpxNzc4OC1lY2hvZWR+fg b"),
    ("urlsafe base64", "a enE_VE9LPnpxNzc4OC1lY2hvZWR-fg== b"),
    ("urlsafe base64 unpadded", "a enE_VE9LPnpxNzc4OC1lY2hvZWR-fg b"),
    ("base64 upper-cased", "a ENE/VE9LPNPXNZC4OC1LY2HVZWR+FG== b"),
    ("hex", "a 7a713f544f4b3e7a71373738382d6563686f65647e7e b"),
    ("HEX", "a 7A713F544F4B3E7A71373738382D6563686F65647E7E b"),
]


@pytest.mark.parametrize(("form", "text"), ECHOED_FORMS, ids=[f for f, _ in ECHOED_FORMS])
def test_every_echoed_form_of_the_token_in_metadata_is_replaced_by_its_placeholder(
    monkeypatch: pytest.MonkeyPatch, form: str, text: str
) -> None:
    from rollbench.policies.remote.base import bounded_metadata

    monkeypatch.setenv("ROLLBENCH_SERVER_TOKEN", ECHOED)
    recorded = bounded_metadata("http://127.0.0.1:1/act", {"note": text, text: [text]})
    assert recorded == {
        "note": "a <ROLLBENCH_SERVER_TOKEN> b",
        "a <ROLLBENCH_SERVER_TOKEN> b": ["a <ROLLBENCH_SERVER_TOKEN> b"],
    }


@pytest.mark.slow
def test_a_server_echoing_the_token_in_any_form_gets_none_of_them_into_the_run_or_cli_output(tmp_path: Path) -> None:
    echoed = {"needs_images": False, **{form: text for form, text in ECHOED_FORMS}}
    with policy_server(echoed, echo_error=False) as url:
        made = _eval(url, tmp_path / "run", token=ECHOED)
    assert made.returncode == 0, made.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["plan"]["policy"]["provenance"]["server_metadata"] == {
        "needs_images": False,
        **{form: "a <ROLLBENCH_SERVER_TOKEN> b" for form, _ in ECHOED_FORMS},
    }
    graded = rb("grade", tmp_path / "run", "--json")
    everything = _all_bytes(tmp_path / "run") + (made.stdout + made.stderr + graded.stdout + graded.stderr).encode()
    for _, text in ECHOED_FORMS:
        form = text[2:-2]
        assert form.encode() not in everything and form.lower().encode() not in everything.lower(), form
