"""Hostile round 19's resume class (attacker b, F1) for ``scripts/hostile_inputs.py`` (its :class:`Runner` ``r``;
seeded by ``r.rng``; each damaged variant ended in a traceback, or resumed a run it then corrupted, before the fix):
``eval --resume`` of the runner's sound run (scripted/reach, 3 episodes, recorded OK) with one committed file
rewritten by pyarrow. Each must exit 2 with one line naming the file and the column, and leave the run as it was
(every byte: run.json still says OK):

* ids ``r19r-row-``: one cell of an episode row (``meta/episodes/chunk-000/file-00E.parquet``) of another type than
  rollbench writes (a bool column as an integer, float, string or list; an integer column as a fraction, inf, NaN,
  digits, a bool or a list; a string column as a number, bool or list; a float column as a string, bool or list) or
  null where rollbench always writes a value: ``... is not one of rollbench's (COLUMN is ...)``;
* ids ``r19r-plan-``: a row restating another plan entry than its own (seed, trial, horizon, success rule, task,
  instruction, LeRobot ``tasks``): ``... contradicts the run's plan (COLUMN ...)``;
* ids ``r19r-swap-``: two row files swapped: ``... holds the row of episode E``;
* ids ``r19r-data-``: a data file (``data/chunk-000/file-00E.parquet``) with one column of another dtype, width or kind
  than meta/info.json declares, dropped, or one column more: ``data file ...: column NAME ...``;
* id ``r19r-sound``: the untouched copy resumes (exit 0), the control that the check accepts what rollbench wrote.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROW = "meta/episodes/chunk-000/file-{:03d}.parquet"
DATA = "data/chunk-000/file-{:03d}.parquet"
RESUME = ["eval", "--resume", "RUN"]

_BOOL = ["rollbench/success", "rollbench/success_at_reset"]
_INT = ["rollbench/trial", "rollbench/seed", "rollbench/initial_state", "rollbench/max_steps", "rollbench/steps",
        "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index",
        "meta/episodes/file_index"]  # fmt: skip
_STR = ["rollbench/task", "rollbench/success_rule", "rollbench/termination_reason", "rollbench/error",
        "rollbench/error_fault", "rollbench/instruction", "rollbench/variant", "rollbench/render_failure",
        "rollbench/transcript", "rollbench/wire_capture"]  # fmt: skip
_FLOAT = ["rollbench/return", "rollbench/wall_time_s"]
_REQUIRED = ["rollbench/task", "rollbench/max_steps", "rollbench/success_rule", "rollbench/success",
             "rollbench/termination_reason"]  # fmt: skip


def _set(path: Path, column: str, values: Any) -> None:
    """Rewrite ``path`` with ``column`` holding ``values`` (None: dropped; a column it lacks: added)."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    if values is None:
        t = t.drop_columns([column])
    elif column in t.column_names:
        t = t.set_column(t.schema.get_field_index(column), column, values)
    else:
        t = t.append_column(column, values)
    pq.write_table(t, path)


def _wrong_value(rng: Any, column: str) -> tuple[Any, str]:
    """A value of another type than ``column`` holds (or null for a column rollbench always writes) and the Python
    type name the refusal gives it (``EpisodeRow.from_row``'s wording: ``COLUMN is a int, not a bool``)."""
    if column in _REQUIRED and rng.random() < 0.2:
        return None, "null"
    if column in _BOOL:
        options: list[Any] = [rng.randint(0, 9), rng.random() + 0.5, rng.choice(["true", "1", "yes"]), [True]]
    elif column in _INT:
        options = [rng.randint(0, 99) + 0.5, math.inf, math.nan, str(rng.randint(0, 9)), rng.random() < 0.5, [1]]
    elif column in _STR:
        options = [rng.randint(-9, 99), rng.random(), rng.random() < 0.5, ["success"]]
    else:
        options = [f"{rng.random():.3f}", rng.random() < 0.5, [1.0]]
    value = rng.choice(options)
    return value, f"a {type(value).__name__}"


def row_types(r: Any, n: int) -> None:
    """One cell of an episode row of another type: refused naming the row file and the column."""
    import pyarrow as pa

    for i in range(n):
        e, column = r.rng.randrange(3), r.rng.choice(_BOOL + _INT + _STR + _FLOAT)
        value, kind = _wrong_value(r.rng, column)
        lead = f"{ROW.format(e)} is not one of rollbench's ({column} is {kind}"

        def plant(run: Path, e: int = e, column: str = column, value: Any = value) -> None:
            kind = {**dict.fromkeys(_BOOL, pa.bool_()), **dict.fromkeys(_INT, pa.int64()),
                    **dict.fromkeys(_STR, pa.string())}.get(column, pa.float64())  # fmt: skip
            _set(run / ROW.format(e), column, pa.array([value], kind if value is None else None))

        r.case(f"r19r-row-{column.replace('/', '_')}-{e}-{i}", plant, RESUME, {2}, unchanged=True, words=lead)


