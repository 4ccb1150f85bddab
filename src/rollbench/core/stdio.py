"""Code under evaluation never writes into rollbench's own output, and processes it leaves behind never hold it.

While :func:`isolated_output` is active (the CLI wraps every run in it, issue 30 items 5 and 11):

* file descriptors 1 and 2 of the process are the write end of a pipe that a relay thread copies to the caller's
  standard error. Whatever the code under evaluation writes, through Python or C, to its stdout or stderr lands on
  rollbench's stderr, never in ``--json`` output;
* the caller's stdout and stderr are held only in two private descriptors, opened close-on-exec (so a child that
  ``exec``s, e.g. ``subprocess.Popen``, never gets them) and closed in every child of ``os.fork()`` (an
  ``os.register_at_fork`` hook, which also points that child's ``sys.stdout``/``sys.stderr`` at the pipe). A
  child the policy leaves running therefore holds only the pipe: a caller reading rollbench's output sees it end
  when rollbench exits, not when the last child does;
* rollbench's own Python-level stderr (progress, warnings) goes straight to the caller's stderr through the private
  descriptor (a terminal stays a terminal), and ``sys.stdout`` is that same stderr: nothing printed during the run
  reaches stdout.

On exit, descriptors 1 and 2 and ``sys.stdout``/``sys.stderr`` are restored and rollbench writes its result. What
the children write later goes into the pipe while rollbench lives, then nowhere (they get ``EPIPE``). Not covered: a
C library calling ``fork(2)`` itself without exec (no Python hook runs there); its child holds the private copies.

A command that promises a machine-readable document on stdout (``--json``, the MCP stdio wire) goes further, for
the whole process (issue 42, hostile round 5, F5): :func:`reserve_stdout`, called by ``rollbench``'s entry point
before any code under evaluation is imported, moves the caller's stdout into a private descriptor and points
descriptor 1 at standard error for good. The document is written to :func:`document_stream`; nothing else in the
process, whatever path ends it (success, an error exit, an exception, ``atexit``, ``__del__``, threads, children,
before or after :func:`isolated_output`), can reach the caller's stdout, and after :func:`seal_stdout` not even
rollbench does.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

_held: list[int] = []  # the private descriptors of the caller's stdout and stderr while a run is isolated
_document: list[TextIO] = []  # the caller's stdout, once reserve_stdout took it (the only way to write there)
_hook_installed = False


def _install_fork_hook() -> None:
    global _hook_installed
    if not _hook_installed:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _hook_installed = True


def reserve_stdout() -> bool:
    """Take the caller's stdout for a machine-readable document, for the rest of the process: its descriptor is
    duplicated to a private one (3 or above, close-on-exec, pointed at stderr in every child of ``os.fork()``) that
    only :func:`document_stream` writes to, and descriptor 1 (so ``sys.stdout``, C code and every child started
    from now on) becomes a copy of descriptor 2. Call it before any code under evaluation is imported. Returns
    False, changing nothing, when descriptor 1 or 2 cannot be duplicated (e.g. closed); True when reserved (also
    on a second call)."""
    if _document:
        return True
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    try:
        private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return False
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(private)
        return False
    encoding, errors = getattr(sys.stdout, "encoding", None), getattr(sys.stdout, "errors", None)
    raw = io.FileIO(private, "w", closefd=False)
    _document.append(io.TextIOWrapper(raw, encoding=encoding or "utf-8", errors=errors, write_through=True))
    _install_fork_hook()
    return True


def document_stream() -> TextIO:
    """Where a command's machine-readable document goes: the reserved stdout (:func:`reserve_stdout`), else
    ``sys.stdout`` as it is now (a library call, an in-process test's capture)."""
    return _document[0] if _document else sys.stdout


def _after_fork_in_child() -> None:
    for stream in _document:  # the child never writes the parent's document, nor keeps the caller's stdout open
        with contextlib.suppress(OSError, ValueError):
            os.dup2(2, stream.fileno(), inheritable=False)
    for fd in _held:
        with contextlib.suppress(OSError):
            os.close(fd)
    if _held:
        _held.clear()
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)


def _relay(read_fd: int, to_fd: int) -> None:
    with contextlib.suppress(OSError):
        while data := os.read(read_fd, 65536):
            view = memoryview(data)
            while view:
                view = view[os.write(to_fd, view) :]


def seal_stdout() -> None:
    """After a command's machine-readable document is written: nothing more reaches the caller's stdout. With a
    reserved stdout (:func:`reserve_stdout`) its private descriptor becomes a copy of stderr, so this process no
    longer holds the caller's stdout (a reader sees its end now, not when the last thread or child ends);
    otherwise descriptor 1 and ``sys.stdout`` point at the caller's standard error for the rest of the process, so
    that nothing a policy left behind (an ``atexit`` handler, a ``__del__``, a non-daemon thread still printing)
    lands after the document. A no-op when ``sys.stdout`` is not descriptor 1 (an in-process capture)."""
    if _document:
        with contextlib.suppress(OSError, ValueError):
            _document[0].flush()
            os.dup2(2, _document[0].fileno(), inheritable=False)
        return
    try:
        if sys.stdout.fileno() != 1:
            return
        sys.stdout.flush()
        os.dup2(2, 1)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    sys.stdout = sys.stderr


@contextlib.contextmanager
def isolated_output() -> Iterator[None]:
    """Run the body with descriptors 1 and 2 detached from the caller (see the module docstring). Nested use is a
    no-op; a process whose descriptor 1 or 2 is closed runs the body unchanged."""
    if _held:
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        real_out, real_err = os.dup(1), os.dup(2)  # non-inheritable (close-on-exec) by default
    except OSError:
        yield
        return
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    relay = threading.Thread(target=_relay, args=(read_fd, real_err), name="rollbench-child-output", daemon=True)
    relay.start()
    _install_fork_hook()
    _held.extend((real_out, real_err))
    saved = sys.stdout, sys.stderr
    try:
        on_fd2 = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # an in-process capture (Typer's CliRunner): keep writing to it
        on_fd2 = False
    mine: Any = (
        io.TextIOWrapper(
            io.FileIO(real_err, "w", closefd=False), line_buffering=True, errors="backslashreplace", write_through=True
        )
        if on_fd2
        else sys.stderr
    )
    sys.stdout = sys.stderr = mine
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            mine.flush()
        sys.stdout, sys.stderr = saved
        _held.clear()
        os.dup2(real_out, 1)
        os.dup2(real_err, 2)
        relay.join(timeout=0.5)  # EOF unless a child still holds the pipe; then the daemon thread is left reading
        os.close(real_out)
        if not relay.is_alive():
            os.close(real_err)
            os.close(read_fd)
