"""The CLI reference, ``docs/cli.md``, generated from the ``rollbench`` commands themselves.

``python -m rollbench.cli.reference`` rewrites ``docs/cli.md`` (``--check`` exits 1 when the file differs, ``-`` as
the path prints to stdout). Every command, argument and option is taken from the click command typer builds, with the
text ``--help`` shows: the option names, the value type, the default, the bound (``x>=1``, ``0<=x<=65535``), the
environment variable and the help. Nothing here is written by hand, so the reference cannot drift from ``--help``;
tests/test_cli_reference.py regenerates it and compares.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HEADER = """# CLI reference

Every `rollbench` command with every argument and option, its default and its bound, as `rollbench COMMAND --help`
prints them. Generated from the commands by `python -m rollbench.cli.reference` (do not edit by hand:
`tests/test_cli_reference.py` fails when this file is not current). Exit codes of every command:
[status.md](status.md).
"""

_BRACKET = re.compile(r"\s*\[([^\[\]]*)\]\s*$")


def _cell(text: str) -> str:
    """Text fit for one markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _split_help(help_text: str) -> tuple[str, str, str, str]:
    """``"Episodes.  [default: 10; x>=1]"`` -> ("Episodes.", "10", "x>=1", env var) as click formats the suffix."""
    default = bound = env = ""
    m = _BRACKET.search(help_text)
    if m:
        help_text = help_text[: m.start()]
        for part in m.group(1).split("; "):
            if part.startswith("default: "):
                default = part.removeprefix("default: ")
            elif part.startswith("env var: "):
                env = part.removeprefix("env var: ")
            elif part == "required":
                default = "required"
            else:
                bound = part
    return help_text.strip(), default, bound, env


def _param_rows(command: Any, ctx: Any) -> list[str]:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            name = param.make_metavar(ctx) if hasattr(param, "make_metavar") else param.name.upper()
            help_text = getattr(param, "help", None) or ""
            req = "required" if param.required else "optional"
            more = ", repeatable" if param.nargs == -1 else ""
            rows.append(f"| `{_cell(name)}` (argument, {req}{more}) | | | | {_cell(help_text)} |")
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        decl, help_text = record
        text, default, bound, env = _split_help(help_text)
        if param.required and not default:
            default = "required"
        if param.envvar and not env:
            env = param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar)
        more = " (repeatable)" if param.multiple else ""
        cells = [f"`{_cell(decl)}`{more}", _cell(default), _cell(bound), f"`{env}`" if env else "", _cell(text)]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def render() -> str:
    """The whole reference as markdown: one section per command, in the order ``rollbench --help`` lists them."""
    import typer.main

    from rollbench.cli.main import app

    group: Any = typer.main.get_command(app)  # the rollbench group (a click Group)
    root_ctx = group.context_class(group, info_name="rollbench")
    parts = [HEADER]
    names = group.list_commands(root_ctx)
    parts.append("Commands: " + ", ".join(f"[`{n}`](#rollbench-{n})" for n in names) + ".\n")
    parts.append("Global: `rollbench --version` prints the installed version; `rollbench` alone prints the commands.\n")
    for name in names:
        command = group.get_command(root_ctx, name)
        ctx = command.context_class(command, info_name=name, parent=root_ctx)
        usage = " ".join(command.collect_usage_pieces(ctx))
        parts.append(f"## rollbench {name}\n")
        parts.append(f"`rollbench {name} {usage}`\n")
        if command.help:
            parts.append(" ".join(command.help.split()) + "\n")
        rows = _param_rows(command, ctx)
        if rows:
            parts.append(
                "| option | default | bound | env var | meaning |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
            )
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """``python -m rollbench.cli.reference [PATH] [--check]``: write (or check) the reference; PATH default
    docs/cli.md under the current directory, ``-`` for stdout. Exit 0 on success, 1 when --check finds it stale."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    text = render()
    target = paths[0] if paths else "docs/cli.md"
    if target == "-":
        sys.stdout.write(text)
        return 0
    path = Path(target)
    if check:
        current = path.read_text() if path.is_file() else ""
        if current != text:
            print(f"{path} is not current: run `python -m rollbench.cli.reference`", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
