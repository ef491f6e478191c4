"""The report's section on accuracy against dependency distance (with the reach of local and sparse
layouts), against evaluation length, and on each task's extra splits."""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

import variants
from analysis.aggregate import over_seeds
from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section

MAX_REACH_LENGTH = 4096  # receptive fields are computed on layouts up to this length


def _mixer_reach(mixers: list, seq_len: int) -> int | None:
    """How far back the last position sees through the blocks of a baseline whose mixer has a finite reach
    (a convolution: its `reach`, (past, future) positions per block, adds up over blocks); None for one that
    sees the whole past (a recurrence)."""
    if not all(hasattr(mixer, "reach") for mixer in mixers):
        return None
    return min(sum(mixer.reach[0] for mixer in mixers), seq_len - 1)


def _reach(entry: dict[str, Any]) -> int | None:
    """How far back (in tokens) the last position sees every position, through the layers of the variant's
    layouts as the run drew them (each layer's own, any of its heads), or through a convolution baseline's
    receptive field; None for a variant without a layout (it sees everything)."""
    modules, seq_len, causal = entry["modules"], entry["seq_len"], entry["causal"]
    if variants.is_baseline(entry["variant"]):
        return _mixer_reach(modules, seq_len)
    reached = torch.zeros(seq_len, dtype=torch.bool)
    reached[-1] = True
    for attention in reversed(modules):  # the last layer's queries first, back towards the input
        if attention.block_layout is None:
            return None
        allowed = torch.stack([attention.layout(seq_len, seq_len, causal=causal, head=head)
                               for head in range(entry["heads"])]).any(dim=0)  # (query, key): some head attends
        reached |= allowed[reached].any(dim=0)
    by_distance = reached.flip(0)  # index d: the position d tokens before the last
    gaps = (~by_distance).nonzero().flatten()
    return int(gaps[0]) - 1 if len(gaps) else seq_len - 1


def _accuracy_figure(fig, name: str, task: str, against: str, xlabel: str, aggregated: pd.DataFrame) -> Figure:
    """A task's test accuracy curves against `against` (drawn on the figure's one axis), labelled and captioned."""
    ax = fig.axes[0]
    ax.set_xlabel(xlabel)
    shared.accuracy_axis(ax)
    ax.set_title(f"{task}: test accuracy by {against}")
    ax.legend(loc="best")
    return Figure(name, f"{task}: test accuracy against {against}, mean ± sd over seeds", fig, aggregated)


@section("distance", "Accuracy against dependency distance")
def distance(context: Context) -> list[Block]:
    completed = context.completed
    rows = [{"task": run.task, "variant_name": run.variant_name, "setting": run.setting, "label": run.label,
             "run_id": run.run_id, "seed": run.seed, "lo": bucket.get("lo"), "hi": bucket.get("hi"),
             "accuracy": bucket.get("accuracy"), "count": bucket.get("count")}
            for run in completed.itertuples(index=False) for bucket in run.accuracy_by_distance
            if bucket.get("accuracy") is not None]
    blocks: list[Block] = [Text(
        "Test accuracy per dependency-distance bucket (how many positions back the evidence lies), mean over "
        "seeds with a ± 1 standard deviation band, one line per variant (baselines included). Dotted vertical "
        "lines mark the reach of local and sparse variants and of convolutions: the farthest distance up to "
        "which the last position sees every earlier position after all layers (computed from the variant's "
        "layout or the convolution's receptive field, not typed in)."
    )]
    if not rows:
        blocks.append(Text("No completed run reports accuracy by dependency distance."))
    frame = pd.DataFrame(rows)
    for index, (task, task_frame) in enumerate(frame.groupby("task", sort=True) if rows else []):
        aggregated = over_seeds(task_frame, ["variant_name", "setting", "label", "lo", "hi"], ["accuracy"], spread=True)
        aggregated["distance"] = (aggregated["lo"] + aggregated["hi"]) / 2
        fig, axes = figures.figure()
        ax = axes[0, 0]
        shared.draw_lines(context, ax, aggregated, "distance", "accuracy_mean", "accuracy_std", bounded=True)
        chance = completed.loc[completed["task"] == task, "chance_accuracy"].dropna()
        if len(chance):
            ax.axhline(float(chance.iloc[0]), color="grey", linestyle="--", linewidth=1,
                       label=f"chance {float(chance.iloc[0]):.3g}")
        reaches = []
        for entry in shared.layout_variants(completed[completed["task"] == task], baselines=True):
            if entry["seq_len"] > MAX_REACH_LENGTH:
                continue
            reach = _reach(entry)
            if reach is not None:
                reaches.append({"task": task, "variant_name": entry["variant_name"], "depth": entry["depth"],
                                "seq_len": entry["seq_len"], "reach": reach})
                ax.axvline(reach, color=context.colour(entry["variant_name"]), linestyle=":", linewidth=2,
                           label=f"{entry['variant_name']} reach {reach}")
        buckets = aggregated.drop_duplicates(["lo", "hi"]).sort_values("lo")
        if len(buckets) <= 12:
            ax.set_xticks(buckets["distance"], [f"{lo}-{hi}" for lo, hi in zip(buckets["lo"], buckets["hi"],
                                                                              strict=True)], rotation=30)
        blocks.append(_accuracy_figure(fig, f"distance-{index:02d}-{shared.slug(task)}", task, "dependency distance",
                                       "dependency distance (tokens back; bucket range)", aggregated))
        if reaches:
            blocks.append(Table(f"reach-{index:02d}-{shared.slug(task)}", f"{task}: reach of local and sparse variants "
                                "and convolutions (tokens the last position sees without a gap, after all layers)",
                                pd.DataFrame(reaches)))
    blocks += _lengths(context, completed)
    blocks += _splits(completed)
    return blocks


def _lengths(context: Context, completed: pd.DataFrame) -> list[Block]:
    rows = [{"task": run.task, "variant_name": run.variant_name, "setting": run.setting, "label": run.label,
             "run_id": run.run_id, "length": entry.get("length"), "accuracy": entry.get("accuracy")}
            for run in completed.itertuples(index=False)
            for entry in run.accuracy_by_length if entry.get("accuracy") is not None]
    if not rows:
        return []
    blocks: list[Block] = []
    frame = pd.DataFrame(rows)
    for index, (task, task_frame) in enumerate(frame.groupby("task", sort=True)):
        aggregated = over_seeds(task_frame, ["variant_name", "setting", "label", "length"], ["accuracy"], spread=True)
        fig, axes = figures.figure()
        ax = axes[0, 0]
        shared.draw_lines(context, ax, aggregated, "length", "accuracy_mean", "accuracy_std", bounded=True)
        for length in sorted(set(completed.loc[completed["task"] == task, "task.seq_len"].dropna())):
            ax.axvline(length, color="black", linestyle=":", linewidth=1, label=f"trained length {int(length)}")
        figures.log_axes(ax, aggregated["length"], y=False)
        blocks.append(_accuracy_figure(fig, f"length-{index:02d}-{shared.slug(task)}", task, "evaluation length",
                                       "evaluation sequence length (tokens, log scale)", aggregated))
    return blocks


def _splits(completed: pd.DataFrame) -> list[Block]:
    rows = [{"task": run.task, "variant": run.label, "split": split, "accuracy": accuracy}
            for run in completed.itertuples(index=False) for split, accuracy in run.accuracy_by_split.items()
            if accuracy is not None]
    if not rows:
        return []
    table = over_seeds(pd.DataFrame(rows), ["task", "variant", "split"], ["accuracy"], spread=True)
    return [Table("splits", "Test accuracy on each task's extra held-out splits, over seeds", table)]
