"""What several report sections share: number and name formatting, the problems table, lines per
variant, the accuracy axis, and the layouts of the runs' variants."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

import variants
from analysis.report.context import Context
from analysis.report.render import Block, Table
from analysis.runs import run_parts
from experiments.run.records import RecordError


def fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def count(number: int, noun: str, plural: str | None = None) -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def slug(text: str) -> str:
    """A file-name-safe form of a name from a run; callers prefix an index, so slugs need not be unique."""
    cleaned = "".join(character if character.isascii() and (character.isalnum() or character in "-_.") else "-"
                      for character in str(text))
    return cleaned.strip("-.")[:40] or "x"


def problems_table(name: str, caption: str, problems: list[dict[str, str]]) -> list[Block]:
    if not problems:
        return []
    return [Table(name, caption, pd.DataFrame(problems, columns=["run", "reason"]))]


def layout_variants(runs: pd.DataFrame, *, baselines: bool = False) -> list[dict[str, Any]]:
    """One entry per variant_name among `runs` (first run of each) with what drawing its layout needs: `modules`,
    each block's attention module (or a baseline's token mixer) as the run built them (`analysis.runs.run_parts`:
    the run's seed draws a random layout, BigBird's, and the task's longest sequence sizes Linformer's
    projections), and the run's sizes; with `baselines`, the baselines' runs too, else attention variants only."""
    entries = []
    if not baselines:
        runs = runs[~runs["variant"].map(variants.is_baseline).astype(bool)]  # a baseline has no attention layout
    for name, group in runs.groupby("variant_name", sort=True):
        try:
            parts = run_parts(group.iloc[0])
        except (RecordError, KeyError, TypeError, ValueError):
            continue
        model = parts.config.model
        entries.append({"variant_name": name, "variant": parts.config.variant,
                        "modules": [block.attn if block.mixer is None else block.mixer for block in parts.model.blocks],
                        "heads": model.heads, "depth": model.depth, "causal": model.causal,
                        "seq_len": parts.task.seq_len, "seed": parts.config.seed})
    return entries


def draw_lines(context: Context, ax, frame: pd.DataFrame, x: str, y: str, spread: str | None = None,
                marker: str | None = "o", bounded: bool = False) -> None:
    """One line per label: colour by variant, line style by setting, a band of +- `spread` where known
    (clipped to [0, 1] when `bounded`, as accuracies are)."""
    styles = context.linestyles(frame)
    for (name, setting, label), group in frame.groupby(["variant_name", "setting", "label"], sort=True):
        group = group.sort_values(x)
        colour = context.colour(name)
        ax.plot(group[x], group[y], color=colour, linestyle=styles[setting], marker=marker, markersize=4,
                label=label)
        if spread is not None and group[spread].notna().any():
            low, high = group[y] - group[spread].fillna(0), group[y] + group[spread].fillna(0)
            if bounded:
                low, high = low.clip(0, 1), high.clip(0, 1)
            ax.fill_between(group[x], low, high, color=colour, alpha=0.15, linewidth=0)


def accuracy_axis(ax) -> None:
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("test accuracy (fraction correct)")


def mean_std_text(mean: float, std: float, seeds: int) -> str:
    """'mean ± sample standard deviation (n=seeds)'; the spread from two seeds on."""
    spread = f" ± {std:.3f}" if seeds > 1 else ""
    return f"{mean:.3f}{spread} (n={seeds})"


def confirmation(runs: pd.DataFrame, study: str) -> pd.Series:
    """The test accuracies of a study's completed confirmation runs (tagged with the study and confirm)."""
    confirmed = runs[(runs["study"] == study) & runs["confirm"].eq(True) & (runs["status"] == "completed")]
    return confirmed["test_accuracy"].dropna().astype(float)


def best_trials(context: Context) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per study: trials per state, the best trial, its selection value (the objective the sweep maximised)
    beside the test accuracy of its run (the test accuracy of the run its `run_id` attribute names), its
    settings, and the test accuracy of the study's confirmation runs. Returns (shown, data): the text the
    report shows, and the numbers its CSV holds."""
    test_accuracy = dict(zip(context.runs["run_id"], context.runs["test_accuracy"], strict=True))
    rows = []
    for study in context.studies:
        best = study.best()
        run_id = best.user_attrs.get("run_id") if best else None
        confirmed = confirmation(context.runs, study.name)
        rows.append({
            "study": study.name, "variant": study.definition.get("variant"), "task": study.definition.get("task"),
            **{f"{state} trials": number for state, number in study.counts().items()},
            "best trial": best.number if best else None,
            "selection value (objective)": best.value if best else None,
            "test accuracy (its run's)": test_accuracy.get(run_id),
            "run": run_id,
            "best settings": " ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                                      for name, value in (best.params.items() if best else [])),
            "confirmation mean": confirmed.mean() if len(confirmed) else math.nan,
            "confirmation std": confirmed.std(ddof=1) if len(confirmed) > 1 else math.nan,
            "confirmation seeds": len(confirmed),
        })
    data = pd.DataFrame(rows)
    shown = data.drop(columns=["confirmation mean", "confirmation std", "confirmation seeds"]).assign(**{
        "confirmation runs' test accuracy": [
            mean_std_text(row["confirmation mean"], row["confirmation std"], row["confirmation seeds"])
            if row["confirmation seeds"] else "none" for _, row in data.iterrows()]})
    return shown, data
