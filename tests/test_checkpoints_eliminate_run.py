"""``rollbench checkpoints --eliminate`` on three scripted checkpoints, one clearly worse (skill 0.05) and a near tie
(0.95, 0.9), at delta 0.3, alpha 0.2, first look 8 (looks 8, 16, 32, 64, 103): the command drops the clearly worse
early and its looks replay from disk; ``rollbench report`` of its OUT folder shows each look and the chosen step.
One elimination per module (it records ~220 episodes over five looks): both tests read the same recorded folder,
and each edits a copy of it.

Oracle: ``checkpoint_policies.expected_success`` decides each checkpoint's moves on a seed; the seeded shuffled plan
is drawn here with numpy (docs/checkpoints.md); the Hoeffding/empirical-Bernstein bound of the first look that
drops step 1000 is computed by hand from the recorded successes."""

from __future__ import annotations

import json
import math
import re
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rollbench
from checkpoint_policies import expected_success, write_checkpoint
from checkpoints_html import assert_no_generic_statistics, checkpoints_section, html_report, table_rows
from cli_in_process import invoke

pytestmark = pytest.mark.slow

SKILLS = {1000: 0.05, 2000: 0.95, 3000: 0.9}
ARGS = ["--env", "scripted/reach", "--policy-template", "checkpoint_policies:make",
        "--policy-options", json.dumps({"checkpoint": "{path}"})]  # fmt: skip


