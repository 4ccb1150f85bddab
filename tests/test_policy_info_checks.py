"""A policy's ``PolicyInfo`` is checked where the policy is built (hostile round 12, F4/F6): a plug-in
(``module:factory``) declaring a field of the wrong type or out of bounds is refused by ``rollbench eval`` with exit
2 and one ``error:`` line naming the policy, the field and the value, before any episode and before its run
directory exists; before the fix some values ended in a pydantic/ValueError traceback (exit 1) and others were taken
silently (``chunk_size="3"``, ``tasks="scripted/*"``, read as ten one-character patterns).

Oracles: the values are hand-picked against the bounds the docs state (``chunk_size`` 1 to 1000, ``--image-size``'s
even 16 to 4096 pixels, JSON provenance); the good declaration's run is checked against a hand count of its episodes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import rollbench
from rollbench.cli.main import app
from rollbench.core.contracts import ConfigError, PolicyInfo
from rollbench.core.policy_info import check_policy_info

DOUBLE = """
import os, numpy as np
from rollbench import PolicyInfo
from pinfo_cases import CASES
class P:
    def __init__(self, fields):
        self.info = PolicyInfo(**{"name": "pinfo", "tasks": ("scripted/*",), **fields})
    def reset(self, task, seed): pass
    def act(self, observation, instruction): return np.zeros((1, 2), np.float32)
    def close(self): pass
def make(name, options):
    return P(CASES[os.environ["PINFO_CASE"]])
