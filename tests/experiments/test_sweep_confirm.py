"""Sweeps choose on the validation set and report the test set: the objective and the pruner hear the
validation accuracy, the end shows the best trial's test accuracy, and `--confirm-seeds N` trains the best
configuration with N fresh seeds, resumably, and reports the mean and spread of their test accuracy."""

import json
import re
import statistics

import pytest
from optuna.trial import TrialState
from test_sweep import in_process_sweep

from experiments import sweep as sweeps
from experiments.run.records import Summary
from experiments.sweep import objective
from experiments.sweep.confirm import spread

T_975_TWO_DEGREES = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom


def test_the_objective_and_the_pruner_hear_the_validation_accuracy_and_the_end_shows_the_test_accuracy(
        tmp_path, monkeypatch):
    def trained(config, record, *, should_prune, tags, **ignored):  # validation and test accuracy differ
        assert should_prune(10, 0.125) is False  # what train passes: the validation accuracy of the evaluation
        summary = Summary(run_id=record.run_id, status="completed", steps=40, val_accuracy=0.25, test_accuracy=0.75,
                          tags=tags)
        record.write_summary(summary)
        return summary

    monkeypatch.setattr(objective, "train", trained)
    plan, study = in_process_sweep(tmp_path, trials=1)
    assert sweeps.work(plan, study, quiet=True) == 0
    (trial,) = study.trials
    assert trial.value == 0.25 and trial.intermediate_values == {10: 0.125}
    assert f"best: trial 0, validation accuracy 0.2500, test accuracy 0.7500, run {trial.user_attrs['run_id']}" \
        in sweeps.report(plan, study)


def confirmation_summaries(runs_dir):
    summaries = [Summary.from_dict(json.loads(path.read_text())) for path in runs_dir.glob("*/summary.json")]
    return sorted((summary for summary in summaries if summary.tags.get("confirm")), key=lambda s: s.seed)


def test_confirm_seeds_trains_the_best_config_with_fresh_seeds_resumably_and_reports_mean_and_spread(
        tmp_path, capsys):
    plan, study = in_process_sweep(tmp_path, trials=1, confirm_seeds=3)
    assert sweeps.work(plan, study, quiet=True) == 0
    (best,) = study.trials
    trial_config = json.loads((tmp_path / best.user_attrs["run_id"] / "config.json").read_text())

    # Stopped by a signal in its first run, confirming ends with 130; the same call resumes that run.
    stopped = sweeps.confirm_best(plan, study, quiet=True, should_stop=lambda step: step >= 20)
    (interrupted,) = confirmation_summaries(tmp_path)
    assert stopped == 130 and interrupted.status == "interrupted" and interrupted.steps == 20
    capsys.readouterr()
    assert sweeps.confirm_best(plan, study, quiet=True, should_stop=lambda step: False) == 0
    output = capsys.readouterr().out

    summaries = confirmation_summaries(tmp_path)
    assert [summary.seed for summary in summaries] == [1, 2, 3]  # the seeds after the sweep's seed 0
    assert summaries[0].run_id == interrupted.run_id and summaries[0].steps == 40
    for summary in summaries:
        assert summary.status == "completed"
        assert summary.tags == {"study": plan.study_name, "confirm": True, "confirms_trial": best.number}
        config = json.loads((tmp_path / summary.run_id / "config.json").read_text())
        assert {**config, "seed": 0} == trial_config  # the best trial's config, its seed the only change
    accuracies = [summary.test_accuracy for summary in summaries]
    mean, std = statistics.fmean(accuracies), statistics.stdev(accuracies)
    (line,) = [line for line in output.splitlines() if line.startswith("test accuracy over 3 fresh seeds")]
    assert f"mean {mean:.4f}, std {std:.4f}" in line
    low, high = map(float, re.search(r"95% interval of the mean (\S+)\.\.(\S+) ", line).groups())
    assert (low + high) / 2 == pytest.approx(mean, abs=1e-4)
    assert (high - low) / 2 == pytest.approx(T_975_TWO_DEGREES * std / 3 ** 0.5, abs=1e-4)

    # Confirming again trains nothing: every run is kept as it was.
    checkpoints = {path: path.stat().st_mtime_ns for path in tmp_path.glob("*/checkpoint.pt")}
    assert sweeps.confirm_best(plan, study, quiet=True, should_stop=lambda step: False) == 0
    again = capsys.readouterr().out
    assert again.count("(kept)") == 3 and line in again
    assert {path: path.stat().st_mtime_ns for path in tmp_path.glob("*/checkpoint.pt")} == checkpoints
    assert len(list(tmp_path.glob("*/config.json"))) == 4  # one trial, three confirmation runs
    assert [trial.state for trial in study.trials] == [TrialState.COMPLETE]


def test_the_spread_of_one_seed_says_it_needs_more():
    assert spread([0.5]) == "test accuracy over 1 fresh seed: 0.5000 (a spread needs 2 seeds or more)"
