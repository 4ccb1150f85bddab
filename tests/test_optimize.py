"""``rollbench optimize-instruction``: the search climbs when the words matter, refuses to fool itself when they do
not, resumes after SIGKILL, and its ``llm`` proposer speaks the OpenAI chat-completions format.

Real MetaWorld episodes with ``metaworld-lang-expert`` (in-process, or a real ``serve-policy`` on loopback). The only
test double is the LLM provider: a FastAPI app on loopback answering ``/v1/chat/completions`` (a real provider
cannot run here).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from llm_stand_in import chat_server
from rollbench.api import grade
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.optimize.compare import Paired
from rollbench.optimize.config import build_config, is_better
from rollbench.optimize.proposers import Context, LLMProposer, propose
from rollbench.optimize.search import Search
from rollbench.testing.metaworld_lang_expert import instruction_level
from served_policy import ROLLBENCH, requests, served

REACH = "metaworld/reach-v3"
REACH_TEXT = "reach the goal with the gripper"  # what the provider's double answers first (llm_stand_in)
FAST = ["--max-steps", "60"]


def optimize_cmd(out: Path, policy: str, *flags: str) -> list[str]:
    return [ROLLBENCH, "optimize-instruction", "--env", REACH, "--policy", policy, "--out", str(out), *FAST, *flags]


def run_dirs(out: Path) -> list[Path]:
    """Every run of a search, from its optimize.json: the rounds, then the held-out run."""
    state = json.loads((out / "optimize.json").read_text())
    return [out / r["run_dir"] for r in state["rounds"]] + [out / state["holdout"]["run_dir"]]


def recorded_instructions(out: Path) -> set[str]:
    runs = run_dirs(out)
    return {e.instruction for r in runs for e in grade(r, check_videos=False).episodes}


def comparison(b: int, c: int, pairs: int = 10) -> Paired:
    from rollbench.optimize.compare import mcnemar_p

    return Paired("incumbent", "c1", pairs, c, b, b, c, (b - c) / pairs, mcnemar_p(b, c), "greater")


# ---------------------------------------------------------------------------------------------- pure parts


def test_acceptance_needs_a_significant_paired_gain_or_the_users_margin() -> None:
    cfg = build_config(env=REACH, policy="zero")
    assert is_better(comparison(5, 0), cfg)  # p = 1/32
    assert not is_better(comparison(4, 0), cfg)  # p = 1/16
    assert not is_better(comparison(6, 1), cfg)  # p = 8/128
    assert not is_better(comparison(0, 0), cfg)
    with_margin = build_config(env=REACH, policy="zero", margin=0.2)
    assert is_better(comparison(2, 0), with_margin) and not is_better(comparison(2, 1), with_margin)


def test_seed_ranges_of_rounds_and_held_out_never_overlap() -> None:
    cfg = build_config(env=REACH, policy="zero", seed=7, holdout_episodes=5, episodes_per_candidate=3, rounds=4)
    assert cfg.holdout_seeds() == (7, 12)
    assert [cfg.round_seeds(r) for r in range(4)] == [(12, 15), (15, 18), (18, 21), (21, 24)]


def test_proposers_are_deterministic_new_and_of_their_kind() -> None:
    ctx = Context(REACH, REACH_TEXT, round=0, seed=0, seen=frozenset({"reach goal"}))
    assert propose("mix", "reach the goal", ctx, 6) == propose("mix", "reach the goal", ctx, 6)
    drops = [t for t, _ in propose("drop", "reach the goal", ctx, 9)]
    assert sorted(drops) == ["reach the", "the goal"]  # "reach goal" was already seen
    assert {t for t, _ in propose("synonym", "reach the goal", ctx, 9)} == {
        "touch the goal",
        "go to the goal",
        "reach the target",
        "reach the destination",
    }
    swaps = {t for t, _ in propose("reorder", "reach the goal", ctx, 9)}
    assert swaps == {"the reach goal", "reach goal the", "goal reach the"}
    inserted = [t for t, _ in propose("insert", "reach the goal", ctx, 200)]
    assert "reach the goal with" in inserted and "reach the goal gripper" in inserted
    assert all(len(t.split()) == 4 for t in inserted)
    templates = {t for t, _ in propose("template", "reach", ctx, 50)}
    assert "please reach" in templates and f"please {REACH_TEXT}" in templates
    assert [r for _, r in propose("mix", "reach the goal", ctx, 5)] == [
        "drop",
        "insert",
        "reorder",
        "synonym",
        "template",
    ]


def test_bad_optimize_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    not_ours = tmp_path / "full"
    not_ours.mkdir()
    (not_ours / "x").write_text("x")
    cases = [
        (["--proposer", "genetic"], "valid proposers: drop, insert, reorder, synonym, template, mix, llm"),
        (["--budget", "5"], "below one round"),
        (["--proposer", "llm"], "ROLLBENCH_LLM_BASE_URL"),
    ]
    no_llm: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ROLLBENCH_LLM")}
    for flags, message in cases:
        out = tmp_path / "search"
        proc = invoke(*optimize_cmd(out, "metaworld-lang-expert", *flags)[1:], env=no_llm)
        assert proc.returncode == 2, (flags, proc.stderr)
        assert message in proc.stderr and not out.exists(), (flags, proc.stderr)
    proc = invoke("optimize-instruction", "--env", "metaworld/MT10", "--policy", "zero", "--out", tmp_path / "s")
    assert proc.returncode == 2 and "one task, got 10" in proc.stderr and not (tmp_path / "s").exists()
    with pytest.raises(ConfigError, match=r"holds no optimize\.json"):
        Search(build_config(env=REACH, policy="metaworld-lang-expert"), not_ours).prepare()


# ---------------------------------------------------------------------------------------------- MetaWorld


@pytest.mark.sim
@pytest.mark.slow
def test_the_search_climbs_from_a_vague_instruction_to_a_precise_one_over_served_ws(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    out = tmp_path / "search"
    with served(tmp_path, "metaworld-lang-expert", "ws") as (url, log, _):
        flags = ["--start", "move", "--rounds", "4", "--candidates", "3", "--episodes-per-candidate", "5"]
        proc = subprocess.run(
            optimize_cmd(out, url, *flags, "--holdout-episodes", "6"), capture_output=True, text=True, timeout=600
        )
        received = {r["instruction"] for r in requests(log) if r["kind"] == "act"}
    assert proc.returncode == 0, proc.stderr
    state = json.loads((out / "optimize.json").read_text())
    assert state["status"] == "DONE"
    assert instruction_level(REACH_TEXT, "move") == 0 and instruction_level(REACH_TEXT, state["incumbent"]) == 3
    h = state["holdout"]
    assert (h["original"]["successes"], h["winner"]["successes"], h["original"]["episodes"]) == (0, 6, 6)
    assert h["significant"] and h["paired"]["p_value"] == pytest.approx(1 / 64)
    assert "winner is better than the original on held-out seeds" in proc.stdout
    assert "held-out (seeds 0..5, never used in the search)" in proc.stdout
    # never regresses: every accepted candidate beat the incumbent of its round on the same seeds
    for r in state["rounds"]:
        acc = r["decision"]["accepted"]
        if acc:
            assert r["scores"][acc]["successes"] > r["scores"]["incumbent"]["successes"]
    assert state["stop_reason"] == "perfect score"
    # what the server received is exactly what every recorded run says it was told
    assert received == recorded_instructions(out)
    # every run of the search is an ordinary run directory the review dashboard's catalog lists
    from rollbench.dashboard.catalog import Catalog

    records, pending = Catalog([tmp_path], sync_budget_s=600).records()
    assert pending == []
    listed = {rec.run_dir for rec in records if rec.error is None}
    assert {d.resolve() for d in run_dirs(out)} <= listed
    held = set(range(0, 6))
    for r in state["rounds"]:
        seeds = {e.seed for e in grade(out / r["run_dir"], check_videos=False).episodes}
        assert seeds == set(range(*r["seeds"])) and not seeds & held
        assert grade(out / r["run_dir"], check_videos=False).status == "OK"


@pytest.mark.sim
def test_a_chance_winner_on_search_seeds_shows_no_gain_on_held_out_seeds(tmp_path: Path) -> None:
    """The coin policy ignores the meaning of the words; a lenient margin lets a lucky candidate win a round."""
    pytest.importorskip("metaworld")
    cfg = build_config(
        env=REACH,
        policy="metaworld-lang-expert",
        policy_options={"mode": "coin", "p": 0.5},
        start=REACH_TEXT,
        rounds=1,
        candidates=3,
        episodes_per_candidate=5,
        holdout_episodes=10,
        margin=0.4,
        max_steps=60,
        seed=19,  # round 0's seeds 29..33: the incumbent succeeds once, "reach the goal with the" 4 times
    )
    state = Search(cfg, tmp_path / "search").run()
    rnd = state["rounds"][0]
    acc = rnd["decision"]["accepted"]
    assert acc is not None, rnd
    assert (rnd["scores"]["incumbent"]["successes"], rnd["scores"][acc]["successes"]) == (1, 4)
    assert state["incumbent"] == "reach the goal with the"
    winning = next(c for c in rnd["comparisons"] if c["variant"] == acc)
    assert not is_better(
        Paired(**{k: winning[k] for k in Paired.__dataclass_fields__}), build_config(env=REACH, policy="x")
    )
    h = state["holdout"]
    assert (h["original"]["successes"], h["winner"]["successes"]) == (5, 5)  # seeds 19..28: no gain
    assert not h["significant"]
    assert h["verdict"].startswith("no significant gain on held-out seeds")
    assert "did not replicate" in h["verdict"]


@pytest.mark.sim
@pytest.mark.slow
def test_a_search_killed_mid_round_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    flags = ["--start", "move", "--rounds", "2", "--candidates", "2", "--episodes-per-candidate", "3"]
    flags += ["--holdout-episodes", "3"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        optimize_cmd(killed, "metaworld-lang-expert", *flags), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    committed = killed / "rounds" / "killed-r000" / "meta" / "episodes" / "chunk-000"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(committed.glob("file-*.parquet"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done = len(list(committed.glob("file-*.parquet")))
    assert 2 <= done < 9, f"the kill did not land mid-round ({done} of 9 episodes committed)"
    state = json.loads((killed / "optimize.json").read_text())
    assert state["rounds"][0]["status"] == "proposed" and state["status"] == "RUNNING"

    again = subprocess.run(
        optimize_cmd(killed, "metaworld-lang-expert", *flags), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    whole = tmp_path / "whole"
    assert (
        subprocess.run(
            optimize_cmd(whole, "metaworld-lang-expert", *flags), capture_output=True, timeout=600
        ).returncode
        == 0
    )
    resumed, reference = (json.loads((d / "optimize.json").read_text()) for d in (killed, whole))
    for doc in (resumed, reference):  # the run directories are named after the search directory
        for part in (*doc["rounds"], doc["holdout"]):
            part["run_dir"] = part["run_dir"].replace("killed-", "").replace("whole-", "")
        doc["runs_prefix"] = None
    assert resumed["rounds"] == reference["rounds"]
    assert resumed["holdout"] == reference["holdout"]
    r0 = grade(killed / "rounds" / "killed-r000", check_videos=False)
    assert (r0.status, r0.episodes_recorded, r0.episodes_requested) == ("OK", 9, 9)
    run_log = json.loads((killed / "rounds" / "killed-r000" / "run.json").read_text())
    assert len(run_log["executions"]) == 2  # killed, then resumed


# ---------------------------------------------------------------------------------------------- llm proposer


def _chat_server(statuses: list[int]) -> contextlib.AbstractContextManager[tuple[str, list[dict[str, Any]]]]:
    """The provider's test double (tests/llm_stand_in.py) answering two fixed instructions."""
    return chat_server(statuses)


