"""What every ``rollbench`` command shares: the two consoles and the one error line (exit 2 by default)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer._click import exceptions as click_errors  # typer 0.2x vendors click; its errors live here
from typer.core import TyperGroup

from rollbench.core.contracts import ConfigError, RollbenchError, describe
from rollbench.core.format import described, is_decimal, not_utf8, printable, typed_value_message
from rollbench.core.interrupts import Terminated
from rollbench.core.jsonfile import strict_dumps
from rollbench.core.stdio import document_stream, reserve_stdout, seal_stdout


class _Console(Console):
    """rich's Console that never sends a control or bidirectional character inside printed text to the terminal
    (:func:`~rollbench.core.format.printable`, newlines kept): the net under every ``print`` of a string or table
    cell. Text from outside is also passed through :func:`said` where it is printed, which escapes its newlines
    (one error, one line) and its markup; emoji codes are never replaced. A console for stdout writes to
    :func:`~rollbench.core.stdio.document_stream` (the caller's stdout, even once descriptor 1 is stderr)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)  # ":secret:" in <REDACTED:secret:6> is text, never an emoji (hostile6 F7)
        super().__init__(*args, **kwargs)

    @property
    def file(self) -> IO[str]:
        if self._file is None and not self.stderr:
            return document_stream()
        return super().file

    @file.setter
    def file(self, new_file: IO[str]) -> None:
        self._file = new_file

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text, keep_newlines=True), **kwargs)


def said(text: object) -> str:
    """Text from outside (a recorded error or name, a server's reply, a peer's listing) as a ``print`` with markup
    shows it: every control, newline and bidirectional character as a visible escape
    (:func:`~rollbench.core.format.printable`) and its rich markup escaped, so ``[bold]`` prints as written."""
    return escape(printable(text))


def make_console(**kwargs: Any) -> Console:
    """A console for a command's own output (rich's ``Console`` arguments), with :class:`_Console`'s net."""
    return _Console(**kwargs)


def output_console(piped_width: int = 160, **kwargs: Any) -> Console:
    """A console for a command's standard output (rich's ``Console`` arguments): a terminal's own width, or piped,
    ``$COLUMNS`` when it is set to 40 or more (issue 42, item 20), else ``piped_width`` columns (a table is never
    squeezed into rich's 80)."""
    made = _Console(**kwargs)
    if made.is_terminal:
        return made
    columns = os.environ.get("COLUMNS", "")
    return _Console(width=int(columns) if is_decimal(columns) and int(columns) >= 40 else piped_width, **kwargs)


console = _Console(stderr=True)
out = output_console()