def plan_rows(r: Any, n: int) -> None:
    """A row restating another plan entry: refused naming the row file and the column."""
    import pyarrow as pa

    edits: list[tuple[str, Callable[[Any, int], Any]]] = [
        ("rollbench/seed", lambda rng, e: e + rng.randint(1, 50)),
        ("rollbench/trial", lambda rng, e: e + rng.randint(1, 50)),
        ("rollbench/max_steps", lambda rng, e: rng.choice([1, 49, 51, 500])),
        ("rollbench/success_rule", lambda rng, e: "final_step"),
        ("rollbench/task", lambda rng, e: rng.choice(["scripted/reach-final", "scripted/clock", "metaworld/reach-v3"])),
        ("rollbench/instruction", lambda rng, e: rng.choice(["reach the goal", "move the point", "push the cube"])),
        ("tasks", lambda rng, e: [rng.choice(["reach the goal", "move the point to the goal ", "x"])]),
    ]
    for i in range(n):
        e = r.rng.randrange(3)
        column, make = r.rng.choice(edits)
        value = make(r.rng, e)

        def plant(run: Path, e: int = e, column: str = column, value: Any = value) -> None:
            _set(run / ROW.format(e), column, pa.array([value]))

        words = f"{ROW.format(e)} contradicts the run's plan ({column} "
        r.case(f"r19r-plan-{column.replace('/', '_')}-{e}-{i}", plant, RESUME, {2}, unchanged=True, words=words)


def swapped_rows(r: Any, n: int) -> None:
    """Two row files swapped (each a whole rollbench row, of another episode): refused naming the first."""
    for i in range(max(1, n // 2)):
        a, b = sorted(r.rng.sample(range(3), 2))

        def plant(run: Path, a: int = a, b: int = b) -> None:
            first, second = run / ROW.format(a), run / ROW.format(b)
            data = first.read_bytes()
            shutil.copyfile(second, first)
            second.write_bytes(data)

        words = f"{ROW.format(a)} holds the row of episode {b}"
        r.case(f"r19r-swap-{a}{b}-{i}", plant, RESUME, {2}, unchanged=True, words=words)


def _changed(values: Any, how: str, target: str) -> Any:
    """``values`` (a data column) of another element dtype, width or kind (``how``; a scalar column cast to
    ``target``, or to uint32 when it already is of that type)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    if pa.types.is_fixed_size_list(kind):
        if how == "list":
            return pa.array(values.to_pylist(), pa.list_(kind.value_type))
        width = kind.list_size + (1 if how == "width" else 0)
        element = pa.float16() if how == "dtype" else kind.value_type
        return pa.FixedSizeListArray.from_arrays(pa.array([0.0] * width * len(values), element), width)
    want = pa.bool_() if target == "bool" else getattr(pa, target)()
    want = pa.uint32() if want == kind else want
    return pc.cast(values, want) if want == pa.string() else pc.cast(pc.cast(values, pa.float64()), want, safe=False)


def data_columns(r: Any, n: int) -> None:
    """A data file column of another dtype, width or kind than meta/info.json declares, dropped, or one more."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    scalars = ["next.reward", "next.success", "next.done", "policy.latency_s", "timestamp", "frame_index",
               "episode_index", "index", "task_index"]  # fmt: skip
    for i in range(n):
        e = r.rng.randrange(3)
        column = r.rng.choice([*scalars, "observation.state", "action", "extra"])
        how = "add" if column == "extra" else r.rng.choice(
            ["dtype", "drop"] if column in scalars else ["width", "list", "dtype", "drop"])  # fmt: skip
        target = r.rng.choice(["int8", "uint64", "float64", "float16", "string", "bool", "int32"])

        def plant(run: Path, e: int = e, column: str = column, how: str = how, target: str = target) -> None:
            path = run / DATA.format(e)
            t = pq.read_table(path)
            if how == "drop":
                _set(path, column, None)
            elif how == "add":
                _set(path, column, pa.array(range(t.num_rows), pa.int16()))
            else:
                _set(path, column, _changed(t[column].combine_chunks(), how, target))

        words = f"data file {DATA.format(e)}: column {column} "
        r.case(f"r19r-data-{column}-{how}-{e}-{i}", plant, RESUME, {2}, unchanged=True, words=words)


def run_all(r: Any, n: int) -> None:
    """Every class above: ``max(2, n // 2)`` variants of each (each copies the runner's sound run)."""
    m = max(2, n // 2)
    r.case("r19r-sound", lambda run: None, RESUME, {0}, unchanged=False)
    row_types(r, m)
    plan_rows(r, m)
    swapped_rows(r, m)
    data_columns(r, m)
