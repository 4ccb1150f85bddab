"""A secret cut into parts written apart is still found (hostile round 16, F2): ``release`` kept both halves of an API
key split over two lines of an ``--instructions`` file, each line one instruction variant (run.json, tasks.parquet,
the episode rows). :mod:`rollbench.core.secret_pieces` finds any piece of ``P`` letters and digits of a secret
(``P``: 12 from 24 characters, half from 16 to 23, 8 below).

Oracle: the pieces are cut here by hand at stated lengths, on both sides of ``P``; the end-to-end row greps every
byte of every released file for each half in any letter case and reads the released tasks back with pyarrow.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.core.secret_echo import SecretEcho, scrubbed
from rollbench.core.secret_pieces import piece_length

KEY24 = "Zq8f3kLm2Pw9xR7tYb4nVc6H"  # 24 letters and digits: pieces of 12
KEY16 = "Rb7kQ2xW9mZt4LpN"  # 16: pieces of 8, so either half is one


@pytest.mark.parametrize(("n", "p"), [(8, 8), (15, 8), (16, 8), (17, 9), (22, 11), (23, 12), (24, 12), (64, 12)])
def test_the_piece_length_is_8_below_16_half_up_to_23_and_12_from_24(n: int, p: int) -> None:
    assert piece_length(n) == p


@pytest.mark.parametrize("pad", [0, 600], ids=["short text", "long text (hashed windows)"])
def test_a_piece_of_12_of_a_24_character_key_is_found_and_one_of_11_is_not(pad: int) -> None:
    echo = SecretEcho({"KEY": KEY24})
    filler = "the quick brown fox " * (pad // 20)
    assert echo.found_text(f"{filler}reach the goal {KEY24[:12]} now") == "KEY"
    assert echo.found_text(f"{filler}then stop {KEY24[12:]}") == "KEY"
    assert echo.found_text(f"{filler}middle {KEY24[6:18].upper()} in capitals") == "KEY"
    assert echo.found_text(f"{filler}reach the goal {KEY24[:11]} now") is None
    assert echo.found_text(f"{filler}then stop {KEY24[13:]}") is None


def test_either_half_of_a_16_character_key_is_found_in_text_and_as_bytes() -> None:
    echo = SecretEcho({"KEY": KEY16})
    assert echo.found_text(f"first {KEY16[:8]}") == "KEY"
    assert echo.found([*KEY16[8:].encode(), 32, 32]) == "KEY"  # an array of the half's bytes
    assert echo.found_text(f"first {KEY16[:7]}") is None


def test_each_half_in_its_own_string_is_replaced_whole_and_the_rest_kept() -> None:
    echo = SecretEcho({"KEY": KEY24})
    value = {"variants": [{"name": "v0", "instruction": f"reach the goal {KEY24[:12]}"},
                          {"name": "v1", "instruction": f"then stop {KEY24[12:]}"}], "episodes": 2}  # fmt: skip
    kept = scrubbed(value, echo, "<P>")
    assert kept == {"variants": [{"name": "v0", "instruction": "<P>"}, {"name": "v1", "instruction": "<P>"}],
                    "episodes": 2}  # fmt: skip


def test_a_megabyte_of_random_text_holds_no_piece() -> None:
    rng = random.Random(5)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 ") for _ in range(1_000_000))
    assert SecretEcho({"KEY": KEY24}).found_text(text) is None
    assert SecretEcho({"KEY": KEY16}).found_text(text) is None


def test_release_keeps_neither_half_of_a_key_split_over_two_instruction_lines(tmp_path: Path) -> None:
    key = KEY24 + "s"  # 25: halves of 12 and 13, as the hostile round cut it
    (tmp_path / "instr.txt").write_text(f"reach the goal {key[:12]}\nthen stop {key[12:]}\n")
    run, rel = tmp_path / "R", tmp_path / "REL"
    proc = invoke("eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "1",
                  "--instructions", tmp_path / "instr.txt", "--out", run)  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    halves = [key[:12].lower().encode(), key[12:].lower().encode()]
    assert all(h in (run / "meta/tasks.parquet").read_bytes().lower() for h in halves)  # the oracle sees them
    proc = invoke("release", run, "--out", rel, "--date", "2026-01-01", env={"MY_SERVICE_TOKEN": key})
    assert proc.returncode == 0, proc.stdout
    leaks = [str(f.relative_to(rel)) for f in sorted(rel.rglob("*")) if f.is_file()
             if any(h in f.read_bytes().lower() for h in halves)]  # fmt: skip
    assert leaks == []
    tasks = pq.read_table(rel / "R/meta/tasks.parquet").column("task").to_pylist()
    assert len(tasks) == 2 and all(re.fullmatch(r"<REDACTED:env_secret:\d+>", t) for t in tasks), tasks
    variants = json.loads((rel / "R/run.json").read_text())["spec"]["instructions"]
    assert [v["instruction"] for v in variants] == tasks
