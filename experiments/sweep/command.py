"""`attnlab sweep`: open the study, run its workers, print what it found, and confirm the best
configuration with fresh seeds when asked."""

from __future__ import annotations

from experiments.launch import StopFlag
from experiments.sweep.confirm import confirm_best
from experiments.sweep.definition import Sweep, open_study
from experiments.sweep.pool import run_workers, work, worker_command, worker_count
from experiments.sweep.result import report


def run(sweep: Sweep, *, workers: int | None, worker_index: int | None, quiet: bool) -> int:
    """The whole sweep from this process (`workers` processes: default one per GPU with cuda, else 1), or,
    with `worker_index`, one worker of a sweep that another process started: no summary at the end."""
    workers = worker_count(workers, sweep.device)
    study = open_study(sweep)
    if worker_index is not None:
        return work(sweep, study, worker=worker_index, quiet=quiet, should_stop=StopFlag().install())
    print(f"sweep {sweep.study_name}: {sweep.trials} complete trials of {sweep.variant} on {sweep.task} "
          f"({sweep.profile}), {workers} worker{'s' if workers > 1 else ''}, storage {sweep.storage_shown}; "
          "searching:")
    print("\n".join(f"  {param.describe()}" for param in sweep.space.params))
    if workers == 1:
        exit_code = work(sweep, study, quiet=quiet, should_stop=StopFlag().install())
    else:
        exit_code = run_workers(sweep, study, worker_command(sweep, quiet), workers)
    print(report(sweep, study), flush=True)
    if exit_code == 0 and sweep.confirm_seeds:
        exit_code = confirm_best(sweep, study, quiet=quiet, should_stop=StopFlag().install())
    return exit_code
