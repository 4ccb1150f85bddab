"""What summarize and report pool and pair, over real runs of the scripted env (no simulator, a second each): report
decides pairing per pair of runs, cells are keyed by instruction text, repeated episodes are counted with a warning,
served policies are labelled by the server's name and kept apart, and report closes its figures."""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from conftest import rollbench_bin
from rollbench.analysis.compare import compare_where_paired
from rollbench.analysis.html_report import render_report, report_comparison
from rollbench.analysis.sources import load_runs
from rollbench.analysis.summarize import summarize_runs
from rollbench.api import evaluate
from rollbench.grading.stats import Z95

REACH = "scripted/reach"
CANON = "move the point to the goal"  # scripted/reach's instruction


def _run(out: Path, policy: str, **kw: Any) -> Path:
    fields: dict[str, Any] = {"env": REACH, "episodes": 4, "max_steps": 20, "seed": 0, **kw}
    evaluate(out=out, policy=policy, host_label="lab", **fields)
    return out


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """expert and zero are paired (seeds 0-3); zero-seed10 shares the task but not the seeds; init shares no task."""
    root = tmp_path_factory.mktemp("mixed")
    _run(root / "expert", "scripted-expert")  # succeeds in all 4 episodes
    _run(root / "zero", "zero")  # fails all 4
    _run(root / "zero-seed10", "zero", seed=10)
    _run(root / "init", "zero", env="scripted/reach-init")
    return root


@pytest.mark.slow
def test_report_pairs_each_pair_of_runs_on_its_own_and_skips_pairs_with_no_common_task(mixed_root: Path) -> None:
    doc = compare_where_paired(load_runs([mixed_root]).runs, n_resamples=1000)
    got = {(c["a"], c["b"]): c for c in doc["comparisons"]}
    assert list(got) == [
        ("lab/point/expert", "lab/point/zero"),
        ("lab/point/expert", "lab/point/zero-seed10"),
        ("lab/point/zero", "lab/point/zero-seed10"),
    ]
    paired = got[("lab/point/expert", "lab/point/zero")]
    # still paired next to the odd runs: exact McNemar, 4 discordant pairs all A-only: p = 2 * (1/2)^4
    assert paired["statistics"] == "paired" and "unpaired_reason" not in paired
    assert (paired["pooled"]["a_only"], paired["pooled"]["b_only"], paired["pooled"]["pairs"]) == (4, 0, 4)
    assert paired["pooled"]["p_value"] == 0.125 and paired["pooled"]["test"] == "exact McNemar (two-sided)"
    unpaired = got[("lab/point/expert", "lab/point/zero-seed10")]
    assert unpaired["statistics"] == "unpaired" and unpaired["pooled"]["test"].startswith("Fisher")
    assert unpaired["pooled"]["p_value"] == pytest.approx(2 / 70)  # 4/4 vs 0/4: two of C(8,4) = 70 tables
    assert unpaired["unpaired_reason"] == (
        "seeds differ (task scripted/reach: lab/point/expert has 0-3, lab/point/zero-seed10 has 10-13)"
    )
    assert got[("lab/point/zero", "lab/point/zero-seed10")]["pooled"]["p_value"] == 1.0
    # Holm over the three comparisons made (the init pairs are not among them): 3 x 2/70, 2 x 0.125, 1 x 1
    assert [c["pooled"]["p_holm_pairs"] for c in doc["comparisons"]] == pytest.approx([0.25, 6 / 70, 1.0])
    assert doc["not_compared"] == [
        {"a": "lab/point/expert", "b": "lab/point/init", "reason": "no task in common"},
        {"a": "lab/point/init", "b": "lab/point/zero", "reason": "no task in common"},
        {"a": "lab/point/init", "b": "lab/point/zero-seed10", "reason": "no task in common"},
    ]
    assert (doc["statistics"], doc["unpaired_pairs"]) == ("mixed", 2)


