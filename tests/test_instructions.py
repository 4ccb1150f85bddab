"""Instruction sweeps (``eval --instructions``), perturbation reports (``--instruction-perturb``) and the language
test policy ``metaworld-lang-expert``, with real MetaWorld episodes, in-process (the command line through
``cli_in_process.invoke``) and served over ws."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate, grade
from rollbench.core.contracts import ConfigError
from rollbench.core.perturb import perturb
from rollbench.core.plan import make_plan
from rollbench.core.spec import build_spec
from rollbench.core.variants import read_variants
from rollbench.testing.metaworld_lang_expert import acts, instruction_level
from served_policy import ROLLBENCH, requests, served

REACH = "metaworld/reach-v3"
REACH_TEXT = "reach the goal with the gripper"  # reach-v3's declared instruction
LADDER = {  # name -> (instruction, precision level)
    "none": ("do something useful", 0),
    "object": ("the goal", 1),
    "verb": ("reach the goal", 2),
    "full": (REACH_TEXT, 3),
}


def sweep_file(tmp: Path) -> Path:
    path = tmp / "ladder.json"
    path.write_text(json.dumps([{"name": n, "instruction": t} for n, (t, _) in LADDER.items()]))
    return path


def replay_successes(episodes: list[tuple[int, np.ndarray]]) -> list[bool]:
    """Independent replay: a MetaWorld env of its own, reset with each episode's seed, its recorded actions stepped
    in order; success = the env's own check after any step."""
    from rollbench.core.registry import EnvOptions, family_of

    fam = family_of(REACH)
    env = fam.make(fam.task(REACH), EnvOptions())
    try:
        out = []
        for seed, actions in episodes:
            env.reset(seed)
            out.append(any([env.step(a).success for a in actions]))
        return out
    finally:
        env.close()


def recorded_actions(run_dir: Path) -> dict[int, np.ndarray]:
    out: dict[int, list[Any]] = {}
    for f in sorted(run_dir.glob("data/chunk-*/file-*.parquet")):
        t = pq.read_table(f, columns=["episode_index", "action"]).to_pydict()
        for e, a in zip(t["episode_index"], t["action"], strict=True):
            out.setdefault(e, []).append(a)
    return {e: np.asarray(a, dtype=np.float32) for e, a in out.items()}


# ---------------------------------------------------------------------------------------------- pure parts


def test_perturbations_are_fixed_rewordings() -> None:
    assert perturb(REACH_TEXT, "synonym") == "touch the target with the hand"
    assert perturb(REACH_TEXT, "drop-object") == "reach with the gripper"
    assert perturb("press the button", "drop-object") == "press"
    assert perturb("Pick up the puck.", "synonym") == "Grab up the disc."
    assert perturb(REACH_TEXT, "paraphrase") == perturb(REACH_TEXT, "paraphrase") != REACH_TEXT
    assert REACH_TEXT in perturb(REACH_TEXT, "paraphrase")
    assert perturb(REACH_TEXT, "distractor").startswith(REACH_TEXT + "; ")


def test_language_levels_follow_the_documented_rule() -> None:
    for text, level in LADDER.values():
        assert instruction_level(REACH_TEXT, text) == level, text
    assert instruction_level(REACH_TEXT, "touch the target with the hand") == 0  # synonyms do not count
    assert instruction_level(REACH_TEXT, REACH_TEXT + "; do not touch the yellow can") == 2  # a distractor costs one
    assert instruction_level("press the button", "press the button") == 3  # no detail words: verb + object is all


def test_plan_numbers_episodes_task_major_then_variant_then_trial() -> None:
    spec = build_spec(
        env="scripted/reach,scripted/reach-final",
        policy="zero",
        episodes=3,
        seed=5,
        instructions=({"name": "a", "instruction": "go"}, {"name": "b", "instruction": "go there"}),
    )
    eps = make_plan(spec).episodes
    got = [(e.episode_index, e.task.split("/")[1], e.variant, e.trial, e.seed, e.instruction) for e in eps]
    want = [
        ((ti * 2 + vi) * 3 + k, task, v, k, 5 + k, text)
        for ti, task in enumerate(("reach", "reach-final"))
        for vi, (v, text) in enumerate((("a", "go"), ("b", "go there")))
        for k in range(3)
    ]
    assert got == want


def test_variant_files_plain_lines_and_json(tmp_path: Path) -> None:
    plain = tmp_path / "v.txt"
    plain.write_text("# comment\nreach the goal\n\n  press it  \n")
    assert read_variants(plain) == [
        {"name": "v0", "instruction": "reach the goal"},
        {"name": "v1", "instruction": "press it"},
    ]
    named = tmp_path / "v.json"
    named.write_text('{"short": "reach", "long": "reach the goal"}')
    assert [v["name"] for v in read_variants(named)] == ["short", "long"]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "x"}]')
    with pytest.raises(ConfigError, match="list of"):
        read_variants(bad)
    with pytest.raises(ConfigError, match="unique; repeated: a"):
        build_spec(env=REACH, policy="zero", episodes=1, instructions=({"name": "a", "instruction": "x"},) * 2)
    with pytest.raises(ConfigError, match="valid perturbations: paraphrase, synonym, drop-object, distractor"):
        build_spec(env=REACH, policy="zero", episodes=1, instruction_perturb=("shout",))


