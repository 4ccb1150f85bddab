"""``rollbench reproduce``: verdicts on real scripted runs with known counts, against scipy as the oracle.

The runs are real rollbench runs of the ``scripted`` family (suite ``scripted/all``: two tasks), with the test double
``reproduce_policies:fail_on`` choosing which episodes fail, so the counts are known before grading; every p-value is
compared with :func:`scipy.stats.binomtest` / :func:`scipy.stats.fisher_exact` called here, and every power with a
sum of Binomial probabilities over the outcomes scipy's own test rejects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import binom, binomtest, fisher_exact

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.core.contracts import ConfigError
from rollbench.reproduce import (
    ReferenceFileError,
    load_reference,
    parse_reference,
    render_text,
    reproduce,
    shipped_names,
)
from rollbench.reproduce.model import check_average
from rollbench.reproduce.verdict import episodes_needed, rejection_region

TASKS = ("scripted/reach", "scripted/reach-final")


def _run(root: Path, name: str, per_task: int, fail: dict[str, list[int]], **spec: Any) -> Path:
    out = root / name
    evaluate(env="scripted/all", policy="reproduce_policies:fail_on", episodes=per_task, out=out,
             policy_options={"fail": fail}, **spec)  # fmt: skip
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reproduce")
    return {
        "48of50": _run(root, "48of50", 25, {TASKS[0]: [0], TASKS[1]: [0]}),
        "35of50": _run(root, "35of50", 25, {TASKS[0]: list(range(8)), TASKS[1]: list(range(7))}),
        "10of10": _run(root, "10of10", 5, {}),
        # seed 49 starts at the goal in both tasks (success at reset, never a policy success): 2 more failures
        "146of150": _run(root, "146of150", 75, {TASKS[0]: [1], TASKS[1]: [3]}),
    }


def _ref(rate: float, *, episodes: int | None = None, successes: int | None = None, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"benchmark": "scripted", "suite": "all", "success_rate": rate, "tasks": 2}
    if episodes is not None:
        entry["episodes"] = episodes
    if successes is not None:
        entry["successes"] = successes
    return {"format": "rollbench.reference/1", "name": "test-ref", "policy": "scripted expert", "reported_by": "a test",
            "source": {"kind": "paper", "paper": "A test", "table": "Table 1"}, "protocol": extra.pop("protocol", {}),
            "entries": [entry], **extra}  # fmt: skip


def _load(doc: dict[str, Any]):
    return parse_reference(json.dumps(doc), "test-ref.json")


def _scipy_power(n: int, p_ref: float, p_true: float) -> float:
    """Independent oracle: the outcomes scipy's two-sided binomtest rejects at 0.05, weighted by Binomial(n, p_true)."""
    return sum(binom.pmf(k, n, p_true) for k in range(n + 1) if binomtest(k, n, p_ref).pvalue <= 0.05)


@pytest.mark.slow
def test_48_of_50_against_97_is_consistent_and_says_how_little_50_episodes_rule_out(runs):
    row = reproduce([runs["48of50"]], _load(_ref(97.0)))["rows"][0]
    assert (row["successes"], row["episodes"]) == (48, 50)
    assert row["p_value"] == pytest.approx(binomtest(48, 50, 0.97).pvalue, rel=1e-12)
    assert row["power"] == pytest.approx(_scipy_power(50, 0.97, 0.92), rel=1e-9)
    assert row["power"] < 0.8 and row["verdict"] == "consistent"
    assert row["difference_pts"] == pytest.approx(-1.0)
    needed = row["episodes_needed"]  # the smallest n whose power (scipy oracle) reaches 0.8
    assert _scipy_power(needed, 0.97, 0.92) >= 0.8 > _scipy_power(needed - 1, 0.97, 0.92)


@pytest.mark.slow
def test_48_of_50_against_88_is_underpowered_not_significant_but_8_points_away(runs):
    row = reproduce([runs["48of50"]], _load(_ref(88.0)))["rows"][0]
    assert row["p_value"] == pytest.approx(binomtest(48, 50, 0.88).pvalue, rel=1e-12)
    assert row["p_value"] > 0.05 and row["difference_pts"] == pytest.approx(8.0)
    assert row["verdict"] == "underpowered"
    assert reproduce([runs["48of50"]], _load(_ref(88.0)), gap_pts=8)["rows"][0]["verdict"] == "consistent"


