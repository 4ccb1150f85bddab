"""A peer that was sent a secret (a policy server its bearer token, an LLM provider its API key) and echoes it back in
another form gets nothing recorded (hostile round 8, F1-F3): one detector (:mod:`rollbench.core.secret_echo`)
recognises the forms, and server metadata, agent transcripts and wire captures, and ``release`` replace the part that
holds one whole.

Oracle: every form is built here with the standard library (``base64``, ``codecs``, ``urllib.parse``, ``html``)
from the secret, independently of the detector; the end-to-end rows grep every byte of every recorded (or released)
file for the secret in any letter case and for each planted form's text. Real parts: rollbench's CLI in process
against real websocket and raw TCP servers on loopback (tests/hostile_peers.py) that act as the hostile policy
server or OpenAI-compatible provider.
"""

from __future__ import annotations

import base64
import codecs
import json
import random
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest

from cli_in_process import invoke
from hostile_peers import RawRequest, hostile_ws_server, http_reply, json_bytes, raw_http_server
from rollbench.core.secret_echo import SecretEcho, scrubbed

SECRET = "Rb7kQ2xW9mZt4LpN8vHc"  # a random-looking token, as servers and providers issue them
ACCENTED = "Zürich-Kennwort-93ßQ"  # not ASCII: its bytes differ between encodings
PLACEHOLDER = "<P>"


def _b(s: str) -> bytes:
    return s.encode()


# label -> the secret as a hostile peer may send it back (a JSON value). The hostile round's forms, then new ones.
FORMS: dict[str, Callable[[str], Any]] = {
    "upper case": lambda k: k.upper(),
    "swapped case": lambda k: k.swapcase(),
    "base64 of Bearer + token": lambda k: base64.b64encode(_b("Bearer " + k)).decode(),
    "base64 at another byte offset": lambda k: base64.b64encode(_b("x" + k)).decode(),
    "percent-encoded": lambda k: "".join(f"%{ord(c):02X}" for c in k),
    "base32": lambda k: base64.b32encode(_b(k)).decode(),
    "UTF-16 hex": lambda k: k.encode("utf-16-le").hex(),
    "split over two items": lambda k: [k[:7], k[7:]],
    "joined with zero-width spaces": lambda k: "\u200b".join(k),
    "reversed": lambda k: k[::-1],
    "array of its bytes": lambda k: list(_b(k)),
    "array of code points": lambda k: [ord(c) for c in k],
    "Bearer + token as bytes": lambda k: list(_b("Bearer " + k)),
    "JSON unicode escapes": lambda k: "".join(f"\\u{ord(c):04x}" for c in k),
    # not tried by the hostile round
    "base85": lambda k: base64.b85encode(_b(k)).decode(),
    "Ascii85": lambda k: base64.a85encode(_b(k)).decode(),
    "rot13": lambda k: codecs.encode(k, "rot13"),
    "every character separated by a dot": lambda k: ".".join(k),
    "JSON in a string in a string": lambda k: json.dumps({"x": json.dumps({"y": [ord(c) for c in k]})}),
    "HTML entities": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "decimal numbers in text": lambda k: ", ".join(str(ord(c)) for c in k),
    "0x numbers in text": lambda k: " ".join(hex(ord(c)) for c in k),
    "percent-encoded base64": lambda k: urllib.parse.quote(base64.b64encode(_b(k + "==")).decode(), safe=""),
    "base64 of UTF-16": lambda k: base64.b64encode(k.encode("utf-16-be")).decode(),
    "byte rows of a 2-D array": lambda k: [list(_b(k[:10])), list(_b(k[10:]))],
    "integral floats": lambda k: [float(ord(c)) for c in k],
    "split over nested containers": lambda k: [[k[:4]], {"a": k[4:11]}, [[k[11:]]]],
    "URL-safe base64 inside a sentence": lambda k: "see " + base64.urlsafe_b64encode(_b("id=" + k)).decode() + " ok",
    "split over an object's key and value": lambda k: {k[:9]: k[9:]},
    # hostile round 14, F9: characters moved or repeated rather than encoded
    "each pair of characters swapped": lambda k: "".join(k[i + 1 : i + 2] + k[i] for i in range(0, len(k), 2)),
    "every character doubled": lambda k: "".join(c * 2 for c in k),
    "every character tripled, dash-separated": lambda k: "-".join(c * 3 for c in k),
    "shuffled inside a sentence": lambda k: "your key is " + "".join(random.Random(3).sample(k, len(k))) + " ok",
    "reversed pairs in upper case": lambda k: "".join(k[i + 1 : i + 2] + k[i] for i in range(0, len(k), 2))[
        ::-1
    ].upper(),
    "sorted (fail closed: a permutation is not told from a reversible one)": lambda k: "".join(sorted(k)),
}
# forms of a secret that is not ASCII (its bytes in several encodings)
ACCENTED_FORMS: dict[str, Callable[[str], Any]] = {
    "UTF-8 bytes": lambda k: list(k.encode()),
    "Latin-1 bytes": lambda k: list(k.encode("latin-1")),
    "UTF-16-LE bytes": lambda k: list(k.encode("utf-16-le")),
    "base64 of UTF-8": lambda k: base64.b64encode(k.encode()).decode(),
    "NFKD (decomposed) upper case": lambda k: __import__("unicodedata").normalize("NFKD", k).upper(),
}
ORDINARY: dict[str, Any] = {
    "openpi metadata": {"action_horizon": 10, "norm_stats": {"state": {"mean": [0.1, 0.2], "std": [1.0, 2.5]}}},
    "a model name": "pi0_fast_droid",
    "a short string sharing letters": SECRET[:6],
    "the secret's letters in another order, one of them changed": "".join(sorted(SECRET))[:-1] + "y",
    "the secret's letters in another order, one of them dropped, twice": "".join(sorted(SECRET))[1:] * 2,
    "half the secret doubled": "".join(c * 2 for c in SECRET[:10]),
    "a megabyte of base64 of random bytes": base64.b64encode(random.Random(2).randbytes(750_000)).decode(),
    "every byte value in order": list(range(256)),
    "an image row": list(random.Random(0).randbytes(4096)),
    "base64 of random bytes": base64.b64encode(random.Random(1).randbytes(3000)).decode(),
    "English text": "Move the red block onto the green plate, then release the gripper. " * 20,
}


