"""One trial of a sweep: its values, its run (new, or the run of the trial it retries), training, and the
verdict. Trials are judged on the validation set: the pruner hears the validation accuracy of every
evaluation and the objective is the final validation accuracy, maximised, so the test set (the test set)
plays no part in choosing a configuration and stays a fair measure of the chosen one."""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import TrialState

from experiments.run import config as configs
from experiments.run.launch import start_record
from experiments.run.records import RecordError, RunRecord
from experiments.run.train import train
from experiments.sweep.definition import Sweep
from experiments.sweep.liveness import machine


class TrialDiverged(Exception):
    """The trial's run diverged: the trial fails, the study goes on."""


class TrialSurplus(Exception):
    """Workers started trials at the same instant, and the earlier ones already fill the target."""


class SweepInterrupted(Exception):
    """SIGINT or SIGTERM stopped the trial's run at a checkpoint; the trial is queued again."""

    def __init__(self, number: int) -> None:
        super().__init__(f"trial {number} interrupted")
        self.number = number


def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial `number` of a sweep seeded with `seed`."""
    return zlib.crc32(f"{seed}/{number}".encode())


def inherited_record(runs_dir: Path, trial: optuna.Trial, config: configs.RunConfig) -> RunRecord:
    """The run of `trial`: a retried trial continues the run of the trial it retries (its `run_id` user
    attribute, inherited) when that run is in `runs_dir` with the same config; otherwise a new run."""
    inherited = trial.user_attrs.get("run_id")
    if inherited is not None:
        try:
            record = RunRecord.open(runs_dir, inherited)
            if configs.from_dict(record.read_config()) == config:
                return record
        except ValueError:  # not in this runs folder (another machine's), never written, or no longer valid
            pass
    return start_record(runs_dir, config)


class Objective:
    """One trial: its values, its run (new, or the run of the trial it retries), train, and the verdict."""

    def __init__(self, sweep: Sweep, *, quiet: bool, should_stop: Callable[[int], bool]) -> None:
        self.sweep = sweep
        self.quiet = quiet
        self.should_stop = should_stop

    def __call__(self, trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", {"machine": machine(), "pid": os.getpid()})
        ahead = [other for other in trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                                                   TrialState.RUNNING))
                 if other.number < trial.number]
        if len(ahead) >= self.sweep.trials:  # another worker passed the check in work() at the same instant
            trial.set_user_attr("status", "surplus")
            raise TrialSurplus(f"trials {[other.number for other in ahead]} already fill the target")
        # Each trial draws from a seed of its own, the sweep's seed and the trial's number: no two trials of
        # concurrent workers draw alike, and a study run again draws what it drew before.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            trial.study.sampler = optuna.samplers.TPESampler(seed=trial_seed(self.sweep.seed, trial.number))
        config = self.sweep.config(self.sweep.space.suggest(trial))
        record = inherited_record(self.sweep.runs_dir, trial, config)
        trial.set_user_attr("run_id", record.run_id)

        def should_prune(step: int, val_accuracy: float) -> bool:
            trial.report(val_accuracy, step)
            return trial.should_prune()

        try:
            summary = train(config, record, quiet=self.quiet, should_stop=self.should_stop, should_prune=should_prune,
                            tags={"study": self.sweep.study_name, "trial": trial.number})
        except RecordError:  # the record itself: another process trains it, or its checkpoint does not match
            raise
        except ValueError as error:  # inputs were validated before training: this is a bug, show its trace
            raise RuntimeError(f"run {record.run_id} of trial {trial.number} failed") from error
        trial.set_user_attr("status", summary.status)
        if summary.status == "pruned":
            raise optuna.TrialPruned(f"validation accuracy {summary.val_accuracy:.3f} at step {summary.steps}")
        if summary.status == "diverged":
            raise TrialDiverged(summary.error)
        if summary.status == "interrupted":
            raise SweepInterrupted(trial.number)
        return summary.val_accuracy
