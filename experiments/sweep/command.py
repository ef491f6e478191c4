"""`attnlab sweep`: open the study, run its workers, print what it found, and confirm the best
configuration with fresh seeds when asked; and `join`, one worker process of a sweep that `--workers N`
started, which reads the sweep from its study."""

from __future__ import annotations

from pathlib import Path

from experiments.launch import StopFlag
from experiments.sweep.confirm import confirm_best
from experiments.sweep.definition import Sweep, open_study
from experiments.sweep.pool import WorkerSettings, run_workers, work, worker_count
from experiments.sweep.result import report


def run(sweep: Sweep, *, workers: int | None, quiet: bool) -> int:
    """The whole sweep from this process (`workers` processes: default one per GPU with cuda, else 1)."""
    workers = worker_count(workers, sweep.device)
    study = open_study(sweep)
    print(f"sweep {sweep.study_name}: {sweep.trials} complete trials of {sweep.variant} on {sweep.task} "
          f"({sweep.profile}), {workers} worker{'s' if workers > 1 else ''}, storage {sweep.storage_shown}; "
          "searching:")
    print("\n".join(f"  {param.describe()}" for param in sweep.space.params))
    if workers == 1:
        exit_code = work(sweep, study, quiet=quiet, should_stop=StopFlag().install())
    else:
        exit_code = run_workers(sweep, study, workers, quiet=quiet)
    print(report(sweep, study), flush=True)
    if exit_code == 0 and sweep.confirm_seeds:
        exit_code = confirm_best(sweep, study, quiet=quiet, should_stop=StopFlag().install())
    return exit_code


def join(settings: WorkerSettings) -> int:
    """One worker of the sweep in study `settings.study`, rebuilt from the definition the study holds: trials
    until the study holds `settings.trials` complete ones (no summary: the process that started it reports)."""
    sweep = Sweep.from_definition(settings.stored_definition(), study_name=settings.study, device=settings.device,
                                  storage_url=settings.storage_url, runs_dir=Path(settings.runs_dir),
                                  heartbeat_seconds=settings.heartbeat_seconds, trials=settings.trials)
    return work(sweep, open_study(sweep), worker=settings.index, quiet=settings.quiet,
                should_stop=StopFlag().install())
