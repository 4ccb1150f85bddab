"""A peer dashboard's own text never reaches the central dashboard's answers (issue 42, hostile round 6 F1 and F6):
a reason phrase, a header line that is no header, a status line, a chunk header, a redirect's Location, a body that
is not JSON, a body of the wrong JSON shape. Whatever the peer sent, `/`, `/api/runs`, `/api/run/...`,
`/api/episode/...` and the run and episode pages carry no byte of its marker, answer 200 (never a 500), and name
the failure in rollbench's words: the expected texts are written out by hand, sizes counted from what was sent.

Real parts: raw TCP servers on loopback that answer what each case says (tests/hostile_peers.py
``raw_http_server``: bytes no HTTP library would send) and the real central dashboard (uvicorn, in a thread).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from dashboard_support import ServerThread, peer_run
from hostile_peers import RawRequest, http_reply, raw_http_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

MARK = "PEERLEAK-sk-7731-QUOTED"
B = MARK.encode()
UNSHOWN = "(its text is not shown: it may quote the server's reply)"
LISTING = json.dumps({"runs": [peer_run()]}).encode()
STEPS = {"timestamp": [0.0, 0.1], "reward": [0.0, 1.0], "success": [False, True], "action": [[0.0], [1.0]]}

# one hostile answer per case: raw bytes a peer sends in place of a good answer
HOSTILE: dict[str, bytes] = {
    "reason phrase": b"HTTP/1.1 503 " + B + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    "404 reason and body": b"HTTP/1.1 404 " + B + b"\r\ncontent-length: 23\r\nconnection: close\r\n\r\n" + B,
    "bad header line": b"HTTP/1.1 200 OK\r\nx-ok: 1\r\n" + B + b" no colon\r\ncontent-length: 2\r\n\r\n{}",
    "status line": B + b" 200 OK\r\n\r\n",
    "chunk header": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + B + b"\r\n",
    "redirect location": b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:9/" + B + b"\r\ncontent-length: 0\r\n\r\n",
    "body not JSON": http_reply(200, b'{"runs": ' + B + b"}"),
    "body not UTF-8": http_reply(200, b"\xff\xfe" + B),
    "bad gzip": http_reply(200, b"\x1f\x8b" + B, "Content-Encoding: gzip"),
}
# the peer's failure as the central dashboard names it (without the "peer URL: " of the proxied answers)
NAMED: dict[str, str] = {
    "reason phrase": "HTTPStatusError: HTTP 503",
    "404 reason and body": "HTTPStatusError: HTTP 404",
    "bad header line": f"RemoteProtocolError {UNSHOWN}",
    "status line": f"RemoteProtocolError {UNSHOWN}",
    "chunk header": f"RemoteProtocolError {UNSHOWN}",
    "redirect location": "PeerError: it answered HTTP 302, a redirect, which is never followed",
    "body not JSON": f"PeerError: its answer is not JSON ({9 + len(B) + 1} bytes, not shown)",
    "body not UTF-8": f"PeerError: its answer is not JSON ({2 + len(B)} bytes, not shown)",
    "bad gzip": f"DecodingError {UNSHOWN}",
}
# answers that are JSON but not what a dashboard serves: the peer's strings inside are never quoted either
NOT_OBJECT = (http_reply(200, json.dumps([MARK]).encode()), "PeerError: its answer is not a JSON object")


def _shape(doc: object, named: str) -> tuple[bytes, str]:
    return http_reply(200, json.dumps(doc).encode()), named


RUN_SHAPES: dict[str, tuple[bytes, str]] = {
    "a list": NOT_OBJECT,
    "results a string": _shape(
        {"results": MARK}, "PeerError: its run answer's results are not an object with an object of tasks"
    ),
    "a task row of strings": _shape(
        {"results": {"tasks": {MARK: {"success_rate": MARK}}}},
        "PeerError: its run answer's results.tasks are not rows of rates, intervals and counts",
    ),
    "live a string": _shape({"live": MARK}, "PeerError: its run answer's live is not an object"),
    "warnings of objects": _shape(
        {"results": None, "warnings": [{MARK: MARK}]}, "PeerError: its run answer's warnings are not a list of strings"
    ),
}
EPISODE_SHAPES: dict[str, tuple[bytes, str]] = {
    "a list": NOT_OBJECT,
    "no steps": _shape(
        {MARK: STEPS}, "PeerError: its episode answer has no steps with timestamp, reward, success and action lists"
    ),
    "steps of strings": _shape(
        {"steps": {**STEPS, "reward": [MARK, MARK]}},
        "PeerError: its episode answer has a step value that is not a number",
    ),
    "steps of two lengths": _shape(
        {"steps": {**STEPS, "timestamp": [0.0]}}, "PeerError: its episode answer has step lists of different lengths"
    ),
    "an action row a string": _shape(
        {"steps": {**STEPS, "action": [MARK, MARK]}},
        "PeerError: its episode answer has an action row that is not a list",
    ),
}


def serve(tmp_path: Path, answer: Callable[[RawRequest], bytes], paths: list[str]) -> dict[str, httpx.Response]:
    """GET each of ``paths`` from a central dashboard whose one peer answers ``answer(request)``."""
    with raw_http_server(answer) as url:
        srv = ServerThread([], tmp_path / "labels.json", cache_dir=tmp_path / "cache", peers=[url]).start()
        try:
            got = {p: httpx.get(srv.url + p, timeout=60) for p in paths}
        finally:
            srv.stop()
    got["url"] = httpx.Response(200, text=url)
    return got


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_peer_listing_is_named_without_a_byte_of_its_text(tmp_path: Path, case: str) -> None:
    got = serve(tmp_path, lambda req: HOSTILE[case], ["/api/runs", "/"])
    for path in ("/api/runs", "/"):
        assert got[path].status_code == 200
        assert B not in got[path].content and B.lower() not in got[path].content.lower()
    hosts = got["/api/runs"].json()["hosts"]
    assert [(h["source"], h["host"], h["runs"], h["error"]) for h in hosts] == [(got["url"].text, None, 0, NAMED[case])]


def _detail(hostile: bytes, where: str) -> Callable[[RawRequest], bytes]:
    """A peer with a good listing whose ``where`` answers ("/api/run/" or "/api/episode/") are ``hostile``."""

    def answer(req: RawRequest) -> bytes:
        if req.path == "/api/runs":
            return http_reply(200, LISTING)
        if req.path.startswith(where):
            return hostile
        if req.path.startswith("/api/run/"):
            return http_reply(200, json.dumps({"results": None, "live": None, "warnings": []}).encode())
        return http_reply(200, json.dumps({"steps": STEPS}).encode())

    return answer


def _cases(shapes: dict[str, tuple[bytes, str]]) -> list[tuple[str, bytes, str]]:
    return [(c, HOSTILE[c], NAMED[c]) for c in sorted(HOSTILE)] + [(c, *shapes[c]) for c in sorted(shapes)]


RUN_CASES, EPISODE_CASES = _cases(RUN_SHAPES), _cases(EPISODE_SHAPES)


@pytest.mark.parametrize(("case", "hostile", "named"), RUN_CASES, ids=[c for c, _, _ in RUN_CASES])
def test_a_hostile_peer_run_answer_is_named_without_a_byte_of_its_text(
    tmp_path: Path, case: str, hostile: bytes, named: str
) -> None:
    got = serve(tmp_path, _detail(hostile, "/api/run/"), ["/api/run/h/r/n", "/run/h/r/n"])
    for path in ("/api/run/h/r/n", "/run/h/r/n"):
        assert got[path].status_code == 200 and B not in got[path].content
    doc = got["/api/run/h/r/n"].json()
    assert (doc["results"], doc["warnings"], doc["error"]) == (None, [], f"peer {got['url'].text}: {named}")


@pytest.mark.parametrize(("case", "hostile", "named"), EPISODE_CASES, ids=[c for c, _, _ in EPISODE_CASES])
def test_a_hostile_peer_episode_answer_is_named_without_a_byte_of_its_text(
    tmp_path: Path, case: str, hostile: bytes, named: str
) -> None:
    paths = ["/api/episode/h/r/n/0", "/episode/h/r/n/0"]
    got = serve(tmp_path, _detail(hostile, "/api/episode/"), paths)
    for path in paths:
        assert got[path].status_code == 200 and B not in got[path].content
    steps = got["/api/episode/h/r/n/0"].json()["steps"]
    assert steps == {
        "timestamp": [],
        "reward": [],
        "success": [],
        "action": [],
        "error": f"peer {got['url'].text}: {named}",
    }


def test_a_good_peer_episode_answer_is_drawn(tmp_path: Path) -> None:
    """The control of the table: the same peer answering well gives the steps it sent and no error."""
    got = serve(tmp_path, _detail(b"", "/nothing/"), ["/api/episode/h/r/n/0", "/api/run/h/r/n", "/episode/h/r/n/0"])
    assert got["/api/episode/h/r/n/0"].json()["steps"] == STEPS
    assert "error" not in got["/api/run/h/r/n"].json()
    assert got["/episode/h/r/n/0"].status_code == 200 and 'data-steps="2"' in got["/episode/h/r/n/0"].text


def test_a_peer_listing_without_model_or_urls_leaves_its_episodes_unknown_never_a_500(tmp_path: Path) -> None:
    """Hostile round 6 F6: before, the episode answer was a 500 with a KeyError traceback."""
    run = {k: v for k, v in peer_run().items() if k not in ("model", "urls")}
    listing = http_reply(200, json.dumps({"runs": [run]}).encode())
    got = serve(tmp_path, lambda req: listing, ["/api/runs", "/api/episode/h/r/n/0", "/api/run/h/r/n"])
    error = "PeerError: runs[0] has no model of the type a dashboard serves"
    assert [h["error"] for h in got["/api/runs"].json()["hosts"]] == [error]
    assert got["/api/episode/h/r/n/0"].status_code == 404
    assert got["/api/episode/h/r/n/0"].json() == {"error": "no episode h/r/n/0"}
    assert got["/api/run/h/r/n"].json() == {"error": "no run h/r/n"}


def test_a_peer_run_page_missing_what_it_draws_is_a_502_naming_the_peer(tmp_path: Path) -> None:
    """A task row that passes the API's check (no rate, so no interval needed) but lacks the counts the run page
    draws: the JSON answer carries it as sent, the page is a one-line 502, never a 500."""
    results = {"tasks": {MARK: {"success_rate": None, "ci95_low": None, "ci95_high": None}}}
    run_answer = http_reply(200, json.dumps({"results": results, "live": None, "warnings": []}).encode())
    got = serve(tmp_path, _detail(run_answer, "/api/run/"), ["/api/run/h/r/n", "/run/h/r/n"])
    assert got["/api/run/h/r/n"].status_code == 200 and got["/api/run/h/r/n"].json()["results"] == results
    assert got["/run/h/r/n"].status_code == 502
    assert got["/run/h/r/n"].json() == {
        "error": f"peer {got['url'].text}: its answer lacks what the page draws (UndefinedError)"
    }


JS = "javascript:alert(1)//" + MARK
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-hashes' 'sha256-GZIcz60Uwd6wT3vaYke/atSr53TehbYAPepOa3d03Vw='; "
    "style-src 'self'; img-src 'self'; media-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)  # the hash: `printf 'return false' | openssl dgst -sha256 -binary | base64`, the pages' onsubmit text


def test_a_peer_never_chooses_the_central_dashboards_links(tmp_path: Path) -> None:
    """Hostile round 7 F3: a peer's ``urls`` and video URLs (``javascript:``, or another run's route) are never drawn;
    every link to its run is the central's own route for the identity it checked, and every page carries the CSP."""
    run = peer_run()
    ep = {**run["episodes"][0], "key": "vm/point/r1/0", "urls": {"review": JS, "transcript": JS}}
    ep["videos"] = {"front": {"url": JS, "ready": True, "from_s": 0.0, "to_s": None}}
    listing = http_reply(200, json.dumps({"runs": [{**run, "urls": {"page": JS}, "episodes": [ep]}]}).encode())
    pages_ = ["/", "/run/h/r/n", "/episode/h/r/n/0", "/disagreements", "/api/runs", "/api/run/h/r/n"]
    good = _detail(b"", "/nothing/")
    got = serve(tmp_path, lambda req: listing if req.path == "/api/runs" else good(req), pages_)
    for path in pages_:
        assert got[path].status_code == 200, path
        assert b"javascript" not in got[path].content.lower() and B not in got[path].content, path
        assert got[path].headers["content-security-policy"] == CSP
        assert got[path].headers["x-content-type-options"] == "nosniff"
    assert '<a href="/run/h/r/n">h/r/n</a>' in got["/"].text
    assert "<a href='/episode/h/r/n/0'>0</a>" in got["/run/h/r/n"].text
    assert 'src="/media/h/r/n/0/front"' in got["/episode/h/r/n/0"].text
    assert "<a href='/transcript/h/r/n/0'>open</a>" in got["/episode/h/r/n/0"].text
    [listed] = got["/api/runs"].json()["runs"]
    assert listed["urls"] == {"page": "/run/h/r/n", "api": "/api/run/h/r/n"}
    assert [e["key"] for e in listed["episodes"]] == ["h/r/n/0"]


