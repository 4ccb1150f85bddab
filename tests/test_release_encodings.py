"""Secrets written in another encoding than the rules read (hostile round 19, F1 and F3).

F1: UTF-16 text without a byte order mark is ASCII with NUL bytes between, valid UTF-8 that no rule matches; release
copied such a file as "text", unchanged. A file released as text now holds no NUL byte (refused, exit 2, naming it),
and a string whose secret is interleaved with NULs or zero-width characters (JSON ``\\u0000``, U+200B) is replaced
whole. F3: a video's (and a parquet file's) bytes were searched for environment secrets only in their Latin-1
spelling and for text only in ASCII runs; a UTF-16 or UTF-8 copy was released. Oracles: the planted bytes searched
for in every released file (and with the invisible characters removed), exit codes and the one refusal line, and
pyarrow / json reading the released values back."""

from __future__ import annotations

import json
import random
import shutil
import struct
import sys
import unicodedata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_in_process import invoke
from rollbench.api import evaluate
from rollbench.release.invisible import INVISIBLE
from rollbench.release.kinds import byte_findings, plain_byte_findings, text_runs
from rollbench.release.rules import Scanner

KEY = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"  # an OpenAI-form key
GH = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token
TEXT = f"openai {KEY}\ngithub {GH}\nmail alice@corp-secret.example\npassword=Hunter2Hunter2xyz\nhome /home/alice/x\n"
LEAKS = [KEY, GH, "alice@corp-secret.example", "Hunter2Hunter2xyz", "/home/alice"]
TOKEN = ("MY_SERVICE_TOKEN", "Zq7vK2mP9xR4tL8wN3bFq")
UMLAUT = ("DB_PASSWORD", "Pässwörd-Geheim-2026")  # not ASCII: UTF-8 and Latin-1 differ
VIDEO = "videos/observation.images.top/chunk-000/file-000.mp4"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("enc") / "run"
    evaluate(out=out, env="scripted/reach", policy="zero", episodes=2, max_steps=3, seed=1, video=True)
    return out


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    out = tmp_path / "src" / "run"
    shutil.copytree(recorded, out)
    (out / "notes").mkdir()
    return out


