"""``rollbench checkpoints --eliminate`` says the elimination's own decision, never a fixed-N test on the episodes it
gathered adaptively: the chosen step with "P(chosen is more than delta below the best) <= alpha", the look whose
anytime bound eliminated each other step, the episodes used against the fixed-N design, and rates labelled
descriptive; no McNemar p-value, "better" or "worse" in the text, ``--json``, checkpoints.json, the report, the
dashboard's view or MCP's ``rank_checkpoints``.

Oracle: ``checkpoint_policies.expected_success`` gives every checkpoint's outcome on each seed; the seeded shuffled
plan is drawn here with numpy (docs/checkpoints.md); the looks are replayed by hand below from the bounds'
formulas (Hoeffding and empirical Bernstein at level alpha / ((K - 1) L)), not by rollbench's code.

Tiny case, by hand: K = 3, delta 0.5, alpha 0.3, first look 4: N_max = ceil(2 ln(2 * 2 * 4 / 0.3) / 0.25) = 32,
looks 4, 8, 16, 32 (L = 4, level 0.0375). Step 1000 (skill 0) never succeeds and step 2000 (skill 1) always
does: their 8 paired differences are all 1, and the Hoeffding radius sqrt(2 ln(2 / 0.0375) / 8) = 0.997 < 1
eliminates step 1000 at look 2 (at look 1 the radius is 1.41). Step 3000 (skill 0.95) stays until look 4, where
the radius 0.498 <= delta stops the rule."""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from markupsafe import escape

import rollbench
from checkpoint_policies import expected_success, write_checkpoint
from cli_in_process import invoke

SKILLS = {1000: 0.0, 2000: 1.0, 3000: 0.95}
DELTA, ALPHA, LOOKS = 0.5, 0.3, (4, 8, 16, 32)
ARGS = ["--env", "scripted/reach", "--policy-template", "checkpoint_policies:make",
        "--policy-options", json.dumps({"checkpoint": "{path}"}), "--eliminate", "--delta", str(DELTA),
        "--alpha", str(ALPHA), "--first-look", "4"]  # fmt: skip
FIXED_N_WORDS = re.compile(r"better|worse|holm|mcnemar|p_value|p_holm|p \(|significant", re.IGNORECASE)


