"""Reading ``rollbench report``'s HTML in the checkpoints tests: the "Checkpoints" section, its ranking table's cells,
a report made in the test process, and the check that nothing outside the section carries generic statistics."""

from __future__ import annotations

import re
from pathlib import Path

from cli_in_process import invoke


def checkpoints_section(html: str) -> str:
    """The report's "Checkpoints" section (up to the next ``<h2>``)."""
    start = html.index("<h2>Checkpoints</h2>")
    return html[start : html.index("<h2>", start + 5)]


def table_rows(section: str) -> list[list[str]]:
    """The cells of the section's ranking table (the one after the looks table when there is one), row by row."""
    table = section.split("<th>eliminated</th>")[-1] if "<th>eliminated</th>" in section else section
    body = table.split("<th>step</th>", 1)[1].split("</table>", 1)[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]


def html_report(tmp_path: Path, *paths: Path) -> str:
    """``rollbench report PATHS --out tmp_path/r.html`` (it must succeed) and the HTML it wrote."""
    got = invoke("report", *paths, "--out", tmp_path / "r.html")
    assert got.returncode == 0, got.stderr
    return (tmp_path / "r.html").read_text()


def _outside(html: str) -> str:
    """The report less its Checkpoints section and its figures' data (base64 may spell any word)."""
    start = html.index("<h2>Checkpoints</h2>")
    return re.sub(r'src="data:[^"]*"', "", html[:start] + html[html.index("<h2>", start + 5) :])


def assert_no_generic_statistics(html: str) -> None:
    """No paired/unpaired test, "better" or repeat caveat outside the Checkpoints section, and no generic sections."""
    outside = _outside(html)
    for text in ("McNemar", "Fisher", "better", "unpaired", "UNPAIRED", "Holm", "repeat"):
        assert text not in outside, text
    assert "<h2>Comparison</h2>" not in html and "<h2>Success rate per task</h2>" not in html
