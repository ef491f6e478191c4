"""What a sweep found: the study's counts, its best trial (chosen on the validation set; its run's test
accuracy beside it), the best values and the command that trains them again."""

from __future__ import annotations

from collections import Counter

import optuna
from optuna.trial import FrozenTrial, TrialState

from experiments.run.records import RecordError, RunRecord
from experiments.run.rerun import rerun_command
from experiments.sweep.definition import Sweep
from experiments.sweep.pool import short


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    """The complete trial of highest validation accuracy (the earliest among equals), or None."""
    complete = [trial for trial in study.get_trials(deepcopy=False) if trial.state == TrialState.COMPLETE]
    return max(complete, key=lambda trial: (trial.value, -trial.number)) if complete else None


def accuracy_on_test_set(sweep: Sweep, run_id: str) -> str:
    """The test (test set) accuracy its run's summary holds, shown; the run may be on another machine."""
    try:
        accuracy = RunRecord.open(sweep.runs_dir, run_id).read_summary().test_accuracy
    except RecordError:
        return f"unknown here (no run {run_id} in {sweep.runs_dir})"
    return f"{accuracy:.4f}"


def report(sweep: Sweep, study: optuna.Study) -> str:
    """The study's counts, its best trial (values, run, config) and the command that reruns it."""
    count = Counter(trial.state for trial in study.get_trials(deepcopy=False))
    lines = [f"study {sweep.study_name} ({sweep.storage_shown}): {count[TrialState.COMPLETE]} of {sweep.trials} "
             f"complete, {count[TrialState.PRUNED]} pruned, {count[TrialState.FAIL]} failed, "
             f"{count[TrialState.RUNNING]} running"]
    best = best_trial(study)
    if best is None:
        return "\n".join([*lines, "no trial has completed yet"])
    run_id = best.user_attrs["run_id"]
    lines.append(f"best: trial {best.number}, validation accuracy {best.value:.4f}, test accuracy "
                 f"{accuracy_on_test_set(sweep, run_id)}, run {run_id} "
                 f"(config: {sweep.runs_dir / run_id / 'config.json'})")
    lines += [f"  {name} = {short(value)}" for name, value in best.params.items()]
    lines.append(f"rerun it: {rerun_command(sweep.trial_config(best), runs_dir=sweep.runs_dir)}")
    return "\n".join(lines)
