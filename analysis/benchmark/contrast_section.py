"""The lead of a protocol-2 benchmark page (`analysis.benchmark.page`) and of its record's block in docs/results.md and
the README (`analysis.results_doc`): every variant against dense per task and metric (`analysis.benchmark.contrasts`,
drawn by `analysis.benchmark.contrast_page`), from the settled confirmation jobs of the ledger, in place of protocol 1's
leaderboard, ranks and verdicts. A seed whose run diverged or failed counts as a run that stayed at chance
(`contrasts.at_chance`), and the page says how many; a layout cell that attends more than half its pairs
(`analysis.benchmark.coverage`) is left out of the contrasts with its reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.benchmark.contrast_page import contrast_blocks
from analysis.benchmark.contrasts import (
    FAMILY,
    POWER,
    REFERENCE,
    TEST_ACCURACY,
    at_chance,
    contrasts,
    curve_frame,
    event_metric,
    number,
    sentences,
    tidy,
    tiers,
)
from analysis.benchmark.coverage import DENSE_COVERAGE, computes_dense, coverage_text
from analysis.report.render import Section, Table, Text
from common.statistics import MOST_PAIRS, pairs_to_detect
from experiments.benchmark.ledger import COMPLETED, SETTLED, Ledger
from experiments.run.config import due

Result = tuple[str, str, int, dict[str, Any]]  # (variant, task, seed, result) as `contrasts.tidy` reads it
SHOWN = ["task", "metric", "variant", "seeds paired", "difference", "low", "high", "Holm-adjusted p", "told apart"]
# What protocol 2 asks of each cell of record (docs/benchmark.md): that it could detect a difference from dense of 0.05
# in test accuracy, or of 20% of dense's restricted mean in steps to 0.9, at 80% power at the Holm level.
AIMS = {TEST_ACCURACY: (0.05, False), event_metric("0.9"): (0.20, True)}
POWER_COLUMNS = ["task", "metric", "aim", "detectable", "met", "seeds paired", "seeds the aim needs", "rows"]
# The most paired seeds a task of record may grow to for that aim, four times the protocol's 6: a row of the suite costs
# about half an hour of wall time per 6 seeds with 2 workers here, so 24 seeds of one row take about the run of record's
# whole 2.5 hours. A task whose aim would need more on every metric is exploratory (`exploratory`), decided from the
# spread of its paired differences alone, never from their sign or size.
MOST_SEEDS = 24


@dataclass
class Compared:
    """What the contrasts are built from: the confirmation results, and a sentence each on what was left out or
    scored at chance, and on the coverage of the layout cells compared."""

    results: list[Result]
    notes: list[str]


def _chance(cells: pd.DataFrame, task: str) -> float:
    """The task's chance accuracy as any of its cells' runs recorded it."""
    return next((chance for chance in cells.loc[cells["task"] == task, "chance"] if not math.isnan(chance)), math.nan)


def compared(ledger: Ledger, cells: pd.DataFrame) -> Compared:
    """The settled confirmation jobs of every cell that is compared, a diverged or failed one as `at_chance`; a cell
    whose layout attends more than DENSE_COVERAGE of its pairs is left out, and said so."""
    dense = computes_dense(cells).to_numpy()
    left_out = {(row["variant"], row["task"]): coverage_text(row) for (_, row), out in zip(cells.iterrows(), dense,
                                                                                          strict=True) if out}
    jobs = [(state, job) for state in ledger.cells if (state.cell.variant, state.cell.task) not in left_out
            for job in state.confirmation if job is not None and job.state in SETTLED]
    lengths = {job.job.task: [entry["length"] for entry in job.result.get("accuracy_by_length", [])]
               for _, job in jobs if job.state == COMPLETED}
    results, failed = [], 0
    for _, job in jobs:
        if job.state == COMPLETED:
            results.append((job.job.variant, job.job.task, job.job.seed, job.result))
            continue
        train = ledger.benchmark.config(job.job).train
        evaluations = [step for step in range(1, train.steps + 1) if due(step, train.eval_every, train.steps)]
        results.append((job.job.variant, job.job.task, job.job.seed, at_chance(
            _chance(cells, job.job.task), train.steps, evaluations, lengths.get(job.job.task, []))))
        failed += 1
    notes = [f"{variant} on {task} is left out of the contrasts: it {text}, more than {DENSE_COVERAGE:.0%}, so it is "
             "no sparse contender there." for (variant, task), text in left_out.items()]
    plural = failed != 1
    notes += [f"{failed} confirmation seed{'s' * plural} diverged or failed and count{'s' * (not plural)} as a run "
              "that stayed at chance: every accuracy at the task's "
              "chance, both events censored at the budget, its curve flat at chance (none is dropped)."] \
        if failed else []
    covered = cells[~dense & cells["coverage"].notna()]
    notes += ["Coverage of the layout cells compared: " + "; ".join(
        f"{row['variant']} on {row['task']} {coverage_text(row)}" for _, row in covered.iterrows()) + "."] \
        if len(covered) else []
    return Compared(results, notes)


def contrast_section(ledger: Ledger, cells: pd.DataFrame) -> tuple[Section, pd.DataFrame]:
    """The page's lead under protocol 2, and its contrasts as the command line prints them."""
    found = compared(ledger, cells)
    frame = tidy(found.results)
    variants = list(ledger.benchmark.variants)
    blocks = contrast_blocks(frame, curve_frame(found.results), variants) if len(frame) else []
    table = contrasts(frame) if len(frame) else pd.DataFrame(columns=SHOWN)
    if not table.empty:
        power = power_check(table)
        blocks += [*(Text(line) for line in power_lines(power)),
                   Table("power", "Whether each task's cells could detect the protocol's aim (0.05 in test accuracy, "
                         "or 20% of dense's restricted mean in steps to 0.9) at 80% power at the Holm level, and the "
                         "paired seeds the cell's measured spread would need for it", power)]
    section = Section("contrasts", "Contrasts against dense", [*(Text(note) for note in found.notes), *blocks])
    return section, table.reindex(columns=SHOWN)


