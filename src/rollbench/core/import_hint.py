"""What to tell a user whose own policy module cannot be imported or named (issue 42, item 19): the form of a policy
in one's own module, and that Python does not search the current directory for the ``rollbench`` command."""

from __future__ import annotations

from pathlib import Path

OWN_POLICY_FORM = "MODULE:FACTORY (a policy in your own module, e.g. my_policy:make)"
"""How ``--policy`` names a factory in a module of one's own, as listed among the valid policies."""


def cwd_hint(module_name: str, error: BaseException | None) -> str:
    """``"; ./NAME.py is in the current directory ..."`` when ``error`` is the ModuleNotFoundError of the top-level
    package of ``module_name`` and a ``NAME.py`` or ``NAME/`` package lies in the current directory (which the
    ``rollbench`` command does not search: Python puts the script's folder on ``sys.path``, not the working
    directory), else ``""``."""
    top = module_name.split(".", 1)[0]
    if not isinstance(error, ModuleNotFoundError) or error.name != top:
        return ""
    here = [p for p in (Path(f"{top}.py"), Path(top) / "__init__.py") if p.is_file()]
    if not here:
        return ""
    return (
        f"; ./{here[0]} is in the current directory, which the rollbench command does not search: run it with "
        f"PYTHONPATH=. (e.g. PYTHONPATH=. rollbench eval --policy {module_name}:...)"
    )


def cannot_import(policy: str, module_name: str, error: BaseException) -> str:
    """The one-line error of ``--policy MODULE:FACTORY`` whose module cannot be imported, with :func:`cwd_hint`."""
    return f"policy {policy!r}: cannot import module {module_name!r} ({error}){cwd_hint(module_name, error)}"
