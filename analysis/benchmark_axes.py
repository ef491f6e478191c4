"""The benchmark's axes beside its leaderboard, read from the confirmation runs' figures in the storage:

- length: the test accuracy at each evaluation length of a task that evaluates at lengths beyond its
  training length (1x, 2x, 4x where the task's profile does, e.g. induction), mean over the seeds;
- speed of learning: the steps and the wall time a confirmation run takes to first reach 90% of the task's
  best accuracy (the highest mean test accuracy of any cell on that task), from its learning curve (the
  test accuracy at each evaluation), averaged over the seeds that reach it.

Capacity (accuracy against model width, and against the number of key-value pairs or distractors) needs
runs of its own at other sizes; the benchmark does not train them.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

from analysis.render import Block, Table, Text
from experiments.benchmark import CellState, Ledger
from experiments.benchmark.ledger import COMPLETED

SPEED_FRACTION = 0.9


def _confirmed(state: CellState) -> list[dict]:
    """The figures of a cell's completed confirmation runs."""
    return [job.result for job in state.confirmation if job is not None and job.state == COMPLETED]


def length_table(ledger: Ledger) -> pd.DataFrame:
    """One row per (variant, task, evaluation length) of the tasks evaluated at several lengths: the length as a
    multiple of the training length, and the mean test accuracy there over the seeds that have it."""
    rows = []
    for state in ledger.cells:
        results = _confirmed(state)
        lengths = [entry["length"] for entry in (results[0].get("accuracy_by_length", []) if results else [])]
        for length in lengths:
            accuracies = [entry["accuracy"] for result in results for entry in result.get("accuracy_by_length", [])
                          if entry["length"] == length and entry["accuracy"] is not None]
            rows.append({"variant": state.cell.variant, "task": state.cell.task, "length": length,
                         "x training length": length / lengths[0],
                         "test accuracy": statistics.fmean(accuracies) if accuracies else math.nan,
                         "seeds": len(accuracies)})
    return pd.DataFrame(rows, columns=["variant", "task", "length", "x training length", "test accuracy", "seeds"])


def _first_reach(curve: list[list[float]], threshold: float) -> tuple[float, float] | None:
    """(step, wall seconds) of the first evaluation at or above `threshold`, or None."""
    return next(((step, seconds) for step, seconds, accuracy in curve if accuracy >= threshold), None)


def speed_table(ledger: Ledger, cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell with confirmation runs: the task's best accuracy and the threshold (90% of it), how many seeds
    reach it, and the mean steps and wall seconds they take to."""
    best = cells.groupby("task")["test mean"].max()
    rows = []
    for state in ledger.cells:
        results = _confirmed(state)
        if not results or pd.isna(best.get(state.cell.task)):
            continue
        threshold = SPEED_FRACTION * best[state.cell.task]
        reached = [point for point in (_first_reach(result.get("curve", []), threshold) for result in results)
                   if point is not None]
        rows.append({"variant": state.cell.variant, "task": state.cell.task, "task best": best[state.cell.task],
                     "threshold": threshold, "seeds reaching": f"{len(reached)} of {len(results)}",
                     "steps to threshold": statistics.fmean(step for step, _ in reached) if reached else math.nan,
                     "wall seconds to threshold": (statistics.fmean(seconds for _, seconds in reached)
                                                   if reached else math.nan)})
    return pd.DataFrame(rows, columns=["variant", "task", "task best", "threshold", "seeds reaching",
                                       "steps to threshold", "wall seconds to threshold"])


def axes(ledger: Ledger, cells: pd.DataFrame) -> list[Block]:
    """The length and speed-of-learning tables, and what the capacity axis would need."""
    lengths = length_table(ledger)
    blocks: list[Block] = []
    if (lengths["x training length"] > 1).any():
        shown = lengths.assign(column=[f"{task} n={length} ({ratio:g}x)" for task, length, ratio in
                                       zip(lengths["task"], lengths["length"], lengths["x training length"],
                                           strict=True)])
        table = shown.pivot(index="variant", columns="column", values="test accuracy")
        table = table.reindex(index=[name for name in ledger.benchmark.variants if name in table.index],
                              columns=list(dict.fromkeys(shown["column"]))).reset_index()
        blocks.append(Table("length", "Length: mean test accuracy over the confirmation seeds at each evaluation "
                            "length of the tasks evaluated beyond their training length", table, data=lengths))
    else:
        blocks.append(Text("Length: no task of this benchmark evaluates beyond its training length at this profile "
                           "(a task's eval_lengths option adds lengths, with positions that reach them)."))
    blocks.append(Table("speed", f"Speed of learning: steps and wall time (evaluations included) to first reach "
                        f"{SPEED_FRACTION:.0%} of the task's best mean test accuracy, at the evaluations of each "
                        "confirmation run (every train.eval_every steps), averaged over the seeds that reach it",
                        speed_table(ledger, cells)))
    blocks.append(Text("Capacity (accuracy against model width, and against the number of key-value pairs or "
                       "distractors) is not measured: it needs runs at other sizes, which the benchmark does not "
                       "train."))
    return blocks
