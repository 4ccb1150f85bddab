"""``rollbench release`` grades what it publishes: a run whose files contradict each other is not released quietly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_in_process import invoke  # the commands in the test process: what they refuse, write and print
from rollbench.api import evaluate
from rollbench.release.copy import build_release


@pytest.mark.slow
def test_a_run_that_fails_grade_is_refused_naming_its_violation_unless_allowed_and_then_counted(
    tmp_path: Path,
) -> None:
    """A release is what others will grade: a run whose files contradict each other (meta/info.json claiming one
    frame more than its 2 episodes of 2 steps hold) is refused before anything is written; ``--allow-violations``
    releases it with a warning, MANIFEST.json counting the one violation; a sound run is counted 0."""
    run = tmp_path / "runs" / "damaged"
    evaluate(out=run, env="scripted/reach", policy="zero", episodes=2, max_steps=2)
    info = json.loads((run / "meta/info.json").read_text())
    assert info["total_frames"] == 4  # 2 episodes of 2 steps, a row each
    info["total_frames"] = 5
    (run / "meta/info.json").write_text(json.dumps(info))
    proc = invoke("release", run, "--out", tmp_path / "out")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: {run} fails rollbench grade: meta/info.json says total_frames=5 but the data files hold 4 rows; "
        "release it anyway with --allow-violations\n"
    )
    assert not (tmp_path / "out").exists()
    proc = invoke("release", run, "--out", tmp_path / "out", "--allow-violations")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "warning: damaged is released with 1 grade violation (--allow-violations)\n"
    manifest = json.loads((tmp_path / "out/MANIFEST.json").read_text())
    assert manifest["grades"] == {"damaged": {"status": "PARTIAL", "violations": 1}}
    sound = tmp_path / "runs" / "sound"
    evaluate(out=sound, env="scripted/reach", policy="zero", episodes=2, max_steps=2)
    assert build_release([sound], tmp_path / "out2")["grades"] == {"sound": {"status": "OK", "violations": 0}}
