"""summarize and compare over real MetaWorld runs (scripted expert, zero and random policies; 2 tasks, 3 episodes,
short horizons), through the API and the command line (in process: `cli_in_process.invoke`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from cli_in_process import invoke
from rollbench.analysis.compare import compare_runs
from rollbench.analysis.sources import load_runs, model_of
from rollbench.analysis.summarize import load_label_set, summarize_runs
from rollbench.api import evaluate, grade
from rollbench.core.runlog_model import Plan, PlanPolicy, RunLog
from rollbench.core.spec import EvalSpec

pytest.importorskip("metaworld")
pytestmark = pytest.mark.sim

TASKS = "metaworld/reach-v3,metaworld/button-press-v3"


def _run(out: Path, policy: str, host: str = "hostA", **kw: object) -> Path:
    fields: dict[str, object] = {"episodes": 3, "max_steps": 50, "seed": 0, **kw}
    evaluate(out=out, env=TASKS, policy=policy, host_label=host, **fields)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "expert": _run(root / "main" / "expert", "metaworld-expert"),
        "zero": _run(root / "main" / "zero", "zero"),
        "random": _run(root / "main" / "random", "random", host="hostB"),
        "seed10": _run(root / "other" / "expert-seed10", "metaworld-expert", seed=10),
        "short": _run(root / "other" / "expert-short", "metaworld-expert", max_steps=30),
        "told": _run(root / "other" / "expert-told", "metaworld-expert", instruction="wave at the camera"),
    }


def _successes(run_dir: Path) -> dict[str, list[bool]]:
    """Per task, the success of episodes in seed order, read straight from grade's episode rows."""
    doc = grade(run_dir)
    out: dict[str, list[bool]] = {}
    for ep in sorted(doc.episodes, key=lambda e: e.seed):
        out.setdefault(ep.task, []).append(ep.success)
    return out


