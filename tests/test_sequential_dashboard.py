"""The dashboard's run page of a sequential arm (a real ``rollbench dashboard`` on loopback): the decision and the
statistic-against-pairs chart, recomputed from both arms; a partner name that is not a plain sibling is not read."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from dashboard_support import ServerThread
from rollbench.core.spec import build_spec
from rollbench.sequential.runner import SequentialConfig, run_sequential


@pytest.mark.slow
def test_an_arms_run_page_shows_its_decision_and_the_chart_of_every_look(tmp_path: Path) -> None:
    # seed 8: B is decided better at the third look (pair 15), with seed 0 at the fourth
    a = build_spec(env="scripted/reach", policy="scripted-expert", action_noise=6.0, episodes=1, seed=8)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=8)
    doc = run_sequential(a, b, tmp_path / "runs" / "cmp", SequentialConfig(delta=0.2, look_every=5, host_label="h"))
    task = doc["tasks"][0]
    log = json.loads((tmp_path / "runs" / "cmp" / "b-scripted_reach" / "run.json").read_text())
    server = ServerThread([tmp_path / "runs"], tmp_path / "labels.json").start()
    try:
        api = httpx.get(f"{server.url}/api/run/h/point/a-scripted_reach", timeout=60).json()
        page = httpx.get(f"{server.url}/run/h/point/a-scripted_reach", timeout=60).text
    finally:
        server.stop()
    got = api["sequential"]["task"]
    assert (got["decision"], got["stopped_at"], got["looks"]) == ("b_better", task["stopped_at"], task["looks"])
    assert "<h2>Sequential test</h2>" in page and '<b class="seq-decision">b_better</b>' in page
    assert page.count('class="llr_b"') == 1 and page.count('class="llr_a"') == 1
    assert f"b_better at pair {task['stopped_at']}</text>" in page
    # the chart's steps: one vertical step per look, plus the origin
    b_points = page.split('class="llr_b"')[0].rsplit('<polyline points="', 1)[1].split('"')[0].split()
    assert len(b_points) == 1 + 2 * len(task["looks"])
    assert log["sequential"]["partner"] == "a-scripted_reach"


def test_an_arm_whose_test_cannot_be_recomputed_shows_why_on_its_page(tmp_path: Path) -> None:
    """An arm handed over without its partner: the page said 500 (its template read ``sequential.task`` of the error
    answer under StrictUndefined; hostile round 22, b F2); it shows the reason, as ``/api/run`` gives it."""
    a = build_spec(env="scripted/reach", policy="zero", episodes=1, seed=0)
    b = build_spec(env="scripted/reach", policy="scripted-expert", episodes=1, seed=0)
    run_sequential(a, b, tmp_path / "made", SequentialConfig(delta=0.3, look_every=5, host_label="h"))
    (tmp_path / "runs").mkdir()
    (tmp_path / "made" / "a-scripted_reach").rename(tmp_path / "runs" / "a-scripted_reach")  # its partner left behind
    server = ServerThread([tmp_path / "runs"], tmp_path / "labels.json").start()
    try:
        api = httpx.get(f"{server.url}/api/run/h/point/a-scripted_reach", timeout=60).json()
        page = httpx.get(f"{server.url}/run/h/point/a-scripted_reach", timeout=60)
    finally:
        server.stop()
    assert api["sequential"] == {"error": "its partner arm b-scripted_reach is not beside it"}
    assert page.status_code == 200
    assert '<h2>Sequential test</h2><p class="warn">its partner arm b-scripted_reach is not beside it</p>' in page.text


def test_a_partner_that_is_not_a_plain_sibling_name_is_not_followed(tmp_path: Path) -> None:
    from rollbench.dashboard.service import sequential_of

    for partner in ("../elsewhere", "/etc", "..", "a/b"):
        assert sequential_of(tmp_path, partner) == {"error": "run.json names no valid partner arm"}
