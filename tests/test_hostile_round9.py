"""Hostile round 9 (issue 42): numbers a handed-over file records are bounded by typed readers, named when refused
and never quoted; the work a recorded sequential design asks for is bounded; label text is UTF-8; every float
option of ``checkpoints`` has an upper bound; checkpoint folder names print as written.

Oracles: the bounds as the docs state them (5,000 and 1,000 pairs, 86,400 s, 30 days, int64), the single-look
N_max computed here from its formula, the field names of the files, and the recorded bytes of the label file."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from doctored_files import edit_json
from rollbench.analysis.episodes import AnalysisEpisode
from rollbench.checkpoints.eliminate import design as elimination_design
from rollbench.checkpoints.recorded import check_recorded, described
from rollbench.checkpoints.watch import Polling
from rollbench.core.contracts import ConfigError
from rollbench.core.runlog_model import SequentialDesignRecord
from rollbench.dashboard.labels import set_label
from rollbench.dashboard.rubrics import BUILTIN_RUBRICS
from rollbench.grading.sequential import design

SECRET = "SEKRETMARK tok_ZXCVBN98765432qwer"


# ---- F8 / F9: a recorded sequential design has the bounds the command accepts ----------------------------------------
def _recorded_design() -> dict[str, Any]:
    return design(0.2, budget=20).model_dump(mode="json")


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ({"budget": 10**20}, "budget: Input should be less than or equal to 5000"),
        ({"budget": 5001}, "budget: Input should be less than or equal to 5000"),
        ({"look_every": 10**9}, "look_every: Input should be less than or equal to 5000"),
        (
            {"budget": 5000, "look_every": 7},
            "budget 5000 is above the 1000 pairs a test looking every 7 pairs may have",
        ),
        (
            {"budget": 1001, "look_every": 2},
            "budget 1001 is above the 1000 pairs a test looking every 2 pairs may have",
        ),
        ({"budget": 6, "look_every": 7}, "look_every 7 is above the budget (6 pairs)"),
        ({"discordant": 0.9, "p_a": 0.05}, "discordant 0.9 is impossible for p_a 0.05, delta 0.2"),
        ({"p_a": 0.85}, "p_a + delta must be below 1, got 0.85 + 0.2"),
    ],
)
def test_a_recorded_sequential_design_outside_the_commands_bounds_is_refused_by_name(
    edit: dict[str, Any], words: str
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        SequentialDesignRecord.model_validate({**_recorded_design(), **edit})
    err = caught.value.errors()[0]
    assert words in f"{'.'.join(map(str, err['loc']))}: {err['msg']}"


def test_the_largest_designs_the_command_accepts_are_valid_records() -> None:
    rec = {**_recorded_design(), "budget": 5000, "look_every": 1}
    assert SequentialDesignRecord.model_validate(rec).budget == 5000
    rec = {**_recorded_design(), "budget": 1000, "look_every": 1000}
    assert SequentialDesignRecord.model_validate(rec).look_every == 1000


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"budget": 1001, "look_every": 2}, "budget must be between 1 and 1000 pairs looking every 2 pairs, got 1001"),
        ({"budget": 5001}, "budget must be between 1 and 5000 pairs, got 5001"),
        ({"budget": 6, "look_every": 7}, "look_every must be between 1 and the budget (6 pairs), got 7"),
        ({"look_every": 1001}, "look_every must be between 1 and the budget (1000 pairs), got 1001"),
    ],
)
def test_design_refuses_work_above_its_stated_bound_before_computing(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        design(0.2, **kwargs)
    assert str(caught.value) == words


def _doctored(src: Path, dst: Path, **design_fields: Any) -> Path:
    shutil.copytree(src, dst)
    for log_path in dst.glob("*/run.json"):
        log = json.loads(log_path.read_text())
        log["sequential"]["design"].update(design_fields)
        log_path.write_text(json.dumps(log))
    return dst


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rollbench.core.spec import build_spec
    from rollbench.sequential.runner import SequentialConfig, run_sequential

    root = tmp_path_factory.mktemp("seq")
    a = build_spec(env="scripted/reach", policy="random", episodes=1, max_steps=5)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, max_steps=5)
    run_sequential(a, b, root / "cmp", SequentialConfig(delta=0.4, budget=20, host_label="h"))
    return root / "cmp"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"budget": 10**20}, "sequential.design.budget: Input should be less than or equal to 5000"),
        ({"budget": 5000, "look_every": 7}, "budget 5000 is above the 1000 pairs a test looking every 7 pairs"),
    ],
)
def test_doctored_arms_are_one_line_in_compare_and_report_and_one_error_on_the_run_page(
    comparison: Path, tmp_path: Path, fields: dict[str, Any], words: str
) -> None:
    from cli_in_process import invoke
    from rollbench.dashboard.service import sequential_of

    bad = _doctored(comparison, tmp_path / "bad", **fields)
    for argv in (
        ["compare", "--sequential", bad / "a-scripted_reach", bad / "b-scripted_reach"],
        ["report", bad, "--out", tmp_path / "r.html"],
    ):
        got = invoke(*argv)
        lines = got.stderr.strip().splitlines()
        assert got.returncode == 2 and len(lines) == 1 and words in lines[0], got.stderr
        assert "Traceback" not in got.stdout + got.stderr
    page = sequential_of(bad / "a-scripted_reach", "b-scripted_reach")  # the run page's one-line error
    assert list(page) == ["error"] and words in page["error"] and "\n" not in page["error"]
    assert sequential_of(comparison / "a-scripted_reach", "b-scripted_reach")["task"]["decision"] is not None


# ---- F3 / F10: checkpoints.json's numbers are bounded by a typed reader; disagreeing text is described ----------------
def _ranking() -> dict[str, Any]:
    return {
        "alpha": 0.05,
        "rule": {"min_coverage": 0.95, "exclude_policy_errors": False},
        "elimination": {"design": {"delta": 0.1, "alpha": 0.05, "looks": [16, 32, 738]}, "steps": [1000, 2000]},
        "checkpoints": [{"step": 1000}, {"step": 2000}],
    }


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (("alpha",), 10**400, "alpha: Input should be a valid number"),
        (("alpha",), float("nan"), "alpha: Input should be a finite number"),
        (("alpha",), 1.5, "alpha: Input should be less than 1"),
        (("rule", "min_coverage"), 10**400, "rule.min_coverage: Input should be a valid number"),
        (("elimination", "design", "delta"), 10**400, "elimination.design.delta: Input should be a valid number"),
        (("elimination", "design", "alpha"), float("inf"), "elimination.design.alpha: Input should be a finite number"),
        (("elimination", "design", "looks"), [10**400], "elimination.design.looks.0: Input should be less than or"),
        (("elimination", "steps"), [10**400], "elimination.steps.0: Input should be less than or equal to"),
    ],
)
def test_a_recorded_number_out_of_bounds_is_named_by_its_field(path: tuple[str, ...], value: Any, words: str) -> None:
    doc = _ranking()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValueError) as caught:
        check_recorded(doc)
    assert str(caught.value).startswith(words) and "0" * 30 not in str(caught.value)  # the value is never quoted


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.75, "0.75"),
        (3000, "3000"),
        (None, "None"),
        ("kept", "'kept'"),
        (SECRET + " <script>" + "A" * 1_000_000, "a string of 1000042 characters"),
        ("SEKRETMARK2", "a string of 11 characters"),
        ([SECRET, 1], "a list of 2 items"),
        ({SECRET: 1}, "an object of 1 keys"),
        (10**400, "a very large integer"),
        (float("nan"), "a float"),
    ],
)
def test_a_disagreeing_recorded_value_is_shown_only_when_it_cannot_carry_text(value: Any, shown: str) -> None:
    assert described(value) == shown


@pytest.fixture(scope="module")
def checkpoints_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from checkpoint_policies import write_checkpoint
    from cli_in_process import invoke

    root = tmp_path_factory.mktemp("ckpt")
    for step, skill in ((1000, 0.2), (2000, 0.9)):
        write_checkpoint(root / "train", step, skill)
    (root / "train" / "checkpoints" / "[bold red]ck_6000").mkdir()  # F12: incomplete, its name is markup
    got = invoke(
        "checkpoints", root / "train", "--env", "scripted/reach", "--policy-template", "checkpoint_policies:make",
        "--policy-options", json.dumps({"checkpoint": "{path}"}), "--episodes", 4, "--max-steps", 5, "--out",
        root / "out",
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    (root / "stderr.txt").write_text(got.stderr)
    return root / "out"


@pytest.mark.slow
def test_a_checkpoint_folder_name_prints_as_written_not_as_markup(checkpoints_out: Path) -> None:
    said = " ".join((checkpoints_out.parent / "stderr.txt").read_text().split())  # lines wrap at spaces
    assert "checkpoints/[bold red]ck_6000 lacks config.json or model.safetensors" in said


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.update(alpha=10**400), "checkpoints.json is damaged: alpha: Input should be a valid number"),
        (lambda d: d["rule"].update(min_coverage=10**400), "is damaged: rule.min_coverage: Input should be a valid"),
    ],
)
def test_a_checkpoints_folder_with_a_huge_number_is_one_named_violation_in_report(
    checkpoints_out: Path, tmp_path: Path, edit: Any, words: str
) -> None:
    from cli_in_process import invoke
    from rollbench.checkpoints.recompute import recompute

    bad = tmp_path / "bad"
    shutil.copytree(checkpoints_out, bad)
    edit_json(bad / "checkpoints.json", edit)
    got = recompute(bad)
    assert len(got.violations) == 1 and words in got.violations[0] and got.ranking is None
    report = invoke("report", bad, "--out", tmp_path / "r.html")
    assert report.returncode == 0 and "Traceback" not in report.stderr and words in report.stderr


@pytest.mark.slow
def test_recorded_text_that_disagrees_is_described_never_quoted(checkpoints_out: Path, tmp_path: Path) -> None:
    from rollbench.checkpoints.recompute import recompute

    bad = tmp_path / "bad"
    shutil.copytree(checkpoints_out, bad)
    doc = json.loads((bad / "checkpoints.json").read_text())
    doc["verdict"] = SECRET + " <script>" + "A" * 1_000_000
    doc["checkpoints"][0]["success_rate"] = "SEKRETMARK2"
    (bad / "checkpoints.json").write_text(json.dumps(doc))
    said = "\n".join(recompute(bad).violations)
    assert "says verdict a string of 1000042 characters; recomputed from the runs:" in said
    assert f"step {doc['checkpoints'][0]['step']} success_rate a string of 11 characters differs" in said
    assert "SEKRETMARK" not in said and len(said) < 2000


# ---- F6: every integer of an exported episode is bounded -------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("length", 10**400, "r: episode 0 has length outside 0 .. 9223372036854775807"),
        ("length", -1, "r: episode 0 has length outside 0 .. 9223372036854775807"),
        ("seed", 2**63, "r: episode 0 has seed outside 0 .. 9223372036854775807"),
        ("initial_state", -(10**30), "r: episode 0 has initial_state outside 0 .. 9223372036854775807"),
        ("trial", 10**400, "r: episode 0 has trial outside 0 .. 9223372036854775807"),
        ("episode_index", 2**64, "r: an episode has episode_index outside 0 .. 9223372036854775807"),
    ],
)
def test_an_exported_episodes_integer_out_of_int64_is_refused_by_name(field: str, value: int, words: str) -> None:
    ep = {"episode_index": 0, "task": "t", "success": True, field: value}
    with pytest.raises(ConfigError) as caught:
        AnalysisEpisode.from_export(ep, "r")
    assert str(caught.value) == words


def test_an_exported_episode_at_the_int64_bound_is_read() -> None:
    ep = {"episode_index": 2**63 - 1, "task": "t", "success": True, "length": 2**63 - 1, "seed": 0}
    assert AnalysisEpisode.from_export(ep, "r").length == 2**63 - 1


# ---- F7: label text that is not UTF-8 is refused, nothing written ----------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"note": "\ud800"}, "the note is not UTF-8 text (it holds a lone surrogate)"),
        ({"note": "fine \udfff then"}, "the note is not UTF-8 text (it holds a lone surrogate)"),
        ({"label": "fail\ud800"}, "the label is not UTF-8 text (it holds a lone surrogate)"),
        ({"annotator": "ana\udc80"}, "the annotator is not UTF-8 text (it holds a lone surrogate)"),
        ({"context": {"task": "t\ud800"}}, "not written: a field of the entry is not UTF-8 text"),
    ],
)
def test_label_text_that_is_not_utf8_is_refused_and_nothing_is_written(
    tmp_path: Path, kwargs: dict[str, Any], words: str
) -> None:
    path = tmp_path / "labels.json"
    rubric = BUILTIN_RUBRICS["outcome-v1"]
    set_label(path, "h/r/n/0", "succeeded", rubric=rubric, note="first")
    before = path.read_bytes()
    args: dict[str, Any] = {"label": "failed", **kwargs}
    with pytest.raises(ConfigError) as caught:
        set_label(path, "h/r/n/0", args.pop("label"), rubric=rubric, **args)
    assert words in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.slow
def test_the_label_api_answers_400_in_one_line_to_a_lone_surrogate(tmp_path: Path) -> None:
    from dashboard_support import ServerThread
    from rollbench.api import evaluate

    evaluate(env="scripted/reach", policy="zero", episodes=1, max_steps=3, out=tmp_path / "runs" / "r", host_label="h")
    labels = tmp_path / "labels.json"
    server = ServerThread([tmp_path / "runs"], labels).start()
    try:
        url = f"{server.url}/api/label/h/point/r/0"
        for body in ('{"label": "failed", "note": "\\ud800"}', '{"label": "fail\\udfffed", "note": ""}'):
            got = httpx.post(url, content=body, headers={"Content-Type": "application/json"}, timeout=30)
            assert got.status_code == 400 and "is not UTF-8 text" in got.json()["error"], got.text
        ok = httpx.post(url, json={"label": "failed", "note": "after"}, timeout=30)
    finally:
        server.stop()
    assert ok.status_code == 200 and json.loads(labels.read_text())["labels"]["h/point/r/0"]["note"] == "after"


# ---- F4 / F13: upper bounds of the checkpoints command's numbers -----------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"poll_s": math.inf}, "--poll-s must be between 0 and 86400 seconds, got inf"),
        ({"poll_s": 1e300}, "--poll-s must be between 0 and 86400 seconds, got 1e+300"),
        ({"poll_s": math.nan}, "--poll-s must be between 0 and 86400 seconds, got nan"),
        ({"poll_s": -1.0}, "--poll-s must be between 0 and 86400 seconds, got -1"),
        ({"until_idle_s": math.inf}, "--until-idle must be between 0 and 2.592e+06 seconds, got inf"),
        ({"until_idle_s": 2592001.0}, "--until-idle must be between 0 and 2.592e+06 seconds, got 2.592e+06"),
    ],
)
def test_watch_polling_outside_its_stated_bounds_is_refused(kwargs: dict[str, float], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Polling(**kwargs)
    assert str(caught.value) == words


def test_watch_polling_at_its_bounds_is_accepted() -> None:
    assert Polling(86_400.0, 30 * 86_400.0).poll_s == 86_400.0


def test_a_first_look_above_a_single_looks_n_max_is_refused_with_the_bound() -> None:
    n_max = math.ceil(2 * math.log(1 / (0.05 / 2)) / 0.1**2)  # Hoeffding, 2 checkpoints, one look: 738
    with pytest.raises(ConfigError) as caught:
        elimination_design(2, 0.1, 0.05, 99_999_999_999_999)
    assert str(caught.value).startswith(f"--first-look must be between 2 and {n_max} ")
    assert elimination_design(2, 0.1, 0.05, n_max).looks == (n_max,)
