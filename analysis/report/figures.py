"""The report's figure conventions: one colour per variant across every figure, one style, one size scale.

Figures are `matplotlib.figure.Figure` objects made without pyplot (no GUI backend, nothing global to
close; `savefig` renders with Agg); seaborn draws on their axes. Text from runs is drawn literally
(`text.parse_math` off), so a name with `$` in it is a name, not a formula.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterable, Iterator

import numpy as np
import seaborn as sns
from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, NullFormatter

from common.statistics import mean_interval

PANEL_INCHES = (6.4, 4.0)  # one plot: about 640 x 400 pixels at the report's 100 dpi
DPI = 100


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The report's look: seaborn's whitegrid at notebook sizes, literal text, the Agg renderer."""
    params = {**sns.axes_style("whitegrid"), **sns.plotting_context("notebook"), "text.parse_math": False,
              "figure.dpi": DPI, "savefig.dpi": DPI, "legend.fontsize": 9, "axes.titlesize": 12}
    with rc_context(params):
        yield


def mean_interval_bar(values: Iterable[float]) -> tuple[float, float]:
    """seaborn's `errorbar` of a mean over seeds: its 95% interval (Student's t, `common.statistics.mean_interval`);
    from one seed, no bar (the value itself at both ends)."""
    values = list(values)
    if len(values) < 2:
        return values[0], values[0]
    interval = mean_interval(values)
    return interval.low, interval.high


def palette(names: Iterable[str]) -> dict[str, tuple[float, float, float]]:
    """Variant name -> colour, the same in every figure of a report: names in sorted order get tab10's
    colours (a wider evenly spaced palette beyond ten)."""
    ordered = sorted(set(names))
    colours = sns.color_palette("tab10" if len(ordered) <= 10 else "husl", len(ordered))
    return dict(zip(ordered, colours, strict=True))


def figure(rows: int = 1, columns: int = 1, *, width: float | None = None,
           height: float | None = None) -> tuple[Figure, np.ndarray]:
    """A figure of rows x columns panels (axes returned as a 2-D array), with constrained layout."""
    fig = Figure(figsize=(width or PANEL_INCHES[0] * columns, height or PANEL_INCHES[1] * rows),
                 layout="constrained")
    axes = np.asarray(fig.subplots(rows, columns, squeeze=False))
    return fig, axes


def heatmap(ax, matrix: np.ndarray, rows: list[str], columns: list[str], *, every: int = 1, **options) -> None:
    """seaborn's heat map (as the tutorials draw attention) with every `every`-th row and column labelled.

    Labels are set after seaborn draws: its check for overlapping labels would otherwise render the
    whole figure once per heat map."""
    sns.heatmap(matrix, ax=ax, xticklabels=False, yticklabels=False, **options)
    ax.set_xticks(np.arange(0, len(columns), every) + 0.5, columns[::every], rotation=90)
    ax.set_yticks(np.arange(0, len(rows), every) + 0.5, rows[::every], rotation=0)


def log_axes(ax, lengths: Iterable[int], *, y: bool = True) -> None:
    """x on a log2 scale ticked at the measured lengths; y (when asked) on a log10 scale. Tick labels are
    plain numbers (the report draws text literally, without mathtext)."""
    ticks = sorted(set(int(length) for length in lengths))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [str(tick) for tick in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    if y:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def suptitle(fig: Figure, text: str) -> None:
    """A figure title wrapped to the figure's width (about 9 characters per inch at the report's sizes)."""
    fig.suptitle(textwrap.fill(text, max(30, int(fig.get_figwidth() * 9))))
