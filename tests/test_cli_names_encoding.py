"""Names that are not valid UTF-8 and terminals that cannot show a name (hostile8 F6, F8), through the real
``rollbench`` entry point in a subprocess (the checks run in ``main()``, before any command).

* An argument that is not valid UTF-8 (a run directory or ``--out`` named with the bytes ``\\xff\\xfe``) ends every
  command with exit 2 and one line naming it escaped, before anything is read or written: before the fix ``grade``
  called such a run FAILED quoting duckdb's exception text, ``eval --resume`` rewrote its run.json OK -> FAILED and
  ``runs --json`` wrote invalid UTF-8.
* ``runs ROOT`` lists such a directory as unreadable (its name escaped) and every other run as before; its JSON is
  strict UTF-8.
* ``PYTHONIOENCODING=ascii``: a run named ``übung`` is shown escaped, never a UnicodeEncodeError traceback; the JSON
  document stays JSON (``\\u00fc``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rollbench

SRC = str(Path(rollbench.__file__).resolve().parents[1])
BAD = b"bad\xff\xfe"  # not UTF-8
SHOWN = "bad\\xff\\xfe"  # how rollbench names it


def rollbench_cli(*args: str | bytes, encoding: str | None = None, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC, "MUJOCO_GL": "egl"}
    env.pop("PYTHONIOENCODING", None)
    if encoding:
        env["PYTHONIOENCODING"] = encoding
    return subprocess.run(
        [sys.executable, "-m", "rollbench", *args], capture_output=True, env=env, cwd=cwd, timeout=300, check=False
    )


def tree(root: Path) -> dict[bytes, str]:
    out = {}
    for dirpath, dirs, files in os.walk(os.fsencode(root)):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            out[p] = "dir" if os.path.isdir(p) else hashlib.sha256(Path(os.fsdecode(p)).read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ROOT/ok: a sound scripted run; ROOT/bad\\xff\\xfe: a byte-for-byte copy of it."""
    root = tmp_path_factory.mktemp("names")
    made = rollbench_cli(
        "eval", "--env", "scripted/reach", "--policy", "scripted-expert", "--episodes", "2", "--max-steps", "5",
        "--out", str(root / "ok"), cwd=root,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr.decode()
    shutil.copytree(root / "ok", os.fsdecode(os.fsencode(root) + b"/" + BAD))
    return root


COMMANDS = [  # (args; B = the non-UTF-8 run, N = a new non-UTF-8 path, O = the sound run)
    ["grade", "B"],
    ["eval", "--resume", "B"],
    ["eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", "N"],
    ["runs", "B"],
    ["summarize", "B"],
    ["compare", "O", "B"],
    ["report", "B", "--out", "O-report.html"],
    ["release", "B", "--out", "N"],
    ["robustness", "B"],
    ["grade", "--json", "B"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=["-".join(a[:2]) for a in COMMANDS])
def test_a_path_that_is_not_utf8_is_refused_in_one_line_before_anything_is_written(args: list[str], root: Path) -> None:
    before = tree(root)
    paths = {"B": os.fsencode(root) + b"/" + BAD, "N": os.fsencode(root) + b"/new\xff", "O": str(root / "ok")}
    argv = [paths.get(a, a) for a in args]
    done = rollbench_cli(*argv, cwd=root)
    err = done.stderr.decode("utf-8")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert done.returncode == 2, err
    assert done.stdout == b""
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "its name is not valid UTF-8" in lines[0], lines
    assert (SHOWN in lines[0]) or ("new\\xff" in lines[0])
    assert tree(root) == before  # nothing written, run.json not rewritten


@pytest.mark.parametrize("form", ["separate", "joined"])
def test_an_instruction_that_is_not_utf8_is_refused_as_text_not_as_a_name(form: str, tmp_path: Path) -> None:
    """Hostile round 12, F8: an ``--instruction`` with bytes that are not UTF-8 is named as text, with its option;
    the advice to rename it is for names and paths."""
    text = b"a\xed\xa0\x80b"  # a UTF-16 surrogate encoded as UTF-8: not valid UTF-8
    given = [b"--instruction", text] if form == "separate" else [b"--instruction=" + text]
    done = rollbench_cli(
        "eval", "--env", "scripted/reach", "--policy", "zero", "--episodes", "1", "--out", str(tmp_path / "o"),
        *given, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        "error: --instruction: not valid UTF-8 text (a\\xed\\xa0\\x80b); rollbench records text as UTF-8"
    ]
    assert not (tmp_path / "o").exists()


def test_runs_lists_a_run_whose_name_is_not_utf8_as_unreadable_and_keeps_the_others(root: Path) -> None:
    done = rollbench_cli("runs", str(root), "--json", cwd=root)
    assert done.returncode == 0, done.stderr.decode()
    rows = {r["run"]: r for r in json.loads(done.stdout.decode("utf-8"))}  # strict UTF-8
    assert set(rows) == {"ok", SHOWN}
    assert rows["ok"]["status"] == "OK" and rows["ok"]["episodes_recorded"] == 2
    assert rows[SHOWN]["error"] == f"{root}/{SHOWN}: its name is not valid UTF-8; rename it"


def test_an_ascii_terminal_shows_a_non_ascii_run_name_escaped(root: Path, tmp_path: Path) -> None:
    shutil.copytree(root / "ok", tmp_path / "übung")
    table = rollbench_cli("runs", str(tmp_path), encoding="ascii", cwd=tmp_path)
    assert table.returncode == 0 and b"Traceback" not in table.stderr, table.stderr.decode()
    assert b"\\xfcbung" in table.stdout
    doc = rollbench_cli("runs", str(tmp_path), "--json", encoding="ascii", cwd=tmp_path)
    assert doc.returncode == 0, doc.stderr.decode()
    assert doc.stdout.isascii() and [r["run"] for r in json.loads(doc.stdout)] == ["übung"]
