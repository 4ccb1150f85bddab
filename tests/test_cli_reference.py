"""docs/cli.md is the CLI reference generated from the commands (``python -m rollbench.cli.reference``): regenerated
here and compared, so it cannot drift from ``--help``; and it names every command, option, default and bound."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import REPO

REGENERATE = "python -m rollbench.cli.reference"


def test_cli_reference_in_docs_is_what_the_commands_generate_now() -> None:
    from rollbench.cli.reference import render

    current = (REPO / "docs/cli.md").read_text()
    assert current == render(), f"docs/cli.md is stale: run `{REGENERATE}` from the checkout and commit docs/cli.md"


@pytest.mark.slow
def test_cli_reference_lists_every_command_and_option_with_defaults_and_bounds() -> None:
    """The oracle is `rollbench COMMAND --help` run as a user runs it: every option it prints is in the reference."""
    text = (REPO / "docs/cli.md").read_text()
    top = subprocess.run([sys.executable, "-m", "rollbench", "--help"], capture_output=True, text=True, check=True)
    listed = top.stdout.split("Commands:", 1)[1].splitlines()  # a description wraps onto deeper-indented lines
    commands = [ln.split()[0] for ln in listed if ln.startswith("  ") and not ln.startswith("   ")]
    assert "eval" in commands and "reproduce" in commands
    for name in commands:
        assert f"## rollbench {name}\n" in text, name
        section = text.split(f"## rollbench {name}\n", 1)[1].split("\n## ", 1)[0]
        helped = subprocess.run(
            [sys.executable, "-m", "rollbench", name, "--help"], capture_output=True, text=True, check=True
        ).stdout
        for option in set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", helped, re.M)) - {"--help"}:
            assert f"`{option}" in section, f"{name} {option}"
    assert "| `--episodes <int range>` | 10 | x>=1 |" in text  # eval: default and bound
    assert "| `--port <int range>` | 8301 | 0<=x<=65535 |" in text  # dashboard


def test_cli_reference_check_mode_fails_on_a_stale_file_and_names_the_command(tmp_path) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text("# old\n")
    r = subprocess.run(
        [sys.executable, "-m", "rollbench.cli.reference", str(stale), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 1 and REGENERATE in r.stderr