@pytest.fixture
def chat_stand_in() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with _chat_server([]) as stand_in:
        yield stand_in


CTX = Context(task=REACH, task_instruction=REACH_TEXT, round=0, seed=0, seen=frozenset())


def test_the_llm_proposer_retries_a_busy_endpoint_like_the_agent_client() -> None:
    with _chat_server([503, 429]) as (base, seen):
        proposer = LLMProposer(base, "sk-test", "stand-in-1", backoff_s=0.01)
        assert proposer.propose("move", CTX, 2) == [REACH_TEXT, "move the arm"]
    assert [s["auth"] for s in seen] == ["Bearer sk-test"] * 3  # 503, 429, then the answer


def test_the_llm_proposer_gives_up_naming_the_status_and_never_the_key() -> None:
    with _chat_server([401]) as (base, seen), pytest.raises(RollbenchError) as err:
        LLMProposer(base, "sk-secret-123", "stand-in-1", backoff_s=0.01).propose("move", CTX, 2)
    assert len(seen) == 1  # 401 is not retried
    # the reply ({"error":{"message":"no luck for Bearer sk-secret-123"}}, 56 bytes) is named by its size, never quoted
    assert str(err.value) == (
        f"the llm proposer's endpoint failed: the model API {base}/chat/completions answered HTTP 401, a reply of 56 "
        "bytes (not shown: a server's text is never quoted)"
    )


