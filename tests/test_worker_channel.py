"""A worker process's channel is code under evaluation's to break, never rollbench's to hang on (hostile round 12,
F9): a policy that writes junk into, or closes, every descriptor of its worker process ends its own episode as a
``policy`` error, the worker is replaced and the run finishes, with no traceback. The parent's reader of that channel
(:mod:`rollbench.run.channel`) is checked here on a real pipe, frame by frame."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from multiprocessing import Pipe
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest

from rollbench.run import channel
from rollbench.run.channel import Corrupt, Inbox


def _frame(message: object) -> bytes:
    body = bytes(ForkingPickler.dumps(message))
    return struct.pack("!i", len(body)) + body


def _read_all(inbox: Inbox) -> list[tuple[str, object]]:
    got, _ = inbox.read()
    return got


def test_whole_frames_come_out_in_order_and_a_split_one_waits_for_its_rest() -> None:
    ours, theirs = Pipe()
    inbox = Inbox(ours)
    data = _frame(("ready", 7)) + _frame(("fatal", "boom"))
    os.write(theirs.fileno(), data + _frame(("steps", ()))[:5])
    assert _read_all(inbox) == [("ready", 7), ("fatal", "boom")]
    os.write(theirs.fileno(), _frame(("steps", ()))[5:])
    assert _read_all(inbox) == [("steps", ())]
    assert not inbox.stalled()


@pytest.mark.parametrize(
    ("junk", "words"),
    [
        (b"\xff\x00garbage" * 1000, "a message length of -16750751 bytes"),
        (b"garbage\n", f"a message length of {struct.unpack('!i', b'garb')[0]} bytes"),
        (struct.pack("!i", 0), "a message length of 0 bytes"),
        (struct.pack("!i", 9) + b"\x00garbage\n", "a message that does not unpickle"),
        (_frame(("hello", 1)), "a message that is none of a worker's"),
        (_frame([1, 2]), "a message that is none of a worker's"),
    ],
)
def test_bytes_no_worker_message_can_be_are_corrupt_at_once(junk: bytes, words: str) -> None:
    ours, theirs = Pipe()
    os.write(theirs.fileno(), junk)
    with pytest.raises(Corrupt) as caught:
        Inbox(ours).read()
    assert str(caught.value).startswith(words)


def test_an_incomplete_message_is_stalled_only_after_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = Pipe()
    inbox = Inbox(ours)
    os.write(theirs.fileno(), b"\x00\x00garbage")  # a length of 26465 bytes, 5 of them there
    assert _read_all(inbox) == [] and not inbox.stalled()
    monkeypatch.setattr(channel, "STALL_S", 0.0)
    time.sleep(0.01)
    assert inbox.stalled()


def test_the_end_of_the_channel_is_reported_after_what_came_before_it() -> None:
    ours, theirs = Pipe()
    inbox = Inbox(ours)
    os.write(theirs.fileno(), _frame(("ready", 1)))
    theirs.close()
    assert inbox.read() == ([("ready", 1)], False)
    assert inbox.read() == ([], True)


def _eval(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), tests])}
    out = tmp_path / "r"
    options = json.dumps({"how": how, "once": str(tmp_path / "claimed")})
    args = ["eval", "--env", "scripted/reach", "--policy", "misbehaving_policies:breaks_its_worker", "--policy-options",
            options, "--episodes", "3", "--max-steps", "5", "--workers", "2", "--out", str(out), "--json"]  # fmt: skip
    got = subprocess.run(
        [sys.executable, "-m", "rollbench", *args], env=env, capture_output=True, text=True, timeout=180
    )
    return got, out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["junk", "close"])
def test_a_policy_that_breaks_its_workers_descriptors_errors_its_episode_and_the_run_finishes(
    tmp_path: Path, how: str
) -> None:
    got, out = _eval(tmp_path, how)
    assert "Traceback" not in got.stderr, got.stderr[-1500:]
    assert got.returncode == 1, got.stderr[-1500:]  # PARTIAL: docs/status.md
    doc = json.loads(got.stdout)
    run = json.loads((out / "run.json").read_text())
    assert doc["status"] == run["status"] == "PARTIAL"
    errored = [e for e in doc["episodes"] if e["termination_reason"] == "error"]
    assert len(doc["episodes"]) == 3 and len(errored) == 1
    assert errored[0]["error_fault"] == "policy"
    said = "wrote into its channel to rollbench" if how == "junk" else "closed its channel to rollbench"
    assert said in errored[0]["error"] and errored[0]["error"].endswith("; not re-run")
    execution = run["executions"][-1]
    assert execution["worker_deaths"] == 1 and execution["episodes_rerun"] == 0
