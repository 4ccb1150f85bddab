"""Hostile round 13: what another interpreter sends rollbench over a pipe or prints to it is read strictly.

F17: a pipe frame header (``wire/pipe/frames.py``, shared by the env host and the LeRobot policy host) nested past
32 maps and lists, holding an integer of 5000 digits or a key twice is a FrameError in plain words, never a
RecursionError or ValueError traceback. F16: an env host interpreter's version probe
(``envs/hosted/remote.venv_versions``) that prints anything but a JSON object mapping the asked distributions to
version strings or null is refused with exit 2 and one line naming the interpreter. Expected texts are written out
by hand; depths are counted by hand (the header object is level 1).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from pathlib import Path

import pytest

import rollbench.wire.pipe.frames as frames
from conftest import run_cli
from rollbench.core.contracts import ConfigError
from rollbench.envs.hosted.remote import venv_versions
from rollbench.wire.pipe.child import ChildFailed, ChildProcess


def read_header(header: bytes) -> dict:
    """The message of a frame holding ``header``, written by a thread (a header may exceed the pipe's buffer)."""
    r, w = os.pipe()
    writer = threading.Thread(target=frames.write_frame, args=(w, b"RBLR" + struct.pack(">I", len(header)) + header))
    writer.start()
    try:
        return frames.FrameReader(r).read(timeout_s=30)[0]
    finally:
        os.close(r)  # a writer still blocked gets PeerGone
        writer.join(timeout=30)
        os.close(w)


def nested(levels: int) -> bytes:
    """A header object (level 1) whose "v" holds ``levels - 1`` lists, one inside the other."""
    return b'{"op": "x", "v": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"


DEEP = "frame header nests maps and lists more than 32 deep"


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (nested(33), DEEP),  # parsed, then measured
        (b'{"op": "hello", "info": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", DEEP),  # the parser's own recursion
        (b'{"op": "hello", "info": ' + b"9" * 5000 + b"}", "frame header holds an integer too long to convert"),
        (b'{"op": "x", "op": "y"}', "frame header has a key twice in one object"),
        (b'{"op": "x", "v": {"a": 1, "a": 2}}', "frame header has a key twice in one object"),
    ],
    ids=["33-deep", "100000-deep", "5000-digit-int", "key-twice", "nested-key-twice"],
)
def test_a_frame_header_too_deep_too_long_a_number_or_a_key_twice_is_a_frame_error(header: bytes, error: str) -> None:
    with pytest.raises(frames.FrameError) as caught:
        read_header(header)
    assert str(caught.value).startswith(error)


def test_a_frame_header_32_deep_with_a_4300_digit_integer_is_read_whole() -> None:
    expected: list = []
    for _ in range(30):  # 31 lists in all, inside the header object: 32 levels
        expected = [expected]
    assert read_header(nested(32))["v"] == expected
    assert read_header(b'{"op": "x", "n": ' + b"7" * 4300 + b"}")["n"] == int("7" * 4300)


HOST = """
import sys
sys.path.insert(0, {pipe_dir!r})
import frames
a = sys.argv[1:]
reader, out = frames.FrameReader(int(a[a.index("--in-fd") + 1])), int(a[a.index("--out-fd") + 1])
frames.write_frame(out, frames.encode({{"op": "hello", "info": {{}}}}))
reader.read()
header = b'{{"op": "ok", "v": ' + b"[" * 100000 + b"]" * 100000 + b"}}"
frames.write_frame(out, b"RBLR" + len(header).to_bytes(4, "big") + header)
reader.read()
"""


def test_a_deep_reply_mid_run_is_the_child_s_failure_named_in_plain_words(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST.format(pipe_dir=frames.PIPE_DIR))
    child = ChildProcess("test host", [sys.executable, str(script)], 60.0, dict(os.environ))
    try:
        with pytest.raises(ChildFailed) as caught:
            child.call({"op": "step"}, None, 60.0)
    finally:
        child.close()
    assert str(caught.value).startswith(f"test host failed during step ({DEEP}; exit code ")
    assert "Recursion" not in str(caught.value)


def test_a_hello_whose_info_is_not_an_object_is_a_start_failure(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST.format(pipe_dir=frames.PIPE_DIR).replace('"info": {}', '"info": [1, 2]'))
    with pytest.raises(ChildFailed) as caught:
        ChildProcess("test host", [sys.executable, str(script)], 60.0, dict(os.environ))
    assert str(caught.value) == "test host did not start (its hello's info is not a JSON object)"


