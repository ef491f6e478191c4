"""The report's learning curves: training loss and test accuracy against steps and wall time."""

from __future__ import annotations

import pandas as pd

from analysis.report import figures
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section


@section("curves", "Learning curves")
def curves(context: Context) -> list[Block]:
    metrics, unreadable = context.metrics(context.ordinary)
    blocks: list[Block] = [Text(
        "Training loss (mean over each logging interval) and test accuracy against optimiser steps and against "
        "wall time, averaged over seeds (band: ± 1 standard deviation; wall time: the mean over seeds at each step)."
    )]
    if metrics.empty:
        blocks.append(Text("No run has a metrics stream (metrics.jsonl) yet."))
    for index, (task, frame) in enumerate(metrics.groupby("task", sort=True)):
        keys = ["variant_name", "setting", "label", "step"]
        train = (frame[frame["kind"] == "train"].groupby(keys, as_index=False)
                 .agg(loss_mean=("loss", "mean"), loss_std=("loss", "std"), wall_seconds=("wall_seconds", "mean"),
                      seeds=("run_id", "nunique")).assign(kind="train"))
        evaluated = (frame[frame["kind"] == "eval"].groupby(keys, as_index=False)
                     .agg(test_accuracy_mean=("test_accuracy", "mean"), test_accuracy_std=("test_accuracy", "std"),
                          wall_seconds=("wall_seconds", "mean"), seeds=("run_id", "nunique")).assign(kind="eval"))
        fig, axes = figures.figure(2, 2)
        for column, x, xlabel in ((0, "step", "training step"), (1, "wall_seconds", "wall time (s)")):
            shared.draw_lines(context, axes[column, 0], train, x, "loss_mean", "loss_std", marker=None)
            axes[column, 0].set_ylabel("training loss (cross-entropy, nats)")
            axes[column, 0].set_title(f"{task}: training loss by {xlabel.split(' (')[0]}")
            shared.draw_lines(context, axes[column, 1], evaluated, x, "test_accuracy_mean", "test_accuracy_std",
                        bounded=True)
            shared.accuracy_axis(axes[column, 1])
            axes[column, 1].set_title(f"{task}: test accuracy by {xlabel.split(' (')[0]}")
            for ax in axes[column]:
                ax.set_xlabel(xlabel)
        axes[0, 1].legend(loc="best")
        data = pd.concat([train, evaluated], ignore_index=True)
        blocks.append(Figure(f"curves-{index:02d}-{shared.slug(task)}", f"{task}: learning curves, mean over seeds",
                             fig, data))
    blocks += shared.problems_table("unreadable-metrics", "Runs whose metrics could not be read", unreadable)
    return blocks