def _texts(value: Any) -> list[str]:
    """What a form looks like on disk: its JSON text, and each string in it (JSON-escaped and raw)."""
    out = [json.dumps(value)]
    if isinstance(value, str):
        out += [value, json.dumps(value)[1:-1]]
    return [t for t in out if len(t) >= 6]


@pytest.mark.parametrize("label", FORMS)
def test_each_form_of_the_secret_is_recognised_and_scrubbed_whole(label: str) -> None:
    form = FORMS[label](SECRET)
    echo = SecretEcho({"TOKEN": SECRET})
    assert echo.found(form) == "TOKEN"
    kept = scrubbed({"ok": "pi0", "echo": form, "n": 3}, echo, PLACEHOLDER)
    assert kept == {"ok": "pi0", "echo": PLACEHOLDER, "n": 3}


@pytest.mark.parametrize("label", ACCENTED_FORMS)
def test_a_secret_that_is_not_ascii_is_recognised_in_its_encodings(label: str) -> None:
    assert SecretEcho({"KEY": ACCENTED}).found(ACCENTED_FORMS[label](ACCENTED)) == "KEY"


@pytest.mark.parametrize("label", ORDINARY)
def test_ordinary_values_are_kept_unchanged(label: str) -> None:
    value = ORDINARY[label]
    echo = SecretEcho({"TOKEN": SECRET})
    assert echo.found(value) is None
    assert scrubbed({"v": value}, echo, PLACEHOLDER) == {"v": value}


def test_a_secret_with_fewer_than_8_letters_and_digits_is_never_reported() -> None:
    echo = SecretEcho({"SHORT": "ab-12_3!", "LONG": SECRET})
    assert echo.names == ["LONG"]
    assert SecretEcho({"SHORT": "ab-12_3!"}).found("ab-12_3! and AB123") is None


def test_the_exact_form_is_replaced_in_place_and_other_forms_whole() -> None:
    echo = SecretEcho({"TOKEN": SECRET})
    value = {"note": f"token {SECRET} refused", "list": ["ok", SECRET.upper()], "keep": [1, 2]}
    kept = scrubbed(value, echo, PLACEHOLDER, lambda s: s.replace(SECRET, PLACEHOLDER))
    assert kept == {"note": f"token {PLACEHOLDER} refused", "list": ["ok", PLACEHOLDER], "keep": [1, 2]}


