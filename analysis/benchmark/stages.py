"""The page section of each stage of the benchmark (`experiments.benchmark.stages`), found by the key the stage
names (`Stage.page`): the page (`analysis.benchmark.page`) shows, after its leaderboard, one section per stage of the
benchmark, in the stages' order, made by the function its key finds in `SECTIONS`. A new stage reuses a key
(`seeds` shows any stage's runs per cell, over their seeds) or adds its function here.

- tuning: each cell's validation accuracy at each multiple of the grid and the learning rate chosen, and the
  cells whose choice lies at an edge of the grid, where a better one may lie beyond it;
- confirmation: what the confirmation runs show beside the leaderboard: accuracy by dependency distance and by
  length, and the speed of learning (`analysis.benchmark.axes`);
- capacity: accuracy against model width and task size (`analysis.benchmark.axes`);
- seeds: the test accuracy of the stage's runs per cell, mean and 95% interval over their seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import pandas as pd

from analysis.benchmark.axes import capacity_blocks, confirmation_blocks
from analysis.report.render import Block, Section, Table, Text
from common.statistics import mean_interval, wilson
from experiments.benchmark.ledger import COMPLETED, SETTLED, CellState, JobState, Ledger, mean_validation
from experiments.benchmark.stages import CONFIRM, Stage
from experiments.run.config import RunConfig


def chance_of(state: CellState) -> float:
    """The chance accuracy of a cell's task, as its runs recorded it (NaN before any run has)."""
    return next((job.result["chance_accuracy"] for job in state.jobs
                 if job.result and job.result.get("chance_accuracy") is not None), math.nan)


def seed_scores(jobs: list[JobState | None], chance: float) -> dict[int, float]:
    """The settled ones of `jobs` by their seed number: the test accuracy of each, or `chance` where its run diverged
    or failed (what the leaderboard's mean and the verdicts' pairing count)."""
    return {job.job.seed: job.result["test_accuracy"] if job.state == COMPLETED else chance
            for job in jobs if job is not None and job.state in SETTLED}


def cell_config(ledger: Ledger, state: CellState) -> RunConfig | None:
    """The run config the benchmark gives a cell's first confirmation job (its first job where none is), so that a
    storage written before results recorded a setting reads the same; None for a skipped cell, which has no jobs."""
    jobs = [job for job in state.called if job.stage == CONFIRM] or state.called
    return ledger.benchmark.config(jobs[0]) if jobs else None


def run_setup(ledger: Ledger, state: CellState) -> dict[str, Any]:
    """Whether a cell's model is causal and how many examples its fixed test set holds (`cell_config`); NaN for a
    skipped cell."""
    config = cell_config(ledger, state)
    if config is None:
        return {"causal": math.nan, "test size": math.nan}
    return {"causal": config.model.causal, "test size": float(config.task_options.test_size)}


def test_figures(jobs: list[JobState | None], chance: float) -> dict[str, Any]:
    """The test accuracy of the settled ones of `jobs` over their seeds: a seed whose run diverged or failed counts,
    scored at `chance` (dropping it would rank a variant that diverges on 2 of 3 seeds on its survivor). How many
    seeds were asked, completed and failed, which completed, the mean, the standard deviation and the 95% interval
    of the mean (Student's t) over the completed and failed seeds (n = "seeds scored")."""
    done = [job for job in jobs if job is not None and job.state == COMPLETED]
    accuracies = list(seed_scores(jobs, chance).values())
    mean = statistics.fmean(accuracies) if accuracies else math.nan
    interval = mean_interval(accuracies) if len(accuracies) > 1 else None
    std, half = (interval.std, interval.half_width) if interval else (math.nan, math.nan)
    return {"seeds asked": len(jobs), "seeds completed": len(done), "seeds failed": len(accuracies) - len(done),
            "seeds scored": len(accuracies), "seeds": ",".join(str(job.job.seed) for job in done), "test mean": mean,
            "test std": std, "interval half-width": half}


def interval_text(row: pd.Series) -> str:
    """'0.578 ± 0.123 (n=3; test set 0.52–0.63)': the mean and the half-width of its 95% interval over n seeds, and
    the Wilson 95% interval of the mean over the test set's examples where the row has a "test size"; '1 of 3
    diverged or failed, scored at chance' beside n where seeds did not complete."""
    scored, failed = int(row["seeds scored"]), int(row["seeds failed"])
    if scored == 0:
        return "–"
    spread = f" ± {row['interval half-width']:.3f}" if scored > 1 else ""
    lost = f"; {failed} of {scored} diverged or failed, scored at chance" if failed else ""
    test_size = row.get("test size", math.nan)
    test_set = "" if math.isnan(test_size) else \
        "; test set {:.2f}–{:.2f}".format(*wilson(row["test mean"] * test_size, test_size))
    return f"{row['test mean']:.3f}{spread} (n={scored}{lost}{test_set})"


def _edge(state: CellState) -> str:
    """'top' or 'bottom' where the chosen learning rate lies at that edge of what the cell tuned, else ''."""
    rates = state.learning_rates
    return "" if state.best_lr is None else "top" if state.best_lr == max(rates) else \
        "bottom" if state.best_lr == min(rates) else ""