def probe(tmp_path: Path, name: str, prints: str) -> str:
    """An interpreter whose ``-c`` probe prints ``prints`` (a Python expression's value, printed) and exits 0."""
    path = tmp_path / name
    path.write_text(f'#!/bin/sh\nexec {sys.executable} -c "print({prints})"\n')
    path.chmod(0o755)
    return str(path)


EXPECTED = "expected one JSON object mapping gymnasium, numpy to a version string (at most 200 characters) or null"


@pytest.mark.parametrize(
    ("prints", "what"),
    [
        ("[1,2,3]", "a list of 3 items"),
        ("'['*20000 + ']'*20000", "output that is not strict JSON (the message nests maps and lists more than 32 deep)"),
        ("'['*100000 + ']'*100000", "200,001 bytes (at most 65,536 are read)"),
        ("'{\\\"gymnasium\\\": \\\"1.0\\\"}'", "an object of 1 key whose keys are not the distributions asked for"),
        ("'{\\\"gymnasium\\\": 1, \\\"numpy\\\": null}'", "a number as the version of gymnasium"),
        ("'{\\\"gymnasium\\\": \\\"' + 'x'*201 + '\\\", \\\"numpy\\\": null}'", "a string of 201 characters as the version of gymnasium"),
        ("'not json'", "output that is not strict JSON (not JSON (Expecting value at line 1 column 1))"),
    ],
    ids=["list", "deep", "too-long", "missing-key", "number", "long-version", "not-json"],
)  # fmt: skip
def test_a_version_probe_printing_anything_but_the_expected_object_is_refused_naming_the_interpreter(
    tmp_path: Path, prints: str, what: str
) -> None:
    python = probe(tmp_path, "python", prints)
    with pytest.raises(ConfigError) as caught:
        venv_versions(python, ("gymnasium", "numpy"))
    assert str(caught.value) == f"the env host interpreter {python}: its version probe printed {what}; {EXPECTED}"


def test_a_version_probe_printing_the_expected_object_gives_its_versions(tmp_path: Path) -> None:
    python = probe(tmp_path, "python", '\'{\\"gymnasium\\": \\"1.2.3\\", \\"numpy\\": null}\'')
    assert venv_versions(python, ("gymnasium", "numpy")) == {"gymnasium": "1.2.3", "numpy": None}


@pytest.mark.slow
def test_eval_with_an_env_host_whose_version_probe_prints_a_list_exits_2_with_one_line(tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo "[1,2,3]"; exit 0; fi\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "run"
    proc = run_cli("eval", "--env", f"hostedgym:{python}:CartPole-v1", "--policy", "random", "--episodes", "1",
                   "--max-steps", "5", "--out", out)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert " ".join(proc.stderr.split()) == (
        f"error: the env host interpreter {python}: its version probe printed a list of 3 items; {EXPECTED}"
    )
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("header", "why"),
    [
        (b'{"op": "hello", "info": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", DEEP),
        (b'{"op": "hello", "info": ' + b"9" * 5000 + b"}", "frame header holds an integer too long to convert (over 4300 digits)"),
    ],
    ids=["deep", "5000-digits"],
)  # fmt: skip
def test_eval_with_an_env_host_whose_hello_header_is_malformed_exits_2_naming_it(
    tmp_path: Path, header: bytes, why: str
) -> None:
    host = tmp_path / "fakehost.py"
    host.write_text(
        f"import os, struct, sys\na = sys.argv[1:]\nh = {header!r}\n"
        "os.write(int(a[a.index('--out-fd') + 1]), b'RBLR' + struct.pack('>I', len(h)) + h)\n"
    )
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\nexec {sys.executable} {host} "$@"\n'
    )
    python.chmod(0o755)
    proc = run_cli("eval", "--env", f"hostedgym:{python}:CartPole-v1", "--policy", "random", "--episodes", "1",
                   "--max-steps", "5", "--out", tmp_path / "run")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert (
        " ".join(proc.stderr.split()) == f"error: hostedgym env host (CartPole-v1) did not start ({why}): (no output)"
    )
    assert "Traceback" not in proc.stderr