def release(*args: object, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    r = invoke("release", *args, "--date", "2026-01-01", env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stderr.strip().splitlines()


def held(out: Path, needles: list[str]) -> list[str]:
    """``FILE: NEEDLE`` for each released file holding a needle, read as bytes with every NUL and zero-width space
    (as UTF-8 and as UTF-16) removed: what a reader of the file sees."""
    found = []
    for p in sorted(f for f in out.rglob("*") if f.is_file()):
        data = p.read_bytes()
        for junk in ("\u200b".encode(), "\u200b".encode("utf-16-le"), "\u200b".encode("utf-16-be"), b"\0"):
            data = data.replace(junk, b"")
        found += [f"{p.relative_to(out)}: {n}" for n in needles if n.encode() in data]
    return found


def _manifest(out: Path) -> dict[str, dict[str, object]]:
    return {f["path"]: f for f in json.loads((out / "MANIFEST.json").read_text())["files"]}


def _rules(out: Path) -> list[tuple[str, str, str]]:
    return [(r["file"], r["field"], r["rule"]) for r in json.loads((out / "MANIFEST.json").read_text())["redactions"]]


# F1: text files


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_a_text_file_in_utf16_or_utf32_without_a_bom_refuses_the_release_naming_it(
    run: Path, tmp_path: Path, codec: str
) -> None:
    (run / "notes/plain.txt").write_text(TEXT)
    (run / "notes/export.txt").write_bytes(TEXT.encode(codec))
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 2 and len(lines) == 1, lines
    assert "run/notes/export.txt holds a NUL byte (at byte " in lines[0] and "UTF-16" in lines[0]
    assert not any(leak in lines[0] for leak in LEAKS)
    assert not (tmp_path / "rel").exists()


def test_a_nul_byte_past_the_first_8_kib_of_a_file_of_no_text_suffix_refuses_it(run: Path, tmp_path: Path) -> None:
    blob = b"header " * 1300 + TEXT.encode("utf-16-le")  # 9,100 bytes of ASCII, then UTF-16 text
    assert b"\0" not in blob[:8192]
    (run / "notes/blob.dat").write_bytes(blob)
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 2 and len(lines) == 1 and str(run / "notes/blob.dat") in lines[0], lines
    assert "is not a file release can scan for secrets" in lines[0]
    assert not (tmp_path / "rel").exists()


def test_a_single_nul_at_the_end_of_a_text_file_refuses_it(run: Path, tmp_path: Path) -> None:
    (run / "notes/log.md").write_bytes(b"x" * 20_000 + b"\0")
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 2 and len(lines) == 1 and "run/notes/log.md holds a NUL byte (at byte 20,000)" in lines[0], lines


def test_a_labels_file_released_whole_in_utf16_refuses_the_release(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_bytes(TEXT.encode("utf-16-le"))
    code, lines = release(run, "--labels", labels, "--out", tmp_path / "rel")
    assert code == 2 and len(lines) == 1 and "labels/labels.txt holds a NUL byte" in lines[0], lines
    assert not (tmp_path / "rel").exists()


def test_control_characters_that_hide_nothing_are_released_byte_for_byte(run: Path, tmp_path: Path) -> None:
    log = b"\x1b[32mepisode 0 ok\x1b[0m\rprogress 50%\x08\x08\x08done\x07\n\fpage 2\tend\n"  # ANSI colours, BS, BEL
    notes = "reviewed 👩‍💻 ok 🏳️‍🌈, family 👨‍👩‍👧‍👦, فارسی\u200cها, flag 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f\n"
    (run / "notes/run.log").write_bytes(log)
    (run / "notes/notes.md").write_text(notes)
    (run / "notes/meta.json").write_text(json.dumps({"note": notes}, indent=2))  # \\u200d escapes
    (run / "notes/raw.json").write_text(json.dumps({"note": notes}, ensure_ascii=False))  # UTF-8 as written
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    files = _manifest(tmp_path / "rel")
    for name in ("run.log", "notes.md", "meta.json", "raw.json"):
        assert files[f"run/notes/{name}"]["unchanged"] is True, name
        assert (tmp_path / "rel/run/notes" / name).read_bytes() == (run / "notes" / name).read_bytes()


def test_a_key_split_by_control_characters_in_a_text_file_replaces_its_line_and_keeps_the_others(
    run: Path, tmp_path: Path
) -> None:
    log = b"start ok\nkey " + "\x1b".join(KEY).encode() + b" done\n\x1b[32mepisode 1 ok\x1b[0m\nend\n"
    (run / "notes/term.log").write_bytes(log)
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    assert (tmp_path / "rel/run/notes/term.log").read_bytes() == (
        b"start ok\n<REDACTED:api_key:1>\n\x1b[32mepisode 1 ok\x1b[0m\nend\n"
    )
    assert ("run/notes/term.log", "line 2", "interleaved:openai_key") in _rules(tmp_path / "rel")


def test_a_key_coloured_by_terminal_escapes_is_replaced_whole_in_a_log_and_in_a_json_string(
    run: Path, tmp_path: Path
) -> None:
    """``\\x1b[32m`` before the key: its final ``m`` joins the key's ``s`` into one word, so no rule's word start
    matches as written; without the control sequence the key is found (hostile round 20, left over)."""
    key = "sk-" + "abcdefghijklmnopqrstuvwx"  # too regular for the entropy rule: only openai_key finds it
    coloured = f"\x1b[1;32m{key}\x1b[0m"
    (run / "notes/term.log").write_bytes(f"key {coloured} done\n".encode())
    (run / "notes/keys.json").write_text(json.dumps({"note": f"key {coloured}", "ok": "\x1b[32mfine\x1b[0m"}))
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    log = (tmp_path / "rel/run/notes/term.log").read_bytes()
    back = json.loads((tmp_path / "rel/run/notes/keys.json").read_text())
    assert sorted([log.decode(), back["note"] + "\n"]) == ["<REDACTED:api_key:1>\n", "<REDACTED:api_key:2>\n"]
    assert back["ok"] == "\x1b[32mfine\x1b[0m"
    assert held(tmp_path / "rel", [key, key[3:]]) == []
    assert ("run/notes/term.log", "line 1", "interleaved:openai_key") in _rules(tmp_path / "rel")
    assert ("run/notes/keys.json", "note", "interleaved:openai_key") in _rules(tmp_path / "rel")


@pytest.mark.parametrize(
    "cut",
    ["\x1b(B", "\x1b=", "\x1b]8;;\x1b\\", "\x1b]0;title\x07", "(\x08", "ab\x08\x08", "\x9b1m"],
    ids=["esc-charset", "esc-keypad", "osc8-link", "osc-title", "overstrike", "overstrike-two", "c1-csi"],
)
def test_a_key_cut_by_any_terminal_sequence_is_found_as_a_terminal_shows_it(
    run: Path, tmp_path: Path, cut: str
) -> None:
    """Hostile round 22, a F4: ESC ( B (tput sgr0), ESC =, OSC strings and overstruck characters left their
    printable bytes inside the key, so no rule matched; a terminal shows the key whole."""
    head, tail = GH[:20], GH[20:]
    (run / "notes/console.log").write_bytes(f"ok line\ntoken {head}{cut}{tail} end\nlast\n".encode())
    (run / "notes/keys.json").write_text(json.dumps({"msg": f"{head}{cut}{tail}"}))
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    log = (tmp_path / "rel/run/notes/console.log").read_bytes().decode()
    assert log.startswith("ok line\n<REDACTED:api_key:") and log.endswith(">\nlast\n") and log.count("\n") == 3
    assert json.loads((tmp_path / "rel/run/notes/keys.json").read_text())["msg"].startswith("<REDACTED:api_key:")
    assert held(tmp_path / "rel", [head, tail]) == []


# F1: strings in JSON and parquet


def _interleaved(value: str, sep: str) -> str:
    return sep.join(value)


@pytest.mark.parametrize("sep", ["\0", "\u200b", "\u2060", "\u00ad", "\ufeff"])
@pytest.mark.parametrize("style", ["rollbench", "compact-utf8"])
def test_a_json_string_holding_a_key_interleaved_with_invisible_characters_is_replaced_whole(
    run: Path, tmp_path: Path, sep: str, style: str
) -> None:
    doc = {"note": f"openai {_interleaved(KEY, sep)} end", "gh": _interleaved(GH, sep), "ok": "fine 👍"}
    text = json.dumps(doc, indent=2) if style == "rollbench" else json.dumps(doc, ensure_ascii=False) + "\n"
    (run / "notes/keys.json").write_text(text)
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    back = json.loads((tmp_path / "rel/run/notes/keys.json").read_text())
    assert back == {"note": "<REDACTED:api_key:1>", "gh": "<REDACTED:api_key:2>", "ok": "fine 👍"}
    assert held(tmp_path / "rel", [KEY, GH]) == []
    assert ("run/notes/keys.json", "note", "interleaved:openai_key") in _rules(tmp_path / "rel")
    assert ("run/notes/keys.json", "gh", "interleaved:github_token") in _rules(tmp_path / "rel")


def test_a_partly_interleaved_key_leaves_no_part_of_it(run: Path, tmp_path: Path) -> None:
    """The rule finds the key's first 30 characters as written; without the zero-width space it finds the whole key:
    the string is replaced whole, so the last 10 characters are not kept either."""
    (run / "notes/k.json").write_text(json.dumps({"note": f"x {KEY[:30]}\u200b{KEY[30:]} y"}, indent=2))
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    assert json.loads((tmp_path / "rel/run/notes/k.json").read_text()) == {"note": "<REDACTED:api_key:1>"}
    assert held(tmp_path / "rel", [KEY[30:]]) == []


def test_a_credential_value_learnt_from_an_interleaved_pair_is_redacted_where_it_stands_plainly(
    run: Path, tmp_path: Path
) -> None:
    (run / "notes/a.json").write_text(json.dumps({"note": "p\u200bassword=Hunter2Hunter2xyz"}, indent=2))
    (run / "notes/b.txt").write_text("the db takes Hunter2Hunter2xyz\n")
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    assert held(tmp_path / "rel", ["Hunter2Hunter2xyz"]) == []
    assert (tmp_path / "rel/run/notes/b.txt").read_text().startswith("the db takes <REDACTED:credential:")


def test_a_parquet_string_column_holding_interleaved_keys_is_replaced_by_value(run: Path, tmp_path: Path) -> None:
    values = ["plain 🙂‍↔️ text", f"k {_interleaved(KEY, chr(0))}", f"k {_interleaved(GH, chr(0x200B))}", None]
    pq.write_table(pa.table({"note": values, "n": [1, 2, 3, 4]}), run / "notes/t.parquet")
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 0, lines
    back = pq.read_table(tmp_path / "rel/run/notes/t.parquet").to_pydict()
    assert back == {"note": [values[0], "<REDACTED:api_key:1>", "<REDACTED:api_key:2>", None], "n": [1, 2, 3, 4]}
    assert held(tmp_path / "rel", [KEY, GH]) == []


def test_every_format_and_control_character_of_unicode_is_invisible_to_the_rules_but_separators() -> None:
    """The hand-written class against this Python's Unicode database: every ``Cf`` and every ``Cc`` but tab,
    newline, carriage return and form feed (which separate words) is dropped before the rules run again."""
    missing = [
        f"U+{c:04X}"
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cf", "Cc") and chr(c) not in "\t\n\r\f" and not INVISIBLE.fullmatch(chr(c))
    ]
    assert missing == []
    assert not INVISIBLE.search("\t\n\r\f aZ09é€😀")


# F3: a video's and a parquet file's bytes


def _free_box(video: Path, payload: bytes) -> None:
    with open(video, "ab") as f:  # a top-level mp4 box: the container still opens and plays
        f.write(struct.pack(">I", 8 + len(payload)) + b"free" + payload)


@pytest.mark.parametrize(
    ("secret", "codec", "said"),
    [
        (TOKEN, "utf-16-le", "environment:MY_SERVICE_TOKEN in its bytes (as UTF-16LE)"),
        (TOKEN, "utf-16-be", "environment:MY_SERVICE_TOKEN in its bytes (as UTF-16BE)"),
        (UMLAUT, "utf-8", "environment:DB_PASSWORD in its bytes (as UTF-8)"),
        (UMLAUT, "utf-16-le", "environment:DB_PASSWORD in its bytes (as UTF-16LE)"),
        (UMLAUT, "latin-1", "environment:DB_PASSWORD in its bytes,"),  # the spelling searched before
    ],
)
def test_an_environment_secret_in_a_videos_bytes_in_any_encoding_refuses_the_release(
    run: Path, tmp_path: Path, secret: tuple[str, str], codec: str, said: str
) -> None:
    name, value = secret
    _free_box(run / VIDEO, b"\x01\x02" + ("env " + value.upper()).encode(codec) + b"\x03")  # any letter case
    code, lines = release(run, "--out", tmp_path / "rel", env={name: value})
    assert code == 1 and len(lines) == 1 and f"{VIDEO}: the video holds a match of rule {said}" in lines[0], lines
    assert value.lower() not in lines[0].lower() and not (tmp_path / "rel").exists()


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("contact alice@corp-secret.example today", "email"),
        ("encoded in /home/alice/proj by a tool", "home_path"),
        ("db login token=Hunter2Hunter2xyz at prod", "secret_field"),
        (f"uploaded with {KEY} here", "openai_key"),
    ],
)
def test_text_in_utf16_inside_a_videos_bytes_is_searched_as_ascii_text_is(
    run: Path, tmp_path: Path, codec: str, text: str, rule: str
) -> None:
    _free_box(run / VIDEO, b"\x07" * 3 + text.encode(codec))  # an odd offset: the UTF-16 text is not 2-aligned
    code, lines = release(run, "--out", tmp_path / "rel")
    assert code == 1 and len(lines) == 1, lines
    assert f"rule {rule} in its bytes (a {codec.upper().replace('-16-', '-16')} text run at byte " in lines[0]
    assert not (tmp_path / "rel").exists()


def test_utf16_text_holding_no_secret_in_a_video_is_released_byte_for_byte(run: Path, tmp_path: Path) -> None:
    _free_box(run / VIDEO, "recorded with ScreenTool 4.2 (c) 2026 Example Ltd".encode("utf-16-le"))
    code, lines = release(run, "--out", tmp_path / "rel", env=dict([TOKEN]))
    assert code == 0, lines
    assert (tmp_path / "rel/run" / VIDEO).read_bytes() == (run / VIDEO).read_bytes()


def test_text_runs_reads_utf16_at_either_alignment_and_each_run_whole() -> None:
    le, be = "mail alice@corp-secret.example".encode("utf-16-le"), "at /home/bob/proj/x".encode("utf-16-be")
    raw = b"\x00\x01" + le + b"\x00\xff" * 3 + b"z" + be + b"\x00\x00short\x00" + "tiny".encode("utf-16-le")
    got = [(where.split(" at byte ")[0], text) for where, text in text_runs(raw)]
    assert ("a UTF-16LE text run", "mail alice@corp-secret.example") in got
    assert ("a UTF-16BE text run", "at /home/bob/proj/x") in got
    assert not any("tiny" in t for _, t in got)  # 4 characters: no run


def test_random_bytes_hold_no_utf16_run_and_an_env_secret_is_found_in_each_spelling() -> None:
    scanner = Scanner(set(), set(), None, environ=dict([TOKEN, UMLAUT]))
    raw = random.Random(19).randbytes(300_000)
    assert [w for w, _ in text_runs(raw) if "UTF-16" in w] == []
    assert byte_findings(raw, scanner) == [] and plain_byte_findings(raw, scanner) == []
    for name, value in (TOKEN, UMLAUT):
        for codec, label in (("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE")):
            planted = raw[:149_999] + value.swapcase().encode(codec) + raw[149_999:]
            assert f"environment:{name} in its bytes (as {label})" in byte_findings(planted, scanner)
            assert f"environment:{name} in its bytes (as {label})" in plain_byte_findings(planted, scanner)


def test_an_allowed_value_is_no_finding_in_a_parquet_files_bytes_in_any_encoding() -> None:
    allow = Scanner(set(), set(), {"allow": ["Zq7vK2mP9xR4tL8wN3bFq"]}, environ=dict([TOKEN]))
    raw = b"\x01" + TOKEN[1].encode("utf-16-be") + b"\x02"
    assert plain_byte_findings(raw, allow) == []
    assert plain_byte_findings(raw, Scanner(set(), set(), None, environ=dict([TOKEN]))) == [
        "environment:MY_SERVICE_TOKEN in its bytes (as UTF-16BE)"
    ]
