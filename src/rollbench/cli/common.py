"""What every ``rollbench`` command shares: the two consoles and the one error line (exit 2 by default)."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)
out = Console()
if not out.is_terminal:  # piped output: do not squeeze tables into 80 columns
    out = Console(width=160)


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: MSG`` as one line on stderr (markup escaped) and exit with ``code`` (2: bad input)."""
    console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