@pytest.mark.slow
def test_35_of_50_against_97_is_below_with_scipys_exact_binomial_p_value(runs):
    row = reproduce([runs["35of50"]], _load(_ref(97.0)))["rows"][0]
    assert (row["successes"], row["episodes"]) == (35, 50)
    assert row["p_value"] == pytest.approx(binomtest(35, 50, 0.97).pvalue, rel=1e-9)
    assert row["verdict"] == "below" and row["test"].startswith("exact binomial")


@pytest.mark.slow
def test_10_of_10_against_60_is_above_because_the_exact_test_rejects(runs):
    row = reproduce([runs["10of10"]], _load(_ref(60.0)))["rows"][0]
    assert (row["successes"], row["episodes"]) == (10, 10)
    assert row["p_value"] == pytest.approx(binomtest(10, 10, 0.6).pvalue, rel=1e-12)
    assert row["p_value"] < 0.05 and row["verdict"] == "above"
    assert row["power"] == pytest.approx(_scipy_power(10, 0.6, 0.55), rel=1e-9)


@pytest.mark.slow
def test_146_of_150_against_97_is_consistent(runs):
    row = reproduce([runs["146of150"]], _load(_ref(97.0)))["rows"][0]
    assert (row["successes"], row["episodes"]) == (146, 150)
    assert row["p_value"] == pytest.approx(binomtest(146, 150, 0.97).pvalue, rel=1e-12)
    assert row["power"] == pytest.approx(_scipy_power(150, 0.97, 0.92), rel=1e-9)
    assert row["verdict"] == "consistent"


def test_a_reference_with_counts_is_compared_with_fishers_exact_test(runs):
    row = reproduce([runs["35of50"]], _load(_ref(92.0, episodes=50, successes=46)))["rows"][0]
    assert row["test"].startswith("fisher-exact")
    assert row["p_value"] == pytest.approx(fisher_exact([[35, 15], [46, 4]]).pvalue, rel=1e-12)
    assert (row["reference_successes"], row["reference_episodes"]) == (46, 50)
    assert row["verdict"] == "below"


def test_a_protocol_difference_is_named_with_both_values(runs):
    protocol = {"horizon": {"all": 40}, "replan_every": 5, "episodes_per_task": 50, "fast_render": True}
    row = reproduce([runs["48of50"]], _load(_ref(97.0, protocol=protocol)))["rows"][0]
    diffs = {d["field"]: (d["run"], d["reference"]) for d in row["protocol_differences"]}
    assert diffs == {
        "horizon": (50, 40),
        "replan_every": (1, 5),
        "episodes_per_task": (25, 50),
        "fast_render": (False, True),
    }
    text = render_text(reproduce([runs["48of50"]], _load(_ref(97.0, protocol=protocol))))
    assert "protocol differs: horizon: run 50, reference 40" in text


def test_a_matching_protocol_names_no_difference(runs):
    protocol = {"horizon": {"all": 50}, "replan_every": 1, "episodes_per_task": 25, "settle_steps": 0}
    assert reproduce([runs["48of50"]], _load(_ref(97.0, protocol=protocol)))["rows"][0]["protocol_differences"] == []


def test_the_document_is_the_same_on_every_call(runs):
    ref = _load(_ref(97.0))
    first = json.dumps(reproduce([runs["48of50"]], ref), sort_keys=True)
    assert json.dumps(reproduce([runs["48of50"]], ref), sort_keys=True) == first


def test_one_suite_in_two_runs_is_refused(runs):
    with pytest.raises(ConfigError, match="scripted/all is in two runs"):
        reproduce([runs["48of50"], runs["35of50"]], _load(_ref(97.0)))


def test_a_missing_run_directory_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="absent does not exist"):
        reproduce([tmp_path / "absent"], _load(_ref(97.0)))


@pytest.mark.parametrize(
    ("n", "p"), [(n, p) for n in (1, 2, 7, 10, 23, 50, 51, 150) for p in (0.02, 0.1, 0.5, 0.6, 0.924, 0.97, 0.988)]
)
def test_the_rejection_region_is_where_scipys_binomtest_rejects(n, p):
    assert list(rejection_region(n, p)) == [binomtest(k, n, p).pvalue <= 0.05 for k in range(n + 1)]


