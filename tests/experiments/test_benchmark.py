"""The benchmark: cells (skipped with their reason where a variant cannot run a task), one learning-rate grid
for every variant, the choice on the validation set, confirmation with fresh seeds, the capacity stage at
other widths and task sizes, jobs queued twice or retried, resuming where it stopped, workers on a real
PostgreSQL server of which one is killed, and one-sentence errors."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pandas as pd
import pytest
from command_line import refusal
from optuna.trial import TrialState, create_trial
from poison import poison_forward
from postgres import postgres_server

from attnlab.cli import main
from common import schema
from common.options import OptionError
from common.schema import from_flags
from experiments import benchmark, revisions
from experiments.benchmark import Job, estimate, record, worker
from experiments.benchmark.definition import upgraded
from experiments.benchmark.ledger import COMPLETED, DUPLICATE, FAILED, OUTCOME, RESULT, WAITING, Ledger, owns_its_job
from experiments.run.records import RunRecord, Summary
from experiments.run.train import train
from experiments.schemas.benchmark import BenchmarkOptions
from experiments.sweep.storage import MAX_RETRIES

ROOT = Path(__file__).resolve().parents[2]
TINY_RUNS = ["model.dim=32", "model.depth=1", "train.batch_size=16", "train.log_every=5", "train.eval_every=10",
             "train.checkpoint_every=10", "train.warmup_steps=2", "train.steps=20"]
TINY_SETS = ["task.seq_len=12", "task.num_keys=4", "task.num_distractors=4", "task.num_buckets=4",
             "task.test_size=32", *TINY_RUNS]
TINY_MQAR = ["task.seq_len=16", "task.num_pairs=2", "task.test_size=32", *TINY_RUNS]  # x2 pairs still fit
TINY = [word for assignment in TINY_SETS for word in ("--set", assignment)]
CAPACITY = {"capacity_widths": "0.5,2", "capacity_scales": "2"}  # widths both ways, whatever the protocol's default


def plan(tmp_path, variants="dense,linformer", task="passkey,flipflop", seeds=2, sets=(), tiny=TINY_SETS, protocol=1,
         target_accuracy="none", interim_validation="608", **extra):
    """The benchmark `attnlab benchmark` builds at tiny sizes, with the command line's capacity defaults
    unless `extra` says otherwise; under protocol 1 (one tuning seed, whose stages these tests pin) unless told,
    without a target and reading 608 validation examples at each interim evaluation unless told."""
    options = from_flags(BenchmarkOptions, {
        "variant": variants, "task": task, "seeds": seeds, "lr_multiples": "0.3,1,3", "set": [*tiny, *sets],
        "name": "tiny", "heartbeat_seconds": 1, "protocol": protocol, "target_accuracy": target_accuracy,
        "interim_validation": interim_validation, "extend_grid": "0", **{**CAPACITY, **extra}})
    return benchmark.build(options, device="cpu", runs_dir=tmp_path)


def test_cells_are_every_variant_on_every_task_and_one_that_cannot_run_is_kept_as_skipped_with_its_reason(tmp_path):
    bench = plan(tmp_path)
    cells = {(cell.variant, cell.task): cell for cell in bench.cells}
    assert list(cells) == [("dense", "passkey"), ("linformer", "passkey"), ("dense", "flipflop"),
                           ("linformer", "flipflop")]
    reason = cells["linformer", "flipflop"].skipped
    assert "'linformer' is bidirectional" in reason and "'flipflop' needs causal attention" in reason
    assert all(cell.skipped is None for key, cell in cells.items() if key != ("linformer", "flipflop"))
    # One grid per task, the same for every variant: multiples of the task profile's learning rate.
    assert bench.learning_rates(cells["dense", "passkey"]) == bench.learning_rates(cells["linformer", "passkey"]) \
        == [0.0003, 0.001, 0.003]
    assert bench.learning_rates(cells["dense", "flipflop"]) == [0.0009, 0.003, 0.009]
    missing = Ledger(bench, []).missing()
    assert len(missing) == 9 and {job.stage for job in missing} == {"tune"}  # 3 cells x 3 learning rates
    assert {job.seed for job in missing} == {0}
    assert not any(tmp_path.iterdir())  # preparing touches nothing


def add(study, job, state, *, val=None, test=None, parameters=1000, outcome=None, target_step=None,
        curve=(), **system_attrs):
    """A trial holding `job`, in `state`, with the figures a worker writes when it completes (stopped at the
    benchmark's target at `target_step` where given), or the outcome it writes when its run diverges or fails."""
    user_attrs = {"job": job.to_attr(), **({OUTCOME: outcome} if outcome else {})}
    if state == TrialState.COMPLETE:
        user_attrs[RESULT] = {"status": "completed", "val_accuracy": val, "test_accuracy": test, "chance": 0.25,
                              "parameters": parameters, "steps": target_step or 20, "tokens": 3840,
                              "wall_seconds": 1.0, "run_id": f"run-{job.key}", "error": None,
                              "target_step": target_step,
                              "target_seconds": None if target_step is None else target_step / 20,
                              "curve": [[step, step / 20, val] for step in curve]}
    study.add_trial(create_trial(state=state, value=val if state == TrialState.COMPLETE else None,
                                 user_attrs=user_attrs, system_attrs=system_attrs))


def test_tuning_chooses_on_the_validation_set_and_only_then_queues_confirmation_with_fresh_seeds(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", seeds=3, capacity_widths="none", capacity_scales="none")
    study = optuna.create_study()
    low, middle, high = Ledger(bench, []).missing()
    add(study, low, TrialState.COMPLETE, val=0.5, test=0.9)  # the best test accuracy must not choose
    add(study, middle, TrialState.COMPLETE, val=0.8, test=0.2)
    ledger = Ledger(bench, study.get_trials())
    assert ledger.missing() == [high] and ledger.cells[0].best_lr is None  # tuning has not settled
    add(study, high, TrialState.FAIL, outcome="diverged")
    ledger = Ledger(bench, study.get_trials())
    assert ledger.cells[0].best_lr == middle.lr
    confirmation = ledger.missing()
    assert [(job.stage, job.lr, job.seed) for job in confirmation] == [("confirm", middle.lr, 1),
                                                                      ("confirm", middle.lr, 2),
                                                                      ("confirm", middle.lr, 3)]
    assert not ledger.complete
    for job in confirmation:
        add(study, job, TrialState.COMPLETE, val=0.7, test=0.6)
    ledger = Ledger(bench, study.get_trials())
    assert ledger.complete and ledger.missing() == []  # capacity off: confirmation is the last stage


def test_tuning_scores_a_run_stopped_at_the_target_as_the_target_and_prefers_the_fewest_steps_to_it(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_widths="none", capacity_scales="none",
                 target_accuracy="0.99")
    study = optuna.create_study()
    low, middle, high = Ledger(bench, []).missing()
    add(study, low, TrialState.COMPLETE, val=0.995, test=0.99, target_step=15)  # past it by noise
    add(study, middle, TrialState.COMPLETE, val=0.991, test=0.99, target_step=10)  # there soonest
    add(study, high, TrialState.COMPLETE, val=0.98, test=0.99)  # never reached it
    assert Ledger(bench, study.get_trials()).cells[0].best_lr == middle.lr
    # A run never stopped at the target whose last, whole read is past it still loses to one at it by step 10: what
    # makes stopping an outdone sibling exact.
    study = optuna.create_study()
    add(study, low, TrialState.COMPLETE, val=0.995, test=0.99)
    add(study, middle, TrialState.COMPLETE, val=0.991, test=0.99, target_step=10)
    add(study, high, TrialState.COMPLETE, val=0.5, test=0.5)
    assert Ledger(bench, study.get_trials()).cells[0].best_lr == middle.lr


def test_a_tuning_run_is_outdone_once_a_sibling_is_at_the_target_with_its_whole_validation_set(tmp_path):
    bench = plan(tmp_path, task="passkey,flipflop", variants="dense", target_accuracy="0.99")
    study = optuna.create_study()
    low, middle, high, other_task, *_ = Ledger(bench, []).missing()
    add(study, middle, TrialState.COMPLETE, val=0.995, test=0.99, target_step=10)
    assert worker.outdone(low, study.get_trials(), 10, bench.target) == (middle.lr, 10)
    assert worker.outdone(high, study.get_trials(), 20, bench.target) == (middle.lr, 10)
    assert worker.outdone(low, study.get_trials(), 9, bench.target) is None  # it may still get there first
    assert worker.outdone(middle, study.get_trials(), 20, bench.target) is None  # not by itself
    assert worker.outdone(other_task, study.get_trials(), 20, bench.target) is None  # another cell
    assert worker.outdone(dataclasses.replace(low, stage="confirm", seed=1), study.get_trials(), 20,
                          bench.target) is None
    # Stopped at the target on its interim read, below it on the whole set: it may still lose, so nothing stops.
    study = optuna.create_study()
    add(study, middle, TrialState.COMPLETE, val=0.985, test=0.99, target_step=10)
    assert worker.outdone(low, study.get_trials(), 20, bench.target) is None


def test_tuning_is_queued_in_waves_every_cell_s_centre_learning_rate_first(tmp_path):
    bench = plan(tmp_path, task="passkey,flipflop", variants="dense", target_accuracy="0.99")
    ledger = Ledger(bench, [])
    queued = ledger.queued(ledger.missing())
    assert [(job.task, job.lr) for job in queued] == [
        (task, sorted(bench.learning_rates(bench.cell("dense", task)))[index]) for index in (1, 0, 2)
        for task in ("passkey", "flipflop")]
    wider = dataclasses.replace(bench, lr_multiples=(0.1, 0.3, 1.0, 3.0, 9.0))
    grid = sorted(wider.learning_rates(wider.cell("dense", "passkey")))
    assert sorted(grid, key=lambda lr: Ledger(wider, []).wave(Job("tune", "dense", "passkey", lr, 0))) == \
        [grid[2], grid[1], grid[3], grid[0], grid[4]]
    confirm = dataclasses.replace(queued[0], stage="confirm", seed=1)
    assert ledger.queued([confirm, *queued])[-1] == confirm  # every other job after tuning's grid
    # Confirmation in waves of seeds: each cell's seed 1 before any cell's seed 2, whatever order the cells call them.
    seeds = [dataclasses.replace(queued[index], stage="confirm", seed=seed) for index in (0, 1) for seed in (2, 1)]
    assert [(job.task, job.seed) for job in ledger.queued(seeds)] == [
        ("passkey", 1), ("flipflop", 1), ("passkey", 2), ("flipflop", 2)]


def test_the_estimate_counts_a_record_s_tuning_runs_as_the_rule_stops_them_and_its_extensions(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_widths="none", capacity_scales="none",
                 target_accuracy="0.99", extend_grid="1")
    study = optuna.create_study()
    low, middle, high = Ledger(bench, []).missing()
    add(study, low, TrialState.COMPLETE, val=0.5, curve=(10, 20))  # ran its 20 steps before the rule
    add(study, middle, TrialState.COMPLETE, val=0.98, target_step=10, curve=(10,))  # whole set below
    add(study, high, TrialState.COMPLETE, val=0.995, target_step=10, curve=(10,))  # the top edge: extend
    (beyond,) = Ledger(bench, study.get_trials()).missing()
    add(study, beyond, TrialState.COMPLETE, val=0.6, curve=(10, 20))
    kept = Ledger(bench, study.get_trials())
    # Queued after the centre, whose whole set is below the target, the low rate runs its 20 steps; the one beyond
    # the grid runs after the high one has reached the target at step 10.
    assert sorted(record.earlier_steps(kept)[("dense", "passkey", "own", "tune")]) == [10, 10, 10, 20]
    assert estimate.predicted_extensions(bench, kept) == Counter({(("dense", "passkey", "own"), "tune"): 1})
    # The record replayed on a grid centred higher (x1, x3, x9): its runs at those rates, the best in the middle.
    higher = dataclasses.replace(bench, lr_multiples=(1.0, 3.0, 9.0))
    replayed = Ledger(higher, study.get_trials())
    # Queued first, x3 reaches the target at step 10, so x9, queued last, stops there instead of running its 20.
    assert sorted(record.earlier_steps(replayed)[("dense", "passkey", "own", "tune")]) == [10, 10, 10]
    assert estimate.predicted_extensions(higher, replayed) == Counter()


def test_an_outdone_tuning_run_stops_at_its_next_evaluation_and_the_estimate_replays_the_rule(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", seeds=1, capacity_widths="none",
                 capacity_scales="none", target_accuracy="0.999")
    study = benchmark.open_study(bench)
    low, middle, high = Ledger(bench, []).missing()
    add(study, high, TrialState.COMPLETE, val=1.0, test=1.0, target_step=10)
    assert benchmark.work(bench, study, quiet=True) == 0
    ledger = Ledger(bench, study.get_trials())
    results = {state.job.lr: state.result for state in ledger.cells[0].tuning}
    for lr in (low.lr, middle.lr):  # ten steps of a tiny model do not reach 0.999
        assert results[lr]["outdone"] == {"lr": high.lr, "step": 10}
        assert results[lr]["steps"] == 10 and results[lr]["status"] == "pruned"
    assert ledger.cells[0].best_lr == high.lr and ledger.complete
    (confirmation,) = ledger.cells[0].confirmation
    assert "outdone" not in confirmation.result  # only tuning runs compete
    from analysis.benchmark import page
    index, _ = page.write(ledger, tmp_path / "page")
    assert "2 tuning runs stopped as outdone" in index.read_text() and f"lr {high.lr:g} was at the target by step 10" \
        in index.read_text()
    # A run recorded before the rule is counted at the length the rule gives it now.
    curve = [[10, 1.0, 0.5], [20, 2.0, 0.6], [30, 3.0, 0.7]]
    assert record.outdone_steps({"steps": 30, "curve": curve}, 15) == 20
    assert record.outdone_steps({"steps": 30, "curve": curve, "target_step": 10}, 15) == 30
    assert record.outdone_steps({"steps": 30, "curve": curve}, None) == 30


def test_the_target_reaches_every_job_and_is_part_of_the_benchmark(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", target_accuracy="0.99")
    (job, *_) = Ledger(bench, []).missing()
    assert bench.config(job).train.target_accuracy == 0.99 and schema.stored(bench)["target_accuracy"] == 0.99
    assert "--target-accuracy 0.99" in schema.command(bench)
    assert plan(tmp_path, task="passkey", variants="dense").config(job).train.target_accuracy is None
    assert upgraded({"variants": ["dense"]})["target_accuracy"] is None  # stored before: every step


def test_every_job_reads_its_test_set_once_at_its_end_and_a_validation_subset_before(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", interim_validation="16")
    (job, *_) = Ledger(bench, []).missing()
    train_config = bench.config(job).train
    assert (train_config.interim_test, train_config.interim_validation) == (False, 16)
    assert schema.stored(bench)["interim_validation"] == 16 and "--interim-validation 16" in schema.command(bench)
    whole = plan(tmp_path, task="passkey", variants="dense", interim_validation="all")
    assert whole.config(job).train.interim_validation is None and "--interim-validation all" in schema.command(whole)
    # Stored before interim evaluations: every evaluation read every set, as its jobs did.
    assert {key: upgraded({"variants": ["dense"]})[key] for key in ("interim_test", "interim_validation")} == {
        "interim_test": True, "interim_validation": None}


def test_a_benchmark_stores_the_protocol_it_runs_and_a_definition_stored_before_reads_as_protocol_1(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", protocol=revisions.PROTOCOL, interim_validation="all")
    assert bench.protocol == schema.stored(bench)["protocol"] == revisions.PROTOCOL == 2  # new benchmarks: protocol 2
    assert upgraded({"variants": ["dense"]})["protocol"] == 1
    # A definition stored before benchmarks kept their protocol (and its screen) reads as protocol 1: one tuning seed
    # over the whole budget.
    earlier = plan(tmp_path, task="passkey", variants="dense")
    stored = {key: value for key, value in schema.stored(earlier).items()
              if key not in ("protocol", "screen_seeds", "screen_fraction")}
    older = benchmark.rebuild(stored, study_name=bench.study_name, device="cpu", storage_url=None,
                              runs_dir=tmp_path, heartbeat_seconds=1)
    assert (older.protocol, older.tuning_seeds, older.screen_fraction) == (1, [0], 1.0)
    with pytest.raises(OptionError, match=r"runs protocol 99, which this version does not have; accepted: 1, 2\."):
        benchmark.rebuild({**schema.stored(bench), "protocol": 99}, study_name=bench.study_name,
                          device="cpu", storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)

def settle_tuning_and_confirmation(bench, study):
    """A new benchmark's tuning completed (the middle learning rate best), then its confirmation."""
    for stage in ("tune", "confirm"):
        jobs = Ledger(bench, study.get_trials()).missing()
        assert {job.stage for job in jobs} == {stage}
        for job in jobs:
            add(study, job, TrialState.COMPLETE, val=0.9 if job.lr == 0.001 else 0.5, test=0.5)
    return Ledger(bench, study.get_trials())


def test_capacity_trains_the_confirmed_cell_at_other_widths_and_task_sizes_once_confirmation_has_settled(tmp_path):
    bench = plan(tmp_path, task="mqar,passkey", variants="dense", seeds=3, tiny=TINY_MQAR,
                 sets=["task.num_keys=4", "task.num_buckets=4"], capacity_widths="0.5,2", capacity_scales="2",
                 capacity_seeds=2)
    study = optuna.create_study()
    for job in Ledger(bench, []).missing():
        add(study, job, TrialState.COMPLETE, val=0.9 if job.lr == 0.001 else 0.5, test=0.5)
    confirmation = Ledger(bench, study.get_trials()).missing()
    assert {job.stage for job in confirmation} == {"confirm"}  # capacity waits for confirmation to settle
    for job in confirmation[:-1]:
        add(study, job, TrialState.COMPLETE, val=0.7, test=0.6)
    missing = Ledger(bench, study.get_trials()).missing()
    assert confirmation[-1].task == "passkey" and confirmation[-1] in missing
    # mqar's confirmation has settled, passkey's has not (its last seed): only mqar's capacity jobs are queued
    assert {job.task for job in missing if job.stage == "capacity"} == {"mqar"}
    add(study, confirmation[-1], TrialState.FAIL, outcome="diverged")  # settled, though not completed
    capacity = Ledger(bench, study.get_trials()).missing()
    assert {job.stage for job in capacity} == {"capacity"} and {job.lr for job in capacity} == {0.001}
    assert {job.seed for job in capacity} == {1, 2}  # the first two confirmation seeds
    sizes = {(job.task, job.axis, job.value) for job in capacity}
    assert sizes == {("mqar", "width", 16), ("mqar", "width", 64), ("mqar", "num_pairs", 4),
                     ("passkey", "width", 16), ("passkey", "width", 64)}  # passkey declares no capacity option
    own = bench.config(Job("confirm", "dense", "mqar", 0.001, 1))
    for job in capacity:
        config = bench.config(job)
        assert config.seed == job.seed and config.train.lr == 0.001
        if job.axis == "width":  # the width changes; the heads keep their number and widen with it
            assert config.model.dim == job.value and config.model.heads == own.model.heads
            assert config.model.attention_head_dim == job.value // own.model.heads
            assert config.task_options == bench.config(Job("confirm", "dense", job.task, 0.001, 1)).task_options
        else:  # the task's capacity option changes, nothing else
            assert config.task_options == dataclasses.replace(own.task_options,
                                                              num_pairs=2 * own.task_options.num_pairs)
            assert config.model == own.model
    for job in capacity:
        add(study, job, TrialState.COMPLETE, val=0.4, test=0.3)
    ledger = Ledger(bench, study.get_trials())
    assert ledger.complete and [len(state.capacity) for state in ledger.cells] == [6, 4]  # sizes x seeds


def test_a_fixed_head_width_widens_with_the_model(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense", sets=["model.head_dim=4"], capacity_widths="2")
    (job,) = settle_tuning_and_confirmation(bench, optuna.create_study()).missing()
    config = bench.config(job)
    assert (config.model.dim, config.model.head_dim, config.model.heads) == (64, 8, 4)


def test_a_capacity_size_that_cannot_be_built_is_kept_as_skipped_with_its_reason(tmp_path):
    bench = plan(tmp_path, task="mqar", variants="dense", tiny=TINY_MQAR, capacity_widths="0.3,2",
                 capacity_scales="2,2.2,4")
    points = {(point.axis, point.multiple): point for point in bench.cells[0].capacity}
    assert [(point.axis, point.value) for point in points.values() if point.skipped is None] == [
        ("width", 32), ("width", 64), ("num_pairs", 2), ("num_pairs", 4)]  # the cell's own sizes, then x2
    width = points["width", 0.3].skipped  # 32 x 0.3 rounds to 10, which 4 heads do not divide
    assert "'dim' got 10" in width and "multiple of heads = 4" in width
    assert points["num_pairs", 2.2].skipped == "num_pairs 2 x2.2 rounds to 4, a size the cell already trains at"
    pairs = points["num_pairs", 4].skipped  # 8 pairs do not fit in 16 tokens
    assert "'seq_len' got 16" in pairs and "4 * num_pairs = 32" in pairs
    ledger = settle_tuning_and_confirmation(bench, optuna.create_study())
    assert {(job.axis, job.value) for job in ledger.missing()} == {("width", 64), ("num_pairs", 4)}
    header = benchmark.command.header(bench, workers=1)
    assert "capacity width 10 skipped in 1 cell: " in header and "capacity num_pairs 8 skipped in 1 cell" in header


def test_a_capacity_task_size_whose_held_out_sets_cannot_be_drawn_is_skipped_with_the_reason(tmp_path):
    sets = ["task.test_size=2", "task.num_distractors=3", *TINY_RUNS]  # the quick 24x24 image; x3: 9 distractors
    bench = plan(tmp_path, task="pathfinder", variants="dense,local", tiny=sets, capacity_widths="none",
                 capacity_scales="3")
    for cell in bench.cells:
        points = {point.multiple: point for point in cell.capacity}
        assert points[1.0].skipped is None
        assert points[3.0].skipped == ("Pathfinder placed 11 paths of up to 34 points 3 pixels apart, one copy with "
                                       "a place to break, in 0 of 2000 24x24 images; accepted: sizes where at least "
                                       "10 fit (fewer or shorter paths, or a larger image).")
    assert "capacity num_distractors 9 skipped in 2 cells: Pathfinder placed 11 paths" in \
        benchmark.command.header(bench, workers=1)


def test_capacity_is_off_with_none_and_its_settings_are_part_of_the_benchmark(tmp_path):
    bench = plan(tmp_path, task="mqar", variants="dense", tiny=TINY_MQAR, capacity_widths="none",
                 capacity_scales="none")
    assert bench.cells[0].capacity == ()
    ledger = settle_tuning_and_confirmation(bench, optuna.create_study())
    assert ledger.complete and ledger.missing() == []
    assert "capacity: off" in benchmark.command.header(bench, workers=1)
    assert "--capacity-widths none --capacity-scales none" in schema.command(bench)
    benchmark.open_study(bench)
    with pytest.raises(ValueError, match=r"its capacity_widths, capacity_scales differ"):
        benchmark.open_study(plan(tmp_path, task="mqar", variants="dense", tiny=TINY_MQAR))


def test_a_job_queued_twice_belongs_to_its_first_trial_and_a_retry_continues_it(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense")
    study = optuna.create_study()
    job = Ledger(bench, []).missing()[0]
    add(study, job, TrialState.FAIL)  # trial 0: its worker died
    add(study, job, TrialState.WAITING)  # trial 1: queued again by a worker planning at the same instant
    add(study, job, TrialState.COMPLETE, val=0.5, test=0.5, failed_trial=0, retry_history=[0])  # trial 2: the retry
    trials = study.get_trials()
    assert owns_its_job(trials[2], trials) and not owns_its_job(trials[1], trials)
    (state,) = [state for key, state in Ledger(bench, trials).states.items() if key == job.key]
    assert [trial.number for trial in state.trials] == [0, 2] and state.state == COMPLETED


def test_a_job_whose_worker_died_too_often_has_failed_with_the_reason(tmp_path):
    bench = plan(tmp_path, task="passkey", variants="dense")
    study = optuna.create_study()
    job = Ledger(bench, []).missing()[0]
    add(study, job, TrialState.FAIL)
    for number in range(1, MAX_RETRIES + 1):
        add(study, job, TrialState.FAIL, failed_trial=0, retry_history=list(range(number)))
    state = Ledger(bench, study.get_trials()).states[job.key]
    assert state.state == FAILED and state.reason == f"its worker died {MAX_RETRIES + 1} times"
    study = optuna.create_study()
    add(study, job, TrialState.FAIL)  # failed a moment ago: its retry is being queued
    assert Ledger(bench, study.get_trials()).states[job.key].state == WAITING


def summaries(folder):
    return {path.parent.name: Summary.from_dict(json.loads(path.read_text())) for path in folder.glob("*/summary.json")}


def test_a_stopped_benchmark_continues_where_it_stopped_and_lists_a_diverged_run(tmp_path, monkeypatch):
    poison_forward(monkeypatch, at_call=3)  # the first job's third step turns NaN
    bench = plan(tmp_path, task="passkey", variants="dense")
    study = benchmark.open_study(bench)
    reached = {"step 10": 0}

    def stop_in_the_third_job(step):  # the first job (the grid's centre) diverges by step 5
        reached["step 10"] += step == 10
        return step == 10 and reached["step 10"] == 2
    assert benchmark.work(bench, study, quiet=True, should_stop=stop_in_the_third_job) == 130
    (stopped,) = [summary for summary in summaries(bench.folder).values() if summary.status == "interrupted"]
    assert benchmark.work(bench, study, quiet=True) == 0

    ledger = Ledger(bench, study.get_trials())
    assert ledger.complete
    runs = summaries(bench.folder)
    # One run per job (3 learning rates, 2 seeds, 2 widths): the stopped job continued its own run.
    assert len(runs) == 7 == len(ledger.states)
    assert runs[stopped.run_id].status == "completed" and runs[stopped.run_id].steps == 20
    (diverged,) = [state for state in ledger.states.values() if state.state != COMPLETED]
    assert diverged.state == "diverged" and "non-finite" in diverged.reason and diverged.job.lr == 0.001
    cell = ledger.cells[0]
    assert cell.best_lr in (0.0003, 0.003) and [job.job.seed for job in cell.confirmation] == [1, 2]
    assert {runs[job.result["run_id"]].tags["stage"] for job in cell.confirmation} == {"confirm"}
    assert {runs[job.result["run_id"]].tags["stage"] for job in cell.capacity} == {"capacity"}
    (resumed,) = [state for state in ledger.states.values() if state.result["run_id"] == stopped.run_id]
    assert [step for step, seconds, accuracy in resumed.result["curve"]] == [10, 20]  # its evaluations, each once
    assert Counter(trial.state for trial in study.get_trials())[TrialState.COMPLETE] == 6


def test_a_tiny_benchmark_trains_its_capacity_points_and_its_page_has_the_capacity_table(tmp_path, capsys):
    out = tmp_path / "reports"
    words = [word for assignment in TINY_MQAR for word in ("--set", assignment)]
    assert main(["benchmark", "--variant", "dense", "--task", "mqar", "--protocol", "1",
                 "--seeds", "2", *words, "--name", "tiny",
                 "--extend-grid", "0", "--runs-dir", str(tmp_path), "--out", str(out), "--heartbeat-seconds", "1",
                 "--workers", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "capacity: the confirmed configuration at model widths x0.5; each task's capacity option x2, seed 1" \
        in printed
    # Each job's line counts the jobs settled so far: 3 tuning, 2 confirmation and 2 capacity jobs in all.
    counts = [line.rsplit("[", 1)[1] for line in printed.splitlines() if line.endswith("jobs settled]")]
    assert counts == [f"{settled} of 7 jobs settled]" for settled in range(1, 8)]
    configs = [json.loads(path.read_text()) for path in (tmp_path / "benchmark" / "tiny").glob("*/config.json")]
    sizes = sorted((config["model"]["dim"], config["task_options"]["num_pairs"]) for config in configs
                   if config["seed"] == 1)  # the first confirmation seed: the cell's own size, then capacity's
    assert sizes == [(16, 2), (32, 2), (32, 4)] and len(configs) == 3 + 2 + 2
    folder = out / "benchmark-tiny"
    table = pd.read_csv(folder / "tables" / "capacity.csv")
    assert sorted(zip(table["axis"], table["value"], strict=True)) == [
        ("num_pairs", 2), ("num_pairs", 4), ("width", 16), ("width", 32)]
    assert table["test accuracy"].between(0, 1).all() and set(table["seeds"]) == {1}
    assert all((folder / "figures" / f"capacity-{axis}.png").is_file() for axis in ("width", "count"))
    distance = pd.read_csv(folder / "tables" / "distance.csv")  # the workers keep each run's distance buckets
    assert set(distance["task"]) == {"mqar"} and set(distance["seeds"]) == {2} and len(distance) > 1
    assert distance["test accuracy"].between(0, 1).all()


def test_a_benchmark_with_capacity_off_trains_no_capacity_run_and_says_so(tmp_path):
    out = tmp_path / "reports"
    assert main(["benchmark", "--variant", "dense", "--task", "passkey", "--protocol", "1",
                 "--seeds", "1", *TINY, "--name", "tiny",
                 "--capacity-widths", "none", "--capacity-scales", "none", "--extend-grid", "0", "--runs-dir",
                 str(tmp_path), "--out", str(out), "--heartbeat-seconds", "1", "--quiet"]) == 0
    assert len(list((tmp_path / "benchmark" / "tiny").glob("*/config.json"))) == 3 + 1
    text = (out / "benchmark-tiny" / "report.md").read_text()
    assert "Capacity: off (--capacity-widths none and --capacity-scales none)." in text
    assert not (out / "benchmark-tiny" / "tables" / "capacity.csv").exists()


def test_a_run_that_raises_is_listed_as_failed_with_its_error_and_the_benchmark_goes_on(tmp_path, monkeypatch):
    real_train = worker.train

    def train(config, record, **kwargs):
        if config.train.lr == 0.003:
            raise RuntimeError("the kernel ran out of memory")
        return real_train(config, record, **kwargs)

    monkeypatch.setattr(worker, "train", train)
    bench = plan(tmp_path, task="passkey", variants="dense")
    study = benchmark.open_study(bench)
    assert benchmark.work(bench, study, quiet=True) == 0
    ledger = Ledger(bench, study.get_trials())
    (failed,) = [state for state in ledger.states.values() if state.state != COMPLETED]
    assert failed.state == FAILED and failed.job.lr == 0.003
    assert failed.reason == "RuntimeError: the kernel ran out of memory"
    assert ledger.complete and len(ledger.cells[0].confirmation) == 2


def attnlab(*args):
    return subprocess.Popen([sys.executable, "-m", "attnlab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, cwd=ROOT)


def wait_for_a_job_mid_run(study, folder, processes, timeout=240):
    """A running trial of one of `processes` whose run has checkpointed but not finished."""
    pids = {process.pid for process in processes}
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert all(process.poll() is None for process in processes), [process.communicate() for process in processes]
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            run = folder / str(trial.user_attrs.get("run_id"))
            if trial.user_attrs.get("worker", {}).get("pid") in pids and (run / "checkpoint.pt").exists() \
                    and json.loads((run / "summary.json").read_text())["status"] == "running":
                return trial
        time.sleep(0.05)
    raise AssertionError("no job reached the middle of its run")


def test_two_workers_on_postgres_finish_the_benchmark_with_every_job_done_once_though_one_is_killed(tmp_path):
    with postgres_server() as url:
        command = ["benchmark", "--variant", "dense,linformer", "--task", "passkey", "--protocol", "1",
                   "--seeds", "2", *TINY,
                   "--target-accuracy", "none",  # every run long enough to be killed in
                   "--set", "train.steps=60", "--extend-grid", "0", "--storage", url, "--name", "shared",
                   "--workers", "1",
                   "--runs-dir", str(tmp_path), "--out", str(tmp_path / "reports"), "--heartbeat-seconds", "1",
                   "--quiet"]
        first, second = attnlab(*command), attnlab(*command)
        folder = tmp_path / "benchmark" / "shared"
        while not list(folder.glob("*/config.json")):  # a job's run has started: the study exists
            assert first.poll() is None and second.poll() is None, (first.communicate(), second.communicate())
            time.sleep(0.1)
        study = optuna.load_study(study_name="benchmark-shared", storage=url)
        killed = wait_for_a_job_mid_run(study, folder, [first, second])
        victim, survivor = (first, second) if killed.user_attrs["worker"]["pid"] == first.pid else (second, first)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        stdout, stderr = survivor.communicate(timeout=600)
        assert survivor.returncode == 0, stderr

        trials = study.get_trials(deepcopy=False)
        complete = Counter(Job.from_attr(trial.user_attrs["job"]).key for trial in trials
                           if trial.state == TrialState.COMPLETE)
        # 2 cells x (3 learning rates + 2 seeds + 1 capacity width), each once
        assert len(complete) == 12 and set(complete.values()) == {1}
        assert all(trial.user_attrs.get(OUTCOME) == DUPLICATE for trial in trials
                   if trial.state == TrialState.FAIL and trial.number != killed.number)
        (retry,) = [trial for trial in trials if trial.system_attrs.get("failed_trial") == killed.number]
        assert retry.state == TrialState.COMPLETE and retry.user_attrs["run_id"] == killed.user_attrs["run_id"]
        runs = summaries(folder)
        assert len(runs) == 12 and all(run.status == "completed" and run.steps == 60 for run in runs.values())
        evaluations = [json.loads(line)["step"] for line in (folder / killed.user_attrs["run_id"] / "metrics.jsonl")
                       .read_text().splitlines() if json.loads(line)["kind"] == "eval"]
        assert evaluations == [10, 20, 30, 40, 50, 60]  # resumed from its checkpoint: each evaluation once
        assert "wrote " in stdout and (tmp_path / "reports" / "benchmark-shared" / "index.html").is_file()


@pytest.mark.parametrize("args, fragments", [
    (["--variant", "loacl"], ["'loacl'", "did you mean 'local'"]),
    (["--task", "passkey,passkey"], ["'passkey'", "listed twice"]),
    (["--lr-multiples", "1,3"], ["lr-multiples", "1.0,3.0", "at least 3"]),
    (["--lr-multiples", "1,3,x"], ["'1,3,x'", "numbers > 0, comma-separated"]),
    (["--protocol", "1", "--lr-multiples", "1"], ["extend-grid got 2 with the one learning rate 1", "accepted: 0"]),
    (["--seeds", "0"], ["seeds got 0", ">= 1"]),
    (["--set", "train.lr=0.01"], ["train.lr", "--lr-multiples"]),
    (["--set", "task.num_kyes=4"], ["task.num_kyes", "did you mean 'num_keys'"]),
    (["--name", "../elsewhere"], ["'../elsewhere'", "plain name"]),
    (["--capacity-widths", "0.5,x"], ["capacity-widths got '0.5,x'", "multiples of each cell's model width"]),
    (["--capacity-widths", "1,2"], ["capacity-widths got '1,2'", "other than 1"]),
    (["--capacity-scales", "2,-2"], ["capacity-scales got '2,-2'", "each > 0"]),
    (["--capacity-scales", "2,2"], ["capacity-scales got '2,2'", "listed once"]),
    (["--capacity-seeds", "9"], ["capacity-seeds got 9", "from 1 to seeds = 6"]),
    (["--target-accuracy", "x"], ["target-accuracy got 'x'", "(0, 1]"]),
    (["--protocol", "1", "--target-accuracy", "1.5"], ["'target_accuracy' got 1.5", "(0, 1]"]),
    (["--target-accuracy", "0.99"], ["target-accuracy 0.99 is protocol 1's stop", "steps to 0.9 and 0.99 as events",
                                     "accepted: none, or --protocol 1"]),
    (["--interim-validation", "608"], ["interim-validation 608 reads part of the validation set",
                                       "accepted: all, or --protocol 1"]),
    (["--screen-seeds", "1"], ["screen-seeds got 1", "an integer >= 2"]),
    (["--screen-fraction", "1.5"], ["screen-fraction got 1.5", "a number in (0, 1]"]),
    (["--protocol", "1", "--screen-seeds", "2"], ["screen-seeds 2 and screen-fraction 1 belong to protocol 2",
                                                  "accepted under --protocol 1: 1 and 1"]),
    (["--protocol", "3"], ["protocol got 3", "accepted: 1, 2"]),
    (["--set", "train.target_accuracy=0.9"], ["train.target_accuracy", "--target-accuracy X"]),
    (["--interim-validation", "0"], ["interim-validation got '0'", "an integer >= 1", "or all"]),
    (["--set", "train.interim_validation=9"], ["train.interim_validation", "--interim-validation N"]),
    (["--set", "train.interim_test=true"], ["train.interim_test", "read once"]),
    (["--variant", "core:window=3"], ["'core' is a set"]),
])
def test_bad_benchmark_input_gets_one_sentence_and_exit_code_2(tmp_path, capsys, args, fragments):
    line = refusal(capsys, ["benchmark", "--variant", "dense", "--task", "passkey", "--runs-dir",
                                   str(tmp_path), *args])
    assert line.startswith("attnlab benchmark: ")
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not any(tmp_path.iterdir())


def test_joining_a_benchmark_with_other_settings_is_refused(tmp_path):
    benchmark.open_study(plan(tmp_path, task="passkey"))
    with pytest.raises(ValueError, match=r"created for another benchmark \(its seeds differ\).*--name"):
        benchmark.open_study(plan(tmp_path, task="passkey", seeds=1))  # more would join: test_benchmark_protocol2


def test_a_benchmark_created_under_one_protocol_is_not_continued_under_another(tmp_path):
    earlier = plan(tmp_path, task="passkey")
    benchmark.open_study(earlier)
    with pytest.raises(ValueError, match=r"created for another benchmark \(its protocol differ\)"):
        benchmark.open_study(dataclasses.replace(earlier, protocol=earlier.protocol + 1))


def make_benchmark(*variables, target="benchmark"):
    """The `attnlab benchmark` command `make TARGET` runs with these variables, on one line (make -n)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MAKE", "MFLAGS"))}
    result = subprocess.run(["make", "-n", "--no-print-directory", target, *variables], cwd=ROOT,
                            capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    (line,) = [line for line in result.stdout.replace("\\\n", " ").splitlines() if "attnlab benchmark" in line]
    return " ".join(line.split())


def test_make_benchmark_hands_its_variables_to_the_command():
    line = make_benchmark("VARIANT=dense,local", "TASK=mqar", "SEEDS=5", "PROFILE=standard", "WORKERS=4",
                          "STORAGE=postgresql://db/x", "NAME=main")
    for words in ("--variant dense,local", "--task mqar", "--seeds 5", "--profile standard", "--workers 4",
                  "--storage 'postgresql://db/x'", "--name main"):
        assert words in line, (words, line)
    default = make_benchmark()
    assert "--variant" not in default and "--task" not in default, default  # the core set on the default suite


def test_benchmark_help_names_its_options():
    result = subprocess.run([sys.executable, "-m", "attnlab", "benchmark", "--help"], capture_output=True,
                            text=True, cwd=ROOT)
    for option in ("--variant", "--task", "--seeds", "--profile", "--lr-multiples", "--name", "--storage", "--workers",
                   "--heartbeat-seconds", "--out", "--capacity-widths", "--capacity-scales", "--capacity-seeds",
                   "--extend-grid", "--size-to-dense", "--no-size-to-dense"):
        assert option in result.stdout, option


def test_the_estimate_counts_every_job_the_protocol_will_run_at_the_size_it_runs_at(tmp_path, monkeypatch):
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    sizes = estimate.estimate(plan(tmp_path), workers=1, quiet=True)
    # Three cells (linformer on flip-flop is skipped), each at its own width 32 and at widths 16 and 64.
    assert sorted(zip(sizes["variant"], sizes["task"], sizes["size"], strict=True)) == sorted(
        (variant, task, size) for variant, task in [("dense", "passkey"), ("linformer", "passkey"),
                                                    ("dense", "flipflop")]
        for size in ("own", "width 16", "width 64"))
    own = sizes[sizes["size"] == "own"]
    assert (own["tune jobs"] == 3).all() and (own["confirm jobs"] == 2).all() and (own["capacity jobs"] == 0).all()
    points = sizes[sizes["size"] != "own"]
    assert (points[["tune jobs", "confirm jobs"]] == 0).all().all() and (points["capacity jobs"] == 1).all()
    # 20 steps at 0.5 s and 2 evaluations (every 10 steps) at 2 s: 14 s a job.
    assert (sizes["job seconds"] == 14.0).all() and sizes["seconds"].sum() == 14.0 * (9 + 6 + 6)
    assert not any(tmp_path.iterdir())  # no storage is created to estimate


def test_the_estimate_leaves_out_the_jobs_the_storage_holds_as_settled(tmp_path, monkeypatch):
    monkeypatch.setattr(estimate, "time_run", lambda config: estimate.Timing(0.5, 2.0))
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_widths="none", capacity_scales="none")
    study = benchmark.open_study(bench)
    first, second, third = bench.stage("tune").jobs(bench, bench.cells[0])
    add(study, first, TrialState.COMPLETE, val=0.5, test=0.5)
    add(study, second, TrialState.FAIL, outcome=FAILED)  # settled: failed
    add(study, third, TrialState.RUNNING)  # not settled: it still costs what it costs
    (row,) = estimate.estimate(bench, workers=1, quiet=True).to_dict("records")
    assert (row["tune jobs"], row["confirm jobs"]) == (1, 2)


def test_a_size_that_cannot_be_set_up_is_listed_with_its_error_and_not_counted(tmp_path, monkeypatch):
    def time_run(config):
        if config.model.dim == 64:
            raise RuntimeError("out of memory")
        return estimate.Timing(0.5, 2.0)

    monkeypatch.setattr(estimate, "time_run", time_run)
    bench = plan(tmp_path, task="passkey", variants="dense", capacity_scales="none")
    sizes = estimate.estimate(bench, workers=1, quiet=True).set_index("size")
    assert sizes.loc["width 64", "error"] == "RuntimeError: out of memory" and pd.isna(sizes.loc["own", "error"])
    text = estimate.summary(sizes.reset_index(), bench, workers=1)
    assert sizes["seconds"].sum() == 14.0 * 6  # (3 + 2 + 1) jobs of 14 s; the failing size adds nothing
    assert "not counted: dense on passkey (width 64) could not be set up, so its 1 job(s) would fail: RuntimeError: " \
           "out of memory" in text


def test_an_evaluation_is_timed_as_often_as_a_run_evaluates(tmp_path):
    config = plan(tmp_path, task="passkey", variants="dense", sets=["train.steps=25"]).config(
        Job("tune", "dense", "passkey", 1e-3, 0))
    record = RunRecord.create(tmp_path, "run")
    train(config, record, quiet=True)
    assert sum(line["kind"] == "eval" for line in record.read_metrics()) == estimate.evaluations(config.train) == 3
    timing = estimate.time_run(config)
    assert 0 < timing.step_seconds < 60 and 0 < timing.eval_seconds < 60
    assert [path.name for path in tmp_path.iterdir()] == ["run"]  # the timed run leaves nothing behind


def test_the_estimate_times_runs_with_the_allocator_a_training_process_has():
    # experiments.speed.memory makes glibc map every allocation over 64 KiB afresh, for its peak-memory readings;
    # a run's steps then take up to twice as long as they do in a worker.
    code = "import sys, experiments.benchmark.estimate; print('experiments.speed.memory' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"


def test_benchmark_estimate_prints_the_hours_writes_the_table_trains_nothing_and_the_benchmark_then_runs(
        tmp_path, capsys):
    words = ["benchmark", "--variant", "dense,lstm", "--task", "passkey", "--protocol", "1",
             "--seeds", "1", *TINY, "--name", "tiny",
             "--capacity-widths", "none", "--capacity-scales", "none", "--runs-dir", str(tmp_path / "runs"),
             "--out", str(tmp_path / "reports"), "--quiet"]
    assert main([*words, "--estimate", "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    # per cell 3 learning rates, 1 beyond the grid (half of --extend-grid 2: no record says where the best lies)
    # and 1 confirmation
    assert "benchmark tiny: 10 jobs to run" in printed and "with 2 workers, about" in printed
    assert "not counted" not in printed  # every size was set up
    folder = tmp_path / "runs" / "benchmark" / "tiny"
    table = pd.read_csv(folder / "estimate.csv")
    assert list(table["variant"]) == ["dense", "lstm"] and (table["seconds"] > 0).all()
    assert sorted(path.name for path in folder.iterdir()) == ["estimate-record.csv", "estimate.csv"]  # no run
    kept = pd.read_csv(folder / "estimate-record.csv")  # the same as a record for docs/records/, with provenance
    assert list(kept["what"]) == ["stage tune", "stage confirm", "stage capacity", "variant dense", "variant lstm",
                                  "every job", "wall time with 2 workers"]
    assert list(kept["jobs"].iloc[:6]) == [8, 2, 0, 5, 5, 10] and {"commit", "device", "command", "source"} <= set(kept)
    assert kept["hours"].iloc[-1] == pytest.approx(kept["hours"].iloc[-2] / 2, abs=0.01)
    assert "--estimate --workers 2" in kept["command"].iloc[0]
    assert main(words) == 0  # the same benchmark, run: its page beside nothing the estimate wrote in its way
    assert (tmp_path / "reports" / "benchmark-tiny" / "index.html").is_file()


def test_make_benchmark_estimate_hands_the_benchmark_its_variables():
    line = make_benchmark("VARIANT=dense,local", "TASK=mqar", "SEEDS=5", "WORKERS=2", "NAME=main",
                          target="benchmark-estimate")
    for words in ("--estimate", "--variant dense,local", "--task mqar", "--seeds 5", "--workers 2", "--name main"):
        assert words in line, (words, line)
