"""How rollbench writes a number for a person to read: one module for the CLI, the report, the dashboard, the
reproduction document and the MCP summaries, so a figure reads the same everywhere.

* a rate (fraction in [0, 1]) as a percentage with one decimal: :func:`pct` (``0.705`` -> ``"70.5%"``);
* a difference of rates in percentage points, signed: :func:`points` (``-0.27`` -> ``"-27.0"``);
* a p-value with three significant digits, or in scientific notation below 0.001: :func:`p_value`
  (``0.0312`` -> ``"0.0312"``, ``6.2e-20`` -> ``"6.2e-20"``);
* a rate interval :func:`interval` (``"56.2% – 80.9%"``) and a points interval :func:`points_interval`
  (``"[-3.0, +5.0]"``: brackets, since a dash would read as a minus sign);
* any other number with one decimal: :func:`number`.

Each returns :data:`MISSING` for None (no episodes, no comparison, not measured): one sign everywhere.

Also here, because both the run planner and the instruction search word it: :func:`differences`, the "what
differs from what is on disk" list of a refused resume. And the two pieces every error message about a value
uses: :func:`quoted`, a value quoted with one length rule (:data:`QUOTED_CHARS`), and :func:`error_location`, where
in a document a pydantic validation error points (``plan.episodes.3.seed``). And :func:`printable`, the one function
that makes text from outside (a recorded error, a server's reply, a peer's listing) safe to show on a terminal. And the Jinja2 environment the HTML
pages render these with: :func:`template_environment`. And :func:`csv_cell`, the one rule for a cell of a CSV file
(numbers as numbers, text that a spreadsheet would evaluate as a formula prefixed with ``'``).
"""

from __future__ import annotations

import difflib
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import Environment

MISSING = "—"  # an em dash: the value does not exist (never 0, never an error)
QUOTED_CHARS = 60  # the most characters of a value an error message quotes


def pct(x: float | None) -> str:
    """A fraction as a percentage, one decimal: ``0.705`` -> ``"70.5%"``; None -> :data:`MISSING`."""
    return MISSING if x is None else f"{100 * x:.1f}%"


def points(x: float | None) -> str:
    """A difference of fractions in percentage points, signed, one decimal: ``-0.27`` -> ``"-27.0"``."""
    return MISSING if x is None else f"{100 * x:+.1f}"


def p_value(x: float | None) -> str:
    """Three significant digits (``"0.0312"``, ``"1"``), scientific notation below 0.001 (``"6.2e-20"``)."""
    if x is None:
        return MISSING
    return f"{x:.3g}" if x >= 0.001 else f"{x:.1e}"


def interval(lo: float | None, hi: float | None) -> str:
    """A confidence interval of a rate: ``"56.2% – 80.9%"``; :data:`MISSING` when either end is missing."""
    return MISSING if lo is None or hi is None else f"{pct(lo)} – {pct(hi)}"


def points_interval(lo: float | None, hi: float | None) -> str:
    """A confidence interval of a difference in points: ``"[-3.0, +5.0]"``; :data:`MISSING` when either end is."""
    return MISSING if lo is None or hi is None else f"[{points(lo)}, {points(hi)}]"


def number(x: float | None, digits: int = 1) -> str:
    """A plain number with ``digits`` decimals (a mean length, a delay in ms); None -> :data:`MISSING`."""
    return MISSING if x is None else f"{x:.{digits}f}"


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may evaluate at the start of a cell (OWASP)


def csv_cell(value: object) -> object:
    """One cell of every CSV rollbench writes (``summarize --csv``, the dashboard's ``/api/labels.csv``), for
    :func:`csv.writer`: None is empty; a number (``int``, ``float``, numpy's; ``-0.5`` stays ``-0.5``) is written as
    the number; anything else is text, and text starting with one of :data:`FORMULA_START` gets a leading ``'`` so a
    spreadsheet shows it as text instead of evaluating it (``=HYPERLINK(...)`` -> ``'=HYPERLINK(...)``)."""
    if value is None:
        return ""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def differences(there: Mapping[str, Any], here: Mapping[str, Any]) -> str:
    """``"key: 'recorded' there, 'asked' here, ..."`` for each key of ``here`` whose value differs from ``there``'s
    (a run directory or search state on disk vs the options given now); empty when none does."""
    return ", ".join(f"{k}: {there.get(k)!r} there, {v!r} here" for k, v in here.items() if there.get(k) != v)


def quoted(value: object, *, as_text: bool = False) -> str:
    """``value`` as an error message quotes it: its ``repr`` (``as_text``: its ``str``), whole up to
    :data:`QUOTED_CHARS` characters, else its first :data:`QUOTED_CHARS` followed by ``...`` and the size of the
    whole (``'xxxx... (5000 characters)'``), so a message stays one readable line whatever it was handed (control
    and bidirectional characters escaped: :func:`printable`)."""
    text = printable(value) if as_text else repr(value)  # repr escapes every unprintable character itself
    if len(text) <= QUOTED_CHARS:
        return text
    return f"{text[:QUOTED_CHARS]}... ({len(str(value))} characters)"


def described(value: object) -> str:
    """``value`` as an error message names a value it was handed (pydantic's ``input``): quoted whole
    (:func:`quoted`) when its ``repr`` has at most :data:`QUOTED_CHARS` characters, else by its type and size only
    (``a string of 5034 characters``, ``a list of 12 items``, ``an object of 3 keys``), never by its content: a long
    value can carry anything, a credential included (hostile round 9, F2)."""
    if len(repr(value)) <= QUOTED_CHARS:
        return quoted(value)
    return container_size(value) or f"a {type(value).__name__} of {len(repr(value))} characters"


