"""What a report section is made of (text, tables, figures) and how it is written as HTML and Markdown.

Every string is escaped here, once, whatever its origin: a section builder hands over plain text and
plain DataFrames, never markup, so a run named `<script>alert(1)</script>` can only ever be shown as text.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure as MplFigure

from analysis.report.tables import FORMATS


@dataclass
class Text:
    """A paragraph of plain text."""

    text: str


@dataclass
class Table:
    """A table shown in the report; `name` names its file (CSV or Parquet), which holds `data` (default: the
    table itself, with numbers unrounded)."""

    name: str
    caption: str
    frame: pd.DataFrame
    data: pd.DataFrame | None = None


@dataclass
class Figure:
    """A matplotlib figure, saved as `figures/<name>.png`, and the data behind it as `tables/<name>.csv` (or
    .parquet)."""

    name: str
    caption: str
    figure: MplFigure
    data: pd.DataFrame


Block = Text | Table | Figure


@dataclass
class Section:
    key: str  # the HTML anchor
    title: str
    blocks: list[Block]


def cell_text(value: Any) -> str:
    """A table cell as text: floats with 4 significant digits, missing values as an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple):
        return ",".join(cell_text(item) for item in value)
    return str(value)


# -- HTML -------------------------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
nav ol { columns: 2; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top;
         max-width: 36em; overflow-wrap: break-word; }
th { background: #f2f2f2; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 0.3em 0; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; }
.table-wrap { overflow-x: auto; }
.meta { color: #555; }
"""


def _html_link(name: str, table_format: str) -> str:
    """The link to a table's or figure's data file, `tables/<name>.<format>`."""
    return f'<a href="tables/{html.escape(name)}.{table_format}">{FORMATS[table_format]}</a>'


def _html_table(table: Table, table_format: str) -> str:
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in table.frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell_text(value))}</td>" for value in row) + "</tr>"
                   for row in table.frame.itertuples(index=False))
    link = " " + _html_link(table.name, table_format)
    return (f'<div class="table-wrap"><table><caption>{html.escape(table.caption)}{link}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")


def _html_block(block: Block, table_format: str) -> str:
    if isinstance(block, Text):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Table):
        return _html_table(block, table_format)
    return (f'<figure><img src="figures/{html.escape(block.name)}.png" alt="{html.escape(block.caption)}">'
            f"<figcaption>{html.escape(block.caption)} {_html_link(block.name, table_format)}</figcaption></figure>")


def to_html(title: str, meta: list[str], sections: list[Section], table_format: str = "csv") -> str:
    toc = "".join(f'<li><a href="#{html.escape(section.key)}">{html.escape(section.title)}</a></li>'
                  for section in sections)
    body = "".join(
        f'<section id="{html.escape(section.key)}"><h2>{html.escape(section.title)}</h2>'
        + "".join(_html_block(block, table_format) for block in section.blocks) + "</section>"
        for section in sections
    )
    meta_html = "".join(f'<p class="meta">{html.escape(line)}</p>' for line in meta)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{meta_html}"
            f"<nav><ol>{toc}</ol></nav>{body}</body></html>\n")


# -- Markdown ---------------------------------------------------------------------------------------


def md_escape(text: str) -> str:
    """Text safe inside Markdown (and the HTML Markdown renders to): entities for <, > and &, escaped
    table pipes and emphasis marks, one line."""
    text = html.escape(text, quote=False).replace("\\", "\\\\")
    for mark in ("|", "*", "_", "`", "[", "]"):
        text = text.replace(mark, "\\" + mark)
    return " ".join(text.split())


def _md_table(table: Table, table_format: str) -> str:
    head = "| " + " | ".join(md_escape(str(column)) for column in table.frame.columns) + " |"
    rule = "|" + "---|" * len(table.frame.columns)
    rows = ["| " + " | ".join(md_escape(cell_text(value)) for value in row) + " |"
            for row in table.frame.itertuples(index=False)]
    link = f"[{FORMATS[table_format]}](tables/{table.name}.{table_format})"
    return "\n".join([f"**{md_escape(table.caption)}** ({link})", "", head, rule, *rows])


def _md_block(block: Block, table_format: str) -> str:
    if isinstance(block, Text):
        return md_escape(block.text)
    if isinstance(block, Table):
        return _md_table(block, table_format)
    return f"![{md_escape(block.caption)}](figures/{block.name}.png)\n\n{md_escape(block.caption)}"


def to_markdown(title: str, meta: list[str], sections: list[Section], table_format: str = "csv") -> str:
    parts = [f"# {md_escape(title)}", *(md_escape(line) for line in meta)]
    for section in sections:
        parts.append(f"## {md_escape(section.title)}")
        parts.extend(_md_block(block, table_format) for block in section.blocks)
    return "\n\n".join(parts) + "\n"


def markdown_table(frame: pd.DataFrame) -> list[str]:
    """A DataFrame as Markdown table lines, every cell escaped as text (`md_escape`)."""
    head = "| " + " | ".join(md_escape(str(column)) for column in frame.columns) + " |"
    rows = ["| " + " | ".join(md_escape(str(value)) for value in row) + " |" for row in frame.itertuples(index=False)]
    return [head, "|" + "---|" * len(frame.columns), *rows]