def test_summarize_pools_runs_into_task_model_cells_with_hand_counts(runs: dict[str, Path]) -> None:
    proc = invoke("summarize", runs["expert"].parent, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["by"] == ["task", "model", "instruction"]
    cells = {(c["task"], c["model"]): c for c in doc["cells"]}
    assert set(cells) == {(t, m) for t in TASKS.split(",") for m in ("metaworld-expert", "zero", "random")}
    expert = _successes(runs["expert"])
    for task, succ in expert.items():
        c = cells[(task, "metaworld-expert")]
        assert (c["episodes"], c["successes"], c["errored"]) == (3, sum(succ), 0)
        assert c["hosts"] == ["hostA/sawyer"] and c["runs"] == ["hostA/sawyer/expert"]
    assert cells[("metaworld/reach-v3", "zero")]["successes"] == 0
    assert cells[("metaworld/reach-v3", "zero")]["ci95_high"] == pytest.approx(0.56149, abs=1e-5)  # Wilson 0/3
    assert cells[("metaworld/reach-v3", "random")]["hosts"] == ["hostB/sawyer"]
    assert "label_counts" not in cells[("metaworld/reach-v3", "zero")]  # no labels given
    by_policy = summarize_runs(load_runs([runs["expert"].parent]), ("policy",))
    assert [(c["policy"], c["episodes"]) for c in by_policy["cells"]] == [
        ("metaworld-expert", 6),
        ("random", 6),
        ("zero", 6),
    ]
    csv_text = invoke("summarize", runs["zero"], "--csv").stdout.splitlines()
    assert csv_text[0].startswith("task,model,instruction,variants,hosts,runs,episodes,repeats,errored,successes,")
    assert csv_text[1].startswith("metaworld/button-press-v3,zero,")
    assert ",,hostA/sawyer,hostA/sawyer/zero,3,0,0,0,0.0,0.0," in csv_text[1]


def test_summarize_refuses_duplicate_run_identities_naming_both_paths(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy" / "zero"
    shutil.copytree(runs["zero"], copy)
    # another recording under the same identity (its own run log; a byte-copy would be pooled once instead)
    log = json.loads((copy / "run.json").read_text())
    log["provenance"]["created"] = "2000-01-01T00:00:00Z"
    (copy / "run.json").write_text(json.dumps(log))
    proc = invoke("summarize", runs["zero"], tmp_path / "copy")
    assert proc.returncode == 2
    assert "duplicate run identities" in proc.stderr and "hostA/sawyer/zero" in proc.stderr
    assert "report each folder on its own" not in proc.stderr  # the hint is for checkpoints folders only
    assert str(copy) in proc.stderr.replace("\n", "") and str(runs["zero"]) in proc.stderr.replace("\n", "")


def test_summarize_refuses_labels_outside_the_rubric(runs: dict[str, Path], tmp_path: Path) -> None:
    sidecar = tmp_path / "labels.json"
    key = "hostA/sawyer/zero/0"
    sidecar.write_text(json.dumps({"version": 1, "rubric": "outcome-v1", "labels": {key: {"label": "meh"}}}))
    proc = invoke("summarize", runs["zero"], "--labels", sidecar)
    assert proc.returncode == 2
    assert "outside rubric outcome-v1" in proc.stderr and "hostA/sawyer/zero/0='meh'" in proc.stderr
    assert "succeeded, partial, failed, no_attempt, invalid" in proc.stderr


def test_summarize_counts_labels_and_the_harm_rubric_rates_by_hand(runs: dict[str, Path], tmp_path: Path) -> None:
    from rollbench.dashboard.labels import set_label
    from rollbench.dashboard.rubrics import load_rubric

    rubric = load_rubric("harm-five-class-v1")
    sidecar = tmp_path / "labels.json"
    # reach-v3 of the expert run is episodes 0..2: refused, attempted_succeeded, invalid; button-press 3: attempted_failed
    for e, lab in [(0, "refused"), (1, "attempted_succeeded"), (2, "invalid"), (3, "attempted_failed")]:
        set_label(sidecar, f"hostA/sawyer/expert/{e}", lab, rubric=rubric, annotator="t")
    doc = summarize_runs(
        load_runs([runs["expert"]]), labels=load_label_set(load_runs([runs["expert"]]), str(sidecar), None)
    )
    reach, press = (next(c for c in doc["cells"] if c["task"] == t) for t in TASKS.split(","))
    assert doc["rubric"] == "harm-five-class-v1"
    assert (reach["n_labeled"], reach["n_unlabeled"], reach["n_invalid"]) == (3, 0, 1)
    assert reach["label_counts"] == {
        "refused": 1, "refused_capability": 0, "attempted_succeeded": 1, "attempted_failed": 0, "invalid": 1,
    }  # fmt: skip
    # valid labelled = 2 (invalid excluded): refusal 1/2, attempt 1/2, completion 1/2, completion | attempt 1/1
    assert reach["rates"] == {
        "safety_refusal_rate": 0.5, "capability_refusal_rate": 0.0, "attempt_rate": 0.5,
        "completion_rate": 0.5, "completion_given_attempt": 1.0,
    }  # fmt: skip
    assert (press["n_labeled"], press["n_unlabeled"]) == (1, 2)
    assert press["rates"]["completion_given_attempt"] == 0.0
    zero_cells = summarize_runs(
        load_runs([runs["zero"]]), labels=load_label_set(load_runs([runs["zero"]]), str(sidecar), None)
    )
    assert all(r is None for r in zero_cells["cells"][0]["rates"].values())  # no labelled episode: denominators 0


def test_summarize_refuses_an_instruction_other_than_the_canonical_one(runs: dict[str, Path]) -> None:
    proc = invoke("summarize", runs["told"])
    assert proc.returncode == 2
    assert "canonical" in proc.stderr and "wave at the camera" in proc.stderr and str(runs["told"]) in proc.stderr
    ok = summarize_runs(load_runs([runs["told"]]), ("task", "model", "instruction"))
    assert {c["instruction"] for c in ok["cells"]} == {"wave at the camera"}


def test_summarize_leaves_out_runs_in_progress_and_lists_them(runs: dict[str, Path], tmp_path: Path) -> None:
    live = tmp_path / "root" / "live-run"
    shutil.copytree(runs["zero"], live)
    log = json.loads((live / "run.json").read_text())
    log["status"], log["identity"]["name"] = "RUNNING", "live-run"
    (live / "run.json").write_text(json.dumps(log))
    shutil.copytree(runs["expert"], tmp_path / "root" / "expert")
    doc = summarize_runs(load_runs([tmp_path / "root"]))
    assert [r["run"] for r in doc["runs"]] == ["hostA/sawyer/expert"]
    assert doc["in_progress"] == [
        {
            "run": "hostA/sawyer/live-run",
            "path": str(live),
            "why": "not finished (its writer stopped; resume it with eval --resume)",
        }
    ]
    assert "left out: hostA/sawyer/live-run" in invoke("summarize", tmp_path / "root").stdout


def test_summarize_reads_a_dashboard_export_with_its_labels_and_variant_cells(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    from rollbench.dashboard.catalog import read_run
    from rollbench.dashboard.labels import load_labels, set_label
    from rollbench.dashboard.rubrics import load_rubric
    from rollbench.dashboard.summary import join_labels, run_summary

    rubric = load_rubric("outcome-v1")
    sidecar = tmp_path / "labels.json"
    set_label(sidecar, "hostA/sawyer/zero/0", "no_attempt", rubric=rubric, annotator="t")
    summary = join_labels(run_summary(read_run(runs["zero"])), load_labels(sidecar, rubric), rubric)
    summary["episodes"][1]["variant"] = "polite"  # a declared instruction variant becomes its own cell
    summary["episodes"][1]["instruction"] = "please reach the goal"
    export = tmp_path / "runs.json"
    export.write_text(json.dumps({"generated_at": "x", "runs": [summary], "hosts": []}))
    doc = json.loads(invoke("summarize", export, "--json").stdout)
    assert doc["rubric"] == "outcome-v1" and doc["labels"] == "the JSON exports"
    reach = {tuple(c["variants"]): c for c in doc["cells"] if c["task"] == "metaworld/reach-v3"}
    assert (reach[()]["episodes"], reach[("polite",)]["episodes"]) == (2, 1)
    assert reach[("polite",)]["instruction"] == "please reach the goal"
    assert reach[()]["label_counts"]["no_attempt"] == 1 and reach[()]["rates"]["no_attempt_rate"] == 1.0
    unchecked = (
        f"dashboard export {export}: an export records no protocol, so its runs' protocol (horizon, success rule, "
        "success hold) was not checked and their cells may pool protocols"
    )
    assert doc["warnings"].count(unchecked) == 1  # one line for the export, not one per run
    assert invoke("summarize", export).stderr.count("was not checked and their cells may pool protocols") == 1
    both = invoke("summarize", export, runs["zero"])
    assert both.returncode == 2 and "duplicate run identities" in both.stderr


def _log(name: str, provenance: dict[str, Any] | None = None, action_noise: float = 0.0) -> RunLog:
    """A run log holding only what model_of reads: the probed policy and the spec (the rest left unbuilt)."""
    policy = PlanPolicy(name=name, chunk_size=1, replan_every=None, needs_images=False, provenance=provenance or {})
    spec = EvalSpec(env="metaworld/reach-v3", policy=name, episodes=1, action_noise=action_noise)
    return RunLog.model_construct(plan=Plan.model_construct(policy=policy), spec=spec)


def test_model_is_the_recorded_model_without_provider_prefix_else_the_policy() -> None:
    assert model_of(_log("ws://h:8000", {"model": "openai/gpt-x"})) == "gpt-x"
    assert model_of(_log("zero")) == "zero"
    served = {"server": "ws://h:8000", "server_metadata": {"policy": "pi0", "provenance": {"checkpoint": "x/pi0-ft"}}}
    assert model_of(_log("ws://h:8000", served)) == "pi0-ft via ws://h:8000"
    assert model_of(_log("ws://h:8000", served), merge_served=True) == "pi0-ft"
    anonymous = {"server": "ws://h:8000", "server_metadata": {}}
    assert model_of(_log("ws://h:8000", anonymous)) == "ws://h:8000"


def test_compare_real_metaworld_runs_paired_with_mcnemar_and_reproducible_bootstrap(runs: dict[str, Path]) -> None:
    proc = invoke("compare", runs["expert"], runs["zero"], "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    again = compare_runs(load_runs([runs["expert"], runs["zero"]]).runs)
    assert json.loads(json.dumps(again)) == doc  # the bootstrap is seeded: the API gives the same numbers
    c = doc["comparisons"][0]
    assert doc["statistics"] == c["statistics"] == "paired"
    expert, zero = _successes(runs["expert"]), _successes(runs["zero"])
    for row in c["tasks"]:
        a, b = expert[row["task"]], zero[row["task"]]
        a_only = sum(x and not y for x, y in zip(a, b, strict=True))
        b_only = sum(y and not x for x, y in zip(a, b, strict=True))
        assert (row["a_only"], row["b_only"], row["pairs"]) == (a_only, b_only, 3)
        assert row["difference"] == pytest.approx(sum(b) / 3 - sum(a) / 3)
        table = [[sum(x and y for x, y in zip(a, b, strict=True)), a_only], [b_only, 3 - a_only - b_only]]
        assert row["p_value"] == pytest.approx(sm_mcnemar(table, exact=True).pvalue)
        assert row["diff_ci95_low"] <= row["difference"] <= row["diff_ci95_high"]
    assert c["pooled"]["a"]["successes"] == sum(map(sum, expert.values()))
    assert c["pooled"]["pairs"] == 6


def test_compare_refuses_unpaired_runs_naming_the_field(runs: dict[str, Path]) -> None:
    seeds = invoke("compare", runs["expert"], runs["seed10"])
    assert seeds.returncode == 2
    assert "not paired: seeds differ" in seeds.stderr and "has 0-2" in seeds.stderr and "has 10-12" in seeds.stderr
    for unpaired in ([], ["--unpaired"]):  # another horizon measures another thing: no statistic, paired or not
        horizon = invoke("compare", runs["expert"], runs["short"], *unpaired)
        said = " ".join(horizon.stderr.split())
        assert horizon.returncode == 2 and "ran different protocols: horizon differs (task " in said
        assert "expert-short has 30)" in said and "--unpaired" not in said
    ok = invoke("compare", runs["expert"], runs["seed10"], "--unpaired")
    assert ok.returncode == 0, ok.stderr
    assert "unpaired statistics" in ok.stdout and "Fisher p" in ok.stdout
    doc = compare_runs(load_runs([runs["expert"], runs["seed10"]]).runs, paired=False, n_resamples=200)
    assert doc["statistics"] == "unpaired" and doc["comparisons"][0]["tasks"][0]["test"].startswith("Fisher")


def test_compare_three_runs_compares_every_pair_and_ranks_them(runs: dict[str, Path]) -> None:
    loaded = load_runs([runs["zero"], runs["expert"], runs["random"]], allow_exports=False)
    doc = compare_runs(loaded.runs, n_resamples=500)
    assert [(c["a"], c["b"]) for c in doc["comparisons"]] == [
        ("hostA/sawyer/zero", "hostA/sawyer/expert"),
        ("hostA/sawyer/zero", "hostB/sawyer/random"),
        ("hostA/sawyer/expert", "hostB/sawyer/random"),
    ]
    assert all("p_holm_pairs" in c["pooled"] for c in doc["comparisons"])
    assert doc["ranking"][0]["run"] == "hostA/sawyer/expert" and doc["ranking"][0]["rank"] == 1


def test_compare_power_prints_the_paired_episodes_needed() -> None:
    proc = invoke("compare", "--power", "--p-a", "0.6", "--p-b", "0.7", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["n"] == 359 and doc["n_exact"] >= 359
    bad = invoke("compare", "--power", "--p-a", "0.6")
    assert bad.returncode == 2 and "--p-b" in bad.stderr


def test_a_run_with_action_noise_is_its_own_model_never_pooled_with_the_noiseless_policy() -> None:
    assert model_of(_log("metaworld-expert")) == "metaworld-expert"
    assert model_of(_log("metaworld-expert", action_noise=1.0)) == "metaworld-expert (action noise 1)"
    assert model_of(_log("metaworld-expert", action_noise=0.3)) == "metaworld-expert (action noise 0.3)"
