"""The ``rollbench`` console script's entry point: a Ctrl-C while the command line is still being imported (about
a second: pydantic models, rich, typer) ends it with one line and exit 130, as a Ctrl-C at any later moment does,
instead of Python's traceback through the imports (hostile round 11, F4). This module imports nothing heavy."""

from __future__ import annotations

import os
import signal
from types import FrameType


def _interrupted_early(signum: int, frame: FrameType | None) -> None:
    """SIGINT before anything ran: nothing to keep, so say so and end at once (no import is left half done)."""
    os.write(2, b"interrupted before anything ran\n")
    os._exit(130)


def main() -> None:
    """Run the command line (:func:`rollbench.cli.main.main`), Ctrl-C during its imports included."""
    # not when SIGINT is ignored (a background job): then a Ctrl-C cannot reach the imports anyway
    early = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if early:
        signal.signal(signal.SIGINT, _interrupted_early)
    from rollbench.cli.main import main as run

    if early:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    run()
