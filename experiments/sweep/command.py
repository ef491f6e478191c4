"""`attnlab sweep`: open the study, run its workers, print what it found, and confirm the best
configuration with fresh seeds when asked; and `join`, one worker process of a sweep that `--workers N`
started, which reads the sweep from its study."""

from __future__ import annotations

import shlex
from pathlib import Path

from optuna.trial import TrialState

from experiments.run.launch import StopFlag
from experiments.slurm import Slurm, WorkerTask, announce, submit
from experiments.sweep.confirm import confirm_best
from experiments.sweep.definition import Sweep, open_study, rebuild
from experiments.sweep.pool import WorkerSettings, run_workers, settings_of, work, worker_count
from experiments.sweep.result import report


def run(sweep: Sweep, *, workers: int | None, quiet: bool, slurm: Slurm | None = None) -> int:
    """The whole sweep from this process (`workers` processes: default one per GPU with cuda, else 1), or with
    `slurm` `workers` array tasks submitted while the study falls short of its target (0 once submitted)."""
    workers = worker_count(workers, sweep.device)
    study = open_study(sweep)
    print(f"sweep {sweep.study_name}: {sweep.trials} complete trials of {sweep.variant} on {sweep.task} "
          f"({sweep.profile}), {workers} worker{'s' if workers > 1 else ''}, storage {sweep.storage_shown}; "
          "searching:")
    print("\n".join(f"  {param.describe()}" for param in sweep.space.params))
    complete = sum(trial.state == TrialState.COMPLETE for trial in study.get_trials(deepcopy=False))
    if slurm is not None and complete < sweep.trials:
        folder = sweep.journal.with_suffix(".slurm")
        status = shlex.join(["attnlab", "report", "--study", sweep.study_name, "--runs-dir", str(sweep.runs_dir)])
        job_id = submit(slurm, WorkerTask(settings_of(sweep, quiet)), workers, folder, name=sweep.study_name)
        print(announce(slurm, job_id, workers, folder,
                       label=f"sweep {sweep.study_name}", status=status), flush=True)
        return 0
    if workers == 1 or slurm is not None:  # one worker, or none to start: the study has reached its target
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
    sweep = rebuild(settings.stored_definition(), study_name=settings.study, device=settings.device,
                    storage_url=settings.storage_url, runs_dir=Path(settings.runs_dir),
                    heartbeat_seconds=settings.heartbeat_seconds, trials=settings.trials)
    return work(sweep, open_study(sweep), worker=settings.index, quiet=settings.quiet,
                should_stop=StopFlag().install())
