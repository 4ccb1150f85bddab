"""Keys a terminal puts together by moving its cursor (a hostile tester, after round 22): a key written in pieces, each
matching no rule as written nor once the invisible characters are removed, and reassembled on the screen by a
cursor move (CSI D and G, ESC 7/8, CSI s/u, ``\\r``, six backspaces, CSI A and H, ESC M, VT), in a log, a JSON
string and a parquet value; ``cat`` showed the key whole and release copied it.

Oracles: pyte's own screen (the library's ``Screen``, not release's: :func:`shown`) drawing the released text, the
plain released bytes, exact released files, MANIFEST.json's rules and warnings; and, for release's screen, pyte's
screen on random texts of the moves both read alike."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyte
import pytest

from cli_in_process import invoke
from rollbench.release.cursor import drawn, moves, render
from rollbench.release.invisible import CONTROLS, INVISIBLE

KEY = "sk-ant-api03-" + "Zq7vK2mP9xR4tL8wN3bFqYh6Tj1Ue5Xw"  # an Anthropic-form key
HEAD, TAIL = KEY[:18], KEY[18:]  # neither matches a rule: 11 key characters after sk-ant-, 27 with no prefix
N, COL = len(HEAD), 4 + len(HEAD) + 1  # the head's length; the tail's column (1-based) after "key " and the head
TRICKS = {  # each shows "key " + KEY on a row of the screen
    "csi-back-D": f"key \x1b[{N}C{TAIL} \x1b[{len(TAIL) + 1 + N}D{HEAD}",
    "csi-column-G": f"key \x1b[{COL}G{TAIL} \x1b[5G{HEAD}",
    "esc-7-esc-8": f"key \x1b7\x1b[{N}C{TAIL} \x1b8{HEAD}",
    "csi-s-csi-u": f"key \x1b[s\x1b[{N}C{TAIL} \x1b[u{HEAD}",
    "carriage-return": f"key {' ' * N}{TAIL} \rkey {HEAD}",
    "six-backspaces": f"key {HEAD}      " + "\b" * 6 + TAIL,
    "csi-up-A": f"key {HEAD}\nnext line here\x1b[1A\r\x1b[{COL}G{TAIL}",
    "csi-position-H": f"line one\nkey {HEAD}\n\x1b[2;{COL}H{TAIL}",
    "reverse-index-esc-M": f"key {HEAD}\nnext line\n\x1bM\x1bM\x1b[{COL}G{TAIL}",
    "vertical-tab": f"\nkey {HEAD}\x1b[A \x0b\x1b[D{TAIL}",
}
WITHIN_A_ROW = ["csi-back-D", "csi-column-G", "carriage-return", "six-backspaces"]


def shown(text: str) -> str:
    """Every row pyte's screen shows once ``text`` is written to it as a tty writes it (``\\n`` as CR LF); xterm's
    ``ESC[s``/``ESC[u``, which pyte lacks, as ``ESC 7``/``ESC 8``."""
    screen = pyte.Screen(400, 60)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n").replace("\x1b[s", "\x1b7").replace("\x1b[u", "\x1b8"))
    return "\n".join(row.rstrip() for row in screen.display)


@pytest.fixture
def run(notes_run: Path) -> Path:
    return notes_run


def release(run: Path, out: Path) -> tuple[int, str]:
    r = invoke("release", run, "--out", out, "--date", "2026-01-01")
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stderr


def _manifest(out: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((out / "MANIFEST.json").read_text())
    return doc


def _rules(out: Path) -> list[tuple[str, str, str]]:
    return [(r["file"], r["field"], r["rule"]) for r in _manifest(out)["redactions"]]  # type: ignore[attr-defined]


def _no_key(text: str) -> None:
    """Neither pyte's screen nor the text as written nor its invisible characters removed holds the key or a piece."""
    assert KEY not in shown(text)
    for seen in (text, INVISIBLE.sub("", text), CONTROLS.sub("", text)):
        assert HEAD not in seen and TAIL not in seen


@pytest.mark.parametrize("trick", TRICKS)
def test_each_trick_shows_the_key_on_a_terminal_and_no_rule_finds_it_as_written(trick: str) -> None:
    """The cases below can fail: pyte shows the key, and no view release had before holds it."""
    text = TRICKS[trick]
    assert f"key {KEY}" in shown(text)
    for seen in (text, INVISIBLE.sub("", text), CONTROLS.sub("", text)):
        assert KEY not in seen and not re.search(r"\bsk-ant-[A-Za-z0-9_\-]{20,}", seen)


@pytest.mark.parametrize("trick", TRICKS)
def test_a_key_a_terminal_reassembles_in_a_log_is_released_in_no_form_a_terminal_shows(
    run: Path, tmp_path: Path, trick: str
) -> None:
    (run / "notes/console.log").write_bytes((TRICKS[trick] + "\n").encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    released = (tmp_path / "rel/run/notes/console.log").read_bytes().decode()
    _no_key(released)
    assert released == "<REDACTED:api_key:1>\n"
    assert ("run/notes/console.log", "line 1", "cursor:anthropic_key") in _rules(tmp_path / "rel")


@pytest.mark.parametrize("trick", WITHIN_A_ROW)
def test_a_key_reassembled_within_its_line_replaces_that_line_and_keeps_the_others(
    run: Path, tmp_path: Path, trick: str
) -> None:
    log = f"\x1b[32mok\x1b[0m line\r\n{TRICKS[trick]}\nprogress 10%\rprogress 20%\nlast line\n"
    (run / "notes/console.log").write_bytes(log.encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    released = (tmp_path / "rel/run/notes/console.log").read_bytes().decode()
    assert released == log.replace(TRICKS[trick], "<REDACTED:api_key:1>")
    _no_key(released)
    assert ("run/notes/console.log", "line 2", "cursor:anthropic_key") in _rules(tmp_path / "rel")
    assert _manifest(tmp_path / "rel")["warnings"] == []


def test_a_key_reassembled_across_lines_replaces_the_whole_file_and_says_why(run: Path, tmp_path: Path) -> None:
    """Rows cannot be traced back to lines once the cursor moves between them."""
    log = f"ok line\n{TRICKS['csi-up-A']}\nlast line\n\n"
    (run / "notes/console.log").write_bytes(log.encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    assert (tmp_path / "rel/run/notes/console.log").read_bytes() == b"<REDACTED:api_key:1>\n\n"
    said = " ".join(err.split())
    assert "run/notes/console.log: once its text moves the cursor between lines, a terminal shows a match of" in said
    assert "the whole file is released as one placeholder (rule cursor:anthropic_key)" in said
    assert any("run/notes/console.log" in w for w in _manifest(tmp_path / "rel")["warnings"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("trick", TRICKS)
def test_a_json_string_and_a_parquet_value_a_terminal_reassembles_are_replaced_whole(
    run: Path, tmp_path: Path, trick: str
) -> None:
    text = TRICKS[trick]
    (run / "notes/keys.json").write_text(json.dumps({"note": text, "ok": "\x1b[32mfine\x1b[0m\r\n"}, indent=2))
    pq.write_table(pa.table({"note": ["plain", text, None]}), run / "notes/t.parquet")
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    back = json.loads((tmp_path / "rel/run/notes/keys.json").read_text())
    column = pq.read_table(tmp_path / "rel/run/notes/t.parquet").column("note").to_pylist()
    assert back == {"note": "<REDACTED:api_key:1>", "ok": "\x1b[32mfine\x1b[0m\r\n"}
    assert column == ["plain", "<REDACTED:api_key:1>", None]
    for value in (back["note"], column[1]):
        _no_key(value)
    rules = _rules(tmp_path / "rel")
    assert ("run/notes/keys.json", "note", "cursor:anthropic_key") in rules
    assert ("run/notes/t.parquet", "note[1]", "cursor:anthropic_key") in rules


def test_a_progress_log_with_colours_carriage_returns_and_redraws_is_released_byte_for_byte(
    run: Path, tmp_path: Path
) -> None:
    bars = "".join(
        f"\r\x1b[32m{p:3d}%\x1b[0m|{'█' * (p // 10)}{' ' * (10 - p // 10)}| {p}/100 [00:{p % 60:02d}<00:10, 9.5it/s]"
        for p in range(0, 101, 5)
    )
    redraws = "".join(
        "\x1b[2A" * (i > 0) + f"\x1b[2K => [1/2] RUN step {i}s\n\x1b[2K => [2/2] COPY {i}s\n" for i in range(4)
    )
    log = (
        f"epoch 1\n{bars}\nepoch 2 loss=0.25\r\n{redraws}spin |\b/\b-\b\\\b| done\n"
        "count 10%\b\b\b20%\b\b\b30%\n\x1b]8;;https://example.org/run\x1b\\link\x1b]8;;\x1b\\ \x1b[?25l\x1b[?25h\n"
    )
    (run / "notes/train.log").write_bytes(log.encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    assert (tmp_path / "rel/run/notes/train.log").read_bytes() == log.encode()
    files = {f["path"]: f for f in _manifest(tmp_path / "rel")["files"]}  # type: ignore[attr-defined]
    assert files["run/notes/train.log"]["unchanged"] is True


def test_a_key_shown_only_in_passing_then_overwritten_is_not_released(run: Path, tmp_path: Path) -> None:
    """The key stands whole on the screen until ``\\r`` and spaces overwrite it: the screen left at the end shows
    nothing, a slower terminal (or a recording of it) shows the key."""
    text = TRICKS["csi-column-G"] + f"\r{' ' * 60}\r"
    cut = text.index("\r")
    assert KEY in shown(text[:cut]) and KEY not in shown(text)
    (run / "notes/console.log").write_bytes(f"ok\n{text}\nend\n".encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    released = (tmp_path / "rel/run/notes/console.log").read_bytes().decode()
    assert released == "ok\n<REDACTED:api_key:1>\nend\n"


def test_a_plain_key_on_a_line_that_moves_the_cursor_is_replaced_alone(run: Path, tmp_path: Path) -> None:
    """What the rules find as written is replaced as always; the line is drawn as released and shows nothing more."""
    (run / "notes/console.log").write_bytes(f"key {KEY}\rprogress 50%\nend\n".encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    released = (tmp_path / "rel/run/notes/console.log").read_bytes().decode()
    assert released == "key <REDACTED:api_key:1>\rprogress 50%\nend\n"
    assert [r for r in _rules(tmp_path / "rel") if r[0] == "run/notes/console.log"] == [
        ("run/notes/console.log", "line 1", "anthropic_key")
    ]


def test_a_credential_a_terminal_reassembles_is_learnt_and_redacted_where_it_stands_plainly(
    run: Path, tmp_path: Path
) -> None:
    """As written the value is on the line after ``password=``; the screen shows it right after it."""
    (run / "notes/a.json").write_text(json.dumps({"note": "password=\n\x1b[A\x1b[10GHunter2Hunter2xyz"}))
    (run / "notes/b.txt").write_text("the db takes Hunter2Hunter2xyz\n")
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    note = json.loads((tmp_path / "rel/run/notes/a.json").read_text())["note"]
    assert note == "password=\n\x1b[A\x1b[10G<REDACTED:credential:1>"  # learnt from the screen: replaced in place
    assert KEY not in shown(note) and "Hunter2" not in shown(note)
    assert (tmp_path / "rel/run/notes/b.txt").read_text() == "the db takes <REDACTED:credential:1>\n"


def test_a_text_too_costly_to_draw_is_withheld_whole_and_said(run: Path, tmp_path: Path) -> None:
    """Saved and restored cursor with every few characters: over 8 cell operations a character, not drawn."""
    (run / "notes/flood.log").write_bytes(("ab\x1b7cd\x1b8" * 40_000 + "\n").encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    assert (tmp_path / "rel/run/notes/flood.log").read_bytes() == b"<REDACTED:withheld:1>\n"
    assert ("run/notes/flood.log", "line 1", "cursor:withheld") in _rules(tmp_path / "rel")
    assert "run/notes/flood.log: its text moves a terminal's cursor and is too long or costly to draw" in " ".join(
        err.split()
    )


@pytest.mark.parametrize(
    "edit",
    [
        "\x1b[67;1;24;1;24$x",  # DECFRA: a "C" filled into row 1, column 24
        "\x1b[1;1;1;30;1;1;24;1$v",  # DECCRA: a rectangle copied
        "\x1b[1;1;1;10$z",  # DECERA
        "\x1b[1;1;1;10${",  # DECSERA
        "\x1b[3'~",  # DECDC: three columns deleted
        "\x1b[3'}",  # DECIC
    ],
)
def test_a_vt420_rectangle_or_column_edit_is_withheld_whole(run: Path, tmp_path: Path, edit: str) -> None:
    """hostile25a F3: the screen does not draw these edits, so what they would put together is not scanned as if
    they did nothing: the file is withheld whole."""
    (run / "notes/edit.log").write_bytes(f"key {KEY[:-1]}{edit}\nnext line\n".encode())
    code, err = release(run, tmp_path / "rel")
    assert code == 0, err
    assert (tmp_path / "rel/run/notes/edit.log").read_bytes() == b"<REDACTED:withheld:1>\n"
    assert ("run/notes/edit.log", "line 1", "cursor:withheld") in _rules(tmp_path / "rel")
    assert "or edits rectangles or columns (VT420)" in " ".join(err.split())


@pytest.mark.parametrize(
    ("text", "moving"),
    [
        ("plain text\twith a tab", False),
        ("\x1b[1;32mcoloured\x1b[0m \x1b(B\x1b[m", False),
        ("\x1b]8;;https://example.org\x1b\\link\x1b]8;;\x1b\\", False),
        ("windows\r\nlines\r\n", False),
        ("progress\r", True),
        ("a\bb", True),
        ("\x1b[4D", True),
        ("\x1b7", True),
        ("\x9b2A", True),
        ("\x0b", True),
        ("\x1b[?25l", True),
    ],
)
def test_only_a_control_that_may_move_the_cursor_makes_release_draw_a_string(text: str, moving: bool) -> None:
    assert moves(text) is moving


def _random_text(rng: random.Random, within_rows: bool) -> str:
    """Text of the moves release's screen and pyte's read alike (not pyte's HPA, which it reads as ``'``, nor its
    DL, which keeps a row when the one below is empty, nor a second restore, which pyte's stack pops)."""
    moves_ = ["\r", "\b", "\t", "\x1b[{n}D", "\x1b[{n}C", "\x1b[{n}G", "\x1b[{n}a", "\x1b[{k}K", "\x1b[{n}X"]
    moves_ += ["\x1b[{n}P", "\x1b[{n}@", "\x1b[32m", "\x1b]0;title\x07"]
    if not within_rows:
        moves_ += ["\x1b[{n}A", "\x1b[{n}B", "\x1b[{n}E", "\x1b[{n}F", "\x1b[{n};{m}H", "\x1b[{n}d", "\x1b[{n}e"]
        moves_ += [
            "\x1b[{k}J",
            "\x1bM",
            "\x1bD",
            "\x0b",
            "\x0c",
            "\x1b[4h",
            "\x1b[4l",
            "\x1b[{n}L",
            "\x1b7\x1b[{m}C\x1b8",
        ]
    parts, rows = [], 0
    for _ in range(rng.randint(1, 40)):
        kind = rng.random()
        if kind < 0.35:
            parts.append("".join(rng.choice("abcXYZ019-_ é") for _ in range(rng.randint(1, 12))))
        elif kind < 0.4 and rows < 30:
            parts.append("\n")
            rows += 1
        else:
            n, m, k = rng.randint(0, 6), rng.randint(0, 8), rng.randint(0, 2)
            parts.append(rng.choice(moves_).format(n=n, m=m, k=k))
    return "".join(parts)


@pytest.mark.parametrize("within_rows", [False, True], ids=["across-rows", "within-rows"])
def test_release_screen_shows_what_pytes_own_screen_shows_for_random_moves(within_rows: bool) -> None:
    rng = random.Random(20261207 + within_rows)
    for _ in range(400):
        text = _random_text(rng, within_rows)
        text += "" if within_rows else "\x1bD\x1bM"  # down and up again: drawn as text moving between rows
        screen = pyte.Screen(400, 80)
        pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
        expected = {  # pyte's cells (its display would draw all 400 x 80 of them), blank where none
            y: "".join(line[x].data for x in range(max(line, default=-1) + 1)).rstrip()
            for y, line in screen.buffer.items()
        }
        if within_rows:  # rows are dropped as the text leaves them: each moved row, as its view's first line
            views = render(text) or []
            assert {y: v.split("\n")[0] for y, v in views} == {y: expected.get(y, "") for y, _ in views}, repr(text)
        else:
            grid = drawn(text).grid
            got = {y: "".join(grid[y]).rstrip() for y in grid}
            assert {y: r for y, r in got.items() if r} == {y: r for y, r in expected.items() if r}, repr(text)


def test_a_benign_progress_log_of_a_mebibyte_is_drawn_and_hostile_floods_are_given_up() -> None:
    """The bounds bite what would cost more than 8 cell operations a character, not a long progress log."""
    bars = "".join(f"\r{p % 100:3d}%|{'█' * (p % 100 // 10):10s}| {p}/30000 [00:01<00:10]" for p in range(30_000))
    assert len(bars) > 1 << 20
    assert render(bars) is not None
    assert render("\x1b[9999Cx" * 20_000) is None  # far columns: each costs 10,000 cells
    assert render("row\n" * 20_000 + "\x1b[H" + "\x1b[L" * 20_000) is None  # each insert moves every row