@pytest.mark.sim
def test_the_llm_proposer_asks_an_openai_compatible_endpoint(
    tmp_path: Path, chat_stand_in: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("metaworld")
    base, seen = chat_stand_in
    monkeypatch.setenv("ROLLBENCH_LLM_BASE_URL", base)
    monkeypatch.setenv("ROLLBENCH_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("ROLLBENCH_LLM_MODEL", "stand-in-1")
    cfg = build_config(
        env=REACH,
        policy="metaworld-lang-expert",
        proposer="llm",
        start="move",
        rounds=1,
        candidates=2,
        episodes_per_candidate=3,
        holdout_episodes=3,
        margin=0.5,
        max_steps=60,
    )
    state = Search(cfg, tmp_path / "search").run()
    assert len(seen) == 1
    assert seen[0]["auth"] == "Bearer sk-test" and seen[0]["body"]["model"] == "stand-in-1"
    assert "'move'" in seen[0]["body"]["messages"][1]["content"]
    rnd = state["rounds"][0]
    assert [(c["instruction"], c["proposer"]) for c in rnd["candidates"]] == [
        (REACH_TEXT, "llm"),
        ("move the arm", "llm"),
    ]
    assert rnd["decision"]["accepted"] == "c1" and state["incumbent"] == REACH_TEXT
    # resuming a finished search re-grades it from disk and never asks the provider again
    Search(cfg, tmp_path / "search").run()
    assert len(seen) == 1
