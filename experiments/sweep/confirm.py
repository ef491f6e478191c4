"""`--confirm-seeds N`: the best configuration trained again with N fresh seeds, and the mean and spread of
their test accuracy.

The sweep chose its best trial on the validation set, training every trial with the sweep's seed; that
trial's test accuracy is one draw, and the best of many draws flatters. Confirming trains the chosen
configuration with the N seeds after the sweep's (`Sweep.fresh_seeds`), none of which trained a trial,
as ordinary runs tagged with the study and `confirm: true`, and prints their test accuracies, their mean,
their standard deviation and the 95% interval of the mean (Student's t). Confirming again keeps the runs
that finished and resumes the interrupted ones from their checkpoints.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import optuna

from common.statistics import mean_interval
from experiments.run import config as configs
from experiments.run.launch import start_record
from experiments.run.records import RunRecord, Summary
from experiments.run.train import train
from experiments.sweep.definition import Sweep
from experiments.sweep.result import best_trial

CONFIRM = "confirm"  # the tag of a confirmation run
FINISHED = ("completed", "diverged")  # a confirmation run in one of these states is kept, not trained again


def confirmation_runs(sweep: Sweep) -> dict[str, RunRecord]:
    """The study's confirmation runs in the runs folder, by their config (as JSON)."""
    found = {}
    for path in sorted(sweep.runs_dir.glob("*/summary.json")):
        record = RunRecord(path.parent)
        try:
            tags = record.read_summary().tags or {}
            if tags.get("study") == sweep.study_name and tags.get(CONFIRM) is True:
                found[configs.to_json(configs.from_dict(record.read_config()))] = record
        except ValueError:  # an unreadable record, or one no longer valid, confirms nothing
            continue
    return found


def spread(accuracies: list[float]) -> str:
    """The mean, standard deviation and 95% interval of the mean (Student's t) of the test accuracies."""
    count = len(accuracies)
    if count == 0:
        return "test accuracy: no confirmation run completed"
    if count == 1:
        return f"test accuracy over 1 fresh seed: {accuracies[0]:.4f} (a spread needs 2 seeds or more)"
    interval = mean_interval(accuracies)
    return (f"test accuracy over {count} fresh seeds: mean {interval.mean:.4f}, std {interval.std:.4f}, 95% interval "
            f"of the mean {interval.low:.4f}..{interval.high:.4f} (Student's t, {count - 1} "
            f"degree{'s' if count > 2 else ''} of freedom)")


def _train_or_keep(config: configs.RunConfig, found: dict[str, RunRecord], sweep: Sweep, *, quiet: bool,
                   should_stop: Callable[[int], bool], tags: dict[str, Any]) -> tuple[Summary, bool]:
    """The summary of the confirmation run of `config`, and whether it was kept: a finished run is kept,
    one that stopped is resumed, and a new one is started when there is none."""
    record = found.get(configs.to_json(config))
    if record is not None:
        summary = record.read_summary()
        if summary.status in FINISHED:
            return summary, True
    else:
        record = start_record(sweep.runs_dir, config)
    return train(config, record, quiet=quiet, should_stop=should_stop, tags=tags), False


def confirm_best(sweep: Sweep, study: optuna.Study, *, quiet: bool, should_stop: Callable[[int], bool]) -> int:
    """Train the best trial's configuration with the sweep's fresh seeds: 0 when every run completed, 130
    when a signal stopped one (the same command continues), 1 otherwise."""
    best = best_trial(study)
    if best is None:
        print(f"sweep {sweep.study_name}: no complete trial to confirm", file=sys.stderr)
        return 1
    seeds = sweep.fresh_seeds
    print(f"confirm: trial {best.number}'s configuration with {len(seeds)} fresh seeds "
          f"({', '.join(map(str, seeds))}; the trials trained with seed {sweep.seed})", flush=True)
    found = confirmation_runs(sweep)
    tags = {"study": sweep.study_name, CONFIRM: True, "confirms_trial": best.number}
    accuracies, exit_code = [], 0
    for seed in seeds:
        summary, kept = _train_or_keep(dataclasses.replace(sweep.trial_config(best), seed=seed), found, sweep,
                                       quiet=quiet, should_stop=should_stop, tags=tags)
        if summary.status == "interrupted":
            print(f"sweep {sweep.study_name}: confirmation run {summary.run_id} interrupted; run the same "
                  "command to continue", file=sys.stderr)
            return 130
        if summary.status == "completed":
            accuracies.append(summary.test_accuracy)
            outcome = f"test accuracy {summary.test_accuracy:.4f}, validation accuracy {summary.val_accuracy:.4f}"
        else:
            exit_code, outcome = 1, f"{summary.status}: {summary.error}"
        print(f"  seed {seed}: {outcome}; run {summary.run_id}{' (kept)' if kept else ''}", flush=True)
    print(spread(accuracies))
    return exit_code
