"""docs/results.md: every measured result the docs show, generated from the committed records, never typed.

    attnlab results          # or `make results`: rewrites docs/results.md and README.md's headline table

The records are `docs/calibration.csv` (one row per calibration run: task, variant, seed, what it reached, the
commit it trained at, the device and the command that trains it again; `make calibration` writes it) and the CSV
files under `docs/records/`, benchmark and speed results with the same provenance columns (`commit`, `device`,
`command`, and `source`, where a record was transcribed from a page or printout rather than written by the
command that measured it). The calibration rows are grouped by what they are: the calibration's default
variants, the kernelised and low-rank families (the variants that run on the `linear` or `lowrank` kernel), the
other attention variants, the baselines (`variants.is_baseline`), and other normalisers beside the softmax
(rows whose command sets `variant.normaliser`). Every table says where its rows come from.

Hand-written text here states no number: a number on the page is a value of a record or computed from one.
A calibration cell is one run at one learning rate, so the page states no finding from those tables.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from analysis.benchmark import page as benchmark_page
from analysis.benchmark import suite as benchmark_suite
from analysis.benchmark.contrast_section import contrast_record
from analysis.benchmark.page import (
    DENSE_RULE,
    REFERENCE,
    UNMATCHED,
    VERDICTS,
    boards,
    cell_rows,
    leaderboard,
    leaderboard_blocks,
)
from analysis.benchmark.stale import stale_lines
from analysis.calibration.doc import calibration_sections, is_bidirectional
from analysis.calibration.table import read_record
from analysis.claims import reproductions as reproduce
from analysis.report.render import Table, Text, markdown_table, md_escape
from common import schema
from common.files import atomic_write_text
from experiments import revisions
from experiments.benchmark import record
from experiments.benchmark.ledger import SETTLED, Ledger
from experiments.benchmark.parity import TOLERANCE
from experiments.speed.fits import fit

PROVENANCE = ("commit", "device", "command", "source")  # the columns that say where a record's rows come from
START, END = "<!-- results:start -->", "<!-- results:end -->"  # README.md's generated block
HEADLINE = "benchmark-mqar-flipflop"  # the record whose leaderboard README.md shows between the markers
README_BOARD = ("Test accuracy: mean ± the half-width of its 95% interval over the confirmation seeds (n), beside the "
                "test set's own Wilson interval. Verdicts: each row against the task's best by a paired test over the "
                "shared seeds that adds the test set's sampling error, Holm-corrected per task; the definitions, the "
                "verdict tables with each difference's interval and p, and the parameters: docs/results.md.")
HEADLINE_RECORD = "quick-protocol2"  # shown there in its place once it exists: `make benchmark`'s run of record
HEADLINE_ESTIMATE = "benchmark-estimate-suite"  # the record of its estimate, made before it ran (`--estimate`)
# The estimates made before its rows' added seeds ran, one per continuation (`GROWTH` in `analysis.benchmark.suite`).
ADDED_ESTIMATES = tuple(name for name, _ in benchmark_suite.GROWTH)
# -- the records under docs/records/ ----------------------------------------------------------------------


def _parameter_range(text: str) -> tuple[float, float]:
    """'104,642..107,536' -> (104642.0, 107536.0): a record's parameters over its tasks."""
    low, _, high = text.replace(",", "").partition("..")
    return float(low), float(high or low)


def _unmatched(frame: pd.DataFrame) -> list[str]:
    """Per row of a leaderboard record, why its model is not within 10% of dense's parameters (recorded before
    the benchmark sized every cell to dense's: `experiments.benchmark.parity`), or ''."""
    ranges = {variant: _parameter_range(text) for variant, text in
              frame.groupby("variant", sort=False)["parameters (over both tasks)"].first().items()}
    if REFERENCE not in ranges:
        return [f"no {REFERENCE} row to compare its parameters with"] * len(frame)
    reference = ranges[REFERENCE]
    return [f"{own[0] / reference[0]:.2f}x {REFERENCE}'s parameters in this record" if not all(
        abs(mine / theirs - 1) <= TOLERANCE for mine, theirs in zip(own, reference, strict=True)) else ""
        for own in (ranges[variant] for variant in frame["variant"])]