# fields the runs page reads when a peer sends them (an older peer may not): of another JSON type, the peer is bad
WRONG_OPTIONAL = {
    "live": ("running", "live"),
    "live.episodes_done": ({"episodes_done": "3", "episodes_total": 4, "stale": False}, "live.episodes_done"),
    "coverage": ("x", "coverage"),
    "scored_success_rate": ("q", "scored_success_rate"),
    "excluded a list": ([1], "excluded"),
    "excluded of strings": ({"policy": "two"}, "excluded"),
    "scored": (2.5, "scored"),
    "policy_errors_as_failures": ("yes", "policy_errors_as_failures"),
}


@pytest.mark.parametrize("case", sorted(WRONG_OPTIONAL))
def test_a_peer_run_with_an_optional_field_of_another_type_marks_the_peer_bad_and_the_page_stays_up(
    tmp_path: Path, case: str
) -> None:
    value, named = WRONG_OPTIONAL[case]
    field = case.split(" ")[0].split(".")[0]
    listing = json.dumps({"runs": [{**peer_run(), field: value}]}).encode()
    got = serve(tmp_path, lambda req: http_reply(200, listing), ["/api/runs", "/"])
    assert got["/"].status_code == got["/api/runs"].status_code == 200
    hosts = got["/api/runs"].json()["hosts"]
    error = f"PeerError: runs[0]{'.live' if '.' in case else ''} has no {named.split('.')[-1]} of the type a dashboard serves"
    assert [(h["host"], h["runs"], h["error"]) for h in hosts] == [(None, 0, error)]
    assert got["/api/runs"].json()["runs"] == []