def print_json(to: Console, text: str) -> None:
    """Print the JSON document ``text`` on ``to`` as ``Console.print_json`` does (indent 2, non-ASCII kept, one
    trailing newline); to a pipe or file, with no colour to add, it writes the same bytes straight away: rich's
    highlighting took seconds for the 4 MB ``rollbench envs --json``."""
    doc = json.loads(text)  # strict JSON: a NaN or infinity is null (grade names the value as a violation)
    if to.is_terminal or to.color_system is not None:
        to.print_json(strict_dumps(doc))
    else:
        encoding = (getattr(to.file, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
        utf = encoding.startswith("utf")  # else escaped (\u00fc): JSON in any encoding (hostile8 F8)
        to.file.write(strict_dumps(doc, indent=2, ensure_ascii=not utf) + "\n")
        to.file.flush()
    seal_stdout()  # the document is the last thing on stdout, whatever a policy's atexit, __del__ or thread prints


def reserve_document_stdout(args: Sequence[str]) -> None:
    """Before a command that promises a machine-readable document on stdout (``--json``; ``mcp``, whose stdio
    transport is JSON-RPC on stdout) runs anything: the caller's stdout is rollbench's alone for the rest of the
    process (:func:`~rollbench.core.stdio.reserve_stdout`), so no policy, child, thread or exit handler writes
    into it, on any path (issue 42, hostile round 5, F5). ``--help`` runs nothing but the help, which goes to
    stdout as for every command."""
    command = next((a for a in args if not a.startswith("-")), None)
    if "--help" in args:
        return
    if "--json" in args or command == "mcp":
        reserve_stdout()


TEXT_OPTIONS = ("--instruction",)
"""Options whose value is text rather than a name or a path: a value that is not UTF-8 is refused as text."""


def guard_process_streams(args: Sequence[str]) -> None:
    """Before anything runs (``rollbench``'s entry point): stdout and stderr write what their encoding cannot hold
    as backslash escapes instead of raising (``PYTHONIOENCODING=ascii`` and a run named ``übung``; hostile8 F8),
    and an argument that is not valid UTF-8 (a run directory or ``--out`` named with such bytes) ends the command
    with exit 2 and one line naming it escaped, before anything is read or written (hostile8 F6); the value of a
    text option (:data:`TEXT_OPTIONS`) is named as text, with its option."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    sys.unraisablehook = _one_line_unraisable
    at, bad = next(((i, shown) for i, a in enumerate(args) if (shown := not_utf8(a)) is not None), (0, None))
    if bad is not None:
        option, _, value = (
            args[at].partition("=") if args[at].startswith("--") else (args[at - 1] if at else "", "", "")
        )
        if option in TEXT_OPTIONS:  # text, not a name: nothing to rename (hostile round 12, F8)
            shown = not_utf8(value) or bad
            sys.stderr.write(f"error: {option}: not valid UTF-8 text ({shown}); rollbench records text as UTF-8\n")
        else:
            sys.stderr.write(
                f"error: {bad}: its name is not valid UTF-8 (rollbench records names and paths as UTF-8); rename it\n"
            )
        sys.exit(2)


def _one_line_unraisable(unraisable: Any) -> None:
    """An exception Python can only ignore (raised in a ``__del__``, a weakref callback, a generator's close: often
    a plug-in's) as one warning line naming its class and where, instead of Python's traceback (hostile round 11,
    F2); the object itself is never quoted (its text is the plug-in's)."""
    exc = unraisable.exc_value
    where = getattr(unraisable.object, "__qualname__", None) or type(unraisable.object).__name__
    what = describe(exc) if exc is not None else getattr(unraisable.exc_type, "__name__", "an exception")
    with contextlib.suppress(Exception):
        sys.stderr.write(f"warning: {printable(what)} raised in {printable(where)} was ignored\n")


def os_error(exc: OSError) -> str:
    """An OSError the machine raised (disk full, a file size limit, permissions) in words, naming the file."""
    what = exc.strerror or describe(exc)
    return f"{what}: {said(exc.filename)}" if exc.filename else what


def fail(msg: str, code: int = 2) -> NoReturn:
    """Print ``error: MSG`` as one line on stderr (markup escaped) and exit with ``code`` (2: bad input)."""
    console.print(f"[bold red]error:[/] {said(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def exit_on_errors() -> Iterator[None]:
    """A command's work: a ConfigError (bad input) ends it with one ``error:`` line and exit 2, any other
    RollbenchError (the work could not be done) with one line and exit 1."""
    try:
        yield
    except ConfigError as exc:
        fail(str(exc))
    except RollbenchError as exc:
        fail(str(exc), code=1)


def print_doc(to: Console, doc: Any, as_json: bool, human: Callable[[Console, Any], None]) -> None:
    """A command's document on ``to``: with ``--json`` as JSON (:func:`print_json`), else ``human(to, doc)``."""
    if as_json:
        print_json(to, json.dumps(doc))
    else:
        human(to, doc)


class OneLineErrors(TyperGroup):
    """The ``rollbench`` group: a usage error (an unknown option, a value out of range) is the same single
    ``error: ...`` line on stderr, exit code 2, as every other bad input (click would print the usage and a hint
    first); ``rollbench`` alone still prints the help."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            console.print(f"[bold red]error:[/] {escape(_usage_message(exc))}", highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        except click_errors.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The ``Commands:`` section of ``rollbench --help`` with each command's whole first paragraph, wrapped at
        words (click's own cuts it to one line ending "...": issue 42, item 20)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                said = cmd.short_help or (cmd.help or "").split("\n\n")[0]
                rows.append((name, " ".join(said.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _usage_message(exc: click_errors.UsageError) -> str:
    """click's message, except for a value typer's pydantic check refused (``--episodes 0: must be at least 1``)
    and for an unknown option: the closest real options of that command (difflib over all
    its option names, not click's prefix matches: ``--episode`` -> ``--episodes``), then where to see them all."""
    if isinstance(exc, click_errors.BadParameter) and isinstance(exc.__cause__, ValidationError) and exc.param:
        err = exc.__cause__.errors()[0]  # typer checks a typed value with pydantic: its words, not pydantic's
        option = max(exc.param.opts, key=len)
        return f"{option} {described(err.get('input'))}: {typed_value_message(err)}"
    if not isinstance(exc, click_errors.NoSuchOption) or exc.ctx is None:
        return exc.format_message()
    from rollbench.core.registry import did_you_mean

    names = [o for p in exc.ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    hint = did_you_mean(exc.option_name, names, n=1)
    command = f"rollbench {exc.ctx.info_name}" if exc.ctx.parent is not None else "rollbench"
    return f"no such option {exc.option_name}.{hint} All options: {command} --help"


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (what systemd, ``docker stop``, Slurm and a plain ``kill`` send) into :class:`Terminated` while
    a run executes, so that it ends like a Ctrl-C instead of leaving run.json saying RUNNING. (A background job
    started by a non-interactive shell ignores SIGINT, a shell rule rollbench keeps; SIGTERM is the signal to send
    it.)"""

    def stop(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Quiet:
    """What :func:`stage` gives off a terminal: the same ``with`` and ``update`` as rich's Status, printing nothing."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, text: str) -> None:
        return None


def stage(text: str) -> Any:
    """A progress line (rich's spinner and ``text``, replaced by each ``update``) on stderr while a command works for
    seconds, only when stderr is a terminal: pipes, files and tests see nothing (issue 42, item 20)."""
    return console.status(text) if console.is_terminal else _Quiet()
