"""Hyperparameter sweeps: an Optuna study whose trials are ordinary runs.

    attnlab sweep --variant local --task passkey --trials 30              # embedded store under runs/sweeps/
    attnlab sweep --variant local --task passkey --trials 30 --workers 4  # four processes, one study
    attnlab sweep ... --storage postgresql://user@host/db                 # one study across machines
    attnlab sweep ... --confirm-seeds 5                                   # then the best, with 5 fresh seeds

Each trial samples the variant's declared options and the training hyperparameters (`experiments.sweep.space`)
with a seeded TPE sampler, trains with the same `train()` as `attnlab run`, into an ordinary run folder
tagged with the study and the trial number (the trial's user attribute `run_id` names it), and reports the
validation accuracy at every evaluation, so that the median pruner can stop it early (its run says
`pruned`). A diverged run fails its trial and the study goes on. The objective is the final validation
accuracy, maximised; the test set (the test set) is only reported, for the best trial and its confirmation.

The modules, by job:

    definition  the sweep validated before anything runs (`build`, from `experiments.schemas.sweep`), and the study
                it creates or joins
    storage     the journal file or a database, and the heartbeats that find trials whose worker died
    liveness    which process runs a trial, and whether it still does
    objective   one trial: its values, its run, training, the verdict
    pool        workers that run trials until the target is reached, one process or several
    worker      one worker process of a sweep or a benchmark (`python -m experiments.sweep.worker`)
    result      the counts, the best trial and the command that trains it again
    confirm     the best configuration trained with fresh seeds: mean and spread of its test accuracy
    command     `attnlab sweep` from start to end; one worker process of it (`join`)
"""

from experiments.sweep.command import run
from experiments.sweep.confirm import confirm_best
from experiments.sweep.definition import Sweep, build, open_study
from experiments.sweep.objective import Objective, TrialDiverged, TrialSurplus, trial_seed
from experiments.sweep.pool import run_workers, work
from experiments.sweep.result import best_trial, report

__all__ = ["Objective", "Sweep", "TrialDiverged", "TrialSurplus", "best_trial", "build", "confirm_best", "open_study",
           "report", "run", "run_workers", "trial_seed", "work"]