def _stale_record(frame: pd.DataFrame) -> list[str]:
    """A sentence when a leaderboard record's tasks or variants were revised since it was measured (a record that
    keeps no revisions was measured on revision 1 of each: `experiments.revisions`)."""
    reasons = sorted({reason for task, variant in zip(frame["task"], frame["variant"], strict=True)
                      for reason in revisions.stale_because(task, variant, {}).split("; ") if reason})
    return [f"Stale: {'; '.join(reasons)}. These rows stand as measured then; the command measures them again."] \
        if reasons else []


def _board(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """A benchmark leaderboard record as the benchmark page draws it (`analysis.benchmark.page.leaderboard`; a variant
    with no causal form is ranked among the bidirectional rows; a row not within 10% of dense's parameters is not
    ranked). The record keeps each cell's mean and interval, not its accuracy per seed, so the page's paired
    verdicts (`analysis.benchmark.verdicts`) cannot be drawn from it, nor its run configs, so no cell states the share
    of the pairs a layout attends (`analysis.benchmark.page.layout_coverage`)."""
    numbers = ["chance", "test mean", "interval half-width", "seeds completed"]
    frame = frame.assign(**{column: pd.to_numeric(frame[column]) for column in numbers})
    cells = frame.assign(status="completed", causal=[not is_bidirectional(name) for name in frame["variant"]],
                         length=math.nan, coverage=math.nan,
                         **{"seeds scored": frame["seeds completed"], "seeds failed": 0, UNMATCHED: _unmatched(frame)})
    # leaderboard reads the variants and tasks, in order, from the ledger's benchmark definition: the record's
    layout = SimpleNamespace(variants=tuple(dict.fromkeys(frame["variant"])), tasks=tuple(dict.fromkeys(frame["task"])))
    shown, _ = leaderboard(cells, SimpleNamespace(benchmark=layout))
    chance = frame.groupby("task", sort=False)["chance"].first()
    shown = shown.rename(columns={task: f"{task} (chance {chance[task]:.3f})" for task in chance.index})
    parameters = frame.groupby("variant", sort=False)["parameters (over both tasks)"].first()
    shown["parameters"] = shown["variant"].map(parameters)
    return shown, ["Test accuracy: mean ± the half-width of its 95% interval over the confirmation seeds (n); the "
                   "average is of the record's rounded means; rows are ranked among rows of the same attention "
                   "(causal, bidirectional) and a model within 10% of dense's parameters. A rank orders averages; "
                   "it is no finding that two rows differ. Which differences the seeds and the test set tell apart "
                   "needs each cell's accuracy per seed, which this record does not keep: the run's benchmark page "
                   "states it (a paired test per task, Holm-corrected).", *_stale_record(frame)]


def _by_length(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Milliseconds per length, one row per variant and kernel, and the log-log slope (`speed.fits.fit`)."""
    keys, time = ["variant", "kernel", "causal"], "ms forward+backward"
    shown = frame.pivot(index=keys, columns="length", values=time)
    shown = shown.reindex(index=pd.MultiIndex.from_frame(frame[keys].drop_duplicates()),
                          columns=sorted(shown.columns, key=int))
    slopes = {key: fit(pd.to_numeric(rows["length"]), pd.to_numeric(rows[time]))
              for key, rows in frame.groupby(keys, sort=False)}
    shown["log-log slope"] = [f"{slopes[key][0]:.2f} ({slopes[key][1]})" for key in shown.index]
    return shown.reset_index().rename_axis(columns=None), [
        "Milliseconds per forward+backward of one layer's attention, by sequence length; the slope is fitted over "
        "the top octaves of the lengths (in brackets)."]


def _estimate_check(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    measured = pd.to_numeric(frame["measured (s)"])
    ratios = {f"measured / {column.removesuffix(' (s)')}": measured / pd.to_numeric(frame[column])
              for column in ("estimated (s)", "at the steps each run took (s)") if column in frame}
    return frame.assign(**{name: ratio.map(lambda value: f"{value:.2f}") for name, ratio in ratios.items()}), [
        "Seconds of runs the estimate predicted against what the same benchmark then took on the same machine: a "
        "row named 'one run' is the mean of its runs, every other row their sum; the wall time is the seconds while "
        "at least one job ran."]


def _as_recorded(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    return frame, []


# Per record (the file's name without .csv): its title, what it measures (no numbers), how it is drawn.
RECORDS = {
    "benchmark-mqar-flipflop": ("Benchmark: four variants on MQAR and flip-flop", _board),
    "benchmark-estimate-core": ("Benchmark: what `make benchmark`, the core set, costs before it runs", _as_recorded),
    "benchmark-estimate-protocol2": ("Benchmark: what `make benchmark`, the core set on the default suite under "
                                     "protocol 2 (every job its whole budget), costs before it runs", _as_recorded),
    "benchmark-estimate-suite": ("Benchmark: what `make benchmark`, the core set on protocol 2's calibrated suite at "
                                 "its 400-step budget, costs before it runs (the run of record's estimate)",
                                 _as_recorded),
    **{name: ("Benchmark: what the run of record's added seeds ("
                    + ", ".join(f"{count} on {row}" for row, count in rows.items())
                    + ") cost, estimated before they ran", _as_recorded) for name, rows in benchmark_suite.GROWTH},
    "benchmark-estimate-all": ("Benchmark: what `VARIANT=all`, every variant and baseline, costs, estimated before "
                               "it runs (every job at its profile's steps: no record of it predicts its stops)",
                               _as_recorded),
    "benchmark-estimate-check": ("Benchmark: how close the estimate came", _estimate_check),
    "benchmark-quick-estimate-check": ("Benchmark of record quick: how close the estimate made before the run came, "
                                       "per variant, per stage and in all", _estimate_check),
    "speed-kernelised": ("Speed: the kernelised and low-rank families against length", _by_length),
    "speed-complexity": ("Speed: the tutorials' complexity table, measured", _as_recorded),
}


def read(path: Path) -> pd.DataFrame:
    """A record under docs/records/, every value as written (text): a CSV with the provenance columns; a file
    without them is a ValueError."""
    frame = pd.read_csv(path, keep_default_na=False, dtype=str)
    missing = [column for column in PROVENANCE if column not in frame]
    if missing:
        raise ValueError(f"Record {str(path)!r} lacks the columns {missing}; accepted: a CSV with the columns "
                         f"{', '.join(PROVENANCE)} beside its values.")
    return frame


def record_section(path: Path) -> list[str]:
    """A record's section: title, the table (drawn by its entry in RECORDS, else as recorded), its provenance."""
    frame = read(path)
    title, draw = RECORDS.get(path.stem, (path.stem, _as_recorded))
    values = frame[[column for column in frame.columns if column not in PROVENANCE]]
    shown, notes = draw(values)
    lines = [f"### {title}", "", f"Record: [records/{path.name}](records/{path.name}).", ""]
    lines += [*notes, *([""] if notes else []), *markdown_table(shown), "", "Where the rows come from:", ""]
    for column in PROVENANCE:
        lines += [f"- {column}: " + "; ".join(f"`{value}`" if column == "command" else md_escape(value)
                                              for value in dict.fromkeys(frame[column].astype(str)))]
    return [*lines, ""]


def progress_lines(ledger: Ledger) -> list[str]:
    """Where a record is still running (stopped part way, or grown by more seeds): how many of its jobs have settled,
    and that its contrasts pair each variant with dense on the seeds both have settled; nothing once it is complete."""
    if ledger.complete:
        return []
    jobs = [job for state in ledger.cells for job in state.called]
    settled = sum(job.state in SETTLED for state in ledger.cells for job in state.jobs)
    return [f"In progress: {settled:,} of {len(jobs):,} jobs settled; the same attnlab benchmark command continues "
            "it. Until then each variant is paired with dense on the seeds both have settled."]


def board_lines(ledger: Ledger, readme: bool = False) -> list[str]:
    """A benchmark's leaderboard and paired verdicts as its page shows them (`analysis.benchmark.page`), in Markdown;
    for the README, the leaderboard without its parameter columns, the rule for cells that compute dense, each
    task's verdict as its sentence and what is stale (`analysis.benchmark.stale`), the other definitions and the
    verdict tables being on the results page. Under protocol 2, in their place, the contrasts against dense as
    sentences (`analysis.benchmark.contrast_section.contrast_record`), and on the results page their table."""
    if ledger.benchmark.protocol >= 2:
        lines, table = contrast_record(ledger, cell_rows(ledger), readme)
        return [*(f"- {md_escape(line)}" for line in [*progress_lines(ledger), *lines, *stale_lines(ledger)]), "",
                *([] if readme else [*markdown_table(table), ""])]
    cells, shown, board = boards(ledger)
    blocks = leaderboard_blocks(ledger, cells, shown, board)
    if not readme:
        return [line for block in blocks for line in (
            [md_escape(block.text)] if isinstance(block, Text) else
            [f"**{md_escape(block.caption)}**", "", *markdown_table(block.frame)]) + [""]]
    lines, verdicts = [f"{README_BOARD} {DENSE_RULE}", ""], False
    for block in blocks:
        if isinstance(block, Table) and block.name.startswith("leaderboard"):
            frame = block.frame.drop(columns=[column for column in block.frame if column.startswith("parameters")])
            lines += [*markdown_table(frame.loc[:, (frame != "").any()]), ""]  # no column left empty
        verdicts = verdicts or (isinstance(block, Text) and block.text == VERDICTS)
        if verdicts and isinstance(block, Text) and block.text != VERDICTS:
            lines.append(f"- {md_escape(block.text)}")
    return [*lines, *(f"- {md_escape(line)}" for line in stale_lines(ledger)), ""]


def journal_section(path: Path, readme: bool = False) -> list[str]:
    """A leaderboard of record (`experiments.benchmark.record`): its board and verdicts (`board_lines`), the command,
    the commits and devices its jobs ran at, its runs' seconds and its wall time."""
    ledger = record.load(path)
    results = [job.result for state in ledger.cells for job in state.jobs if job.result]
    seconds = sum(result.get("wall_seconds") or 0 for result in results)
    name = ledger.benchmark.name
    return [f"### Benchmark of record: {md_escape(name)}", "",
            f"Record: [records/{path.name}](records/{path.name}), the benchmark's own storage; `make results` "
            f"rebuilds its page (reports/benchmark-{md_escape(name)}/) from it without training.", "",
            *board_lines(ledger, readme), f"- command: `{schema.command(ledger.benchmark)}`",
            "- commits: " + ", ".join(sorted({md_escape(str(r.get("git_commit"))) for r in results})),
            "- devices: " + ", ".join(sorted({md_escape(str(r.get("device_name") or r.get("device")))
                                               for r in results})),
            f"- runs: {len(results)}, {seconds / 3600:.2f} hours of runs (every stage); wall time "
            f"{ledger.busy_seconds() / 3600:.2f} hours (while at least one of its jobs ran)", ""]


# -- the page and the README's headline ------------------------------------------------------------------


def page(records: Path) -> str:
    """docs/results.md from the records under `records` (calibration.csv, records/*.csv)."""
    lines = ["# Results", "",
             "Generated by `make results` (`attnlab results`, `analysis.results_doc`) from the committed records "
             "beside this page; do not edit it by hand: change a record, or the generator, and run the command. "
             "`tests/analysis/test_results_doc.py` fails when this page is not what the records give.", ""]
    calibration = read_record(records / "calibration.csv")
    lines += [*calibration_sections(calibration), *benchmark_suite.section(calibration)]
    lines += ["## Benchmark and speed records", "",
              "Records of `make benchmark`, `make benchmark-estimate` and the kernel timings (`make speed`), one CSV "
              "each under [records/](records/); a record transcribed from a run's page or printout says so in its "
              "`source`.", ""]
    paths = sorted((records / "records").glob("*.csv"), key=lambda path: (path.stem not in RECORDS,
                                                                        list(RECORDS).index(path.stem)
                                                                        if path.stem in RECORDS else 0, path.name))
    for path in paths:
        lines += record_section(path)
    for path in record.records(records / "records"):
        lines += journal_section(path)
    return "\n".join(lines).rstrip("\n") + "\n"


def headline(records: Path) -> str:
    """README.md's generated block: the headline leaderboard with where it comes from, and the link to the rest."""
    path = records / "records" / f"{HEADLINE}.csv"
    lines = [START, "<!-- generated by `make results` from docs/records/; edit the record, not this block -->"]
    of_record = record.path_of(HEADLINE_RECORD, records / "records")
    if of_record.exists():
        ledger = record.load(of_record)
        lines += ["", *journal_section(of_record, readme=True)[4:-1],
                  *cost_lines(records / "records", ledger.busy_seconds())]
    elif path.exists():
        frame = read(path)
        shown, notes = _board(frame[[column for column in frame.columns if column not in PROVENANCE]])
        first = frame.iloc[0]
        lines += ["", *markdown_table(shown), "",
                  f"`{first['command']}`: {md_escape(first['profile'])} profile; device: {md_escape(first['device'])}; "
                  f"commit: {md_escape(first['commit'])}; source: {md_escape(first['source'])}.",
                  *(text for note in notes for text in ("", md_escape(note)))]
    lines += ["", *reproduce.readme_lines(records / "records" / "claims"), "",
              "Every measured result, with its provenance: [docs/results.md](docs/results.md).", END]
    return "\n".join(lines)


def cost_lines(records: Path, measured_seconds: float, machines: int = 4) -> list[str]:
    """The README's line on what the benchmark of record cost (`measured_seconds` of wall time: its
    `Ledger.busy_seconds`) against the estimate made before it ran (the record HEADLINE_ESTIMATE, plus each of
    ADDED_ESTIMATES that exists, made before its rows' added seeds ran), and what `VARIANT=all` would (its estimate
    per worker, spread over `machines` machines like the estimate's sharing one storage); none without those
    records."""
    paths = [records / f"{name}.csv" for name in (HEADLINE_ESTIMATE, "benchmark-estimate-all")]
    if not all(path.exists() for path in paths):
        return []
    before, every = (read(path).set_index("what") for path in paths)
    added = [path for name in ADDED_ESTIMATES if (path := records / f"{name}.csv").exists()]
    parts = [before, *(read(path).set_index("what") for path in added)]
    wall = next(what for what in before.index if what.startswith("wall time with "))
    workers = int(wall.split()[3])
    hours = [float(part.loc[wall, "hours"]) for part in parts]
    estimated, measured = sum(hours), measured_seconds / 3600
    runs = float(every.loc["every job", "hours"])
    links = "".join(f", then before {'its' if index == 0 else 'more'} added seeds ran "
                    f"[records/{path.name}](docs/records/{path.name})" for index, path in enumerate(added))
    shown = " + ".join(f"{part:.2f}" for part in hours) + (f" = {estimated:.2f}" if len(parts) > 1 else "")
    return [f"- cost: estimated before the run (`make benchmark-estimate WORKERS={workers}`, "
            f"[records/{paths[0].name}](docs/records/{paths[0].name}){links}) {shown} hours of wall time, measured "
            f"{measured:.2f} ({measured / estimated:.2f} of the estimate); `VARIANT=all`, "
            f"{int(every.loc['every job', 'jobs']):,} jobs, {runs:.1f} hours of runs: {runs / workers:.1f} hours "
            f"with {workers} workers here, {runs / workers / machines:.1f} on {machines} such machines sharing one "
            f"`STORAGE` (no record of it predicts its stops: every job at its profile's steps; "
            f"[docs/results.md](docs/results.md))"]


def with_headline(readme: str, block: str) -> str:
    """`readme` with the text between its markers (inclusive) replaced by `block`."""
    start, end = readme.find(START), readme.find(END)
    if start == -1 or end < start:
        raise ValueError(f"README has no {START} ... {END} block; accepted: a README with both markers, in order.")
    return readme[:start] + block + readme[end + len(END):]


def write(out: Path = Path("docs/results.md"), records: Path = Path("docs"),
          readme: Path | None = Path("README.md")) -> Path:
    """Write `out` from the records under `records`, and `readme`'s headline block (none when `readme` is None)."""
    atomic_write_text(out, page(records))
    if readme is not None:
        atomic_write_text(readme, with_headline(readme.read_text(encoding="utf-8"), headline(records)))
    return out


def check_checkout() -> None:
    """Refuse, before anything is written, a folder that is not the checkout `attnlab results` rewrites: one without
    README.md (and its generated block) or without the records under docs/records/."""
    readme, records = Path("README.md"), record.RECORDS
    missing = [str(path) for path, there in ((readme, readme.is_file()), (records, records.is_dir())) if not there]
    if missing:
        raise ValueError(f"{Path.cwd()} has no {' and no '.join(missing)}, and `attnlab results` rewrites README.md's "
                         "generated block and docs/ from docs/records/; accepted: run it from the attnlab checkout.")
    with_headline(readme.read_text(encoding="utf-8"), "")  # a README without the block is refused, naming the markers


def regenerate(keep: str | None, runs_dir: Path, out: Path) -> list[str]:
    """`attnlab results`: keep benchmark `keep` as a record first (none: keep nothing), then write docs/results.md,
    the README's block and each benchmark of record's page under `out`; what it wrote, a line each. Run outside the
    checkout, it is refused before anything is written."""
    check_checkout()
    kept = [f"kept {record.keep(keep, runs_dir)}"] if keep else []
    written = [f"wrote {write()} and the results block of README.md",
               f"wrote {reproduce.write(out)} and {reproduce.DOC}"]
    for path in record.records():
        written.append(f"wrote {benchmark_page.write(record.load(path), out)[0]}")
    return [*kept, *written]