def container_size(value: object) -> str | None:
    """A string, list, tuple or mapping named by its kind and size (``a string of 1 character``, ``a list of 2
    items``, ``an object of 3 keys``); None for any other value."""
    n = len(value) if isinstance(value, str | list | tuple | Mapping) else 0
    if isinstance(value, str):
        return f"a string of {n} character{'s' * (n != 1)}"
    if isinstance(value, list | tuple):
        return f"a list of {n} item{'s' * (n != 1)}"
    if isinstance(value, Mapping):
        return f"an object of {n} key{'s' * (n != 1)}"
    return None


# what a terminal would obey rather than show: C0 controls (newline included), DEL, C1 controls, the Arabic letter
# mark, the left-to-right/right-to-left marks, the line and paragraph separators and the bidirectional embeddings,
# overrides and isolates (U+202A-U+202E, U+2066-U+2069)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_UNPRINTABLE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``str(text)`` safe to show on a terminal: every control character, DEL, C1 control and bidirectional
    formatting character (see ``_UNPRINTABLE``) replaced by its visible Python escape (ESC -> ``\\x1b``, newline
    -> ``\\n``, U+202E -> ``\\u202e``), so text from outside (a recorded error, a policy server's reply, a peer's
    listing, a handed-over run's names) can neither move the cursor, recolour, erase or reorder what rollbench
    prints, nor spread one error over several lines. ``keep_newlines``: newlines stay (for rollbench's own
    multi-line text). rich markup is not touched: a console printing with markup escapes it too."""
    pattern = _UNPRINTABLE_BUT_NEWLINE if keep_newlines else _UNPRINTABLE
    return pattern.sub(_escaped, str(text))


def error_location(loc: tuple[int | str, ...] | list[int | str], whole: str = "") -> str:
    """Where a pydantic error points, dotted (``("plan", "episodes", 3)`` -> ``"plan.episodes.3"``); ``whole``
    when it points at the document itself (an empty location)."""
    return ".".join(str(part) for part in loc) or whole


def error_message(err: Any) -> str:
    """A pydantic error's message (``err``: one item of ``ValidationError.errors()``) as a plain sentence: our own
    validators' text without pydantic's ``Value error, `` / ``Assertion failed, `` prefix."""
    msg = str(err["msg"])
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


_BOUNDS = {
    "greater_than_equal": ("ge", "must be at least {}"),
    "greater_than": ("gt", "must be more than {}"),
    "less_than_equal": ("le", "must be at most {}"),
    "less_than": ("lt", "must be less than {}"),
}


def typed_value_message(err: Any) -> str:
    """What a value typed on the command line lacks, from typer's pydantic check of it (``err``: one item of
    ``ValidationError.errors()``): a bound as "must be at least 1" (pydantic: "Input should be greater than or equal
    to 1"), a type as "must be a whole number" / "must be a number", else :func:`error_message`."""
    kind, ctx = err.get("type"), err.get("ctx") or {}
    if kind in _BOUNDS and _BOUNDS[kind][0] in ctx:
        key, said = _BOUNDS[kind]
        return said.format(ctx[key])
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type"):
        return "must be a number"
    return error_message(err)


def shown(value: Any) -> Any:
    """A Jinja2 ``finalize``: a None printed by a template reads :data:`MISSING`, like every formatter's."""
    return MISSING if value is None else value


# the formatters as Jinja2 filters, for the report, dashboard and reproduction templates
FILTERS = {
    "pct": pct,
    "points": points,
    "p_value": p_value,
    "interval": interval,
    "points_interval": points_interval,
    "number": number,
}


def template_environment(folder: Path) -> Environment:
    """The one Jinja2 environment of rollbench's HTML pages (the report, the dashboard, the reproduction document):
    templates from ``folder``, every value escaped, a missing field an error (never a blank), None shown as
    :data:`MISSING` (:func:`shown`) and the formatters above as filters (:data:`FILTERS`)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(folder), autoescape=True, undefined=StrictUndefined, finalize=shown)
    env.filters.update(FILTERS)
    return env


def did_you_mean(name: str, valid: Sequence[str], n: int = 3) -> str:
    """`` Did you mean A, B?`` with the (at most ``n``) valid names closest to ``name`` (difflib), or ``""``."""
    close = difflib.get_close_matches(name, valid, n=n, cutoff=0.5)
    return f" Did you mean {', '.join(close)}?" if close else ""


def not_utf8(text: str | Path) -> str | None:
    """``text`` (a name or path as the OS gave it) shown with its undecodable bytes escaped (``run\\xff``) when it is
    not valid UTF-8 (Python keeps such bytes as lone surrogates), else None: rollbench records names and paths as
    UTF-8 (run.json, parquet, JSON output), so such a name is refused or listed as damaged, never read on
    (hostile8 F6)."""
    s = str(text)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def is_decimal(text: str) -> bool:
    """True when ``text`` is one or more ASCII digits 0-9, the only form rollbench reads as a whole number from a
    name, a header or an environment variable: ``str.isdigit`` also accepts ``²``, ``①`` and other scripts' digits,
    which ``int()`` refuses or reads as another number (hostile round 10, F2/F3)."""
    return text.isascii() and text.isdigit()
