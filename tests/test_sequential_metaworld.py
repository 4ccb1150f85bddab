"""``rollbench sequential`` on real MetaWorld runs (the documented command of docs/sequential.md): MetaWorld's
scripted expert against ``zero`` on push-v3 stops early with "B better", the hand replay of both graded arms gives
the same look, and ``compare --sequential`` recomputes it from the two run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sequential_support import ROLLBENCH, invoke, replay, run_cli

pytestmark = pytest.mark.sim


def test_expert_against_zero_on_push_stops_early_with_b_better(tmp_path: Path) -> None:
    out = tmp_path / "push"
    argv = [*ROLLBENCH, "sequential", "--env", "metaworld/push-v3", "--policy-a", "zero", "--policy-b",
            "metaworld-expert", "--delta", "0.2", "--out", str(out), "--json"]  # fmt: skip
    r = run_cli(argv, timeout=900)
    assert r.returncode == 0, r.stderr
    task = json.loads(r.stdout)["tasks"][0]
    hand = replay(out / "a-metaworld_push-v3", out / "b-metaworld_push-v3", task["design"])
    assert (task["decision"], task["stopped_at"]) == ("b_better", hand["stopped_at"])
    assert task["looks"][-1]["a_only"] == 0  # zero never succeeds
    assert task["stopped_at"] < task["design"]["fixed_n"]
    # the recompute in this process (the documented command above is the process under test)
    arms = [str(out / "a-metaworld_push-v3"), str(out / "b-metaworld_push-v3")]
    again = invoke(["compare", "--sequential", *arms, "--json"])
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["tasks"][0]["looks"] == task["looks"]
