"""The benchmark's axes beside its leaderboard: the page sections of the confirmation stage (distance, length,
speed of learning, read from the confirmation runs' figures in the storage) and of the capacity stage
(`analysis.benchmark.stages` finds them by the stages' page keys):

- distance: the test accuracy per dependency-distance bucket of each task (how many positions back the
  evidence lies), mean over the seeds, a line per variant;
- length: the test accuracy at each evaluation length of a task that evaluates at lengths beyond its
  training length (1x, 2x, 4x where the task's profile does, e.g. induction), mean over the seeds, in a table and
  in a figure with each mean's 95% interval;
- speed of learning: the steps and the wall time a confirmation run takes to reach the benchmark's target
  validation accuracy (`--target-accuracy`, where the run stopped); without a target, to first reach 90% of the
  task's best accuracy (the highest mean test accuracy of any cell on that task) on its learning curve (the
  validation accuracy at each evaluation; the test accuracy in a record from before interim evaluations);
  averaged over the seeds that reach it;
- capacity: the test accuracy of each cell at other model widths and, on a task that declares a capacity
  option (MQAR's key-value pairs, the tokens selective copying copies, Pathfinder's distractor paths), at
  other values of it: the capacity stage's runs (`experiments.benchmark.capacity`), the cell's own size being
  its confirmation runs with the same seeds; a line per variant against width and against that count, as in
  Zoology's accuracy against d_model for MQAR, so that a curve, not one ceiling, tells variants apart.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Callable

import pandas as pd
import seaborn as sns

from analysis.report import figures
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections.shared import accuracy_axis
from experiments import tasks
from experiments.benchmark.capacity import WIDTH, Point
from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import COMPLETED, CellState, Ledger
from experiments.benchmark.stages import Stage

SPEED_FRACTION = 0.9


def _confirmed(state: CellState) -> list[dict]:
    """The figures of a cell's completed confirmation runs."""
    return [job.result for job in state.confirmation if job is not None and job.state == COMPLETED]


def length_seeds(ledger: Ledger) -> pd.DataFrame:
    """One row per (variant, task, seed, evaluation length) of the tasks evaluated at several lengths: the length as
    a multiple of the training length, and that seed's test accuracy there (a run that has none is left out)."""
    rows = []
    for state in ledger.cells:
        for job in state.confirmation:
            if job is None or job.state != COMPLETED:
                continue
            lengths = job.result.get("accuracy_by_length", [])
            rows += [{"variant": state.cell.variant, "task": state.cell.task, "seed": job.job.seed,
                      "length": entry["length"], "x training length": entry["length"] / lengths[0]["length"],
                      "test accuracy": entry["accuracy"]} for entry in lengths if entry["accuracy"] is not None]
    return pd.DataFrame(rows, columns=["variant", "task", "seed", "length", "x training length", "test accuracy"])


def length_table(ledger: Ledger) -> pd.DataFrame:
    """One row per (variant, task, evaluation length): the mean test accuracy there over the seeds that have it."""
    return (length_seeds(ledger).groupby(["variant", "task", "length", "x training length"], sort=False)
            ["test accuracy"].agg(["mean", "count"]).reset_index()
            .rename(columns={"mean": "test accuracy", "count": "seeds"}))


DISTANCE_COLUMNS = ["variant", "task", "lo", "hi", "distance", "test accuracy", "seeds"]


def distance_table(ledger: Ledger) -> pd.DataFrame:
    """One row per (variant, task, dependency-distance bucket lo..hi): the bucket's middle and the mean test
    accuracy there over the confirmation seeds that have it."""
    rows = []
    for state in ledger.cells:
        accuracies: dict[tuple[int, int], list[float]] = {}
        for result in _confirmed(state):
            for bucket in result.get("accuracy_by_distance", []):
                if bucket.get("accuracy") is not None:
                    accuracies.setdefault((bucket["lo"], bucket["hi"]), []).append(bucket["accuracy"])
        rows += [{"variant": state.cell.variant, "task": state.cell.task, "lo": lo, "hi": hi, "distance": (lo + hi) / 2,
                  "test accuracy": statistics.fmean(values), "seeds": len(values)}
                 for (lo, hi), values in sorted(accuracies.items())]
    return pd.DataFrame(rows, columns=DISTANCE_COLUMNS)