@pytest.mark.slow
def test_report_warns_at_the_top_when_a_comparison_is_unpaired_and_lists_skipped_pairs(
    mixed_root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "r.html"
    proc = invoke("report", mixed_root, "--out", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    warning = text.index("<strong>Warning:</strong> 2 of 3 comparisons use unpaired statistics")
    assert warning < text.index("<h2>Runs</h2>")  # at the top
    assert "lab/point/expert vs lab/point/zero-seed10 (seeds differ" in text
    assert text.count("— UNPAIRED</h3>") == 2 and text.count("— paired</h3>") == 1
    assert text.count("McNemar p") == 1 and text.count("Fisher p") == 2
    assert (
        "Not compared: lab/point/expert vs lab/point/init (no task in common); lab/point/init vs lab/point/zero (no "
        "task in common); lab/point/init vs lab/point/zero-seed10 (no task in common)." in text
    )
    assert "pooled</td><td class=n>—" not in text  # no empty pooled row for a pair without a common task
    assert "warning: 2 of 3 comparisons use unpaired statistics" in " ".join(proc.stderr.split())


def test_summarize_keys_cells_by_instruction_text_never_by_a_shared_variant_name(tmp_path: Path) -> None:
    # round 1 calls "go to the goal" c1; round 2 calls another text c1 and "go to the goal" incumbent
    r1 = ({"name": "c1", "instruction": "go to the goal"}, {"name": "c2", "instruction": "reach it"})
    r2 = ({"name": "c1", "instruction": "head for the goal"}, {"name": "incumbent", "instruction": "go to the goal"})
    _run(tmp_path / "round1", "zero", episodes=2, instructions=r1)
    _run(tmp_path / "round2", "zero", episodes=2, seed=5, instructions=r2)
    doc = summarize_runs(load_runs([tmp_path]))
    assert doc["by"] == ["task", "model", "instruction"]
    cells = {c["instruction"]: (c["variants"], c["episodes"], c["runs"], c["repeats"]) for c in doc["cells"]}
    assert cells == {
        "go to the goal": (["c1", "incumbent"], 4, ["lab/point/round1", "lab/point/round2"], 0),
        "head for the goal": (["c1"], 2, ["lab/point/round2"], 0),
        "reach it": (["c2"], 2, ["lab/point/round1"], 0),
    }
    assert doc["warnings"] == []
    from rollbench.analysis.figures import success_rate_figure, to_png

    fig = success_rate_figure(doc)  # one bar per instruction text, labelled by its variant names
    assert sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts()) == [
        "zero · c1", "zero · c1, incumbent", "zero · c2",
    ]  # fmt: skip
    to_png(fig)
    by_variant = summarize_runs(load_runs([tmp_path]), ("task", "variant"))
    assert [(c["variant"], c["instruction"], c["episodes"]) for c in by_variant["cells"]] == [
        ("c1", "go to the goal", 2),
        ("c1", "head for the goal", 2),
        ("c2", "reach it", 2),
        ("incumbent", "go to the goal", 2),
    ]


def test_summarize_counts_repeated_episodes_and_warns_naming_the_cell(tmp_path: Path) -> None:
    _run(tmp_path / "a", "zero", episodes=3)  # seeds 0-2
    _run(tmp_path / "b", "zero", episodes=5)  # seeds 0-4: 0-2 again
    doc = summarize_runs(load_runs([tmp_path]))
    [cell] = doc["cells"]
    assert (cell["episodes"], cell["repeats"], cell["successes"]) == (8, 3, 0)  # 5 distinct, 3 repeated
    z2 = Z95 * Z95
    assert cell["ci95_high"] == pytest.approx(z2 / (8 + z2))  # Wilson 0/8 (every episode counted): 0.32441
    assert doc["warnings"] == [
        f"cell task={REACH}, model=zero, instruction={CANON}: 3 of its 8 episodes repeat a (task, seed, initial "
        "state, instruction) already in the cell (3 such episode(s) recorded more than once, across runs "
        "lab/point/a, lab/point/b); each is counted, which is honest only if the policy or env is stochastic (a "
        "deterministic policy repeats the same outcome and the interval is too narrow)"
    ]
    proc = invoke("summarize", tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cells"][0]["repeats"] == 3  # stdout stays JSON; the warning goes to stderr
    assert "warning: cell task=scripted/reach, model=zero" in proc.stderr and "3 of its 8 episodes" in proc.stderr
    csv_text = invoke("summarize", tmp_path / "a", "--csv").stdout.splitlines()
    assert csv_text[0].startswith("task,model,instruction,variants,hosts,runs,episodes,repeats,errored,successes")
    assert csv_text[1].startswith(f"{REACH},zero,{CANON},,lab/point,lab/point/a,3,0,0,0,0.0,")
    by_run = summarize_runs(load_runs([tmp_path]), ("task", "run"))
    assert [(c["episodes"], c["repeats"]) for c in by_run["cells"]] == [(3, 0), (5, 0)] and by_run["warnings"] == []


@contextmanager
def _served(tmp: Path, policy: str) -> Iterator[str]:
    cmd = [rollbench_bin(), "serve-policy", "--policy", policy, "--protocol", "ws", "--port", "0", "--env", REACH]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "serving POLICY at URL" once the port is open
        assert line.startswith("serving "), line
        yield line.split()[-1]
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_served_policy_is_labelled_name_via_url_and_kept_apart_unless_merge_served(tmp_path: Path) -> None:
    with _served(tmp_path, "scripted-expert") as url:
        port = url.rsplit(":", 1)[1]
        other = f"ws://localhost:{port}"  # the same server reached another way
        _run(tmp_path / "v4", url, episodes=2)
        _run(tmp_path / "name", other, episodes=2)
    _run(tmp_path / "inproc", "scripted-expert", episodes=2)
    log = json.loads((tmp_path / "v4" / "run.json").read_text())
    assert log["plan"]["policy"]["name"] == url  # what run.json records: the URL, and the server's own name
    assert log["plan"]["policy"]["provenance"]["server_metadata"]["policy"] == "scripted-expert"
    apart = summarize_runs(load_runs([tmp_path]), ("policy",))
    assert [(c["policy"], c["episodes"]) for c in apart["cells"]] == [
        ("scripted-expert", 2),
        (f"scripted-expert via {url}", 2),
        (f"scripted-expert via {other}", 2),
    ]
    assert {c["model"] for c in summarize_runs(load_runs([tmp_path]))["cells"]} == {
        "scripted-expert",
        f"scripted-expert via {url}",
        f"scripted-expert via {other}",
    }
    merged = invoke("summarize", tmp_path, "--by", "policy", "--merge-served", "--json")
    assert merged.returncode == 0, merged.stderr
    [cell] = json.loads(merged.stdout)["cells"]
    assert (cell["policy"], cell["episodes"], cell["repeats"]) == ("scripted-expert", 6, 4)  # seeds 0-1 three times
    assert "4 of its 6 episodes repeat" in " ".join(merged.stderr.split())


@pytest.mark.slow
def test_report_with_more_than_twenty_figures_closes_each_after_writing_it(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    for i in range(7):  # 7 runs: 21 pairwise difference figures, 24 figures in all
        _run(tmp_path / "runs" / f"r{i}", "zero" if i % 2 else "scripted-expert", episodes=1, max_steps=3)
    loaded = load_runs([tmp_path / "runs"])
    plt.close("all")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "More than 20 figures have been opened" would raise
        files: dict[str, bytes] = {}  # what report --plots writes: each figure as PNG and SVG
        text = render_report(loaded, comparison=report_comparison(loaded, n_resamples=200), plots=files)
    assert plt.get_fignums() == []
    assert text.count("<img ") == 24
    assert len(files) == 48
