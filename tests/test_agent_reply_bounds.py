"""What one model reply may add to an agent episode is bounded (hostile round 13, F18): at most 8 tool calls of a
reply are kept and answered, the rest dropped and counted; a tool call over 16,384 characters ends the episode; the
reply's text is cut at 16,384 characters. The provider is the loopback test double :mod:`agent_double` (no LLM
provider is reachable here); rollout, recording and the requests it receives are real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_double import Double
from rollbench.api import evaluate

REACH = "scripted/reach"


def lines_of(run: Path, episode: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / episode["transcript"]).read_text().splitlines()]


@pytest.mark.slow
def test_a_reply_of_twelve_tool_calls_keeps_eight_answers_each_kept_once_and_counts_the_rest(
    double: Double, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/swarm", episodes=1, max_steps=6, out=out).to_json()
    episode = result["episodes"][0]
    # each move_delta(0, 0) is one hold step: 6 tool calls executed, 6 model calls, the horizon ends the episode
    assert (episode["termination_reason"], episode["length"]) == ("max_steps", 6)
    bodies = [r["body"] for r in double.log if r["model"] == "swarm"]
    assert len(bodies) == 6
    last = bodies[-1]["messages"]
    # system, user, then per earlier turn: the assistant message and 7 tool results (8 kept, one executed)
    assert [m["role"] for m in last] == ["system", "user", *(["assistant"] + ["tool"] * 7) * 5]
    kept_ids = [f"call_{n}_{i}" for n in range(5) for i in (0, 1, 2, 4, 5, 6, 7)]  # call 3 had no id
    assert [c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]] == kept_ids
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == kept_ids  # each kept call answered once
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert all(
        r.endswith("(5 more tool calls of your reply were ignored: one tool call per reply)") for r in results[::7]
    )
    assert all(r == "not executed: one tool call per turn" for i, r in enumerate(results) if i % 7)
    lines = lines_of(out, episode)
    assert [ln["tool_calls_dropped"] for ln in lines if ln["type"] == "call"] == [5] * 6
    logged = [ln["message"] for ln in lines if ln["type"] == "message" and ln["message"]["role"] == "assistant"]
    assert [len(m["tool_calls"]) for m in logged] == [7] * 6
    assert len(lines) == 1 + 6 * (1 + 1 + 1) + 5 * 7 + 2 + 1  # episode, 6 x (call, assistant, action), results...


@pytest.mark.slow
def test_a_tool_call_over_the_size_bound_ends_the_episode_as_a_malformed_call(double: Double, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/bigcall", episodes=1, out=out).to_json()
    episode = result["episodes"][0]
    assert episode["termination_reason"] == "error" and episode["length"] == 0
    assert episode["error"].startswith("EpisodeError: malformed tool call: ")
    assert episode["error"].endswith(", over 16384 characters")
    logged = [ln for ln in lines_of(out, episode) if ln["type"] == "message" and ln["message"]["role"] == "assistant"]
    assert all(isinstance(c, str) for c in logged[0]["message"]["tool_calls"])  # named by type and size, not kept
    assert len((out / episode["transcript"]).read_bytes()) < 20000


@pytest.mark.slow
def test_a_reply_text_is_kept_up_to_its_bound_with_the_count_cut(double: Double, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = evaluate(env=REACH, policy="agent:local/chatty", episodes=1, out=out).to_json()
    episode = result["episodes"][0]
    assert episode["termination_reason"] == "give_up"
    cut = "ab" * 8192 + " [cut: 3616 more characters]"  # 20,000 characters, 16,384 kept
    second = [r["body"]["messages"] for r in double.log if r["model"] == "chatty"][1]
    assert [m["content"] for m in second if m["role"] == "assistant"] == [cut]
    logged = [ln["message"] for ln in lines_of(out, episode) if ln["type"] == "message"]
    assert [m["content"] for m in logged if m["role"] == "assistant"] == [cut, cut]
