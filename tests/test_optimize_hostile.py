"""``optimize-instruction`` against hostile input (hostile round 9, F1 F2 F5 F11): an LLM reply is text from outside
(a non-string content is a failed proposal, a line holding the API key in any form, an over-long line or one with
control characters is dropped with its reason before anything is saved or run), and a handed-over ``optimize.json``
is read through a typed model whose names must be the ones rollbench derives from ``--out`` (exit 2, one line, no
traceback, nothing written outside ``--out``).

The scripted family (``scripted/reach``, ``scripted-expert``) runs the episodes; the only double is the LLM provider
(tests/llm_stand_in.py: FastAPI on loopback, as a real provider cannot run here).
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import invoke
from llm_stand_in import chat_server
from rollbench.core.contracts import ConfigError, RollbenchError
from rollbench.core.spec import build_spec
from rollbench.optimize.proposers import HOLDS_KEY, TOO_LONG, UNPRINTABLE, Context, LLMProposer

KEY = "tok_ZXCVBN98765432qwer"
FORMS = (KEY, KEY[::-1], base64.b64encode(KEY.encode()).decode(), KEY.upper())  # every form the tests look for
CTX = Context(task="scripted/reach", task_instruction="reach the goal", round=0, seed=0, seen=frozenset())
SEARCH = ["--env", "scripted/reach", "--policy", "scripted-expert", "--rounds", "1", "--candidates", "2"]
SEARCH += ["--episodes-per-candidate", "2", "--holdout-episodes", "2", "--max-steps", "5"]


def leaks(root: Path, text: str) -> list[str]:
    """Where under ``root`` (every file's bytes) or in ``text`` a form of the key appears."""
    found = [form for form in FORMS if form in text]
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            found += [f"{p}: {form}" for form in FORMS if form.encode() in data]
    return found


# ------------------------------------------------------------------------------------------- F1, F2: the reply
REPLIES = [
    # (id, reply lines built from the key, kept candidates, dropped (line, reason))
    (
        "the-key-plain-is-dropped",
        lambda k: [f"move to the goal {k}", "move the arm"],
        ["move the arm"],
        [(1, HOLDS_KEY)],
    ),
    ("the-key-reversed-is-dropped", lambda k: [f"move {k[::-1]} now", "go"], ["go"], [(1, HOLDS_KEY)]),
    (
        "the-key-in-base64-is-dropped",
        lambda k: ["1. go", f"2. reach {base64.b64encode(k.encode()).decode()}"],
        ["go"],
        [(2, HOLDS_KEY)],
    ),
    ("the-key-upper-case-is-dropped", lambda k: [f"- {k.upper()} reach", "- reach it"], ["reach it"], [(1, HOLDS_KEY)]),
    (
        "the-key-split-over-two-candidates-drops-the-second",
        lambda k: [f"reach {k[:11]}", f"{k[11:]} now"],
        [f"reach {KEY[:11]}"],
        [(2, HOLDS_KEY)],
    ),
    (
        "an-over-long-line-is-dropped-not-truncated",
        lambda k: ["a" * 4097, "b " * 10],
        ["b b b b b b b b b b"],
        [(1, TOO_LONG)],
    ),
    ("a-line-of-exactly-the-limit-is-kept", lambda k: ["a" * 4096], ["a" * 4096], []),
    ("an-over-long-line-with-the-key-is-dropped-for-its-length", lambda k: [f"{k} " + "a" * 5000], [], [(1, TOO_LONG)]),
    ("terminal-escapes-are-dropped", lambda k: ["move \x1b]0;pwned\x07 point", "push"], ["push"], [(1, UNPRINTABLE)]),
    ("a-bidirectional-override-is-dropped", lambda k: ["move \u202e evil", "push"], ["push"], [(1, UNPRINTABLE)]),
]


@pytest.mark.parametrize(("lines", "kept", "dropped"), [r[1:] for r in REPLIES], ids=[r[0] for r in REPLIES])
def test_an_llm_reply_line_holding_the_key_or_unfit_is_dropped_with_its_reason(
    lines: Callable[[str], list[str]], kept: list[str], dropped: list[tuple[int, str]]
) -> None:
    with chat_server([], lambda k: "\n".join(lines(k))) as (base, seen):
        got, left_out = LLMProposer(base, KEY, "stand-in-1", backoff_s=0.01).proposal("reach", CTX, 4)
    assert seen[0]["auth"] == f"Bearer {KEY}"  # the double was sent the key, so it could echo it
    assert got == kept
    assert [(d["line"], d["reason"]) for d in left_out] == dropped


CONTENTS = [
    ("an-object", lambda k: {"SEKRETMARK": k}, "dict"),
    ("a-list", lambda k: [k, "move"], "list"),
    ("null", lambda k: None, "NoneType"),
    ("a-number", lambda k: 7, "int"),
]


@pytest.mark.parametrize(("content", "kind"), [c[1:] for c in CONTENTS], ids=[c[0] for c in CONTENTS])
def test_a_non_string_llm_content_is_a_failed_proposal_naming_its_type_never_quoting_it(
    content: Callable[[str], Any], kind: str
) -> None:
    with chat_server([], content) as (base, _seen), pytest.raises(RollbenchError) as err:
        LLMProposer(base, KEY, "stand-in-1", backoff_s=0.01).proposal("reach", CTX, 2)
    assert str(err.value) == (
        f"the llm proposer's endpoint {base}/chat/completions sent a choices[0].message.content that is a {kind}, "
        "not text (not shown: a server's reply is never quoted); no candidate taken"
    )


def echoing(k: str) -> str:
    return "\n".join(
        [f"move the point to the goal {k}", f"move the point {k[::-1]} now", f"reach goal {base64.b64encode(k.encode()).decode()}",
         "SEKRETMARK \x1b[2J move point", "reach the goal " + "a" * 5000, "push the point to the goal"]
    )  # fmt: skip


@pytest.mark.slow
def test_a_search_whose_provider_echoes_the_key_records_it_nowhere_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "s"
    with chat_server([], echoing) as (base, seen):
        env = {"ROLLBENCH_LLM_BASE_URL": base, "ROLLBENCH_LLM_API_KEY": KEY}
        first = invoke("optimize-instruction", *SEARCH, "--out", out, "--proposer", "llm", env=env)
        again = invoke("optimize-instruction", *SEARCH, "--out", out, "--proposer", "llm", "--json", env=env)
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert len(seen) == 1  # the resumed search never asks again
    assert leaks(out, first.stdout + first.stderr + again.stdout + again.stderr) == []
    state = json.loads((out / "optimize.json").read_text())
    rnd = state["rounds"][0]
    assert [c["instruction"] for c in rnd["candidates"]] == ["push the point to the goal"]
    assert [(d["line"], d["reason"]) for d in rnd["dropped"]] == [
        (1, HOLDS_KEY), (2, HOLDS_KEY), (3, HOLDS_KEY), (4, UNPRINTABLE), (5, TOO_LONG)
    ]  # fmt: skip
    said = " ".join(first.stderr.split())  # the log, as the terminal shows it (reasons only, never a dropped text)
    assert all(f"round 0: line {n} of the proposer's reply {why}" in said for n, why in [(1, HOLDS_KEY), (5, TOO_LONG)])
    assert json.loads(again.stdout)["rounds"] == state["rounds"]


def test_a_spec_error_names_a_long_value_by_type_and_size_never_its_content() -> None:
    long = f"SEKRETMARK {KEY} " + "a" * 5000
    cases = [
        (
            {"instructions": ({"name": "a", "instruction": long},)},
            f"instructions.0.instruction: String should have at most 4096 characters (got a string of {len(long)} "
            "characters); instructions: Tuple should have at least 1 item after validation, not 0 (got a list of 1 "
            "item)",  # pydantic's second reading of the field (the tuple after its bad item): also named by size
        ),
        (
            {"instruction": long},
            f"instruction: String should have at most 4096 characters (got a string of {len(long)} characters)",
        ),
        (
            {"image_size": [1] * 40},
            "image_size: Tuple should have at most 2 items after validation, not 40 (got a list of 40 items)",
        ),
        ({"instruction": "x" * 20 + "\u202e"}, None),  # short and valid: no error
    ]
    for extra, said in cases:
        fields = {"env": "scripted/reach", "policy": "zero", "episodes": 1, **extra}
        if said is None:
            build_spec(**fields)
            continue
        with pytest.raises(ConfigError) as err:
            build_spec(**fields)
        assert str(err.value) == f"invalid evaluation spec: {said}"
        assert KEY not in str(err.value)


# ------------------------------------------------------------------------------------------- F5, F11: the state
def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for p in parents:
            d = d[int(p)] if isinstance(d, list) else d[p]
        d[int(last) if isinstance(d, list) else last] = value  # type: ignore[index]

    return edit


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for p in parents:
            d = d[int(p)] if isinstance(d, list) else d[p]
        del d[last]

    return edit


def _resumable(d: dict[str, Any]) -> None:
    """The state of a search killed after round 0 was proposed (so a resume would run it)."""
    d.update(status="RUNNING", stop_reason=None, holdout=None, episodes_used=0)
    r = d["rounds"][0]
    r["status"] = "proposed"
    for k in ("scores", "comparisons", "decision", "perfect"):
        r.pop(k, None)


DAMAGED = "search state {state} is damaged: "
DERIVED = " (derived from --out, the options and the recorded rounds; no name or path is taken from the state file)"
STATES: list[tuple[str, list[Callable[[dict[str, Any]], None]], str]] = [
    ("rounds-not-a-list", [_set("rounds", 5)], "rounds: Input should be a valid list (got 5)"),
    ("a-round-without-status", [_drop("rounds.0.status")], "rounds.0.status: Field required"),
    (
        "a-candidate-of-other-keys",
        [_resumable, _set("rounds.0.candidates", [{"x": 1}])],
        "rounds.0.candidates.0.name: Field required",
    ),
    (
        "seeds-not-an-object",
        [_set("seeds", 1)],
        "seeds: Input should be a valid dictionary or instance of SeedPlan (got 1)",
    ),
    ("an-unknown-key", [_set("note", "hi")], "note: Extra inputs are not permitted (got 'hi')"),
    (
        "a-decision-of-text",
        [_set("rounds.0.decision", "x")],
        "rounds.0.decision: Input should be a valid dictionary or instance of Decision (got 'x')",
    ),
    (
        "a-long-instruction-named-by-size",
        [_set("rounds.0.incumbent", KEY + "a" * 5000)],
        f"rounds.0.incumbent: String should have at most 4096 characters (got a string of {len(KEY) + 5000} characters)",
    ),
    (
        "an-absolute-round-directory",
        [_resumable, _set("rounds.0.run_dir", "CANARY/victim")],
        "rounds.0.run_dir is a string of LEN characters, not 'rounds/s-r000'" + DERIVED,  # LEN: CANARY/victim's
    ),
    (
        "a-prefix-climbing-out",
        [_resumable, _set("runs_prefix", "../../escaped")],
        "runs_prefix is '../../escaped', not 's'" + DERIVED,
    ),
    (
        "a-held-out-directory-elsewhere",
        [_set("holdout.run_dir", "../x")],
        "holdout.run_dir is '../x', not 's-holdout'" + DERIVED,
    ),
    (
        "round-seeds-moved-onto-held-out",
        [_resumable, _set("rounds.0.seeds", [0, 2])],
        "rounds.0.seeds is [0, 2], not [2, 4]" + DERIVED,
    ),
    ("a-round-numbered-out-of-order", [_set("rounds.0.round", 3)], "rounds.0.round is 3, not 0" + DERIVED),
    ("an-incumbent-no-round-chose", [_set("incumbent", "jump")], "incumbent is 'jump', not 'reach the goal'" + DERIVED),
    ("episodes-used-rewritten", [_set("episodes_used", 1)], "episodes_used is 1, not 6" + DERIVED),
    ("episodes-used-as-text", [_set("episodes_used", "6")], "episodes_used: Input should be a valid integer (got '6')"),
    (
        "a-success-as-true",
        [_set("rounds.0.scores.incumbent.successes", True)],
        "rounds.0.scores.incumbent.successes: Input should be a valid integer (got True)",
    ),
    (
        "a-decided-round-without-decision",
        [_set("rounds.0.decision", None)],
        "rounds.0 is decided without its scores or decision",
    ),
]


@pytest.fixture(scope="module")
def sound_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sound") / "s"
    done = invoke("optimize-instruction", *SEARCH, "--out", out, "--proposer", "drop", "--start", "reach the goal")
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("edits", "said"), [s[1:] for s in STATES], ids=[s[0] for s in STATES])
def test_a_doctored_state_file_is_refused_in_one_line_and_nothing_is_written(
    sound_search: Path, tmp_path: Path, edits: list[Callable[[dict[str, Any]], None]], said: str
) -> None:
    out = tmp_path / "s"  # the same name: the same derived run directories
    shutil.copytree(sound_search, out)
    canary = tmp_path / "canary"
    canary.mkdir()
    state_file = out / "optimize.json"
    doc = json.loads(state_file.read_text())
    for edit in edits:
        edit(doc)
    state_file.write_text(json.dumps(doc).replace("CANARY", str(canary)))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    got = invoke("optimize-instruction", *SEARCH, "--out", out, "--proposer", "drop", "--start", "reach the goal")
    assert got.returncode == 2, got.stdout + got.stderr
    said = said.replace("LEN", str(len(f"{canary}/victim")))
    want = DAMAGED.format(state=out / "optimize.json") + said
    assert got.stderr.strip() == f"error: {want}"
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_a_state_file_that_is_not_an_object_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "s"
    out.mkdir()
    (out / "optimize.json").write_text("[1, 2]")
    got = invoke("optimize-instruction", *SEARCH, "--out", out, "--proposer", "drop")
    assert got.returncode == 2
    assert got.stderr.strip() == (
        f"error: search state {out / 'optimize.json'} is not an instruction search's optimize.json; choose another --out"
    )


def test_the_rounds_table_shows_instructions_as_written_never_as_markup() -> None:
    from rich.console import Console

    from rollbench.cli.optimize import print_search

    inc, cand = "[bold red]reach[/] it", "[link=file:///etc]go[/link] \x1b[2J"
    comparison = {"variant": "c1", "variant_successes": 2, "p_value": 0.25}
    rnd = {"round": 0, "status": "decided", "seeds": [2, 4], "incumbent": inc, "candidates": [{"name": "c1", "instruction": cand}],
           "comparisons": [comparison], "scores": {"incumbent": {"successes": 0}}, "decision": {"accepted": "c1"}}  # fmt: skip
    state = {"task": "scripted/reach", "config": {"episodes_per_candidate": 2}, "rounds": [rnd], "holdout": None}
    state |= {"stop_reason": "1 rounds done", "episodes_used": 4}
    console = Console(record=True, width=300, color_system=None)
    print_search(console, state, Path("s"))
    shown = console.export_text()
    assert "[bold red]reach[/] it" in shown
    assert "[link=file:///etc]go[/link] \\x1b[2J" in shown
