"""What a benchmark will cost before it runs (`attnlab benchmark --estimate`), measured rather than guessed.

Every size the benchmark trains at (each cell's own size, which its tuning and confirmation jobs share, and each
other size a stage trains at, `Stage.size`: each capacity point) is set up exactly as a job's run is
(`experiments.run.train.set_up`), then timed on this device for a few optimiser steps, one interim evaluation and, where
it reads less than the last (`experiments.run.evaluation`), the last one, with the threads each of the workers would
get. A job's time is its steps times the time of a step, plus its interim evaluations and its last; the learning
rate and the seed do not change it. A job that nothing stops trains its stage's steps: its profile's, or, for
a screening run of protocol 2, its fraction of them (`Benchmark.screen_fraction`). Jobs the benchmark's storage
already holds as settled are left out, so the estimate of a benchmark that has started is what remains of it. A
size that cannot be set up is listed with the error and counts for nothing: its jobs would fail as they start.

Stopping at the target (`--target-accuracy`): a job's steps are predicted from earlier runs of the same variant,
task, size and stage that stopped under the same target: the benchmark's record (`docs/records/benchmark-NAME.
journal`, `experiments.benchmark.record`) where it was run with the same profile and target, and the jobs of this
benchmark's storage that have settled; the mean of their steps. A size with no earlier run of its stage takes the
mean of its other stages', and one with none at all its stage's steps: an upper bound. The summary says how many
jobs were predicted each way. A tuning run of the record is counted at the steps it would take under today's rule
that stops a run once a sibling queued before it (`Ledger.queued`) has reached the target sooner
(`record.earlier_steps`). Tuning beyond the grid's
edges (`--extend-grid`) is called for only where tuning ends at an edge, so the record says how often: the record
replayed under this benchmark's grid counts the jobs beyond it where its runs put a cell's best at an edge; a cell
whose grid holds a learning rate the record never ran cannot be replayed (nor can any cell where there is no record):
it counts halfway between none and the most the grid may extend by, and the summary says how many such cells there
are.

Workers share the machine: on the CPU two workers' steps each take longer than one worker's alone (its cores,
caches and memory bandwidth are shared), so with several workers the sizes are timed by as many processes at once,
each with a worker's threads (`measured`).

What it leaves out, so that a benchmark takes somewhat longer than this: starting a worker, writing
checkpoints, and the time a worker waits at a stage boundary (a cell's confirmation waits for the last of its
tuning runs). A run that diverges ends early and takes less.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from common import schema
from common.files import atomic_write_text
from common.provenance import git_commit
from experiments.benchmark import record
from experiments.benchmark.command import open_study
from experiments.benchmark.definition import Benchmark, Job
from experiments.benchmark.ledger import SETTLED, Ledger
from experiments.benchmark.stages import TUNE
from experiments.run import config as configs
from experiments.run.build import build
from experiments.run.records import RunRecord
from experiments.run.timing import seconds
from experiments.run.train import evaluation_line, resume, set_up, train_step
from experiments.sweep.pool import cpu_threads, worker_count

WARMUP_STEPS = 2  # the first steps allocate what the others reuse: not timed
TIMED_STEPS = 5


@dataclass(frozen=True)
class Timing:
    step_seconds: float  # one optimiser step on a fresh batch
    eval_seconds: float  # one interim evaluation: what train.interim_test and train.interim_validation read
    last_eval_seconds: float | None = None  # the last evaluation, every held-out set in full; None: the same

    @property
    def last_seconds(self) -> float:
        return self.eval_seconds if self.last_eval_seconds is None else self.last_eval_seconds

    def job_seconds(self, train: configs.TrainConfig, steps: float) -> float:
        """A job of `steps` steps: its steps, its interim evaluations and its last one."""
        return steps * self.step_seconds + (evaluations(train, steps) - 1) * self.eval_seconds + self.last_seconds


def time_run(config: configs.RunConfig) -> Timing:
    """Seconds per optimiser step and per evaluation of a run of `config`, set up as `train` sets one up, in a
    throwaway folder."""
    with tempfile.TemporaryDirectory() as folder:
        run = set_up(build(config), RunRecord.create(Path(folder), "estimate"), {})
        state = resume(run)
        for _ in range(WARMUP_STEPS):
            train_step(run, state)
        step = seconds(lambda: [train_step(run, state) for _ in range(TIMED_STEPS)], run.device) / TIMED_STEPS
        interim = seconds(lambda: evaluation_line(run, state, False), run.device)
        complete = config.train.interim_test and config.train.interim_validation is None
        last = None if complete else seconds(lambda: evaluation_line(run, state, True), run.device)
    return Timing(step, interim, last)


def timed(config: configs.RunConfig) -> tuple[Timing, str | None]:
    """`time_run`, or NaN timings and the error where the size cannot be set up (its jobs will fail alike: the
    benchmark lists them, so does the estimate)."""
    try:
        return time_run(config), None
    except Exception as failure:
        return Timing(math.nan, math.nan), f"{type(failure).__name__}: {failure}"


def _threads(count: int) -> None:  # a timing process's threads, as a worker's
    torch.set_num_threads(count)


def measured(runs: list[configs.RunConfig], *, workers: int, device: str, desc: str,
             quiet: bool) -> list[tuple[Timing, str | None]]:
    """Each config's timing, in order. Several workers on the CPU share its cores and memory, so a step takes
    longer beside another worker than alone: there the sizes are timed by `workers` processes at once, each with
    a worker's threads, as the benchmark's workers will run them. One worker, or an accelerator, times them here
    one after another."""
    threads = threads_per_worker(workers, device)
    with tqdm(total=len(runs), desc=desc, unit="size", disable=quiet, dynamic_ncols=True) as bar:
        if device != "cpu" or workers == 1 or len(runs) < 2:
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                found = []
                for config in runs:
                    found.append(timed(config))
                    bar.update()
                return found
            finally:
                torch.set_num_threads(before)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_threads, initargs=(threads,)) as pool:
            futures = [pool.submit(timed, config) for config in runs]
            for _ in as_completed(futures):
                bar.update()
            return [future.result() for future in futures]


def evaluations(train: configs.TrainConfig, steps: float | None = None) -> int:
    """How many times a run of `train` evaluates in `steps` steps (default: its profile's): every eval_every
    steps, after the last, and before the first when it records attention statistics (`experiments.run.train`)."""
    return math.ceil((train.steps if steps is None else steps) / train.eval_every) + int(train.attention_stats)


def kept_record(benchmark: Benchmark) -> Ledger | None:
    """The benchmark's record (`docs/records/benchmark-NAME.journal`, `experiments.benchmark.record`), where it was
    run with the same profile and target, replayed under this benchmark's protocol: its cells' jobs as this
    benchmark calls for them (its grid, and beyond the grid's edges where the record's runs put the best there),
    each holding the record's run where the record has one (the same learning rate and seed); None where there is
    no such record."""
    path = record.path_of(benchmark.name)
    if benchmark.target is None or not path.exists():
        return None
    kept = record.load(path, device=benchmark.device)
    if (kept.benchmark.profile, kept.benchmark.target) != (benchmark.profile, benchmark.target):
        return None
    return Ledger(benchmark, [trial for state in kept.states.values() for trial in state.trials])


def earlier_runs(benchmark: Benchmark, own: Ledger | None, kept: Ledger | None) -> dict[tuple[str, str, str, str],
                                                                                      list[int]]:
    """Steps of earlier completed jobs per (variant, task, size, stage) under the benchmark's target: the record
    replayed (`kept`) and its own storage's settled jobs. None without a target."""
    if benchmark.target is None:
        return {}
    found: dict[tuple[str, str, str, str], list[int]] = {}
    for ledger in (ledger for ledger in (own, kept) if ledger is not None):
        for key, steps in record.earlier_steps(ledger).items():
            found.setdefault(key, []).extend(steps)
    return found


def predicted_extensions(benchmark: Benchmark, kept: Ledger | None) -> Counter:
    """Tuning jobs beyond the grid's edges per cell's own size, as the record replayed calls for them: which cells
    extend is known only once tuning has run, and the record's runs say where its best lies on this grid."""
    grid = len(benchmark.lr_multiples)
    return Counter({((state.cell.variant, state.cell.task, "own"), TUNE): len(state.learning_rates) - grid
                    for state in kept.cells if len(state.learning_rates) > grid}) if kept is not None else Counter()


def unknown_extension(benchmark: Benchmark) -> int:
    """The tuning jobs beyond the grid counted for a cell the record cannot replay (its grid holds a learning rate
    the record never ran): halfway between none and the most `--extend-grid` allows, rounded up."""
    return math.ceil(benchmark.extend_grid / 2)


def unreplayable(kept: Ledger | None, own: Ledger | None, remaining: Counter) -> set[tuple[str, str, str]]:
    """The cells (their own sizes) whose tuning beyond the grid the record cannot predict: those the record replayed
    leaves untuned (their grid holds a learning rate it never ran); without a record every cell still tuning."""
    if kept is not None:
        return {(state.cell.variant, state.cell.task, "own") for state in kept.cells
                if state.cell.skipped is None and not state.tuned}
    tuned = {(state.cell.variant, state.cell.task, "own") for state in own.cells if state.tuned} if own else set()
    return {size for size, stage in remaining if stage == TUNE} - tuned


def predicted_steps(found: dict, size: tuple[str, str, str], stage: str, steps: int) -> tuple[float, str]:
    """A job's predicted steps and how they were predicted: the mean of the earlier runs of its size and stage,
    else of its size's other stages, else its stage's `steps` (its profile's, or a screening run's share)."""
    same = found.get((*size, stage)) or [step for (*key, _), runs in found.items() if tuple(key) == size
                                         for step in runs]
    if not same:
        return float(steps), "profile's steps"
    return sum(same) / len(same), "earlier runs of its stage" if found.get((*size, stage)) else "its size's runs"


def size_of(benchmark: Benchmark, job: Job) -> tuple[str, str, str]:
    """What a job's cost depends on: its cell and the size its stage trains it at ('own': the cell's own)."""
    return job.variant, job.task, benchmark.stage(job.stage).size(job)


def stored(benchmark: Benchmark) -> Ledger | None:
    """The benchmark's state in its storage, whose study is joined as a worker joins it (a study created with
    other settings is refused, one with fewer seeds is read as grown, and nothing is stored); None without a storage
    URL or a journal (none is created)."""
    if benchmark.storage_url is None and not benchmark.journal.exists():
        return None
    return Ledger(benchmark, open_study(benchmark, keep=False).get_trials(deepcopy=False))


def settled_jobs(benchmark: Benchmark, ledger: Ledger | None) -> Counter:
    """Settled jobs per (size, stage) in the benchmark's storage."""
    return Counter((size_of(benchmark, state.job), state.job.stage) for state in ledger.states.values()
                   if state.state in SETTLED) if ledger is not None else Counter()


def threads_per_worker(workers: int, device: str) -> int:
    """The threads each of `workers` workers gets on the CPU: one worker runs in this process with its threads;
    several are processes with OMP_NUM_THREADS, or their share of the cores (`experiments.sweep.pool`)."""
    if device != "cpu" or workers == 1:
        return torch.get_num_threads()
    return cpu_threads(workers)


def estimate(benchmark: Benchmark, *, workers: int, quiet: bool = False) -> pd.DataFrame:
    """One row per size still to train: the variant, task and size (`Stage.size`), the jobs of each stage left
    at that size, the measured seconds of a step and of an evaluation, a job's seconds and the size's total."""
    planned = benchmark.planned_jobs()
    stages = [stage.name for stage in benchmark.stages]
    own, kept = stored(benchmark), kept_record(benchmark)
    remaining = Counter((size_of(benchmark, job), job.stage) for job in planned)
    beyond = {key: count for key, count in predicted_extensions(benchmark, kept).items() if key in remaining}
    unknown = unreplayable(kept, own, remaining)
    beyond.update({(size, TUNE): max(beyond.get((size, TUNE), 0), unknown_extension(benchmark))
                   for size in unknown if (size, TUNE) in remaining})
    remaining.update(beyond)
    remaining.subtract(settled_jobs(benchmark, own))
    found = earlier_runs(benchmark, own, kept)
    by_size: dict[tuple, dict[str, int]] = {}
    for (size, stage), count in remaining.items():
        if count > 0:
            by_size.setdefault(size, dict.fromkeys(stages, 0))[stage] = count
    examples = {size_of(benchmark, job): job for job in planned}  # a job of each size, whose config it trains
    config_of = {size: benchmark.config(examples[size]) for size in by_size}
    # The steps a job of each size and stage trains when nothing stops it: a screening run trains fewer.
    of_stage = {(size_of(benchmark, job), job.stage): job for job in planned}
    budgets = {key: benchmark.config(job).train.steps for key, job in of_stage.items()}
    timings = measured(list(config_of.values()), workers=workers, device=benchmark.device,
                       desc=f"timing {benchmark.name}", quiet=quiet)
    rows = []
    for (size, counts), (timing, error) in zip(by_size.items(), timings, strict=True):
        config = config_of[size]
        predictions = {stage: predicted_steps(found, size, stage, budgets.get((size, stage), config.train.steps))
                       for stage in stages}
        seconds_of = {stage: timing.job_seconds(config.train, steps) for stage, (steps, _) in predictions.items()}
        variant, task, label = size
        rows.append({"variant": variant, "task": task, "size": label,
                     **{f"{stage} jobs": counts[stage] for stage in stages},
                     "tune jobs beyond the grid": beyond.get((size, TUNE), 0),
                     "beyond the grid unknown": size in unknown, "steps": config.train.steps,
                     **{f"{stage} steps": predictions[stage][0] for stage in stages},
                     "predicted from": "; ".join(f"{stage}: {how}" for stage, (_, how) in predictions.items()
                                                 if counts[stage]),
                     "step seconds": timing.step_seconds, "eval seconds": timing.eval_seconds,
                     "last eval seconds": timing.last_seconds,
                     "job seconds": sum(seconds_of[stage] * counts[stage] for stage in stages)
                     / max(1, sum(counts.values())),
                     **{f"{stage} seconds": seconds_of[stage] * counts[stage] for stage in stages},
                     "seconds": sum(seconds_of[stage] * counts[stage] for stage in stages), "error": error})
    return pd.DataFrame(rows, columns=["variant", "task", "size", *(f"{stage} jobs" for stage in stages),
                                       "tune jobs beyond the grid", "beyond the grid unknown", "steps",
                                       *(f"{stage} steps" for stage in stages), "predicted from", "step seconds",
                                       "eval seconds", "last eval seconds", "job seconds",
                                       *(f"{stage} seconds" for stage in stages), "seconds", "error"])


def hours(total_seconds: float) -> str:
    return f"{total_seconds / 3600:,.1f}"


def duration(total_seconds: float) -> str:
    """'129.5 hours', or '35 minutes' below an hour."""
    return f"{hours(total_seconds)} hours" if total_seconds >= 3600 else f"{total_seconds / 60:.0f} minutes"


def summary(sizes: pd.DataFrame, benchmark: Benchmark, workers: int) -> str:
    """The estimate as a person reads it: jobs and CPU-hours per stage, per variant and per task, and the
    wall time with `workers` workers."""
    device = benchmark.device if benchmark.device != "cpu" else \
        f"cpu, {threads_per_worker(workers, 'cpu')} thread(s) per worker"
    if sizes.empty:
        return f"benchmark {benchmark.name}: every job has settled; nothing remains to run."
    names = [stage.name for stage in benchmark.stages]
    stages = pd.DataFrame({"jobs": [int(sizes[f"{stage} jobs"].sum()) for stage in names],
                           "hours": [hours(sizes[f"{stage} seconds"].sum()) for stage in names]}, index=names)
    per = {key: sizes.groupby(key, sort=False)["seconds"].sum().sort_values(ascending=False).map(hours)
           for key in ("variant", "task")}
    total = sizes["seconds"].sum()  # sizes that could not be set up count for nothing (NaN)
    failed = sizes[sizes["error"].notna()]
    jobs = failed[[f"{stage} jobs" for stage in names]].sum(axis=1)
    by_way = Counter()
    for _, row in sizes.iterrows():
        for part in filter(None, row["predicted from"].split("; ")):
            stage, _, how = part.partition(": ")
            by_way[how] += int(row[f"{stage} jobs"])
    return "\n".join([
        f"benchmark {benchmark.name}: {stages['jobs'].sum():,} jobs to run, measured on {device} "
        f"({TIMED_STEPS} steps and one evaluation of each of {len(sizes)} sizes)",
        stages.rename_axis("stage").to_string(),
        f"total: {duration(total)} of runs; with {workers} worker{'s' if workers > 1 else ''}, about "
        f"{duration(total / workers)} of wall time (more for the waits between stages, checkpoints and starts)",
        *([] if benchmark.target is None else [
            f"steps: runs stop at validation accuracy {benchmark.target:g}; predicted for "
            + ", ".join(f"{count} jobs from {how}" for how, count in by_way.items())
            + " (earlier runs: this benchmark's settled jobs and its record, experiments.benchmark.record)"]),
        *([f"tuning beyond the grid's edges: {int(sizes['tune jobs beyond the grid'].sum())} jobs (counted in tune), "
           "where the record's runs put a cell's best at an edge of this grid; "
           f"{int(sizes['beyond the grid unknown'].sum())} cells' grids hold learning rates the record never ran "
           "(every cell, where there is no record), so whether they extend is not known: each counts halfway "
           "between none and the most --extend-grid allows"] if kept_shown(sizes) else []),
        "hours by variant: " + ", ".join(f"{name} {value}" for name, value in per["variant"].items()),
        "hours by task: " + ", ".join(f"{name} {value}" for name, value in per["task"].items()),
        *(f"not counted: {row['variant']} on {row['task']} ({row['size']}) could not be set up, so its "
          f"{count} job(s) would fail: {row['error']}"
          for (_, row), count in zip(failed.iterrows(), jobs, strict=True)),
    ])


def kept_shown(sizes: pd.DataFrame) -> bool:
    """Whether the record predicted any tuning beyond the grid or left any cell's unknown (the summary says so)."""
    return bool(sizes["tune jobs beyond the grid"].sum() or sizes["beyond the grid unknown"].sum())


def run(benchmark: Benchmark, *, workers: int | None, quiet: bool) -> int:
    """`attnlab benchmark --estimate`: time what remains of `benchmark` for `workers` workers (the benchmark's
    default count when None), print the summary and write every size's row to estimate.csv in the benchmark's
    folder of this machine (RUNS_DIR/benchmark/NAME/, beside its journal; the page's folder is the page's)."""
    workers = worker_count(workers, benchmark.device, per_core=True)
    sizes = estimate(benchmark, workers=workers, quiet=quiet)
    path, kept = write(benchmark, sizes, workers)
    print(summary(sizes, benchmark, workers), f"wrote {path} and {kept}", sep="\n")
    return 0


def write(benchmark: Benchmark, sizes: pd.DataFrame, workers: int) -> tuple[Path, Path]:
    """Every size's row to estimate.csv and the record's rows (`record_rows`) to estimate-record.csv, in the
    benchmark's folder of this machine; the two paths."""
    path, kept = benchmark.folder / "estimate.csv", benchmark.folder / "estimate-record.csv"
    atomic_write_text(path, sizes.to_csv(index=False))
    atomic_write_text(kept, record_rows(sizes, benchmark, workers).to_csv(index=False))
    return path, kept


def record_rows(sizes: pd.DataFrame, benchmark: Benchmark, workers: int) -> pd.DataFrame:
    """The estimate as a record for docs/records/ (`analysis.results_doc`): jobs and hours of runs per stage,
    per variant and in all, and the wall time with `workers`, each row with the provenance columns (the
    commit, the device, the command, and that the command wrote it)."""
    names = [stage.name for stage in benchmark.stages]
    rows = [(f"stage {stage}", int(sizes[f"{stage} jobs"].sum()), sizes[f"{stage} seconds"].sum()) for stage in names]
    rows += [(f"variant {variant}", int(group[[f"{stage} jobs" for stage in names]].sum().sum()),
              group["seconds"].sum()) for variant, group in sizes.groupby("variant", sort=False)]
    total = sizes["seconds"].sum()
    rows += [("every job", int(sizes[[f"{stage} jobs" for stage in names]].sum().sum()), total),
             (f"wall time with {workers} workers", "", total / workers)]  # "": no job count of its own
    threads = threads_per_worker(workers, "cpu")
    device = benchmark.device if benchmark.device != "cpu" else \
        f"cpu ({os.cpu_count()} cores, {threads} thread(s) per worker), torch {torch.__version__}"
    command = f"{schema.command(benchmark)} --estimate --workers {workers}"
    return pd.DataFrame([{"what": what, "jobs": jobs, "hours": f"{seconds / 3600:.2f}", "profile": benchmark.profile,
                          "commit": git_commit() or "not recorded", "device": device, "command": command,
                          "source": "written by the command (estimate-record.csv)"} for what, jobs, seconds in rows])
