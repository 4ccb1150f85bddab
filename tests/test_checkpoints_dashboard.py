"""The dashboard's checkpoints pages (FastAPI's TestClient on the real app, no browser): a ``rollbench checkpoints``
OUT folder under the root is linked from the runs page, its page shows the ranking recomputed from the run
directories and the success-against-step chart; a name that is not a found folder is 404, and the guard's Host and
Origin checks hold on the new routes.

Oracle: ``checkpoint_policies.expected_success`` (which planned episode each checkpoint wins, seeds 0..N-1), hand
counts; the chart's coordinates from its stated geometry (x from 60 over 560 units, y from 14 over 172 units)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from checkpoint_policies import expected_success, write_checkpoint
from cli_in_process import invoke
from rollbench.cli.dashboard import DashboardOptions, build_dashboard
from rollbench.dashboard.app import create_app

SKILLS = {1000: 0.3, 2000: 0.9, 3000: 0.6}
N = 12
BASE = "http://127.0.0.1:8301"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("dash")
    for step, skill in SKILLS.items():
        write_checkpoint(base / "train", step, skill)
    args = ["--env", "scripted/reach", "--episodes", N, "--policy-template", "checkpoint_policies:make"]
    options = ["--policy-options", json.dumps({"checkpoint": "{path}"})]
    got = invoke("checkpoints", base / "train", *args, *options, "--out", base / "runs" / "sweep")
    assert got.returncode == 0, got.stderr
    return base / "runs"


@pytest.fixture(scope="module")
def client(root: Path) -> Iterator[TestClient]:
    labels = root.parent / "labels" / "labels.json"
    labels.parent.mkdir()
    dash = build_dashboard([root], labels, DashboardOptions(sync_budget_s=600.0, cache_dir=root.parent / "cache"))
    with TestClient(create_app(dash), base_url=BASE) as c:
        yield c


@pytest.mark.slow
def test_the_runs_page_links_each_checkpoints_folder(client: TestClient) -> None:
    page = client.get("/").text
    assert '<a href="/checkpoints/runs/sweep">runs/sweep</a>' in page
    assert client.get("/api/checkpoints").json() == {
        "checkpoints": [{"name": "runs/sweep", "page": "/checkpoints/runs/sweep", "api": "/api/checkpoints/runs/sweep"}]
    }


@pytest.mark.slow
def test_the_folder_page_shows_the_ranking_recomputed_and_the_chart(client: TestClient, root: Path) -> None:
    wins = {s: sum(expected_success(k, seed) for seed in range(N)) for s, k in SKILLS.items()}
    assert wins == {1000: 4, 2000: 12, 3000: 6}  # by hand from the oracle
    api = client.get("/api/checkpoints/runs/sweep").json()
    assert api["violations"] == [] and api["ranking"]["best"] == 2000
    ranked = [
        (r["step"], r["coverage"]["successes"], r["coverage"]["attempted"]) for r in api["ranking"]["checkpoints"]
    ]
    assert ranked == [(2000, 12, N), (3000, 6, N), (1000, 4, N)]
    keys = {r["name"]: r["key"] for r in client.get("/api/runs").json()["runs"]}
    assert api["run_pages"] == {str(s): f"/run/{keys[f'{s:06d}']}" for s in SKILLS}
    page = client.get("/checkpoints/runs/sweep").text
    assert "<b>Verdict:</b> step 2000: best: better than every other checkpoint" in page
    rows = re.findall(r"<tr><td><a href=\"([^\"]+)\">(\d+)</a></td><td>(\w+)</td><td>([^<]+)</td>", page)
    assert rows == [(f"/run/{keys[f'{s:06d}']}", str(s), "OK", f"{100 * wins[s] / N:.1f}%") for s in (2000, 3000, 1000)]
    # the chart: x = 60 + 560 (step - 1000) / 2000, y = 14 + 172 (1 - rate); the best drawn as "best", the two
    # checkpoints worse than it (Holm) as "worse"
    circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="4" class="(\w+)"/>', page)
    expected = [(1000, "worse"), (2000, "best"), (3000, "worse")]
    assert circles == [
        (f"{60 + 560 * (s - 1000) / 2000:.1f}", f"{14 + 172 * (1 - wins[s] / N):.1f}", k) for s, k in expected
    ]


@pytest.mark.slow
def test_a_checkpoints_json_that_disagrees_shows_a_violation(client: TestClient, root: Path) -> None:
    path = root / "sweep" / "checkpoints.json"
    kept = path.read_text()
    doc = json.loads(kept)
    doc["best"] = 1000
    path.write_text(json.dumps(doc))
    try:
        page = client.get("/checkpoints/runs/sweep").text
    finally:
        path.write_text(kept)
    assert f"<li>Violation: {path} says best 1000; recomputed from the runs: 2000</li>" in page


@pytest.mark.parametrize("name", ["runs/nosuch", "runs/sweep/001000", "runs/%2E%2E/runs/sweep", "sweep", "%2Fetc"])
def test_a_name_that_is_not_a_found_folder_is_404(client: TestClient, name: str) -> None:
    for prefix in ("/checkpoints/", "/api/checkpoints/"):
        got = client.get(prefix + name)
        assert got.status_code == 404 and got.json()["error"].startswith("no checkpoints folder"), (prefix, name)


def test_the_guard_checks_host_and_origin_on_the_checkpoints_routes(client: TestClient) -> None:
    assert client.get("/checkpoints/runs/sweep", headers={"host": "evil.example"}).status_code == 421
    foreign = client.get(
        "/api/checkpoints/runs/sweep", headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"}
    )
    assert foreign.status_code == 403
