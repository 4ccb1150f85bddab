"""Run identity host/robot/name: recorded in run.json at eval time, defaults from the machine and the env family,
flags validated before anything runs, and a resumed run keeps the identity it recorded."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from cli_in_process import invoke  # the commands in the test process: what they refuse, write and print
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.core.identity import family_robot, sanitize_segment


def test_families_declare_their_robot():
    assert [family_robot(f) for f in ("metaworld", "robosuite", "libero", "fetch", "pusht", "scripted", "gym")] == [
        "sawyer",
        "panda",
        "panda",
        "fetch",
        "pusht",
        "point",
        "unknown",
    ]


def test_eval_records_the_default_identity(tmp_path: Path):
    evaluate(env="scripted/reach", policy="zero", episodes=1, out=tmp_path / "run-1")
    identity = json.loads((tmp_path / "run-1" / "run.json").read_text())["identity"]
    assert identity == {"host": sanitize_segment(socket.gethostname(), "localhost"), "robot": "point", "name": "run-1"}


@pytest.mark.slow
def test_eval_flags_set_the_identity_and_a_resume_keeps_it(tmp_path: Path):
    out = tmp_path / "r"
    r = invoke(
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "zero",
        "--episodes",
        "1",
        "--out",
        out,
        "--host-label",
        "gpu-7",
        "--robot",
        "ur5e",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "run.json").read_text())["identity"] == {"host": "gpu-7", "robot": "ur5e", "name": "r"}
    with pytest.raises(ConfigError, match=r"\(host: 'gpu-7' there, 'other' here\); drop --host-label/--robot"):
        evaluate(env="scripted/reach", policy="zero", episodes=1, out=out, host_label="other")


@pytest.mark.slow
def test_an_invalid_host_label_is_refused_before_anything_runs(tmp_path: Path):
    r = invoke(
        "eval",
        "--env",
        "scripted/reach",
        "--policy",
        "zero",
        "--episodes",
        "1",
        "--out",
        tmp_path / "x",
        "--host-label",
        "../etc",
    )
    assert r.returncode == 2 and "not a valid identity segment" in r.stderr
    assert not (tmp_path / "x").exists()