def test_episodes_needed_is_the_first_n_with_80_percent_power():
    n = episodes_needed(0.97, 0.05)
    assert _scipy_power(n, 0.97, 0.92) >= 0.8 > _scipy_power(n - 1, 0.97, 0.92)


def test_every_shipped_reference_parses_and_states_a_checkable_source():
    names = shipped_names()
    assert len(names) >= 10
    for name in names:
        ref = load_reference(name)
        assert ref.name == name
        src = ref.source
        if src.kind == "repository":
            assert src.repository and src.path and src.lines and len(src.commit or "") == 40
        else:
            assert src.paper and src.table
        assert check_average(ref) or ref.discrepancy


def test_the_shipped_pi05_openpi_numbers_are_the_readme_table():
    ref = load_reference("pi05-openpi")
    assert {e.suite: e.success_rate for e in ref.entries} == {
        "libero_spatial": 98.8, "libero_object": 98.2, "libero_goal": 98.0, "libero_10": 92.4}  # fmt: skip
    assert ref.source.commit == "15a9616a00943ada6c20a0f158e3adb39df2ccac"
    assert ref.protocol.horizon == {"libero_spatial": 220, "libero_object": 280, "libero_goal": 300, "libero_10": 520,
                                    "libero_90": 400}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "test-ref.json: colour: unknown field"),
        ({"policy": None}, "test-ref.json: policy:"),
        ({"source": {"kind": "repository", "repository": "a/b", "path": "README.md"}}, "test-ref.json: source: a repository source needs"),
        ({"entries": [{"benchmark": "x", "suite": "y", "success_rate": 101}]}, "test-ref.json: entries.0.success_rate:"),
        ({"entries": [{"benchmark": "x", "suite": "y", "success_rate": 90, "episodes": 10, "successes": 8}]},
         "entries.0: 8/10 is not the printed 90.0%"),
        ({"published_average": 50.0}, "published_average 50.0 is not the mean of the entries"),
    ],
)  # fmt: skip
def test_a_bad_reference_file_names_the_file_and_the_field(change, message):
    with pytest.raises(ReferenceFileError) as err:
        _load({**_ref(97.0), **change})
    assert message in str(err.value)


def test_an_unknown_reference_name_lists_the_shipped_ones(tmp_path):
    with pytest.raises(ReferenceFileError) as err:
        load_reference("pi7-nowhere")
    assert "unknown reference 'pi7-nowhere'" in str(err.value) and "pi05-openpi" in str(err.value)


def test_a_damaged_reference_file_is_refused(tmp_path):
    bad = tmp_path / "mine.json"
    bad.write_text('{"format": "rollbench.reference/1", ')
    with pytest.raises(ReferenceFileError, match=r"mine.json: not JSON"):
        load_reference(str(bad))


