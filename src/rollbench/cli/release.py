"""``rollbench release``: the command-line face of :mod:`rollbench.release.copy` (registered by :data:`rollbench.cli.main.COMMANDS`).

Exit codes: 0 = released (or, with ``--dry-run``, listed); 1 = a file could not be redacted safely (nothing was
written); 2 = bad input (nothing was written).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rollbench.cli.common import make_console, print_json
from rollbench.core.contracts import ConfigError, RollbenchError


def release_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Run directories to release.")],
    out: Annotated[Path, typer.Option(help="Release directory (new or empty; never a source or inside one).")],
    rules: Annotated[
        Path | None, typer.Option(help='Extra rules: JSON {"patterns": [...], "literals": [...], "allow": [...]}.')
    ] = None,
    labels: Annotated[
        list[Path] | None, typer.Option(help="A labels (or notes) file to release too; repeatable.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be redacted; write nothing.")] = False,
    date: Annotated[
        str | None, typer.Option(help="Release date for MANIFEST.json (default: the runs' latest time).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
    allow_violations: Annotated[
        bool,
        typer.Option(
            "--allow-violations",
            help="Release runs that rollbench grade finds violations in (MANIFEST.json counts them).",
        ),
    ] = False,
) -> None:
    """Copy runs (and label files) with API keys, tokens, private paths, host/user names and e-mails replaced
    by stable placeholders, and write MANIFEST.json (hashes, every redaction, filters)."""
    from rollbench.cli.analysis import print_warnings
    from rollbench.cli.common import fail as _fail
    from rollbench.record.safe_files import refuse_inside_run
    from rollbench.release.copy import build_release

    out_console = make_console(width=160, markup=False)  # paths and placeholders print as they are written
    try:
        refuse_inside_run(out)  # never into a recorded run, a released one's or another (issue 42, item 8)
        doc = build_release(
            list(paths),
            out,
            labels=list(labels or []),
            rules=rules,
            date=date,
            dry_run=dry_run,
            allow_violations=allow_violations,
        )
    except ConfigError as exc:
        _fail(str(exc))
    except RollbenchError as exc:
        _fail(f"{exc} (nothing was written)", code=1)
    if as_json:
        print_json(out_console, json.dumps(doc))
        return
    verb = "would replace" if dry_run else "replaced"
    for r in doc["redactions"]:
        out_console.print(f"{r['file']}  {r['field']}  {r['rule']} -> {r['placeholder']}", highlight=False)
    for rel, entries in doc.get("label_entries", {}).items():  # exactly the labels the release carries
        for key in entries["kept"]:
            out_console.print(f"{rel}  {key}", highlight=False)
        said = (
            "released whole: not a label file, rollbench cannot tell which runs it is about"
            if entries.get("whole")
            else f"{len(entries['kept'])} label(s) of the released runs"
            + (f"; {entries['left_out']} of other runs left out" if entries["left_out"] else "")
            + (
                f"; {len(gone)} of episodes the released runs do not record left out ({', '.join(gone[:5])}"
                + (" ..." if len(gone) > 5 else "")
                + ")"
                if (gone := entries.get("left_out_unrecorded"))
                else ""
            )
        )
        out_console.print(f"{rel}: {said}", highlight=False)
    print_warnings(
        [
            f"{name} is released with {n} grade violation{'s' if n != 1 else ''} (--allow-violations)"
            for name, g in doc["grades"].items()
            if (n := g["violations"])
        ]
        + doc.get("warnings", [])
    )
    if "video_bytes" in doc["filters"]:  # videos are checked, not redacted: say what of them was searched
        out_console.print(
            f"videos released as recorded: {doc['filters']['video_bytes']}", highlight=False, soft_wrap=True
        )
    values = doc["distinct_counts"]  # how many values of each kind, never the values
    counts = (
        "; ".join(
            f"{k} {values.get(k, 0)} value{'s' if values.get(k, 0) != 1 else ''} in {n} place{'s' if n != 1 else ''}"
            for k, n in doc["redaction_counts"].items()
        )
        or "nothing"
    )
    out_console.print(
        f"{verb} {len(doc['redactions'])} occurrences of {doc['distinct_secrets']} distinct values ({counts}) "
        f"in {len(doc['files'])} files" + ("" if dry_run else f"; release written to {out} with MANIFEST.json"),
        highlight=False,
        soft_wrap=True,  # one line: the path is never broken
    )
