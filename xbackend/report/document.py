"""The report as a document: a list of blocks, rendered once as HTML and once as Markdown.

Strings in the blocks come from results files, so both renderings treat them as
data: the page escapes every string, the Markdown shows it as one line with no
markup (and a code fence no string can close), and neither holds a control character
from them (an ESC in a device's name or a recorded setting is shown as ``\x1b``).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import os
import re
from collections.abc import Callable
from pathlib import Path

from xbackend.safeio import printable

_FLAG_WORDS = {"wrong": "WRONG", "error": "ERROR", "untrusted": "UNTRUSTED"}
_LOG_WORDS = {"": "ok", "wrong": "WRONG", "error": "ERROR", "skipped": "skipped",
              "untrusted": "UNTRUSTED"}  # fmt: skip


@dataclasses.dataclass
class Cell:
    """Text from the results; ``flag`` ("wrong", "error", "skipped", "untrusted": timed
    faster than the device's peak) marks it for the eye."""

    text: str
    flag: str = ""
    link: str = ""  # on the page, a relative address the text links to (the Markdown: none)


@dataclasses.dataclass
class Heading:
    text: str
    level: int


@dataclasses.dataclass
class Paragraph:
    text: str


@dataclasses.dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    numeric: bool = True  # right-align every column after the first


@dataclasses.dataclass
class Image:
    png: Path  # where the figure is (in the report's folder or below), for the Markdown
    data: bytes  # what was written there, for the page (never read back)
    caption: str
    half: bool = False  # on the page, half the width: two such figures side by side
    side: bool = False  # on the page, half the width at the right, the text beside it


@dataclasses.dataclass
class Items:
    items: list[Cell]


@dataclasses.dataclass
class Sentences:
    """Sentences the report wrote (the findings): a tight list on the page, paragraphs in
    the Markdown, where a list item is a flagged line of the log."""

    sentences: list[str]


@dataclasses.dataclass
class Log:
    summary: str
    lines: list[Cell]


@dataclasses.dataclass
class Fold:
    """Blocks folded away under a one-line summary: the page's ``<details>``, which a
    reader opens; the Markdown, which cannot fold, says the summary where the fold stands
    and shows the blocks in its appendix, after everything else."""

    summary: str
    blocks: list[Block]
    in_place: bool = False  # in the Markdown, shown where it stands (the end already)


Block = Heading | Paragraph | Table | Image | Items | Sentences | Log | Fold


_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")


def one_line(text: str) -> str:
    """``text`` with its line breaks as spaces: a string from the results is one line."""
    return _LINE_BREAKS.sub(" ", text)


def shown(text: str) -> str:
    """``text`` as the report shows it: one line, its control characters as escapes
    (``printable``), never obeyed by a terminal that prints the file."""
    return printable(one_line(text))


def _html(text: str) -> str:
    return html.escape(shown(text))


# ---------------------------------------------------------------------------
# Rendering.

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; line-height: 1.45; color: #222; }
h1, h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; }
h2, h3 { clear: both; }
table { border-collapse: collapse; margin: .5em 0 1.2em; font-size: .85em; line-height: 1.3; }
th, td { border: 1px solid #ccc; padding: .15em .5em; text-align: left; }
td { white-space: nowrap; }
table.numeric td:not(:first-child), table.numeric th:not(:first-child) { text-align: right; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; max-height: 600px; }
figure.half { display: inline-block; width: 49%; vertical-align: top; margin: .5em 0 1em; }
figure.side { float: right; width: 52%; margin: 0 0 1em 1.5em; }
ul.findings { padding-left: 1.2em; }
ul.findings li { margin: .2em 0; }
figcaption { font-size: .85em; color: #555; }
pre { font-size: .8em; background: #f8f8f8; padding: .6em; overflow-x: auto; }
.wrong, .error { color: #b00; font-weight: bold; }
.untrusted { color: #a60; font-weight: bold; }
.skipped { color: #888; }
.equal { color: #070; }
.bad { color: #b00; font-weight: bold; }
.notrun { color: #a60; font-weight: bold; }
td.wrap { white-space: normal; max-width: 32em; }
details { margin: .5em 0 1em; }
summary { cursor: pointer; color: #345; }
"""


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _cell_text(cell: Cell) -> str:
    word = _FLAG_WORDS.get(cell.flag)
    return f"{word} {cell.text}".strip() if word else cell.text


def _log_text(cell: Cell) -> str:
    """A line of the log: every line starts with its verdict, in one column."""
    return f"{_LOG_WORDS.get(cell.flag, cell.flag):<8} {cell.text}"


def _html_cell(cell: Cell, tag: str = "td", text: Callable[[Cell], str] = _cell_text) -> str:
    css = f' class="{cell.flag}"' if cell.flag else ""
    shown = _html(text(cell))
    if cell.link:
        shown = f'<a href="{html.escape(cell.link, quote=True)}">{shown}</a>'
    return f"<{tag}{css}>{shown}</{tag}>"


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        level = block.level
        anchor = _anchor(block.text)
        return f'<h{level} id="{anchor}">{_html(block.text)}</h{level}>'
    if isinstance(block, Paragraph):
        return f"<p>{_html(block.text)}</p>"
    if isinstance(block, Table):
        css = ' class="numeric"' if block.numeric else ""
        header = "".join(f"<th>{_html(name)}</th>" for name in block.header)
        rows = "\n".join(
            "<tr>" + "".join(_html_cell(cell) for cell in row) + "</tr>" for row in block.rows
        )
        return f"<table{css}>\n<tr>{header}</tr>\n{rows}\n</table>"
    if isinstance(block, Image):
        data = base64.b64encode(block.data).decode("ascii")
        caption = _html(block.caption)
        css = ' class="half"' if block.half else ' class="side"' if block.side else ""
        return (
            f'<figure{css}><img src="data:image/png;base64,{data}" alt="{caption}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    if isinstance(block, Items):
        items = "\n".join(_html_cell(cell, "li") for cell in block.items)
        return f"<ul>\n{items}\n</ul>"
    if isinstance(block, Sentences):
        items = "\n".join(f"<li>{_html(text)}</li>" for text in block.sentences)
        return f'<ul class="findings">\n{items}\n</ul>'
    if isinstance(block, Fold):
        inner = "\n".join(_html_block(part) for part in block.blocks)
        return f"<details><summary>{_html(block.summary)}</summary>\n{inner}\n</details>"
    lines = "\n".join(_html_cell(cell, "span", _log_text) for cell in block.lines)
    return f"<details><summary>{_html(block.summary)}</summary>\n<pre>{lines}</pre></details>"


def render_html(title: str, blocks: list[Block]) -> str:
    body = "\n".join(_html_block(block) for block in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_html(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


# Escaped wherever they stand: each can open inline markup (emphasis, code, a link or an
# image, strikethrough, GitHub's math), end a table cell, close a heading, or escape the
# next character. Markdown reads a backslash before any ASCII punctuation as "this, as is".
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]!#|~$])")


def _md_text(text: str) -> str:
    """Text from the results, shown as written: one line, no HTML, no markup, no cell break.

    ``<``, ``>`` and ``&`` become entities (no HTML, no autolink, no entity from the data);
    the rest of what can start markup is backslash-escaped; line breaks become spaces, so
    nothing from the data starts a line (a heading, a list, a quote, a fence).
    """
    escaped = html.escape(shown(text), quote=False)
    return _MD_PUNCTUATION.sub(r"\\\1", escaped)


def _md_line(text: str) -> str:
    """Escaped text that starts a line: it cannot start a list, a break or a code block."""
    text = text.lstrip()
    if text[:1] in ("-", "+", "="):
        return f"\\{text}"
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", text)


def _md_cell(cell: Cell) -> str:
    word = _FLAG_WORDS.get(cell.flag)
    text = _md_text(cell.text)
    return f"**{word}** {text}".strip() if word else text


def _md_fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in ``lines``: none of them can close it."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _md_block(block: Block, out: Path, appendix: list[str] | None = None) -> str:
    """One block as Markdown; a fold or a log, where ``appendix`` is given, as a line
    that points to it there (its blocks appended to ``appendix``)."""
    if isinstance(block, Heading):
        return f"{'#' * block.level} {_md_text(block.text)}"
    if isinstance(block, Paragraph):
        return _md_line(_md_text(block.text))
    if isinstance(block, Table):
        align = " --- |" + (" ---: |" if block.numeric else " --- |") * (len(block.header) - 1)
        lines = ["| " + " | ".join(_md_text(name) for name in block.header) + " |", "|" + align]
        lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Image):
        return f"![{_md_text(block.caption)}]({Path(os.path.relpath(block.png, out)).as_posix()})"
    if isinstance(block, Items):
        return "\n".join(f"- {_md_line(_md_cell(cell))}" for cell in block.items)
    if isinstance(block, Sentences):
        return "\n\n".join(_md_line(_md_text(text)) for text in block.sentences)
    in_place = isinstance(block, Fold) and block.in_place
    if isinstance(block, Fold | Log) and appendix is not None and not in_place:
        # Its own heading there; a fold within it shows in place (appendix None).
        inside = block.blocks if isinstance(block, Fold) else [Log("", block.lines)]
        parts = [_md_block(part, out) for part in inside]
        appendix.append("\n\n".join([f"### {_md_text(block.summary)}", *parts]))
        return _md_line(_md_text(f"{block.summary}: in the appendix, at the end."))
    if isinstance(block, Fold):
        inner = [_md_block(part, out, appendix) for part in block.blocks]
        return "\n\n".join([f"{_md_line(_md_text(block.summary))}:", *inner])
    lines = [shown(_log_text(cell)) for cell in block.lines]
    fence = _md_fence(lines)
    said = f"{_md_line(_md_text(block.summary))}:\n\n" if block.summary else ""
    return f"{said}{fence}\n" + "\n".join(lines) + f"\n{fence}"


APPENDIX = "Appendix: the folded sections"


def render_markdown(blocks: list[Block], out: Path) -> str:
    """The Markdown twin of the page: the same blocks in the same order, where each fold
    (the whole tables, the logs, the machines) is one line, its blocks in an appendix at
    the end: Markdown cannot fold, and the page's first screens stay the first lines."""
    appendix: list[str] = []
    body = [_md_block(block, out, appendix) for block in blocks]
    if appendix:
        body += [f"## {APPENDIX}", *appendix]
    return "\n\n".join(body) + "\n"
