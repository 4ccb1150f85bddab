"""Strict JSON everywhere (issue 42, item 10): a run whose rewards are NaN or infinite gives null with a named
violation in ``grade --json``, run.json and the dashboard, and its neighbours are listed as before. Oracle: Python's
``json`` parser with the non-standard constants refused, and the planted values themselves."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.core.jsonfile import JsonRefused, finite_json, loads_strict, strict_dumps


def strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("strict") / "runs" / "good"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1)
    return out


def _plant_rewards(run: Path, value: float) -> None:
    f = run / "data/chunk-000/file-001.parquet"
    t = pq.read_table(f)
    i = t.schema.get_field_index("next.reward")
    pq.write_table(t.set_column(i, "next.reward", pa.array([value] * t.num_rows, pa.float32())), f)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_are_null_with_a_named_violation_in_every_json(
    recorded: Path, tmp_path: Path, value: float
) -> None:
    root = tmp_path / "runs"
    bad, good = root / "bad", root / "good"
    shutil.copytree(recorded, bad)
    shutil.copytree(recorded, good)
    _plant_rewards(bad, value)
    r = invoke("grade", bad, "--json")
    doc = strict(r.stdout)
    assert isinstance(doc, dict) and r.returncode == 1 and "Traceback" not in r.stderr
    assert [e["return"] for e in doc["episodes"]][1] is None
    assert any(
        v.startswith("episode 1: its next.reward rows sum to") and "not a finite number" in v for v in doc["violations"]
    )
    assert grade(good).violations == []
    runs = invoke("runs", root, "--grade", "--json")
    assert runs.returncode == 0 and len(strict(runs.stdout)) == 2  # type: ignore[arg-type]


def test_the_dashboard_lists_every_run_beside_one_with_nan_rewards(recorded: Path, tmp_path: Path) -> None:
    import httpx

    from dashboard_support import ServerThread

    root = tmp_path / "runs"
    shutil.copytree(recorded, root / "good")
    shutil.copytree(recorded, root / "bad")
    _plant_rewards(root / "bad", math.nan)
    srv = ServerThread([root], tmp_path / "labels.json", cache_dir=tmp_path / "c").start()
    try:
        listed = httpx.get(srv.url + "/api/runs", timeout=60)
        page = httpx.get(srv.url + "/", timeout=60)
    finally:
        srv.stop()
    assert listed.status_code == 200 and page.status_code == 200
    rows = strict(listed.text)["runs"]  # type: ignore[index]
    assert sorted(r["key"].rsplit("/", 1)[-1] for r in rows) == ["bad", "good"]


def test_run_json_stays_strict_json_when_a_result_is_not_a_number(recorded: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(recorded, run)
    _plant_rewards(run, math.nan)
    r = invoke("eval", "--resume", run, "--json")  # a finished run: graded and its run.json rewritten
    assert "Traceback" not in r.stderr
    strict(r.stdout)
    log = strict((run / "run.json").read_text())
    assert isinstance(log, dict)


def test_finite_json_replaces_only_non_finite_floats() -> None:
    doc = {"a": [1.5, math.nan, {"b": math.inf, "c": -math.inf}], "d": 0, "e": "NaN", "f": True}
    assert finite_json(doc) == {"a": [1.5, None, {"b": None, "c": None}], "d": 0, "e": "NaN", "f": True}
    assert strict_dumps(doc) == '{"a": [1.5, null, {"b": null, "c": null}], "d": 0, "e": "NaN", "f": true}'


def _set(run: Path, path: str, value: object) -> None:
    log = json.loads((run / "run.json").read_text())
    *parents, last = path.split(".")
    obj = log
    for p in parents:
        obj = obj[p]
    obj[last] = value
    (run / "run.json").write_text(json.dumps(log))


@pytest.mark.parametrize("field", ["provenance", "identity", "results", "plan.policy"])
@pytest.mark.parametrize("value", [[1], "x", 3, True])
def test_a_run_log_object_of_the_wrong_json_type_costs_only_that_run(
    recorded: Path, tmp_path: Path, field: str, value: object
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(recorded, root / "good")
    shutil.copytree(recorded, root / "bad")
    _set(root / "bad", field, value)
    listed = invoke("runs", root, "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    rows = {r["run"]: r for r in strict(listed.stdout)}  # type: ignore[union-attr]
    assert rows["good"]["status"] == "OK" and f"{field}" in rows["bad"]["error"]
    for args in (
        ["summarize", root / "bad"],
        ["release", root / "bad", "--out", tmp_path / "rel", "--date", "2026-01-01"],
    ):
        r = invoke(*args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and field in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "rel").exists()


def _plan_of_no_task(log: dict) -> None:
    log["plan"]["tasks"] = []


def _plan_task_renamed(log: dict) -> None:
    log["plan"]["tasks"][0]["name"] = "scripted/reach-final"


def _one_episode_of_an_unlisted_task(log: dict) -> None:
    log["plan"]["episodes"][1]["task"] = "scripted/elsewhere"


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (_plan_of_no_task, "run.json's plan names no task (plan.tasks is empty)"),
        (
            _plan_task_renamed,
            "plan.episodes[0] names task 'scripted/reach', which plan.tasks does not list (and 1 more",
        ),
        (
            _one_episode_of_an_unlisted_task,
            "plan.episodes[1] names task 'scripted/elsewhere', which plan.tasks does not",
        ),
    ],
    ids=["no-task", "task-renamed", "episode-of-an-unlisted-task"],
)
def test_a_plan_whose_episodes_belong_to_no_listed_task_is_a_damaged_run_costing_only_itself(
    recorded: Path, tmp_path: Path, tamper: Callable[[dict], None], named: str
) -> None:
    """Hostile round 5, F6: ``runs`` (table, JSON, ``--grade``) lists such a run as damaged beside the sound one,
    never a traceback, and ``grade`` names the violation instead of saying OK."""
    root = tmp_path / "runs"
    shutil.copytree(recorded, root / "good")
    shutil.copytree(recorded, root / "bad")
    log = json.loads((root / "bad/run.json").read_text())
    tamper(log)
    (root / "bad/run.json").write_text(json.dumps(log))
    for flags in ([], ["--grade"]):
        listed = invoke("runs", root, "--json", *flags)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        rows = {r["run"]: r for r in strict(listed.stdout)}  # type: ignore[union-attr]
        assert rows["good"]["status"] == "OK" and "damaged" not in rows["good"]
        assert rows["bad"]["damaged"] is True and named in rows["bad"]["violations"][0]
        table = invoke("runs", root, *flags)
        assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr
        assert "damaged: bad: " in table.stdout and "(damaged)" in table.stdout
    graded = invoke("grade", root / "bad", "--json")
    doc = strict(graded.stdout)
    assert graded.returncode == 1 and doc["status"] != "OK"  # type: ignore[index]
    assert [v for v in doc["violations"] if named in v]  # type: ignore[index]


@pytest.mark.parametrize("literal", ["1e999", "-1e999", "1" + "0" * 400 + ".0", "[0.5, 2E+400]"])
@pytest.mark.parametrize("finite", [True, False])
def test_a_number_too_large_for_a_float_is_refused_whatever_finite_says(literal: str, finite: bool) -> None:
    with pytest.raises(JsonRefused) as refused:
        loads_strict('{"rate": ' + literal + "}", finite=finite)
    assert str(refused.value) == "it holds a number too large for a float"


def test_the_largest_finite_floats_and_huge_integers_still_read_exactly() -> None:
    # the oracle: the literals' values written by hand (float max, its negative, the smallest subnormal, underflow)
    assert loads_strict("[1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 1e-999, 12345678901234567890]") == [
        1.7976931348623157e308,
        -1.7976931348623157e308,
        5e-324,
        0.0,
        12345678901234567890,
    ]
