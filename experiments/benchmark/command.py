"""`attnlab benchmark`: open (or join) the benchmark's storage, run its workers until every job has
settled, and hand the state to the report; and `join`, one worker process of a benchmark that `--workers N`
started, which reads the benchmark from its study."""

from __future__ import annotations

import shlex
from pathlib import Path

import optuna

from common import schema
from common.options import OptionError
from experiments.benchmark import progress
from experiments.benchmark.definition import STUDY_PREFIX, Benchmark, folder_of, grows, rebuild, upgraded
from experiments.benchmark.ledger import Ledger
from experiments.benchmark.worker import work
from experiments.run.launch import StopFlag
from experiments.schemas.benchmark import BenchmarkOptions
from experiments.slurm import Slurm, WorkerTask, announce, submit
from experiments.sweep.pool import WorkerSettings, spawn_workers, worker_count
from experiments.sweep.storage import create_or_join, open_storage


def open_study(benchmark: Benchmark, *, keep: bool = True) -> optuna.Study:
    """Create the benchmark's study, or join it after checking that it was created for the same benchmark (or one
    with fewer seeds, which it grows to: `grows`); `keep` False stores nothing of it (an estimate)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each job is announced by the benchmark itself
    storage = open_storage(benchmark.storage_url, benchmark.journal, benchmark.heartbeat_seconds)
    study = create_or_join(storage, benchmark.study_name, schema.stored(benchmark), kind="benchmark",
                           shown=benchmark.storage_shown, upgrade=upgraded, grows=grows, keep=keep,
                           accepted="the protocol, variants, tasks, profile, seed, lr-multiples, capacity options, "
                                    "kernel and --set it was created with and at least its seeds on every row, or "
                                    "another name (--name)")
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


def run(benchmark: Benchmark, *, workers: int | None, quiet: bool,
        slurm: Slurm | None = None) -> tuple[int, Ledger | None]:
    """The whole benchmark from this process (`workers` processes: default one per GPU with cuda, else one per CPU
    core) and its state at the end: 0 when every job has settled, 130 after a signal, 1 otherwise. With `slurm`,
    `workers` array tasks (default one) submitted where jobs remain: (0, None) once submitted."""
    workers = worker_count(workers, benchmark.device, per_core=slurm is None)
    study = open_study(benchmark)
    print(header(benchmark, workers), flush=True)
    settings = worker_settings(benchmark, quiet)
    if slurm is not None and not Ledger(benchmark, study.get_trials(deepcopy=False)).complete:
        folder = benchmark.folder / "slurm"
        job_id = submit(slurm, WorkerTask(settings), workers, folder, name=benchmark.study_name)
        print(announce(slurm, job_id, workers, folder, label=f"benchmark {benchmark.name}",
                       status=status_command(benchmark)), flush=True)
        return 0, None
    if workers == 1 or slurm is not None:  # one worker, or none to start: every job has settled
        exit_code = work(benchmark, study, quiet=quiet, should_stop=StopFlag().install())
    else:
        codes = spawn_workers(settings, workers, label=f"benchmark {benchmark.name}")
        exit_code = 0 if all(code == 0 for code in codes) else 130 if 130 in codes else 1
    state = Ledger(benchmark, study.get_trials(deepcopy=False))
    if exit_code == 0 and not state.complete:
        exit_code = 1
    return exit_code, state


def worker_settings(benchmark: Benchmark, quiet: bool) -> WorkerSettings:
    """What each worker process of `benchmark` is started with."""
    return WorkerSettings("benchmark", benchmark.study_name, benchmark.storage_url, str(benchmark.journal),
                          str(benchmark.runs_dir), benchmark.device, benchmark.heartbeat_seconds, quiet)


def status_command(benchmark: Benchmark) -> str:
    """The command that shows what the storage holds of `benchmark` (`progress.status`)."""
    words = [*BenchmarkOptions.COMMAND, "--status", "--name", benchmark.name, "--runs-dir", str(benchmark.runs_dir)]
    return shlex.join(words + (["--storage", benchmark.storage_shown] if benchmark.storage_url else []))


def status(name: str, storage_url: str | None, runs_dir: Path) -> int:
    """`attnlab benchmark --status`: what the storage holds of benchmark `name`, read as a worker reads it."""
    journal = folder_of(runs_dir, name) / "jobs.journal"
    if storage_url is None and not journal.is_file():
        raise OptionError(f"No benchmark {name!r} under {runs_dir} (no {journal}); accepted: the --name of a benchmark "
                          "there, or the --storage URL that holds it.")
    settings = WorkerSettings("benchmark", f"{STUDY_PREFIX}{name}", storage_url, str(journal), str(runs_dir), "cpu",
                              60, True)  # its cells resolved on the CPU, as a record's are: none of them runs
    benchmark = joined(settings)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = open_storage(storage_url, journal, benchmark.heartbeat_seconds)
    trials = optuna.load_study(study_name=benchmark.study_name, storage=storage).get_trials(deepcopy=False)
    print(progress.status(Ledger(benchmark, trials)))
    return 0


def joined(settings: WorkerSettings) -> Benchmark:
    """The benchmark in study `settings.study`, rebuilt from the definition the study holds (its cells resolved
    again here)."""
    return rebuild(settings.stored_definition(), study_name=settings.study, device=settings.device,
                   storage_url=settings.storage_url, runs_dir=Path(settings.runs_dir),
                   heartbeat_seconds=settings.heartbeat_seconds)


def join(settings: WorkerSettings, *, should_stop: StopFlag | None = None, leave: bool = False) -> int:
    """One worker of the benchmark in study `settings.study` (`joined`): jobs until every job has settled, or with
    `leave` until none is left to take (`work`; no page: the process that started it writes it)."""
    benchmark = joined(settings)
    return work(benchmark, open_study(benchmark), worker=settings.index, quiet=settings.quiet,
                should_stop=should_stop or StopFlag().install(), leave=leave)