def distance_blocks(ledger: Ledger) -> list[Block]:
    """Accuracy against dependency distance: one panel per task, a line per variant."""
    table = distance_table(ledger)
    if table.empty:
        return [Text("Distance: no confirmation run reports its accuracy by dependency distance yet.")]
    return [_per_task_figure(table, ledger.benchmark, "distance", "distance", log_x=False,
                             labels=lambda rows: ("dependency distance (tokens back; middle of each bucket)",
                                                  "dependency distance"),
                             caption="Distance: test accuracy per dependency-distance bucket (how many positions "
                                     "back the evidence lies), one line per variant, mean over the confirmation "
                                     "seeds")]


def _first_reach(curve: list[list[float]], threshold: float) -> tuple[float, float] | None:
    """(step, wall seconds) of the first evaluation at or above `threshold`, or None."""
    return next(((step, seconds) for step, seconds, accuracy in curve if accuracy >= threshold), None)


def _reached(result: dict, threshold: float, target: float | None) -> tuple[float, float] | None:
    """(step, wall seconds) where a run reached the benchmark's target on its validation set (where it stopped),
    or without a target where its learning curve first reached `threshold`; None where it did not."""
    if target is not None:
        return None if result.get("target_step") is None else (result["target_step"], result["target_seconds"])
    return _first_reach(result.get("curve", []), threshold)