@pytest.fixture(scope="module")
def eliminated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The training run, the command's OUT folder and its ``--json`` document's ``elimination`` block."""
    root = tmp_path_factory.mktemp("eliminate")
    run, out = root / "train", root / "out"
    for step, skill in SKILLS.items():
        write_checkpoint(run, step, skill)
    got = invoke("checkpoints", run, *ARGS, "--out", out, "--eliminate", "--delta", "0.3", "--alpha", "0.2",
                 "--first-look", "8", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    return run, out, json.loads(got.stdout)["elimination"]  # what the command decided while it ran


def test_eliminate_drops_the_clearly_worse_early_and_replays_from_disk(
    eliminated: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    from rollbench.checkpoints.discover import find_checkpoints
    from rollbench.checkpoints.eliminate import design
    from rollbench.checkpoints.eliminate_run import replay
    from rollbench.grading.coverage import DEFAULT_RULE

    run, out, e = eliminated
    d = design(3, 0.3, 0.2, 8)
    assert e["design"]["looks"] == list(d.looks)
    # by hand at each look: step 1000 (skill 0.05) against the best, Hoeffding/Bernstein bound from the counts
    first_out = next(look for look in e["looks"] if 1000 in look["eliminated"])
    n = first_out["trials"]
    best = first_out["best"]
    # one seeded shuffled plan for every checkpoint: episode j runs trial order[j] (seed 0 + order[j]), order the
    # first N_max of numpy's PCG64 permutation seeded [seed, crc32(task)] (docs/checkpoints.md)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, zlib.crc32(b"scripted/reach")])))
    order = [int(t) for t in rng.permutation(d.looks[-1])]
    assert order[:8] == [13, 1, 50, 39, 10, 61, 49, 99]  # pinned: the first look's sample
    won: dict[int, list[bool]] = {}
    for step in SKILLS:
        rows = sorted(rollbench.grade(out / f"{step:06d}").episodes, key=lambda e: e.episode_index)
        assert [e.seed for e in rows] == order[: len(rows)]
        won[step] = [bool(e.success) for e in rows]
    # the skill oracle decides the policy's moves; a few scenes fail even when it moves (the same for every
    # checkpoint), so the hand count uses the recorded successes and checks them against the oracle where it holds
    assert all(w <= expected_success(SKILLS[1000], s) for w, s in zip(won[1000], order, strict=False))
    wb, w1 = won[best][:n], won[1000][:n]
    diffs = [int(a) - int(b) for a, b in zip(wb, w1, strict=True)]
    mean = sum(diffs) / n
    var = (sum(x * x for x in diffs) - n * mean * mean) / (n - 1)
    level = 0.2 / (2 * len(d.looks))
    hoeffding = (2 * math.log(2 / level) / n) ** 0.5
    bernstein = (2 * var * math.log(4 / level) / n) ** 0.5 + 14 * math.log(4 / level) / (3 * (n - 1))
    bound = next(b for b in first_out["bounds"] if b["step"] == 1000)
    assert bound["lower"] == pytest.approx(mean - min(hoeffding, bernstein), abs=1e-12) and bound["lower"] > 0
    recorded = {s: len(won[s]) for s in SKILLS}
    assert recorded[1000] == n < recorded[2000]  # no episode of step 1000 after the look that dropped it
    assert e["episodes_used"] == sum(recorded.values())  # the near tie runs to N_max: more than fixed N here
    assert replay(find_checkpoints(run), out, d, DEFAULT_RULE) == e
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    changed = json.loads((edited / "003000" / "run.json").read_text())
    plan = changed["plan"]["episodes"]
    first, second = plan[0]["trial"], plan[1]["trial"]
    plan[0]["trial"], plan[1]["trial"] = second, first
    (edited / "003000" / "run.json").write_text(json.dumps(changed))
    task, seed = changed["plan"]["tasks"][0]["name"], changed["plan"]["trial_order"]["seed"]
    said = f"003000/run.json: planned trial 0 of {task} is {second}, but the recorded permutation (seed {seed}) gives {first} (edited)"
    with pytest.raises(rollbench.ConfigError, match=re.escape(said)):
        replay(find_checkpoints(run), edited, d, DEFAULT_RULE)
    plan[0]["trial"], plan[1]["trial"] = first, second  # the order restored, the population cut short (review of 21)
    changed["plan"]["trial_order"]["populations"][task] = [0, 1]
    (edited / "003000" / "run.json").write_text(json.dumps(changed))
    with pytest.raises(
        rollbench.ConfigError, match=re.escape(f"003000/run.json: plan.trial_order.populations[{task!r}] ")
    ):
        replay(find_checkpoints(run), edited, d, DEFAULT_RULE)
    assert e["chosen"] in (2000, 3000)


def test_every_checkpoint_runs_json_stores_exactly_what_grade_json_prints(
    eliminated: tuple[Path, Path, dict[str, Any]],
) -> None:
    """docs/runs.md: ``grade --json`` equals run.json's ``results``, for a run the elimination stopped too (its
    ``elimination`` block is recorded after its last episode was graded, and changes which episodes were needed)."""
    _, out, e = eliminated
    assert any(1000 in look["eliminated"] for look in e["looks"])  # one run stopped before the last look
    for step in SKILLS:
        run_dir = out / f"{step:06d}"
        r = invoke("grade", run_dir, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        log = json.loads((run_dir / "run.json").read_text())
        assert log["results"] == json.loads(r.stdout)
        assert log["status"] == log["results"]["status"] == "OK"


def test_report_of_an_eliminate_folder_shows_each_look_and_the_chosen_step(
    eliminated: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    _, out, e = eliminated
    html = html_report(tmp_path, out)
    section = checkpoints_section(html)
    looks = re.findall(
        r"<tr><td>(\d+)</td><td class=n>(\d+)</td><td class=n>(\d+)</td><td class=n>([^<]*)</td>", section
    )
    assert looks == [
        (str(i), str(lk["trials"]), str(lk["best"]), ", ".join(f"step {s}" for s in lk["eliminated"]) or "none")
        for i, lk in enumerate(e["looks"], 1)
    ]
    # the verdict is stated at the default alpha 0.05, not the 0.2 the looks ran at: nothing chosen nor eliminated
    # there (tests/test_checkpoints_level.py; the rows of a decision at its own level: test_checkpoints_eliminate_verdict)
    rows = {r[0]: r for r in table_rows(section)}
    assert [r[-1] for r in rows.values()] == ["kept"] * 3 and any(1000 in lk["eliminated"] for lk in e["looks"])
    # the episodes used are those attempted, summed over the table's scored/attempted column
    assert e["episodes_used"] == sum(int(r[4].split("/")[1]) for r in rows.values())
    assert f"episodes used {e['episodes_used']}, the fixed-N design with the same guarantee: " in section
    # the elimination's own verdict, no fixed-N test on its adaptive episodes (and so no caveat about one)
    assert (
        "<strong>Verdict:</strong> no decision at alpha 0.05: the elimination ran at alpha 0.2 and its recorded looks "
        in section
    )
    assert "records the level its ranking was made at (alpha 0.2," in section
    assert "Holm" not in section and "worse" not in section and "stopped adaptively" not in section
    assert "Violation" not in section
    assert_no_generic_statistics(html)  # no p-value on its adaptive samples
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    (edited / "elimination.json").write_text(json.dumps({**e, "chosen": 1000}))
    section = checkpoints_section(html_report(tmp_path, edited))
    assert "elimination.json differs from the replay of the run directories" in section
