"""What a protocol-2 benchmark page shows of its contrasts (`analysis.benchmark.contrasts`), figures first: per task, a
forest plot of each variant's difference from dense in each metric with its 95% interval and the cell's detectable
difference marked as a band around zero; the learning curves per task, the mean validation accuracy over the seeds at
each evaluation and the 95% interval of that mean (Student's t, `mean_interval`) as a band; then the sentences, the
contrast table, the tiers and the summaries per cell. Figures follow `analysis.report.figures`' conventions (one colour
per variant, no pyplot, the report's style, saved by the page).
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.benchmark.contrasts import (
    FAMILY,
    REFERENCE,
    contrasts,
    is_event,
    sentences,
    summaries,
    tiers,
)
from analysis.report import figures
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections.shared import accuracy_axis
from common.statistics import mean_interval

PANELS_PER_ROW = 3


def _grid(panels: int) -> tuple:
    columns = min(PANELS_PER_ROW, max(1, panels))
    fig, axes = figures.figure(math.ceil(max(1, panels) / columns), columns)
    for ax in axes.flat[panels:]:
        ax.set_visible(False)
    return fig, axes


def _forest_panel(ax, cell: pd.DataFrame, colours: dict) -> None:
    """One (task, metric) cell: a row per variant, its difference from dense and interval; the detectable band."""
    metric = cell["metric"].iloc[0]
    detectable = cell["cell detectable difference"].iloc[0]
    if not math.isnan(detectable):
        ax.axvspan(-detectable, detectable, color="0.85", label="detectable difference (80% power)")
    ax.axvline(0, color="0.3", linewidth=1)
    for position, (_, row) in enumerate(cell.iterrows()):
        low, high = row["low"], row["high"]
        error = None if math.isnan(low) else [[row["difference"] - low], [high - row["difference"]]]
        ax.errorbar(row["difference"], position, xerr=error, fmt="o", color=colours[row["variant"]], capsize=3)
    ax.set_yticks(range(len(cell)), list(cell["variant"]))
    ax.invert_yaxis()
    unit = "steps" if is_event(metric) else "fraction"
    ax.set_xlabel(f"variant minus {REFERENCE} ({unit})")
    quiet = cell["not discriminating"].iloc[0]
    ax.set_title(metric + (" (not discriminating)" if quiet else ""), color="0.5" if quiet else "black")


def forest_figures(table: pd.DataFrame, variants: list[str]) -> list[Figure]:
    """A figure per task: a panel per metric, each variant's difference from dense with its 95% interval (a bare
    point where the differences are identical), the cell's detectable difference as a grey band around zero."""
    colours, order = figures.palette(variants), {name: index for index, name in enumerate(variants)}
    found = []
    for index, (task, rows) in enumerate(table.groupby("task", sort=False)):
        cells = list(rows.groupby("metric", sort=False))
        fig, axes = _grid(len(cells))
        for ax, (_, cell) in zip(axes.flat, cells, strict=False):
            _forest_panel(ax, cell.sort_values("variant", key=lambda names: names.map(order), kind="stable"),
                          colours)
        axes.flat[0].legend(loc="best")
        figures.suptitle(fig, f"{task}: each variant's difference from {REFERENCE}, paired by seed")
        found.append(Figure(f"contrasts-{index}", f"{task}: each variant minus {REFERENCE} in each metric, mean over "
                            "the seeds both ran with its 95% interval (paired t, n - 1 degrees of freedom); the grey "
                            "band is the smallest difference the cell could detect with 80% power at the Holm level",
                            fig, rows))
    return found


def curve_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (task, variant, step): the seeds evaluated there, the mean validation accuracy and its 95% interval."""
    rows = []
    for (task, variant, step), group in curves.groupby(["task", "variant", "step"], sort=False):
        values = group["validation accuracy"].tolist()
        interval = mean_interval(values) if len(values) > 1 else None
        rows.append({"task": task, "variant": variant, "step": step, "seeds": len(values),
                     "mean": interval.mean if interval else values[0],
                     "low": interval.low if interval else math.nan, "high": interval.high if interval else math.nan})
    return pd.DataFrame(rows, columns=["task", "variant", "step", "seeds", "mean", "low", "high"])


def curve_figure(curves: pd.DataFrame, variants: list[str]) -> Figure:
    """The learning curves, a panel per task: a line per variant (the mean over seeds) and its interval as a band."""
    summary = curve_summary(curves)
    colours = figures.palette(variants)
    task_names = list(dict.fromkeys(summary["task"]))
    fig, axes = _grid(len(task_names))
    for ax, task in zip(axes.flat, task_names, strict=False):
        for variant, line in summary[summary["task"] == task].groupby("variant", sort=False):
            line = line.sort_values("step")
            ax.plot(line["step"], line["mean"], color=colours[variant], label=variant)
            ax.fill_between(line["step"], line["low"], line["high"], color=colours[variant], alpha=0.15, linewidth=0)
        accuracy_axis(ax)
        ax.set_ylabel("validation accuracy (fraction correct)")
        ax.set_xlabel("training step")
        ax.set_title(f"{task}: learning curves")
    axes.flat[0].legend(loc="lower right")
    return Figure("learning-curves", "Learning curves: validation accuracy at each evaluation, mean over the "
                  "confirmation seeds (line) and the 95% interval of that mean (band)", fig, summary)


def contrast_blocks(frame: pd.DataFrame, curves: pd.DataFrame, variants: list[str]) -> list[Block]:
    """The page's contrast section from the tidy frame and the curves (`analysis.benchmark.contrasts.tidy`,
    `curve_frame`): the figures, a sentence per (task, metric), the contrasts, the tiers and the summaries per cell."""
    table = contrasts(frame)
    with figures.style():
        drawn = [*([] if table.empty else forest_figures(table, variants)),
                 *([] if curves.empty else [curve_figure(curves, variants)])]
    if table.empty:  # dense alone, or no confirmation run of another variant settled yet
        return [*drawn, Text(f"No contrast yet: no variant besides {REFERENCE} has a confirmation run that settled, "
                             f"so there is nothing to set against {REFERENCE}.")]
    blocks: list[Block] = [*drawn, Text(FAMILY)]
    blocks += [Text(line) for line in sentences(table)]
    shown = table[["task", "metric", "variant", "seeds paired", "difference", "low", "high", "Holm-adjusted p",
                   "told apart", "detectable difference"]]
    return [*blocks,
            Table("contrasts", f"Each variant minus {REFERENCE} per task and metric: the mean paired difference, its "
                  "95% interval, the Holm-adjusted p over the metric's family, and the smallest difference the "
                  "contrast could detect; steps are restricted values, a seed that never reached the level counting "
                  "the budget", shown, data=table),
            Table("tiers", "Tiers per task and metric: the best row and every row not told apart from it share a "
                  "tier; the rule repeats on the rows left", tiers(frame)),
            Table("cell-summaries", "Each cell's mean over all its seeds (steps: the restricted mean, a seed that "
                  "never reached the level counting the budget), its 95% interval, and for steps the seeds that "
                  "reached the level and the Kaplan-Meier median", summaries(frame))]
