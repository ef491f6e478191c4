"""`make report`: every run on disk -> one report that answers "which variant handles which dependency,
at what cost".

    build_report("runs", "reports", filters="task=passkey,variant=local")   # -> reports/<name>/index.html

writes `reports/<name>/`:

    index.html   self-contained page (figures beside it), every section in `analysis.report.sections.SECTIONS`
    report.md    the same tables and figures, for a README or a paper draft
    figures/     one PNG per figure
    tables/      one CSV per table and per figure (the data it draws); Parquet with table_format="parquet"
                 (`analysis.report.tables`: dtypes kept, list and dict columns as JSON text)

The folder is written aside and swapped in at the end, so a report is never half old and half new.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from analysis.report import figures
from analysis.report.context import Context, read_speed
from analysis.report.render import Figure, Section, Table, to_html, to_markdown
from analysis.report.sections import registry
from analysis.report.tables import FORMATS, write_table
from analysis.runs import check_selects, load_runs, parse_filters, select
from analysis.sweeps import load_studies, select_studies

REPORT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def default_name(study: str | None, filters: Mapping[str, list[str]]) -> str:
    """The study's name, or the filters as a plain name (REPORT_NAME: 'task-passkey_variant-local',
    'variant-sinkhorn-or-reformer' for a column given two values), or 'all'."""
    if study:
        return study
    if not filters:
        return "all"
    name = "_".join(f"{column}-{'-or-'.join(values)}" for column, values in filters.items())
    return re.sub(r"\.\.+", ".", re.sub(r"[^A-Za-z0-9._-]", "-", name)).strip("-._")[:100] or "filtered"


def _swap_in(built: Path, target: Path) -> None:
    """Replace `target` (a report folder, or nothing) by `built`."""
    if target.exists():
        if not (target / "index.html").is_file():
            raise ValueError(f"Report folder {str(target)!r} exists and is not a report (no index.html); accepted: "
                             "a new name (NAME=) or an output folder (OUT=) without that folder.")
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(built, target)
        shutil.rmtree(old)
    else:
        os.replace(built, target)


def build_report(runs_dir: str | Path, out_dir: str | Path = "reports", *, study: str | None = None,
                 filters: str | Mapping[str, list[str]] | None = None, name: str | None = None,
                 speed_dir: str | Path | None = None, table_format: str = "csv") -> Path:
    """Build the report of the runs under `runs_dir` into `out_dir/<name>/` and return its index.html.

    study: only this sweep study (its journal `runs_dir/sweeps/<study>.journal`) in the sweeps sections,
        and of the sweep trials only its own; ordinary runs are all shown (narrow them with filters).
        Filters on variant, task, profile or seed also select the studies whose definition matches.
    filters: "column=value,column=value" over `load_runs` columns (a column named twice accepts either value),
        or that parsed as a mapping; an unknown column is a ValueError naming the known ones, and filters that
        select no run one naming the values the column has.
    name: the report folder's name (default: the study, the filters, or "all").
    speed_dir: where `make speed` CSVs are (default: `runs_dir/speed`).
    table_format: "csv" or "parquet", the files under tables/.
    """
    if table_format not in FORMATS:
        raise ValueError(f"Table format {table_format!r} is not one the report writes; accepted: "
                         f"{', '.join(FORMATS)}.")
    runs_dir, out_dir = Path(runs_dir), Path(out_dir)
    runs = load_runs(runs_dir)
    columns = list(runs.columns)
    if isinstance(filters, Mapping):
        parsed = parse_filters(",".join(f"{column}={value}" for column, values in filters.items()
                                        for value in values), columns)
    else:
        parsed = parse_filters(filters, columns)
    studies, unreadable_journals = load_studies(runs_dir, study)
    check_selects(runs, parsed)
    selected = select(runs, parsed)
    if study is not None:
        selected = selected[selected["study"].isna() | (selected["study"] == study)]
    name = name or default_name(study, parsed)
    if not REPORT_NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"Report name {name!r} is not a plain name; accepted: letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit, without '..'.")
    speed, speed_files, unreadable_speed = read_speed(Path(speed_dir) if speed_dir else runs_dir / "speed")
    context = Context(runs_dir=runs_dir, runs=selected,
                      skipped=[*runs.attrs["skipped"], *unreadable_journals, *unreadable_speed],
                      studies=select_studies(studies, parsed), speed=speed, speed_files=speed_files, filters=parsed)

    sections = []
    with figures.style():
        for builder in registry.SECTIONS:
            sections.append(Section(builder.key, builder.title, builder.build(context)))
        filter_text = ", ".join(f"{column}={' or '.join(values)}" for column, values in parsed.items()) or "none"
        meta = [f"Built {time.strftime('%Y-%m-%d %H:%M:%S')} from {runs_dir}: {len(selected)} of {len(runs)} runs "
                f"selected; unreadable records skipped: {len(context.skipped)}; filters: {filter_text}; "
                f"study: {study or 'all'}."]
        return write_page(out_dir, name, f"attnlab report: {name}", meta, sections, table_format)


def write_page(out_dir: Path, name: str, title: str, meta: list[str], sections: list[Section],
               table_format: str = "csv") -> Path:
    """Write `sections` as `out_dir/name/` (index.html, report.md, figures/, tables/ as CSV or Parquet), built
    aside and swapped in whole, and return its index.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{name}.building-", dir=out_dir))
    try:
        (building / "figures").mkdir()
        (building / "tables").mkdir()
        for section in sections:
            for block in section.blocks:
                _write_block(block, building, table_format)
        (building / "index.html").write_text(to_html(title, meta, sections, table_format), encoding="utf-8")
        (building / "report.md").write_text(to_markdown(title, meta, sections, table_format), encoding="utf-8")
        os.chmod(building, 0o755)  # mkdtemp makes it private; a report is for sharing
        _swap_in(building, out_dir / name)
    finally:
        if building.exists():
            shutil.rmtree(building)
    return out_dir / name / "index.html"


def _write_block(block: object, folder: Path, table_format: str) -> None:
    """A figure's PNG and data, a table's data (CSV or Parquet); two blocks of one name are a bug in a section
    builder."""
    if not isinstance(block, (Figure, Table)):
        return
    table = folder / "tables" / f"{block.name}.{table_format}"
    if table.exists():
        raise RuntimeError(f"two report blocks are named {block.name!r}")
    if isinstance(block, Figure):
        block.figure.savefig(folder / "figures" / f"{block.name}.png", dpi=figures.DPI)
        write_table(block.data, table)
    else:
        write_table(block.data if block.data is not None else block.frame, table)