def contrast_record(ledger: Ledger, cells: pd.DataFrame, readme: bool = False) -> tuple[list[str], pd.DataFrame]:
    """The record's block: what was left out or scored at chance, the family, and per task and metric its
    sentence (each variant's difference from dense, with its interval and adjusted p where told apart, the
    detectable difference) followed by its tiers, then the power check (`power_lines`; for the README its count
    alone); and the contrast table (`SHOWN` and the detectable difference)."""
    found = compared(ledger, cells)
    frame = tidy(found.results)
    if frame.empty:
        return [*found.notes, "No confirmation job has settled yet."], pd.DataFrame(columns=SHOWN)
    table, ranked = contrasts(frame), tiers(frame)
    if table.empty:  # dense alone: nothing to set against it
        return [*found.notes, f"No contrast: no variant besides {REFERENCE} has a settled confirmation run."], \
            pd.DataFrame(columns=SHOWN)
    lines, checked = [*found.notes, FAMILY], power_check(table)
    aside = exploratory(checked)
    for (task, metric), cell in table.groupby(["task", "metric"], sort=False):
        rows = ranked[(ranked["task"] == task) & (ranked["metric"] == metric)]
        tiered = "; ".join(f"tier {tier}: {', '.join(group['variant'])}" for tier, group in rows.groupby("tier"))
        lines.append(sentences(cell)[0] + (f" Tiers: {tiered}." if tiered else "")
                     + (" Exploratory: too noisy for the protocol's aim (the power check)." if task in aside else ""))
    power = power_lines(checked)  # the README keeps the count, docs/results.md each task's figures
    return [*lines, *(power[:1] if readme else power)], table[[*SHOWN, "detectable difference"]]