def speed_table(ledger: Ledger, cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell with confirmation runs: the threshold (the benchmark's target, read on the validation set where
    the runs stopped; without one 90% of the task's best mean test accuracy), how many seeds reach it, and the
    mean steps and wall seconds they take to: without a target over every seed, one that never reaches it counted
    at the end of its budget (so the mean is a lower bound where some do not), with a target over those that do."""
    best, target = cells.groupby("task")["test mean"].max(), ledger.benchmark.target
    rows = []
    for state in ledger.cells:
        results = _confirmed(state)
        if not results or pd.isna(best.get(state.cell.task)):
            continue
        threshold = target if target is not None else SPEED_FRACTION * best[state.cell.task]
        points = [_reached(result, threshold, target) for result in results]
        count = sum(point is not None for point in points)
        if target is None:  # every run trained its whole budget: one that never reached it counts at its end
            points = [point or (result["steps"], result["wall_seconds"]) for point, result in
                      zip(points, results, strict=True)]
        reached = [point for point in points if point is not None]
        rows.append({"variant": state.cell.variant, "task": state.cell.task, "task best": best[state.cell.task],
                     "threshold": threshold, "seeds reaching": f"{count} of {len(results)}",
                     "steps to threshold": statistics.fmean(step for step, _ in reached) if reached else math.nan,
                     "wall seconds to threshold": (statistics.fmean(seconds for _, seconds in reached)
                                                   if reached else math.nan)})
    return pd.DataFrame(rows, columns=["variant", "task", "task best", "threshold", "seeds reaching",
                                       "steps to threshold", "wall seconds to threshold"])


CAPACITY_COLUMNS = ["variant", "task", "axis", "multiple", "value", "test accuracy", "seeds", "parameters"]
PANELS_PER_ROW = 3


def _point_jobs(state: CellState, point: Point, seeds: set[int], stage: str) -> list:
    """The completed jobs of a cell's capacity point: for the cell's own size, its confirmation runs with the
    capacity seeds; else the point's jobs of the capacity stage (`stage`)."""
    if point.own:
        jobs = [job for job in state.confirmation if job is not None and job.job.seed in seeds]
    else:
        jobs = [job for job in state.of(stage)
                if job is not None and (job.job.axis, job.job.value) == (point.axis, point.value)]
    return [job for job in jobs if job.state == COMPLETED]


def capacity_seeds(ledger: Ledger, stage: str) -> pd.DataFrame:
    """One row per completed run of each capacity point: the point (`capacity_table`'s columns), the seed and its
    test accuracy, which the figures draw with their interval over the seeds."""
    seeds = set(ledger.benchmark.capacity_seed_list)
    rows = [{"variant": state.cell.variant, "task": state.cell.task, "axis": point.axis, "multiple": point.multiple,
             "value": point.value, "seed": job.job.seed, "test accuracy": job.result["test_accuracy"]}
            for state in ledger.cells for point in state.cell.capacity
            for job in _point_jobs(state, point, seeds, stage)]
    return pd.DataFrame(rows, columns=["variant", "task", "axis", "multiple", "value", "seed", "test accuracy"])


def capacity_table(ledger: Ledger, stage: str) -> pd.DataFrame:
    """One row per capacity point of each cell, its own size included: the axis (width, or the task's capacity
    option), the multiple of the cell's own value, the value, and the mean test accuracy and the parameters
    over the capacity seeds that completed there (none yet, or skipped: no accuracy)."""
    seeds = set(ledger.benchmark.capacity_seed_list)
    rows = []
    for state in ledger.cells:
        for point in state.cell.capacity:
            results = [job.result for job in _point_jobs(state, point, seeds, stage)]
            rows.append({"variant": state.cell.variant, "task": state.cell.task, "axis": point.axis,
                         "multiple": point.multiple, "value": point.value,
                         "test accuracy": (statistics.fmean(result["test_accuracy"] for result in results)
                                           if results else math.nan),
                         "seeds": len(results), "parameters": results[0].get("parameters") if results else None})
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


def _capacity_shown(table: pd.DataFrame) -> pd.DataFrame:
    """Rows (task, variant) in the benchmark's order; a column per axis and multiple ('width x2'; 'count x2' for
    the task's capacity option), and the sizes those multiples are on each row."""
    rows, labels = [], {}
    for (task, variant), cell in table.groupby(["task", "variant"], sort=False):
        row, sizes = {"task": task, "variant": variant}, []
        for axis, points in cell.sort_values("multiple", kind="stable").groupby("axis", sort=False):
            kind = "width" if axis == WIDTH else "count"
            for multiple, accuracy in zip(points["multiple"], points["test accuracy"], strict=True):
                labels[f"{kind} x{multiple:g}"] = (kind != "width", multiple)
                row[f"{kind} x{multiple:g}"] = accuracy
            sizes.append(f"{axis} {', '.join(map(str, points['value']))}")
        rows.append({**row, "sizes": "; ".join(sizes)})
    return pd.DataFrame(rows, columns=["task", "variant", *sorted(labels, key=labels.__getitem__), "sizes"])


def _per_task_figure(table: pd.DataFrame, benchmark: Benchmark, name: str, x: str, *, log_x: bool,
                     labels: Callable[[pd.DataFrame], tuple[str, str]], caption: str) -> Figure:
    """One panel per task of `table` (a row per seed with a test accuracy): test accuracy against column `x`, a line
    per variant through the means over the seeds, each with its 95% interval (Student's t, n - 1 degrees of freedom;
    none from one seed); `labels(rows)` of a task's rows: its x-axis label, and the name of x in its title."""
    task_names = list(dict.fromkeys(table["task"]))
    columns = min(PANELS_PER_ROW, len(task_names))
    fig, panels = figures.figure(math.ceil(len(task_names) / columns), columns)
    colours = figures.palette(benchmark.variants)
    for index, (ax, task) in enumerate(zip(panels.flat, task_names, strict=False)):
        rows = table[table["task"] == task]
        frame = rows[rows["test accuracy"].notna()]
        if not frame.empty:
            sns.lineplot(data=frame, x=x, y="test accuracy", hue="variant", palette=colours, marker="o",
                         errorbar=figures.mean_interval_bar, err_style="bars", ax=ax, legend=index == 0)
            if log_x and (frame[x] > 0).all():
                figures.log_axes(ax, frame[x], y=False)
        accuracy_axis(ax)
        ax.set_ylabel("test accuracy (fraction correct)")
        xlabel, quantity = labels(rows)
        ax.set_xlabel(xlabel)
        ax.set_title(f"{task}: test accuracy by {quantity}")
    for ax in panels.flat[len(task_names):]:
        ax.set_visible(False)
    return Figure(name, caption, fig, table)


def _capacity_figure(table: pd.DataFrame, benchmark: Benchmark, name: str, what: str) -> Figure:
    """Test accuracy against one capacity axis's value, a panel per task."""
    def labels(rows: pd.DataFrame) -> tuple[str, str]:
        axis = rows["axis"].iloc[0]
        return ("model width (model.dim)", "width") if axis == WIDTH else (f"{axis} (task option)", axis)

    return _per_task_figure(
        table, benchmark, name, "value", log_x=True, labels=labels,
        caption=f"Capacity: test accuracy against {what}, one line per variant, mean over the capacity seeds with "
                "its 95% interval (the cell's own size: its confirmation runs with those seeds)")


def capacity_blocks(ledger: Ledger, stage: Stage, cells: pd.DataFrame) -> list[Block]:
    """The capacity stage's section: its table and figures (accuracy against width; against each task's capacity
    option)."""
    benchmark = ledger.benchmark
    table = capacity_table(ledger, stage.name)
    if table.empty:
        off = not benchmark.capacity_widths and not benchmark.capacity_scales
        return [Text(stage.protocol(benchmark) if off else "Capacity: no cell of this benchmark has a capacity "
                     "point: every cell was skipped, or only --capacity-scales is on and no task here declares a "
                     "capacity option.")]
    blocks: list[Block] = [
        Table("capacity", "Capacity: mean test accuracy over the capacity seeds at each multiple of each cell's model "
              "width and of its task's capacity option ('count'; sizes: the values those multiples are); x1 is the "
              "confirmation runs with the same seeds", _capacity_shown(table), data=table)]
    done = table[table["test accuracy"].notna()]
    runs = capacity_seeds(ledger, stage.name)
    for name, what, rows in (("capacity-width", "model width", runs[runs["axis"] == WIDTH]),
                             ("capacity-count", "each task's capacity option", runs[runs["axis"] != WIDTH])):
        if not rows.empty:
            blocks.append(_capacity_figure(rows, benchmark, name, what))
    if done.empty:
        blocks.append(Text("Capacity: no capacity run has completed yet."))
    if benchmark.capacity_seeds == 1:
        blocks.append(Text("Capacity runs one seed per size: the curves compare variants, and no single point's "
                           "difference is told apart by a spread over seeds (--capacity-seeds adds seeds)."))
    return blocks


ROW_CAPACITY_COLUMNS = ["task", "axis", "value", "variant", "seed", "test accuracy"]


def row_capacity_seeds(ledger: Ledger) -> pd.DataFrame:
    """The capacity axis a benchmark's task rows make: where two rows or more of one task differ in its capacity
    option alone (selective_copy and selective_copy:num_tokens=8), one row per confirmation run of each, with the
    option's value, its seed and its test accuracy, so that every point has its paired seeds and its interval."""
    found = []
    for state in ledger.cells:
        jobs = [job for job in state.confirmation if job is not None and job.state == COMPLETED]
        config = ledger.benchmark.config(jobs[0].job) if jobs else None
        option = None if config is None else tasks.task_class(config.task).capacity_option
        if option is None:
            continue
        rest = json.dumps({key: value for key, value in dataclasses.asdict(config.task_options).items()
                           if key != option}, sort_keys=True, default=str)
        found += [{"task": config.task, "rest": rest, "axis": option, "value": getattr(config.task_options, option),
                   "variant": state.cell.variant, "seed": job.job.seed, "test accuracy": job.result["test_accuracy"]}
                  for job in jobs]
    frame = pd.DataFrame(found, columns=["rest", *ROW_CAPACITY_COLUMNS])
    values = frame.groupby(["task", "rest"])["value"].transform("nunique")
    return frame[values >= 2][ROW_CAPACITY_COLUMNS].reset_index(drop=True)


def row_capacity_blocks(ledger: Ledger) -> list[Block]:
    """The capacity axis of the task rows (`row_capacity_seeds`): a table of the means and a figure with each mean's
    95% interval over the paired seeds; nothing where no task has two such rows."""
    runs = row_capacity_seeds(ledger)
    if runs.empty:
        return []
    table = (runs.groupby(["task", "axis", "value", "variant"], sort=False)["test accuracy"].agg(["mean", "count"])
             .reset_index().rename(columns={"mean": "test accuracy", "count": "seeds"}))
    return [Table("capacity-rows", "Capacity across task rows: mean test accuracy over the confirmation seeds of each "
                  "row of a task that differs from another in the task's capacity option alone", table),
            _per_task_figure(runs, ledger.benchmark, "capacity-rows-seeds", "value", log_x=True,
                             labels=lambda rows: (f"{rows['axis'].iloc[0]} (task option)", rows["axis"].iloc[0]),
                             caption="Capacity across task rows: test accuracy against the task's capacity option, one "
                                     "line per variant, mean over the confirmation seeds with its 95% interval")]


def confirmation_blocks(ledger: Ledger, stage: Stage, cells: pd.DataFrame) -> list[Block]:
    """The confirmation stage's section beside the leaderboard: the distance, length and speed-of-learning tables
    and figures of its runs."""
    lengths = length_table(ledger)
    blocks: list[Block] = distance_blocks(ledger)
    if (lengths["x training length"] > 1).any():
        shown = lengths.assign(column=[f"{task} n={length} ({ratio:g}x)" for task, length, ratio in
                                       zip(lengths["task"], lengths["length"], lengths["x training length"],
                                           strict=True)])
        table = shown.pivot(index="variant", columns="column", values="test accuracy")
        table = table.reindex(index=[name for name in ledger.benchmark.variants if name in table.index],
                              columns=list(dict.fromkeys(shown["column"]))).reset_index()
        blocks.append(Table("length", "Length: mean test accuracy over the confirmation seeds at each evaluation "
                            "length of the tasks evaluated beyond their training length", table, data=lengths))
        runs = length_seeds(ledger)
        beyond = runs[runs["task"].isin(set(lengths.loc[lengths["x training length"] > 1, "task"]))]
        blocks.append(_per_task_figure(
            beyond, ledger.benchmark, "length-seeds", "x training length", log_x=True,
            labels=lambda rows: ("evaluation length (x the training length)", "evaluation length"),
            caption="Length: test accuracy against the evaluation length as a multiple of the training length, one "
                    "line per variant, mean over the confirmation seeds with its 95% interval"))
    else:
        blocks.append(Text("Length: no task of this benchmark evaluates beyond its training length at this profile "
                           "(a task's eval_lengths option adds lengths, with positions that reach them)."))
    target = ledger.benchmark.target
    rule = (f"the target validation accuracy {target:g}, where each run stopped" if target is not None else
            f"{SPEED_FRACTION:.0%} of the task's best mean test accuracy")
    over = ("averaged over the seeds that reach it" if target is not None else "averaged over every seed, one that "
            "never reaches it counted at the end of its budget (the mean is then a lower bound)")
    blocks.append(Table("speed", f"Speed of learning: steps and wall time (evaluations included) to first reach "
                        f"{rule}, at the evaluations of each confirmation run (every train.eval_every steps), {over}",
                        speed_table(ledger, cells)))
    return blocks + row_capacity_blocks(ledger)