def tuning_blocks(ledger: Ledger, stage: Stage, cells: pd.DataFrame) -> list[Block]:
    """Each cell's validation accuracy at each multiple it tuned (the grid's, then those beyond its edges,
    `--extend-grid`), the learning rate chosen and the edge it lies at, if any; the cells whose grid was extended,
    those whose choice still lies at an edge of what they tuned, and the runs stopped as outdone."""
    benchmark = ledger.benchmark
    multiples = [*benchmark.lr_multiples, *benchmark.extension_multiples()]
    rows, extended, edges = [], [], []
    for state in ledger.cells:
        if state.cell.skipped is not None:
            continue
        multiple_of = dict(zip(benchmark.learning_rates(state.cell, tuple(multiples)), multiples, strict=True))
        row: dict[str, Any] = {"variant": state.cell.variant, "task": state.cell.task}
        for rate, jobs in state.tuning_by_rate.items():
            mean = mean_validation(jobs)
            row[f"lr x{multiple_of[rate]:g}"] = math.nan if mean is None else mean
        name = f"{state.cell.variant} on {state.cell.task}"
        beyond = [f"x{multiple_of[rate]:g}" for rate in state.learning_rates[len(benchmark.lr_multiples):]]
        extended += [f"{name} ({', '.join(beyond)})"] if beyond else []
        edges += [f"{name} ({_edge(state)})"] if _edge(state) else []
        rows.append({**row, "chosen lr": math.nan if state.best_lr is None else state.best_lr,
                     "at an edge": _edge(state)})
    frame = pd.DataFrame(rows)
    columns = [f"lr x{multiple:g}" for multiple in sorted(multiples) if f"lr x{multiple:g}" in frame]
    frame = frame[["variant", "task", *columns, "chosen lr", "at an edge"]] if rows else frame
    blocks: list[Block] = [Table("tuning", "Tuning: validation accuracy at each multiple of the task's learning rate "
                                 "(the grid, and those beyond its edges that were tuned), the learning rate chosen "
                                 "and the edge of what was tuned where it lies at one", frame)]
    if extended:
        blocks.append(Text(f"The grid was extended beyond an edge where the best lay in {len(extended)} of "
                           f"{len(rows)} cells: {'; '.join(extended)}."))
    outdone = [job for state in ledger.cells for job in state.tuning
               if job is not None and job.state == COMPLETED and "outdone" in job.result]
    if outdone:
        runs = "; ".join(f"{job.job.variant} on {job.job.task} at lr {job.job.lr:g} (step {job.result['steps']}; lr "
                         f"{job.result['outdone']['lr']:g} was at the target by step {job.result['outdone']['step']})"
                         for job in outdone)
        blocks.append(Text(f"{len(outdone)} tuning runs stopped as outdone, their accuracy read where they stopped: "
                           f"{runs}."))
    if edges:
        more = (f"--extend-grid {benchmark.extend_grid} tuned up to {benchmark.extend_grid} multiples beyond an edge; "
                "a larger value or --lr-multiples widens it" if benchmark.extend_grid else
                "--extend-grid N tunes up to N multiples beyond an edge; --lr-multiples widens the grid")
        blocks.append(Text(f"The chosen learning rate lies at an edge of what was tuned in {len(edges)} of {len(rows)} "
                           f"cells ({', '.join(edges)}): a better one may lie beyond it ({more})."))
    return blocks


def seeds_blocks(ledger: Ledger, stage: Stage, cells: pd.DataFrame) -> list[Block]:
    """A stage's runs per cell: the mean test accuracy and its 95% interval over their seeds."""
    frame = pd.DataFrame([{"variant": state.cell.variant, "task": state.cell.task,
                           **test_figures(state.of(stage.name), chance_of(state)),
                           "test size": run_setup(ledger, state)["test size"]}
                          for state in ledger.cells if state.cell.skipped is None])
    if frame.empty:
        return [Text(f"{stage.title}: every cell was skipped.")]
    shown = frame[["variant", "task"]].assign(**{"test accuracy": frame.apply(interval_text, axis=1)})
    return [Text(stage.protocol(ledger.benchmark)),
            Table(f"stage-{stage.name}", f"{stage.title}: test accuracy per cell, mean ± half-width of the 95% "
                  "interval over its seeds (n = seeds scored; a seed that diverged or failed scores chance) and the "
                  "Wilson 95% interval of the mean over the test set", shown,
                  data=frame)]


SECTIONS: dict[str, Callable[[Ledger, Stage, pd.DataFrame], list[Block]]] = {
    "tuning": tuning_blocks, "confirmation": confirmation_blocks, "capacity": capacity_blocks, "seeds": seeds_blocks}


def stage_sections(ledger: Ledger, cells: pd.DataFrame) -> list[Section]:
    """One section per stage of the benchmark, in order, by its page key; `cells` is the page's cell table."""
    sections = []
    for stage in ledger.benchmark.stages:
        if stage.page not in SECTIONS:
            raise ValueError(f"Stage {stage.name!r} names the page section {stage.page!r}, which the page does not "
                             f"have; accepted: {', '.join(SECTIONS)}.")
        sections.append(Section(f"stage-{stage.name}", stage.title, SECTIONS[stage.page](ledger, stage, cells)))
    return sections