def _wins() -> dict[int, list[bool]]:
    """Each step's outcome on the shuffled plan's episodes 0..31 (trial order[j] runs seed order[j])."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, zlib.crc32(b"scripted/reach")])))
    order = [int(t) for t in rng.permutation(LOOKS[-1])]
    return {s: [expected_success(k, seed) for seed in order] for s, k in SKILLS.items()}


def _hand_replay(wins: dict[int, list[bool]]) -> tuple[list[tuple[int, int, list[int], dict[int, float]]], int]:
    """The rule replayed from its formulas: per look (n, highest rate, eliminated, lower bounds) and the choice."""
    steps = sorted(wins)
    level = ALPHA / ((len(steps) - 1) * len(LOOKS))
    alive, looks = list(steps), []
    for n in LOOKS:
        rate = {s: sum(wins[s][:n]) / n for s in alive}
        lead = max(alive, key=lambda s: (rate[s], -s))  # ties go to the earlier step
        lows = {}
        for s in (s for s in alive if s != lead):
            d = [int(a) - int(b) for a, b in zip(wins[lead][:n], wins[s][:n], strict=True)]
            mean = sum(d) / n
            var = (sum(x * x for x in d) - n * mean * mean) / (n - 1)
            hoeffding = math.sqrt(2 * math.log(2 / level) / n)
            bernstein = math.sqrt(2 * var * math.log(4 / level) / n) + 14 * math.log(4 / level) / (3 * (n - 1))
            lows[s] = mean - min(hoeffding, bernstein)
        dropped = [s for s, low in lows.items() if low > 0]
        alive = [s for s in alive if s not in dropped]
        looks.append((n, lead, dropped, lows))
        rest = [low for low in lows.values() if low <= 0]
        if not rest or n == LOOKS[-1] or all(low >= -DELTA for low in rest):
            return looks, lead
    raise AssertionError("the rule always stops at its last look")


def _no_fixed_n_test(doc: Any) -> None:
    """No key or string of ``doc`` (recursively) names a fixed-N test or its verdict words."""
    text = json.dumps(doc)
    assert not FIXED_N_WORDS.search(text), FIXED_N_WORDS.search(text)
    assert '"paired"' not in text


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    base = tmp_path_factory.mktemp("elim")
    for step, skill in SKILLS.items():
        write_checkpoint(base / "train", step, skill)
    got = invoke("checkpoints", base / "train", *ARGS, "--out", base / "root" / "out", "--json")
    assert got.returncode == 0, got.stderr
    return base, json.loads(got.stdout)


@pytest.mark.slow
def test_json_is_the_eliminations_hand_replayed_decision_with_descriptive_rates(
    folder: tuple[Path, dict[str, Any]],
) -> None:
    base, doc = folder
    wins = _wins()
    for s in SKILLS:  # the recorded outcomes are the oracle's on the shuffled plan
        rows = sorted(rollbench.grade(base / "root" / "out" / f"{s:06d}").episodes, key=lambda e: e.episode_index)
        assert [bool(e.success) for e in rows] == wins[s][: len(rows)]
    looks, chosen = _hand_replay(wins)
    assert [(n, lead, dropped) for n, lead, dropped, _ in looks] == [
        (4, 2000, []), (8, 2000, [1000]), (16, 2000, []), (32, 2000, [])
    ]  # fmt: skip
    e = doc["elimination"]
    assert e["design"]["looks"] == list(LOOKS) and e["design"]["fixed_n"] == math.ceil(8 * math.log(2 / ALPHA)) == 16
    assert [(lk["trials"], lk["best"], lk["eliminated"]) for lk in e["looks"]] == [(n, b, d) for n, b, d, _ in looks]
    assert (doc["verdict"], doc["chosen"], doc["best"]) == ("chosen_by_elimination", chosen, None) == (
        "chosen_by_elimination", 2000, None)  # fmt: skip
    assert doc["guarantee"] == "P(step 2000 is more than 0.5 below the best checkpoint) <= 0.3"
    used = {1000: 8, 2000: 32, 3000: 32}  # step 1000 stopped at the look that dropped it
    assert e["episodes_used"] == sum(used.values()) == 72 and e["episodes_fixed_n"] == 3 * 16
    rows = {r["step"]: r for r in doc["checkpoints"]}
    assert [r["step"] for r in doc["checkpoints"]] == [2000, 3000, 1000]  # chosen, kept, eliminated
    assert {s: r["decision"] for s, r in rows.items()} == {2000: "chosen", 3000: "kept", 1000: "eliminated"}
    assert {s: (r["coverage"]["successes"], r["coverage"]["attempted"]) for s, r in rows.items()} == {
        s: (sum(wins[s][: used[s]]), used[s]) for s in SKILLS
    }
    assert rows[1000]["success_rate"] == 0.0 and rows[3000]["success_rate"] == sum(wins[3000]) / 32
    at = rows[1000]["eliminated_at"]
    hand = 1 - math.sqrt(2 * math.log(2 / (ALPHA / 8)) / 8)
    assert (at["look"], at["trials"], at["against"], at["pairs"], at["difference"]) == (2, 8, 2000, 8, 1.0)
    assert at["lower_bound"] == pytest.approx(hand, abs=1e-12) == pytest.approx(looks[1][3][1000], abs=1e-12)
    assert rows[2000]["eliminated_at"] is None and rows[3000]["eliminated_at"] is None
    assert doc["rates"].startswith("descriptive (adaptive sample)")
    _no_fixed_n_test({k: v for k, v in doc.items() if k not in ("checkpoint_paths", "figure")})
    recorded = json.loads((base / "root" / "out" / "checkpoints.json").read_text())
    assert recorded == {k: v for k, v in doc.items() if k != "figure"}


@pytest.mark.slow
def test_printed_verdict_names_the_chosen_step_its_guarantee_and_each_elimination(
    folder: tuple[Path, dict[str, Any]],
) -> None:
    base, _ = folder
    got = invoke("checkpoints", base / "train", *ARGS, "--out", base / "root" / "out")  # resumes: runs nothing
    assert got.returncode == 0, got.stderr
    text = " ".join(got.stdout.split())
    assert (
        "verdict: step 2000 chosen by early elimination: P(step 2000 is more than 0.5 below the best checkpoint) <= 0.3"
        in text
    )
    assert (
        "look 2 at 8 episodes: highest rate step 2000, eliminated step 1000 (lower bound on step 2000 minus it: "
        in text
    )
    assert "eliminated at look 2 (8 episodes)" in text and "rate (descriptive, adaptive sample)" in text
    assert "episodes used 72; the fixed-N design with the same guarantee: 48" in text
    assert not FIXED_N_WORDS.search(got.stdout), FIXED_N_WORDS.search(got.stdout)


@pytest.mark.slow
def test_report_dashboard_view_and_mcp_show_the_same_decision_without_a_fixed_n_test(
    folder: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from rollbench.checkpoints.recompute import recompute
    from rollbench.checkpoints.view import section_view
    from rollbench.mcp.server import build_server

    base, doc = folder
    out = base / "root" / "out"
    got = recompute(out, alpha=ALPHA)  # read at the level it ran at (the readers below apply the default 0.05)
    assert got.violations == [] and got.level_note is None
    level_keys = ("level_note", "recorded_alpha", "recorded_rule")
    assert {k: v for k, v in got.ranking.items() if k not in level_keys} == {
        k: v for k, v in doc.items() if k not in ("checkpoint_paths", "elimination", "figure")
    }
    view = section_view(got)
    assert view["says"] == doc["says"] and view["head"][-1] == "decision"
    assert [r[-1] for r in view["rows"]][:2] == ["chosen", "kept"] and view["rows"][2][-1].startswith(
        "look 2 (8 episodes): lower bound +"
    )
    _no_fixed_n_test(view)
    assert invoke("report", out, "--out", tmp_path / "r.html").returncode == 0
    html = (tmp_path / "r.html").read_text()
    section = html[html.index("<h2>Checkpoints</h2>") :]
    # the report states the verdict at the default alpha 0.05: the choice made at 0.3 is not made there
    no_decision = "no decision at alpha 0.05: the elimination ran at alpha 0.3 and its recorded looks do not decide "
    assert f"<strong>Verdict:</strong> {no_decision}" in section
    assert "stopped adaptively" not in section and not FIXED_N_WORDS.search(section.split("<figure>")[0])
    assert f"Why it stopped: {escape(STOP_WORDS)}." in " ".join(section.split())  # as the command printed it

    async def call() -> Any:
        return await build_server(base / "root").call_tool("rank_checkpoints", {"out_name": "out"})

    mcp = anyio.run(call).structured_content
    assert (mcp["verdict"], mcp["chosen"], mcp["violations"], mcp["recorded_alpha"]) == ("undecided", None, [], 0.3)
    assert mcp["elimination"] == doc["elimination"]  # the recorded looks: the record of what ran
    _no_fixed_n_test({k: v for k, v in mcp.items() if k != "checkpoint_paths"})


@pytest.mark.slow
def test_an_edited_decision_in_checkpoints_json_is_a_violation(
    folder: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    import shutil

    from rollbench.checkpoints.recompute import recompute

    base, _ = folder
    edited = tmp_path / "edited"
    shutil.copytree(base / "root" / "out", edited)
    doc = json.loads((edited / "checkpoints.json").read_text())
    doc["chosen"] = 3000
    next(r for r in doc["checkpoints"] if r["step"] == 3000)["decision"] = "chosen"
    (edited / "checkpoints.json").write_text(json.dumps(doc))
    got = recompute(edited)
    assert f"{edited / 'checkpoints.json'} says chosen 3000; recomputed from the runs: 2000" in got.violations
    assert f"{edited / 'checkpoints.json'}: step 3000 decision 'chosen' differs from its run directory's 'kept'" in (
        got.violations
    )


STOP_WORDS = (
    "stopped at look 4 (32 episodes): no kept checkpoint's success rate can exceed step 2000's by more than 0.5 "
    "(every kept one's upper bound on its gain over step 2000 is <= 0.5)"
)


@pytest.mark.slow
def test_the_elimination_says_why_it_stopped_in_json_checkpoints_json_the_printout_and_recompute(
    folder: tuple[Path, dict[str, Any]],
) -> None:
    from rollbench.checkpoints.recompute import recompute

    base, doc = folder
    looks, _ = _hand_replay(_wins())
    low_3000 = looks[-1][3][3000]  # by hand: step 3000 kept (bound <= 0) and within delta (>= -0.5) at the last look
    assert -DELTA <= low_3000 <= 0 and looks[-1][2] == []
    assert doc["elimination"]["stopped"] == STOP_WORDS
    out = base / "root" / "out"
    assert json.loads((out / "checkpoints.json").read_text())["elimination"]["stopped"] == STOP_WORDS
    assert json.loads((out / "elimination.json").read_text())["stopped"] == STOP_WORDS
    got = recompute(out)
    assert got.violations == [] and got.elimination is not None and got.elimination["stopped"] == STOP_WORDS
    printed = invoke("checkpoints", base / "train", *ARGS, "--out", out)  # resumes: runs nothing
    assert printed.returncode == 0, printed.stderr
    assert STOP_WORDS in " ".join(printed.stdout.split())


def test_the_stopping_reason_names_each_of_the_rules_three_stops() -> None:
    from rollbench.checkpoints.eliminate import design
    from rollbench.checkpoints.eliminate_run import stopped

    d = design(3, 0.05, 0.05)  # the looks 16, 32, ..., 5348 of a new user's run (delta 0.05, alpha 0.05)
    assert d.looks[-1] == 5348

    def look(trials: int, lowers: list[float]) -> dict[str, Any]:
        return {"trials": trials, "best": 10000, "eliminated": [],
                "bounds": [{"step": 5000 + 10000 * i, "pairs": trials, "mean": 0.3, "lower": lo}
                           for i, lo in enumerate(lowers)]}  # fmt: skip

    first = [look(16, [-0.1, -0.6]), look(32, [0.04, -0.4]), look(64, [-0.14])]
    # the user's look 4: step 15000's lower bound on (step 10000 minus it) is -0.00287 >= -0.05
    assert stopped([*first, look(128, [-0.002870201029636421])], d) == (
        "stopped at look 4 (128 episodes): no kept checkpoint's success rate can exceed step 10000's by more than "
        "0.05 (every kept one's upper bound on its gain over step 10000 is <= 0.05)"
    )
    assert stopped([*first, look(128, [0.01])], d) == (
        "stopped at look 4 (128 episodes): every other checkpoint was eliminated; step 10000 is the only one left"
    )
    assert stopped([*first, look(5348, [-0.06])], d) == (
        "stopped at look 4 (5348 episodes): budget exhausted (the last look, 5348 episodes per checkpoint)"
    )


@pytest.mark.slow
def test_each_checkpoint_run_stopped_by_the_elimination_grades_ok_with_its_look_and_lists_ok(
    folder: tuple[Path, dict[str, Any]],
) -> None:
    base, _ = folder
    out = base / "root" / "out"
    # by hand (module docstring): step 1000 eliminated at look 2 (8 episodes), 2000 chosen and 3000 kept at look 4
    expected = {
        1000: "stopped by the checkpoint elimination at look 2 (8 episodes): eliminated (24 planned episodes after it "
        "were not needed)",
        2000: "stopped by the checkpoint elimination at look 4 (32 episodes): chosen",
        3000: "stopped by the checkpoint elimination at look 4 (32 episodes): kept",
    }
    for step, reason in expected.items():
        run_dir = out / f"{step:06d}"
        graded = rollbench.grade(run_dir)
        assert (graded.status, graded.reasons, graded.episodes_requested) == ("OK", [reason], 32)
        assert invoke("grade", run_dir).returncode == 0
    r = invoke("runs", out, "--json")
    assert r.returncode == 0, r.stderr
    assert {row["run"]: row["status"] for row in json.loads(r.stdout)} == {f"{s:06d}": "OK" for s in SKILLS}


@pytest.mark.slow
def test_a_lost_episode_the_elimination_needed_keeps_the_run_partial(
    folder: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    import shutil

    base, _ = folder
    copy = tmp_path / "001000"
    shutil.copytree(base / "root" / "out" / "001000", copy)
    (copy / "meta/episodes/chunk-000/file-003.parquet").unlink()  # episode 3 < 8: the look that eliminated it used it
    graded = rollbench.grade(copy)
    assert graded.status == "PARTIAL"
    assert "1 of 32 requested episodes are not recorded (episode 3)" in graded.reasons
    assert invoke("grade", copy).returncode == 1