"""


class _Opaque:  # an object run.json cannot record, whose repr is its own
    def __repr__(self) -> str:
        return "<opaque>"


BAD: dict[str, tuple[dict[str, Any], str]] = {  # case -> (PolicyInfo fields, what the error line quotes)
    "chunk-negative": ({"chunk_size": -1}, "chunk_size=-1;"),
    "chunk-zero": ({"chunk_size": 0}, "chunk_size=0;"),
    "chunk-float": ({"chunk_size": 1.5}, "chunk_size=1.5;"),
    "chunk-nan": ({"chunk_size": math.nan}, "chunk_size=nan;"),
    "chunk-none": ({"chunk_size": None}, "chunk_size=None;"),
    "chunk-str": ({"chunk_size": "3"}, "chunk_size='3';"),
    "chunk-bool": ({"chunk_size": True}, "chunk_size=True;"),
    "chunk-huge": ({"chunk_size": 1001}, "chunk_size=1001;"),
    "replan-negative": ({"replan_every": -3}, "replan_every=-3;"),
    "replan-zero": ({"replan_every": 0}, "replan_every=0;"),
    "replan-bool": ({"replan_every": False}, "replan_every=False;"),
    "needs-images-str": ({"needs_images": "yes"}, "needs_images='yes';"),
    "io-bound-int": ({"io_bound": 1}, "io_bound=1;"),
    "tasks-none": ({"tasks": None}, "tasks=None;"),
    "tasks-str": ({"tasks": "scripted/*"}, "tasks='scripted/*';"),
    "tasks-not-str": ({"tasks": ("scripted/*", 3)}, "tasks=('scripted/*', 3);"),
    "image-sizes-str": ({"image_sizes": {"scripted": "x"}}, "image_sizes={'scripted': 'x'};"),
    "image-sizes-odd": ({"image_sizes": {"scripted": (17, 32)}}, "image_sizes={'scripted': (17, 32)};"),
    "image-sizes-small": ({"image_sizes": {"scripted": [8, 8]}}, "image_sizes={'scripted': [8, 8]};"),
    "image-sizes-three": ({"image_sizes": {"scripted": (32, 32, 3)}}, "image_sizes={'scripted': (32, 32, 3)};"),
    "image-sizes-key": ({"image_sizes": {1: (32, 32)}}, "image_sizes={1: (32, 32)};"),
    "provenance-object": ({"provenance": {"k": _Opaque()}}, "provenance={'k': <opaque>} (TypeError:"),
    "provenance-str": ({"provenance": "notadict"}, "provenance='notadict';"),
    "provenance-nan": ({"provenance": {"k": math.nan}}, "provenance={'k': nan} (ValueError:"),
    "provenance-key": ({"provenance": {1: "x"}}, "provenance={1: 'x'} (a key is not a str);"),
    "provenance-huge": ({"provenance": {"k": "x" * 1_100_000}}, "provenance=an object of 1 key (1100008 bytes"),
    "warnings-none": ({"warnings": None}, "warnings=None;"),
    "one-stream-none": ({"one_stream": None}, "one_stream=None;"),
}
GOOD = {"chunk_size": 4, "replan_every": 2, "image_sizes": {"scripted": [32, 32]}, "provenance": {"ckpt": [1, 2]}}


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``pinfo_double:make`` importable, declaring the PolicyInfo fields of case ``$PINFO_CASE``."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "pinfo_double.py").write_text(DOUBLE)
    cases = {name: fields for name, (fields, _) in BAD.items()} | {"good": GOOD}
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.setitem(sys.modules, "pinfo_cases", type(sys)("pinfo_cases"))
    sys.modules["pinfo_cases"].CASES = cases  # type: ignore[attr-defined]
    monkeypatch.delitem(sys.modules, "pinfo_double", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    return tmp_path


def _eval(out: Path) -> list[str]:
    return ["eval", "--env", "scripted/reach", "--policy", "pinfo_double:make", "--episodes", "2", "--max-steps", "3",
            "--out", str(out)]  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_a_plugin_policy_info_field_of_the_wrong_type_or_bounds_is_refused_in_one_line(
    case: str, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINFO_CASE", case)
    field = BAD[case][1].split("=", 1)[0]
    result = CliRunner().invoke(app, _eval(plugin / "run"))
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    shown = f"exit {result.exit_code}, stderr {result.stderr!r}, {result.exception!r}"
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), shown
    assert "Traceback" not in result.stdout + result.stderr, shown
    assert len(lines) == 1, shown
    assert lines[0].startswith(f"error: policy 'pinfo_double:make': its PolicyInfo {BAD[case][1]}"), shown
    assert f"; {field} must be " in lines[0], shown
    assert not (plugin / "run").exists()  # refused before the run directory, let alone an episode


def test_a_plugin_policy_info_within_bounds_runs_and_is_recorded(plugin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PINFO_CASE", "good")
    result = CliRunner().invoke(app, _eval(plugin / "run"))
    assert result.exit_code == 0, result.stderr
    recorded = json.loads((plugin / "run" / "run.json").read_text())
    policy = recorded["plan"]["policy"]
    assert (policy["chunk_size"], policy["replan_every"]) == (4, 2)
    assert policy["image_sizes"] == {"scripted": [32, 32]} and policy["provenance"] == {"ckpt": [1, 2]}
    assert recorded["status"] == "OK" and recorded["plan"]["episodes_requested"] == 2
    frames = pq.read_table(sorted((plugin / "run" / "data").rglob("*.parquet"))).num_rows
    assert frames == 2 * 3  # hand count: zero actions never reach the goal, so each episode runs its 3 steps


def test_the_refusal_reaches_the_terminal_as_one_line_from_the_real_entry_point(plugin: Path) -> None:
    """The same refusal through ``python -m rollbench`` in a subprocess: stderr is exactly one line, exit 2."""
    src = str(Path(rollbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(plugin / "mods")]), "MUJOCO_GL": "egl"}
    (plugin / "mods" / "pinfo_cases.py").write_text("CASES = {'chunk-str': {'chunk_size': '3'}}\n")
    env["PINFO_CASE"] = "chunk-str"
    done = subprocess.run(
        [sys.executable, "-m", "rollbench", *_eval(plugin / "run")],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "error: policy 'pinfo_double:make': its PolicyInfo chunk_size='3'; chunk_size must be an int from 1 to 1000 "
        "(not a bool, str or float)"
    ]
    assert not (plugin / "run").exists()


def test_every_built_in_policy_info_passes_the_check() -> None:
    """The check refuses nothing rollbench builds itself (the built-ins that need no simulator or server)."""
    from rollbench.core.registry import make_policy

    for name in ("zero", "random", "scripted-expert"):
        check_policy_info(name, make_policy(name).info)
    with pytest.raises(ConfigError, match=r"^policy 'x': its PolicyInfo name=''; name must be a non-empty str$"):
        check_policy_info("x", PolicyInfo(name=""))


def test_an_in_memory_policy_with_a_bad_info_is_refused_before_its_run_directory(tmp_path: Path) -> None:
    """The object handed to ``rollbench.evaluate`` passes the same check (its ``policy=`` name is refused)."""
    import numpy as np

    from rollbench.api import evaluate

    class Mine:
        info = PolicyInfo(name="mine", tasks="scripted/*")  # type: ignore[arg-type]  # a str, not a tuple

        def reset(self, task: Any, seed: int) -> None: ...
        def act(self, observation: Any, instruction: str) -> Any:
            return np.zeros((1, 2), np.float32)

        def close(self) -> None: ...

    with pytest.raises(ConfigError, match=r"its PolicyInfo tasks='scripted/\*'; tasks must be a tuple or list"):
        evaluate(policy=Mine(), env="scripted/reach", episodes=1, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_server_advertising_sizes_that_image_size_would_refuse_has_them_ignored() -> None:
    """A served policy's ``image_sizes`` keep only what ``--image-size`` takes (even, 16 to 4096 pixels): the
    client's PolicyInfo then passes the check instead of rendering at a size no run may choose."""
    from rollbench.wire.obs_map import advertised_image_sizes

    sent = {
        "image_sizes": {"a": [96, 96], "b": [17, 32], "c": [8, 8], "d": [4098, 32], "e": [True, 32], "f": [480, 640]}
    }
    assert advertised_image_sizes(sent) == {"a": (96, 96), "f": (480, 640)}