def test_a_sweep_resumes_from_its_run_json_and_keeps_an_older_specs_identity(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = ["eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "2"]
    cmd += ["--instructions", str(sweep_file(tmp_path)), "--json", "--out", str(out)]
    first = invoke(*cmd)
    assert first.returncode == 0, first.stderr
    again = invoke("eval", "--resume", out, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["variants"] == json.loads(first.stdout)["variants"]
    run_log = json.loads((out / "run.json").read_text())
    assert len(run_log["executions"]) == 1 and run_log["results"]["episodes_recorded"] == 8  # an idle resume adds none
    # a spec without a sweep hashes as before the sweep fields existed
    plain = build_spec(env="scripted/reach", policy="zero", episodes=1)
    dump = plain.model_dump(mode="json")
    for name in ("first_trial", "policy_timeout_s", "success_hold", "fast_render", "instructions", "latency", "stale"):
        del dump[name]
    del dump["instruction_perturb"]
    import hashlib

    blob = json.dumps(dump, sort_keys=True, separators=(",", ":"))
    assert plain.identity() == hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_bad_sweep_flags_exit_2_and_write_nothing(tmp_path: Path) -> None:
    for flags in (
        ["--instruction-perturb", "shout"],
        ["--instructions", str(tmp_path / "missing.txt")],
        ["--instructions", str(sweep_file(tmp_path)), "--instruction", "x"],
    ):
        out = tmp_path / "run"
        cmd = ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", str(out)]
        proc = invoke(*cmd, *flags)
        assert proc.returncode == 2, (flags, proc.stderr)
        assert "error" in proc.stderr.lower() and not out.exists()


# ---------------------------------------------------------------------------------------------- MetaWorld


@pytest.mark.sim
def test_variant_ladder_is_graded_per_variant_and_matches_an_independent_replay(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    spec = build_spec(
        env=REACH,
        policy="metaworld-lang-expert",
        episodes=10,
        max_steps=60,
        instructions=tuple(read_variants(sweep_file(tmp_path))),
    )
    result = evaluate(spec, out=tmp_path / "run")
    assert result.status == "OK", result.reasons
    by_variant = result.variants[REACH]
    assert list(by_variant) == list(LADDER)
    # seeds 0..9 draw u = 0.42 0.05 0.61 0.80 0.13 0.25 0.98 0.41 0.81 0.67: 2 below 0.2, 7 below 0.8
    assert {v: b.successes for v, b in by_variant.items()} == {"none": 0, "object": 2, "verb": 7, "full": 10}
    assert {v: b.instruction for v, b in by_variant.items()} == {n: t for n, (t, _) in LADDER.items()}
    assert by_variant["full"].paired.to_json() == {
        "reference": "none",
        "pairs": 10,
        "both": 0,
        "reference_only": 0,
        "variant_only": 10,
        "neither": 0,
    }
    # every episode: recorded instruction and variant, success = the policy's rule, = a replay of its actions
    actions = recorded_actions(tmp_path / "run")
    for e in result.episodes:
        text, _ = LADDER[e.variant]
        assert e.instruction == text
        assert e.success == acts(e.seed, REACH_TEXT, text)
    replayed = replay_successes([(e.seed, actions[e.episode_index]) for e in result.episodes])
    assert replayed == [e.success for e in result.episodes]
    assert grade(tmp_path / "run") == result


@pytest.mark.sim
def test_the_instruction_the_server_received_is_the_recorded_one(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    with served(tmp_path, "metaworld-lang-expert", "ws") as (url, log, _):
        cmd = [ROLLBENCH, "eval", "--env", REACH, "--policy", url, "--episodes", "4", "--max-steps", "60"]
        cmd += ["--instructions", str(sweep_file(tmp_path)), "--json", "--out", str(tmp_path / "run")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # the server's log: a reset per episode (plan order), then that episode's act calls
    per_episode: list[set[str]] = []
    for r in requests(log):
        if r["kind"] == "reset":
            per_episode.append(set())
        else:
            per_episode[-1].add(r["instruction"])
    assert per_episode == [{e["instruction"]} for e in result["episodes"]]
    assert [e["variant"] for e in result["episodes"]] == [v for v in LADDER for _ in range(4)]
    # served = in-process: the same successes
    local = evaluate(
        build_spec(
            env=REACH,
            policy="metaworld-lang-expert",
            episodes=4,
            max_steps=60,
            instructions=tuple(read_variants(sweep_file(tmp_path))),
        ),
        out=tmp_path / "local",
    )
    assert [e.success for e in local.episodes] == [e["success"] for e in result["episodes"]]


@pytest.mark.sim
def test_instruction_perturb_reports_robustness_paired_with_the_original(tmp_path: Path) -> None:
    pytest.importorskip("metaworld")
    cmd = ["eval", "--env", REACH, "--policy", "metaworld-lang-expert", "--episodes", "5"]
    cmd += ["--max-steps", "60", "--instruction-perturb", "paraphrase,synonym,drop-object,distractor"]
    proc = invoke(*cmd, "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    for word in ("instruction variants", "original", "paraphrase", "synonym", "drop-object", "distractor", "b / c"):
        assert word in proc.stdout
    result = grade(tmp_path / "run")
    variants = result.variants[REACH]
    assert list(variants) == ["original", "paraphrase", "synonym", "drop-object", "distractor"]
    for name, block in variants.items():
        text = REACH_TEXT if name == "original" else perturb(REACH_TEXT, name)
        assert block.instruction == text
        expected = sum(acts(s, REACH_TEXT, text) for s in range(5))
        assert block.successes == expected, name
    assert [variants[n].successes for n in variants] == [5, 5, 0, 0, 4]  # u(seed 3) = 0.80 is not < 0.8
    run_log = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_log["spec"]["instruction_perturb"] == ["paraphrase", "synonym", "drop-object", "distractor"]
    assert [v["name"] for v in run_log["plan"]["tasks"][0]["variants"]] == list(variants)