def _write_ref(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_the_cli_json_is_the_document_and_the_text_says_the_verdict(runs, tmp_path):
    ref_file = _write_ref(tmp_path, _ref(97.0))
    proc = invoke("reproduce", runs["35of50"], "--reference", ref_file, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(json.dumps(reproduce([runs["35of50"]], load_reference(str(ref_file)))))
    text = invoke("reproduce", runs["35of50"], "--reference", ref_file)
    assert "scripted/all: 35/50 = 70.0% [95% Wilson 56.2% – 80.9%] vs 97% (-27.0 points): BELOW" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reference", "pi7-nowhere"], "error: unknown reference 'pi7-nowhere': not a file and not a shipped reference. Shipped references: gr00t"),
        (["--reference", "pi05-openpj"], "error: unknown reference 'pi05-openpj': not a file and not a shipped reference. Did you mean pi05-openpi, pi0-openpi, pi0fast-openpi? Shipped references: gr00t"),
        (["--reference", "pi05-openpi"], "error: no suite of the runs is in reference pi05-openpi"),
        ([], "error: --reference NAME_OR_FILE is missing: rollbench reproduce RUN_DIR... --reference NAME_OR_FILE"),
    ],
)  # fmt: skip
def test_the_cli_refuses_bad_input_with_one_line_and_exit_2(runs, args, message):
    proc = invoke("reproduce", runs["48of50"], *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1


def test_the_cli_names_a_missing_run_directory_and_a_damaged_reference_file(runs, tmp_path):
    proc = invoke("reproduce", tmp_path / "absent", "--reference", "pi05-openpi")
    assert (proc.returncode, proc.stderr) == (2, f"error: {tmp_path / 'absent'} does not exist\n")
    bad = _write_ref(tmp_path, {**_ref(97.0), "entries": [{"benchmark": "scripted", "suite": "all"}]})
    proc = invoke("reproduce", runs["48of50"], "--reference", bad)
    assert proc.returncode == 2
    assert proc.stderr == f"error: reference file {bad}: entries.0.success_rate: required field is missing\n"


@pytest.mark.slow
def test_the_report_has_one_reproduction_section_per_run_of_a_reference_suite(runs, tmp_path):
    ref_file = _write_ref(tmp_path, _ref(97.0))
    out = tmp_path / "report.html"
    proc = invoke("report", runs["35of50"].parent, "--out", out, "--reference", ref_file)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert page.count("<h2>Reproduction of test-ref</h2>") == len(runs)
    assert "<td>scripted/all</td><td>35</td><td>50</td><td>70.0%</td>" in page and "<td>below</td>" in page
    assert "<td>scripted/all</td><td>146</td><td>150</td><td>97.3%</td>" in page and "<td>consistent</td>" in page


def test_the_report_refuses_a_reference_no_run_has_a_suite_of(runs, tmp_path):
    proc = invoke("report", runs["35of50"], "--out", tmp_path / "r.html", "--reference", "pi05-openpi")
    assert proc.returncode == 2 and not (tmp_path / "r.html").exists()
    assert proc.stderr == "error: --reference pi05-openpi: no run directory among the inputs has a suite of it\n"


@pytest.fixture
def dashboard(runs, tmp_path, monkeypatch):
    """The dashboard (real uvicorn on loopback) over the module's runs, with one extra *shipped* reference: the
    shipped set is data, so the test adds ``test-ref`` to it (the real files stay available through the originals)."""
    import rollbench.reproduce as rp
    from dashboard_support import ServerThread

    real_names, real_load = rp.shipped_names, rp.load_reference
    ref_file = _write_ref(tmp_path, _ref(97.0))
    monkeypatch.setattr(rp, "shipped_names", lambda: sorted([*real_names(), "test-ref"]))
    monkeypatch.setattr(rp, "load_reference", lambda n: real_load(str(ref_file) if n == "test-ref" else n))
    srv = ServerThread([runs["35of50"].parent], tmp_path / "labels.json", cache_dir=tmp_path / "cache").start()
    yield srv
    srv.stop()


@pytest.mark.slow
def test_the_dashboard_run_page_and_api_show_the_reproduction(dashboard, runs, tmp_path):
    import httpx

    (key,) = [
        r["key"]
        for r in httpx.get(dashboard.url + "/api/runs", timeout=300).json()["runs"]
        if r["key"].endswith("/35of50")
    ]
    doc = httpx.get(f"{dashboard.url}/api/reproduce/{key}", params={"reference": "test-ref"}, timeout=120).json()
    assert doc == json.loads(json.dumps(reproduce([runs["35of50"]], load_reference(str(tmp_path / "mine.json")))))
    page = httpx.get(f"{dashboard.url}/run/{key}", timeout=120).text
    assert f'<a href="/run/{key}?reference=test-ref">test-ref</a>' in page and "pi05-openpi" not in page
    page = httpx.get(f"{dashboard.url}/run/{key}", params={"reference": "test-ref"}, timeout=120).text
    assert "<h2>Reproduction of test-ref</h2>" in page and "<td>below</td>" in page


@pytest.mark.parametrize("reference", ["/etc/passwd", "pi7-nowhere"])
@pytest.mark.slow
def test_the_dashboard_takes_only_shipped_reference_names(dashboard, reference):
    import httpx

    (key,) = [
        r["key"]
        for r in httpx.get(dashboard.url + "/api/runs", timeout=300).json()["runs"]
        if r["key"].endswith("/35of50")
    ]
    r = httpx.get(f"{dashboard.url}/api/reproduce/{key}", params={"reference": reference}, timeout=120)
    assert r.status_code == 400 and r.json()["error"].startswith(f"unknown reference {reference!r}; shipped: ")