def power_check(table: pd.DataFrame) -> pd.DataFrame:
    """Per task, whether its cells could detect the protocol's aims (`AIMS`): the cell's detectable difference (steps:
    as a share of dense's restricted mean) against the aim, and the paired seeds at which the cell's pooled spread
    would reach it at the same level (`common.statistics.pairs_to_detect`); a metric that does not discriminate meets
    nothing. A task meets the protocol's aim where either metric does."""
    rows = []
    for (task, metric), cell in table.groupby(["task", "metric"], sort=False):
        if metric not in AIMS:
            continue
        aim, relative = AIMS[metric]
        first = cell.iloc[0]
        if first["not discriminating"]:
            rows.append({"task": task, "metric": metric, "aim": aim, "detectable": math.nan,
                         "met": "not discriminating", "seeds paired": int(cell["seeds paired"].min()),
                         "seeds the aim needs": math.nan, "rows": len(cell) + 1})
            continue
        detectable = first["detectable relative to dense"] if relative else first["cell detectable difference"]
        target = aim * first["dense mean"] if relative else aim
        needed = (pairs_to_detect(target, first["cell sd"], first["cell alpha"], POWER)
                  if not math.isnan(first["cell sd"]) else math.nan)
        rows.append({"task": task, "metric": metric, "aim": aim, "detectable": detectable,
                     "met": "yes" if detectable <= aim + 1e-9 else "no",
                     "seeds paired": int(cell["seeds paired"].min()),
                     "seeds the aim needs": math.nan if needed is None else needed, "rows": len(cell) + 1})
    return pd.DataFrame(rows, columns=POWER_COLUMNS)


def exploratory(power: pd.DataFrame) -> list[str]:
    """The tasks of `power` (`power_check`) that are exploratory, not of record: no metric meets the aim, and none
    could within MOST_SEEDS paired seeds (a need beyond MOST_PAIRS counts as beyond it too), and some metric
    discriminates (a task none of whose metrics does misses the aim for that reason, not for its spread)."""
    reachable = (power["met"].eq("yes") | power["seeds the aim needs"].le(MOST_SEEDS)).groupby(power["task"]).any()
    noisy = power["met"].eq("no").groupby(power["task"]).any()  # a task no metric of which discriminates is not
    return [task for task in power["task"].unique() if noisy[task] and not reachable[task]]


def power_lines(power: pd.DataFrame) -> list[str]:
    """The power check as sentences: how many tasks of record meet the aim and which tasks are exploratory (the
    count line, all the README keeps), then for each task that does not meet it, its figures."""
    met = power.groupby("task", sort=False)["met"].agg(lambda values: (values == "yes").any())
    aside = exploratory(power)
    of_record = met.drop(aside)
    lines = [f"Power: {int(of_record.sum())} of {len(of_record)} tasks of record could detect 0.05 in test accuracy or "
             f"20% in steps to 0.9 at {POWER:.0%} power at the Holm level, the protocol's aim"
             + (f"; exploratory, too noisy to reach it within {MOST_SEEDS} seeds: {', '.join(aside)}." if aside
                else ".")]
    for task in met.index[~met]:
        lines.append(f"{task} {'is exploratory' if task in aside else 'misses the aim'}: "
                     + "; ".join(_power_parts(power[power["task"] == task])) + "."
                     + (f" Its aim would take more than the {MOST_SEEDS} paired seeds a task of record may grow to, so "
                        "it is no task of record: its contrasts stand as measured, and differences below its "
                        "detectable ones remain possible." if task in aside else ""))
    return lines


def _power_parts(rows: pd.DataFrame) -> list[str]:
    """Each metric of one task's power check as a clause: what it could detect and the seeds it would need."""
    parts = []
    for _, row in rows.iterrows():
        if row["met"] == "not discriminating":
            parts.append(f"{row['metric']} does not discriminate")
            continue
        shown = f"{row['detectable']:.0%} of dense's mean" if AIMS[row["metric"]][1] else \
            number(TEST_ACCURACY, row["detectable"], signed=False)
        needed = row["seeds the aim needs"]
        more = "" if math.isnan(needed) else \
            f" ({(int(needed) - row['seeds paired']) * row['rows']:,} more runs of its {row['rows']} rows)"
        needs = f"more than {MOST_PAIRS}" if math.isnan(needed) else f"about {int(needed)} paired seeds{more}"
        parts.append(f"{row['metric']} could detect {shown} with {row['seeds paired']} seeds, and would need {needs}")
    return parts
