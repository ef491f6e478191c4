"""`attnlab benchmark`: open (or join) the benchmark's storage, run its workers until every job has
settled, and hand the state to the report; and `join`, one worker process of a benchmark that `--workers N`
started, which reads the benchmark from its study."""

from __future__ import annotations

from pathlib import Path

import optuna

from experiments.benchmark.definition import Benchmark, upgraded
from experiments.benchmark.ledger import Ledger
from experiments.benchmark.worker import work
from experiments.launch import StopFlag
from experiments.sweep.pool import WorkerSettings, spawn_workers, worker_count
from experiments.sweep.storage import create_or_join, open_storage


def open_study(benchmark: Benchmark) -> optuna.Study:
    """Create the benchmark's study, or join it after checking that it was created for the same benchmark."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each job is announced by the benchmark itself
    storage = open_storage(benchmark.storage_url, benchmark.journal, benchmark.heartbeat_seconds)
    study = create_or_join(storage, benchmark.study_name, benchmark.definition(), kind="benchmark",
                           shown=benchmark.storage_shown, upgrade=upgraded,
                           accepted="the protocol, variants, tasks, profile, seed, seeds, lr-multiples, capacity "
                                    "options, kernel and --set it was created with, or another name (--name)")
    study.sampler = optuna.samplers.RandomSampler(seed=0)  # a job's values are queued with it; nothing is drawn
    return study


def header(benchmark: Benchmark, workers: int) -> str:
    """What the benchmark is, each stage as it states itself, the cells skipped with their reasons, and the size
    chosen for each cell sized to dense's parameters (or why none is)."""
    skipped = [cell for cell in benchmark.cells if cell.skipped is not None]
    lines = [f"benchmark {benchmark.name}: {len(benchmark.variants)} variants x {len(benchmark.tasks)} tasks "
             f"({benchmark.profile}), {len(benchmark.cells) - len(skipped)} cells to run, {len(skipped)} skipped; "
             f"{workers} worker{'s' if workers > 1 else ''}, storage {benchmark.storage_shown}"]
    lines += [f"  {line}" for stage in benchmark.stages for line in stage.header(benchmark)]
    lines += [f"  skipped {cell.variant} on {cell.task}: {cell.skipped}" for cell in skipped]
    lines += [f"  sized {cell.variant} on {cell.task} to dense's parameters: {cell.size.shown}, "
              f"{cell.size.parameters:,} parameters ({cell.size.ratio:.2f}x)" for cell in benchmark.cells
              if cell.size.changes]
    lines += [f"  not ranked, {cell.variant} on {cell.task}: {cell.size.unmatched}" for cell in benchmark.cells
              if cell.skipped is None and cell.size.unmatched]
    return "\n".join(lines)


def run(benchmark: Benchmark, *, workers: int | None, quiet: bool) -> tuple[int, Ledger]:
    """The whole benchmark from this process (`workers` processes: default one per GPU with cuda, else one per CPU
    core) and its state at the end: 0 when every job has settled, 130 after a signal, 1 otherwise."""
    workers = worker_count(workers, benchmark.device, per_core=True)
    study = open_study(benchmark)
    print(header(benchmark, workers), flush=True)
    if workers == 1:
        exit_code = work(benchmark, study, quiet=quiet, should_stop=StopFlag().install())
    else:
        settings = WorkerSettings("benchmark", benchmark.study_name, benchmark.storage_url, str(benchmark.journal),
                                  str(benchmark.runs_dir), benchmark.device, benchmark.heartbeat_seconds, quiet)
        codes = spawn_workers(settings, workers, label=f"benchmark {benchmark.name}")
        exit_code = 0 if all(code == 0 for code in codes) else 130 if 130 in codes else 1
    state = Ledger(benchmark, study.get_trials(deepcopy=False))
    if exit_code == 0 and not state.complete:
        exit_code = 1
    return exit_code, state


def join(settings: WorkerSettings) -> int:
    """One worker of the benchmark in study `settings.study`, rebuilt from the definition the study holds (its
    cells resolved again here): jobs until every job has settled (no page: the process that started it writes
    it)."""
    benchmark = Benchmark.from_definition(settings.stored_definition(), study_name=settings.study,
                                          device=settings.device, storage_url=settings.storage_url,
                                          runs_dir=Path(settings.runs_dir),
                                          heartbeat_seconds=settings.heartbeat_seconds)
    return work(benchmark, open_study(benchmark), worker=settings.index, quiet=settings.quiet,
                should_stop=StopFlag().install())
