"""The sequential comparison in ``rollbench report`` (a section with a row per task and the statistic-against-pairs
figure) and the figure itself, against the decision recomputed from the run directories."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from rollbench.analysis.figures import sequential_figure
from rollbench.core.spec import build_spec
from rollbench.sequential.runner import SequentialConfig, run_sequential
from sequential_support import invoke


class _Section(HTMLParser):
    """Rows of the table after the 'Sequential decisions' heading, and the images after it."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = self.in_h2 = False
        self.rows: list[list[str]] = []
        self.images = 0
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self.in_h2 = True
            self.inside = False
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.cell = []
        elif self.inside and tag == "img" and dict(attrs).get("src", "").startswith("data:image/png;base64,"):
            self.images += 1

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None
        if tag == "h2":
            self.in_h2 = False

    def handle_data(self, data):
        if self.in_h2 and data == "Sequential decisions":
            self.inside = True
        elif self.cell is not None:
            self.cell.append(data)


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """One sequential comparison and ``rollbench report`` of it, in this process (both tests read the same page):
    the comparison's document and the page's HTML."""
    tmp_path = tmp_path_factory.mktemp("reported")
    # seed 8: B is decided better at the third look (pair 15), with seed 0 at the fourth
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=8)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=8)
    doc = run_sequential(a, b, tmp_path / "cmp", SequentialConfig(delta=0.2, look_every=5))
    r = invoke(["report", str(tmp_path / "cmp"), "--out", str(tmp_path / "r.html")])
    assert r.returncode == 0, r.stderr
    return doc, (tmp_path / "r.html").read_text()


@pytest.mark.slow
def test_report_shows_each_decision_and_its_figure(reported: tuple[dict, str]) -> None:
    doc, html = reported
    task = doc["tasks"][0]
    page = _Section()
    page.feed(html)
    rows = [row for row in page.rows if row]
    assert rows[0][:5] == ["scripted/reach", "scripted-expert (action noise 6)", "scripted-expert", "B better",
                           str(task["stopped_at"])]  # fmt: skip
    last = task["looks"][-1]
    assert rows[0][5:7] == [str(last["b_only"]), str(last["a_only"])]
    assert page.images >= 1

    fig = sequential_figure(task)
    ax = fig.axes[0]
    b_line, a_line = ax.lines[0], ax.lines[1]
    assert list(b_line.get_xdata()) == [lk["pairs"] for lk in task["looks"]]
    assert list(b_line.get_ydata()) == [lk["llr_b"] for lk in task["looks"]]
    assert list(a_line.get_ydata()) == [lk["llr_a"] for lk in task["looks"]]
    assert list(ax.lines[2].get_ydata()) == [task["design"]["efficacy_llr"]] * 2
    assert list(ax.lines[3].get_ydata()) == [task["design"]["futility_llr"]] * 2
    assert list(ax.lines[4].get_xdata()) == [task["stopped_at"]] * 2
    plt.close(fig)


@pytest.mark.slow
def test_the_fixed_n_comparison_of_sequential_arms_carries_the_early_stopping_caveat(
    reported: tuple[dict, str], tmp_path: Path
) -> None:
    """Issue 30 (h-cli 4): the report's ordinary (fixed-N McNemar) comparison of the two arms says they stopped
    early and points to the sequential decision; a comparison of two ordinary runs says nothing of the kind."""
    import re

    from rollbench.api import evaluate

    text = re.sub(r"<[^>]+>", "", reported[1])
    assert text.count("Early stopping: ") == 1
    assert re.search(
        r"Early stopping: \S+ and \S+ are arms of rollbench sequential, which stopped when its test decided\. The p "
        r"values and intervals below are fixed-N statistics",
        text,
    ), text[:2000]
    for name, policy in (("x", "zero"), ("y", "scripted-expert")):
        evaluate(out=tmp_path / "plain" / name, env="scripted/reach", policy=policy, episodes=3, max_steps=5)
    r = invoke(["report", str(tmp_path / "plain"), "--out", str(tmp_path / "p.html")])
    assert r.returncode == 0, r.stderr
    plain = (tmp_path / "p.html").read_text()
    assert "McNemar p" in plain and "Early stopping" not in plain
