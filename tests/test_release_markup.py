"""hostile24a F2: a key split by markup a viewer drops (HTML tags, a comment, a character reference, Markdown
emphasis or an escaping backslash) is found in the text a browser or a Markdown viewer shows: the whole file is
released as one placeholder (rule ``markup:RULE``), said on stderr. The oracle: the released file read by the
standard library's HTML parser (a renderer of its own, not release's view) and by markdown-it, the CommonMark
renderer rich ships with, holds no key; markup without a hidden key is copied byte for byte."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest
from markdown_it import MarkdownIt

from cli_in_process import invoke

GH = "ghp_" + "Z8x2kQ7mZ4vN1pL6tY9wB3cD5fH0jS2aE4gU"
AWS = "AKIA" + "Q3EGRLCJ4XYZ7ABC"
CASES = {
    "tags.html": f"<p>GitHub <span>{GH[:16]}</span><span>{GH[16:]}</span></p>\n<p>fine</p>\n",
    "reference.html": f"<p>ok</p>\n<p>aws key id: {AWS[:4]}&#81;{AWS[5:]}</p>\n",
    "attribute.html": f'<p><abbr title="{AWS[:4]}&#x51;{AWS[5:]}">key</abbr></p>\n',
    "comment.md": f"# calibration\n\naws key id: {AWS[:4]}<!-- -->{AWS[4:]}\n",
    "emphasis.md": f"# calibration\n\naws key id: {AWS[:4]}**{AWS[4]}**{AWS[5:]}\n",
    "escape.md": f"token {GH[:3]}\\_{GH[4:]}\n",
    "link.md": f"aws key id: [{AWS[:4]}](http://x){AWS[4:]}\n",
    "reference.mkd": f"aws key id: [{AWS[:8]}][1][{AWS[8:]}][1]\n\n[1]: http://x\n",
    "comment.mdown": f"aws key id: {AWS[:4]}<!-- -->{AWS[4:]}\n",
    "cdata.svg": f"<svg><text>{AWS[:4]}<![CDATA[{AWS[4:8]}]]><![CDATA[{AWS[8:]}]]></text></svg>\n",
    "entity.svg": f'<!DOCTYPE svg [<!ENTITY a "{AWS[4:12]}"><!ENTITY b "{AWS[12:]}">]><svg><text>{AWS[:4]}&a;&b;</text></svg>',
    "bdo.html": f'<p><bdo dir="rtl">{AWS[::-1]}</bdo></p>\n',
}


class _Shown(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.attributes: list[str] = []
        self.rtl = 0  # inside <bdo dir="rtl">: drawn right to left

    def handle_data(self, data: str) -> None:
        self.text.append(data[::-1] if self.rtl else data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attributes += [v for _, v in attrs if v]
        self.rtl += tag == "bdo" and dict(attrs).get("dir") == "rtl"

    def handle_endtag(self, tag: str) -> None:
        self.rtl -= tag == "bdo" and self.rtl > 0


def shown(name: str, text: str) -> str:
    """What a viewer shows of ``text``: text nodes joined (an XML parser's for .svg, markdown-it's rendering for
    Markdown), attribute values, references decoded, <bdo dir="rtl"> reversed."""
    suffix = Path(name).suffix
    if suffix == ".svg":
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError:  # not XML (a placeholder): a viewer shows an error and the text
            return text
        return "\n".join(["".join(root.itertext()), *(v for e in root.iter() for v in e.attrib.values())])
    parser = _Shown()
    parser.feed(MarkdownIt("commonmark").render(text) if suffix in (".md", ".mkd", ".mdown") else text)
    parser.close()
    return "\n".join(["".join(parser.text), *parser.attributes])


@pytest.fixture
def run(notes_run: Path) -> Path:
    return notes_run


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_key_split_by_markup_a_viewer_drops_is_released_as_one_placeholder(
    run: Path, tmp_path: Path, name: str
) -> None:
    text = CASES[name]
    assert GH in shown(name, text) or AWS in shown(name, text)  # the viewer shows the key
    assert GH not in text and AWS not in text  # no rule sees it as written
    (run / "notes" / name).write_text(text)
    r = invoke("release", str(run), "--out", str(tmp_path / "rel"), "--date", "2026-01-01")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    released = (tmp_path / "rel/run/notes" / name).read_text()
    assert GH not in shown(name, released) and AWS not in shown(name, released)
    assert released.startswith("<REDACTED:") and "\n" not in released.rstrip("\n")
    assert f"run/notes/{name}: " in r.stderr and "(rule markup:" in r.stderr


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("page.html", '<p class="x">a &lt; b &amp;&amp; <b>bold</b> <!-- note --></p>\n<a href="#top">top</a>\n'),
        ("notes.md", "# Results\n\n*12* of **20** episodes, `seed_base` = 3, a\\_b, ~~old~~ <br>\n"),
    ],
)
def test_markup_without_a_hidden_key_is_copied_byte_for_byte(run: Path, tmp_path: Path, name: str, text: str) -> None:
    (run / "notes" / name).write_text(text)
    r = invoke("release", str(run), "--out", str(tmp_path / "rel"), "--date", "2026-01-01")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rel/run/notes" / name).read_text() == text


def test_markup_whose_entities_expand_past_the_bound_is_withheld_whole(run: Path, tmp_path: Path) -> None:
    laughs = '<!DOCTYPE x [<!ENTITY a "ok"><!ENTITY b "&a;&a;"><!ENTITY c "&b;&b;"><!ENTITY d "&c;&c;">'
    text = laughs + '<!ENTITY e "&d;&d;"><!ENTITY f "&e;&e;">]><x>&f;</x>\n'  # 5 levels of entities in entities
    (run / "notes/deep.xml").write_text(text)
    r = invoke("release", str(run), "--out", str(tmp_path / "rel"), "--date", "2026-01-01")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rel/run/notes/deep.xml").read_text() == "<REDACTED:withheld:1>\n"
    assert "run/notes/deep.xml: its markup declares entities" in r.stderr and "(rule markup:withheld)" in r.stderr