def test_a_value_needing_more_work_than_the_bound_is_reported_as_holding(monkeypatch: pytest.MonkeyPatch) -> None:
    import rollbench.core.secret_echo as secret_echo

    value = {"x": ORDINARY["base64 of random bytes"]}
    assert SecretEcho({"TOKEN": SECRET}).found(value) is None  # clean within the bound
    monkeypatch.setattr(secret_echo, "WORK_FACTOR", 1)
    monkeypatch.setattr(secret_echo, "WORK_FLOOR", 0)
    assert SecretEcho({"TOKEN": SECRET}).found(value) == "TOKEN"  # fail closed: not recorded


# ---- end to end: what a run directory and a release hold -------------------------------------------------------


def _leaks(root: Path, planted: list[Any]) -> list[str]:
    """Every file under ``root`` whose bytes hold the secret in any letter case or a planted form's text."""
    found = []
    needles = [t.encode() for p in planted for t in _texts(p)]
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        if SECRET.lower().encode() in data.lower() or any(n in data for n in needles):
            found.append(str(f.relative_to(root)))
    return found


def _array(a: np.ndarray) -> dict[bytes, Any]:
    return {b"__ndarray__": True, b"data": a.tobytes(), b"dtype": a.dtype.str, b"shape": list(a.shape)}


def _eval(url: str, out: Path, *extra: str, env: dict[str, str], steps: int = 3) -> None:
    proc = invoke(
        "eval", "--env", "scripted/reach", "--policy", url, "--episodes", "1", "--max-steps", steps,
        "--out", out, *extra, env=env,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr


@pytest.mark.slow
def test_ws_server_metadata_echoing_the_token_as_arrays_records_none_of_it(tmp_path: Path) -> None:
    forms = {
        "k_u8": np.frombuffer(_b(SECRET), np.uint8),
        "k_i32": np.array([ord(c) for c in SECRET], np.int32),
        "k_bearer": np.frombuffer(_b("Bearer " + SECRET), np.uint8),
    }
    meta: dict[str, Any] = {k: _array(v) for k, v in forms.items()}
    meta.update(action_horizon=10, needs_images=False, note="SEKRETMARK")
    reply = msgpack.packb({"actions": _array(np.zeros((1, 2), np.float32))})
    env = {"ROLLBENCH_SERVER_TOKEN": SECRET}
    with hostile_ws_server(lambda i: reply, meta) as url:
        _eval(url, tmp_path / "run", env=env)
    recorded = json.loads((tmp_path / "run/run.json").read_text())["plan"]["policy"]["provenance"]["server_metadata"]
    placeholder = "<ROLLBENCH_SERVER_TOKEN>"
    assert recorded == {"k_u8": placeholder, "k_i32": placeholder, "k_bearer": placeholder, "action_horizon": 10,
                        "needs_images": False, "note": "SEKRETMARK"}  # fmt: skip
    planted = [v.tolist() for v in forms.values()]
    assert _leaks(tmp_path / "run", planted) == []


def _act_server(meta: dict[str, Any]) -> Callable[[RawRequest], bytes]:
    def answer(req: RawRequest) -> bytes:
        if req.method == "GET":
            return http_reply(200, json_bytes({"ready": True, "metadata": meta}))
        return http_reply(200, json_bytes({"actions": [[0.1, 0.1]]}))

    return answer


def test_http_server_metadata_echoing_the_token_encoded_records_none_and_release_cleans_an_old_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = {label: FORMS[label](SECRET) for label in FORMS}
    meta = {**{f"echo{i}": v for i, v in enumerate(planted.values())}, "model": "pi0_fast_droid", "horizon": 10}
    env = {"ROLLBENCH_SERVER_TOKEN": SECRET}
    with raw_http_server(_act_server(meta)) as url:
        _eval(url + "/act", tmp_path / "new", env=env)
        recorded = json.loads((tmp_path / "new/run.json").read_text())["plan"]["policy"]["provenance"]
        kept = recorded["server_metadata"]
        echoed = {k: v for k, v in kept.items() if k.startswith("echo")}
        assert len(echoed) == len(planted)
        # replaced whole, or (the token's own base64 at a byte boundary: token_forms) in place
        assert all("<ROLLBENCH_SERVER_TOKEN>" in v for v in echoed.values()), echoed
        assert (kept["model"], kept["horizon"]) == ("pi0_fast_droid", 10)
        assert _leaks(tmp_path / "new", list(planted.values())) == []
        # a run recorded before this detector: its metadata kept every form; release must remove them all
        import rollbench.policies.remote.base as remote_base

        monkeypatch.setattr(remote_base, "_without_token", lambda value, token: value)
        _eval(url + "/act", tmp_path / "old", env=env)
    assert _leaks(tmp_path / "old", list(planted.values())) != []  # the oracle sees the planted forms
    proc = invoke("release", tmp_path / "old", "--out", tmp_path / "rel", "--date", "2026-01-01", env=env)
    assert proc.returncode == 0, proc.stderr
    assert _leaks(tmp_path / "rel", list(planted.values())) == []
    released = json.loads((tmp_path / "rel/old/run.json").read_text())["plan"]["policy"]["provenance"]
    assert released["server_metadata"]["model"] == "pi0_fast_droid"


def _provider(key_forms: str, raw_content: str) -> Callable[[RawRequest], bytes]:
    """An OpenAI-compatible provider echoing the key: a header with it upper-cased, the reply's model,
    finish_reason, content and give_up reason holding ``key_forms``; the second call's content is
    ``raw_content`` spliced into the JSON text as it is (JSON escapes)."""

    def answer(req: RawRequest) -> bytes:
        echo = f"X-Echo: {SECRET.upper()}"
        if req.method == "GET":
            return http_reply(200, json_bytes({"data": [{"id": "m"}]}), echo)
        n_messages = len(json.loads(req.body)["messages"])
        if n_messages <= 2:
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "move_to", "arguments": '{"x": 0.9, "y": 0.9}'},
            }
            body = json_bytes({"model": key_forms, "choices": [{"finish_reason": key_forms, "message": {
                "role": "assistant", "content": key_forms, "tool_calls": [call]}}], "usage": {}})  # fmt: skip
            return http_reply(200, body, echo)
        give_up = {"id": "c2", "type": "function", "function": {"name": "give_up", "arguments": json.dumps(
            {"reason": key_forms})}}  # fmt: skip
        text = json.dumps({"model": "m", "choices": [{"finish_reason": "stop", "message": {
            "role": "assistant", "content": "RAW", "tool_calls": [give_up]}}]})  # fmt: skip
        return http_reply(200, text.replace('"RAW"', f'"{raw_content}"').encode(), echo)

    return answer


