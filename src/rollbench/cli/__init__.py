"""The ``rollbench`` command line, one module per command group."""

import os

from rollbench.core.format import is_decimal

# rich reads $COLUMNS and $LINES when a console is made (at import, below) and ignores values that are not digits,
# but calls int() on any str.isdigit() value, so COLUMNS=² ended every command with a traceback (hostile round 10,
# F3). rollbench ignores such a value as rich does a non-digit one: the terminal's own size is used.
for _name in ("COLUMNS", "LINES"):
    if not is_decimal(os.environ.get(_name, "0")):
        del os.environ[_name]