def test_an_agent_provider_echoing_the_key_leaves_it_in_no_transcript_or_wire_capture(tmp_path: Path) -> None:
    forms = [SECRET.upper(), SECRET.swapcase(), base64.b64encode(_b("Bearer " + SECRET)).decode(), SECRET[::-1],
             base64.b32encode(_b(SECRET)).decode(), ".".join(SECRET), FORMS["each pair of characters swapped"](SECRET),
             FORMS["every character doubled"](SECRET)]  # fmt: skip
    escaped = "".join(f"\\u{ord(c):04x}" for c in SECRET)
    env = {"ROLLBENCH_AGENT_API_KEY": SECRET}
    with raw_http_server(_provider(" ".join(["SEKRETMARK", *forms]), escaped)) as url:
        options = json.dumps({"base_url": url + "/v1", "images": False})
        _eval("agent:local/m", tmp_path / "run", "--policy-options", options, "--wire-capture", env=env, steps=200)
    run = tmp_path / "run"
    transcripts = list(run.glob("transcripts/**/*.jsonl"))
    wires = list(run.glob("wire/**/*.jsonl"))
    assert transcripts and wires
    assert _leaks(run, [*forms, escaped]) == []
    lines = [json.loads(x) for x in transcripts[0].read_text().splitlines()]
    calls = [x for x in lines if x["type"] == "call"]
    assert calls[0]["finish_reason"] == calls[0]["response_model"] == "<redacted:api_key>"
    give_up = [x for x in lines if x["type"] == "action" and x["tool"] == "give_up"]
    assert give_up[0]["arguments"] == {"reason": "<redacted:api_key>"}
    entries = [json.loads(x) for x in wires[0].read_text().splitlines()]
    assert {e["response"]["headers"]["x-echo"] for e in entries} == {"<redacted:api_key>"}
    assert entries[-1]["response"]["body"] == "<redacted:api_key>"  # the body held the key as JSON escapes
