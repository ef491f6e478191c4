"""Protocol 2 of the benchmark: every run trains its whole budget, the steps to 0.9 and 0.99 on the whole
validation set are events, the learning curve's area is a metric, the learning rate is the best mean of a screen on
two seeds or more, confirmation has six paired seeds by default, and a protocol-1 benchmark still reads and is not
continued as protocol 2."""

import dataclasses

import optuna
import pytest
import torch
from optuna.trial import TrialState
from test_benchmark import TINY_SETS, add, plan

from attnlab.cli import build_parser
from common import schema
from common.schema import from_flags
from experiments import benchmark, revisions
from experiments.benchmark import Ledger, estimate, worker
from experiments.benchmark.definition import grows
from experiments.benchmark.worker import RESULT_FIELDS, curve_area, events
from experiments.run import config as configs
from experiments.run import evaluation
from experiments.run.build import build
from experiments.run.records import RunRecord
from experiments.run.train import set_up
from experiments.schemas.benchmark import BenchmarkOptions


def protocol_2(tmp_path, **extra):
    return plan(tmp_path, task="passkey", variants="dense", protocol=2, interim_validation="all",
                capacity_widths="none", capacity_scales="none", **extra)


def test_events_are_the_first_evaluation_at_or_above_each_level_and_none_where_never_reached():
    curve = [[10, 1.0, 0.5], [20, 2.0, 0.9], [30, 3.0, 0.95], [40, 4.0, 0.99], [50, 5.0, 1.0]]
    assert events(curve) == {"0.9": 20, "0.99": 40}  # an evaluation exactly at the level counts
    assert events([[10, 1.0, 0.89], [20, 2.0, 0.98]]) == {"0.9": 20, "0.99": None}  # censored: never reached
    assert events([]) == {"0.9": None, "0.99": None}


def test_the_curve_area_is_the_trapezoid_over_the_evaluations_divided_by_the_budget():
    curve = [[10, 1.0, 0.2], [20, 2.0, 0.6], [30, 3.0, 1.0]]
    # (20 - 10) x (0.2 + 0.6) / 2 + (30 - 20) x (0.6 + 1.0) / 2 = 4 + 8 = 12, over a budget of 30 steps
    assert curve_area(curve, 30) == pytest.approx(0.4)
    assert curve_area([[10, 1.0, 1.0], [40, 4.0, 1.0]], 40) == pytest.approx(0.75)  # before the first: nothing


def test_a_protocol_2_confirmation_run_trains_its_whole_budget_after_validation_reaches_0_99(tmp_path, monkeypatch):
    real_held_out = evaluation.held_out
    read = []

    def perfect(model, train, sets, buckets, final):  # validation at 1.0 from the first evaluation on
        figures = real_held_out(model, train, sets, buckets, final)
        read.append(figures.get("val_examples"))
        return {**figures, "val_accuracy": 1.0}

    monkeypatch.setattr(evaluation, "held_out", perfect)
    bench = protocol_2(tmp_path, seeds=1, extend_grid="0")
    (confirm,) = [job for job in bench.planned_jobs() if job.stage == "confirm"]
    config = bench.config(confirm)
    assert (config.train.target_accuracy, config.train.interim_validation) == (None, None)
    study = optuna.create_study()
    study.enqueue_trial({}, user_attrs={"job": confirm.to_attr()})
    study.optimize(worker.Objective(bench, quiet=True, should_stop=lambda step: False), n_trials=1)
    result = study.trials[0].user_attrs["result"]
    assert result["steps"] == result["budget_steps"] == config.train.steps == 20  # not stopped at step 10
    assert [step for step, _, _ in result["curve"]] == [10, 20] and read == [None, None]  # the whole set each time
    assert result["events"] == {"0.9": 10, "0.99": 10}
    assert result["curve_area"] == pytest.approx((20 - 10) * 1.0 / 20)
    assert {"accuracy_by_length", "accuracy_by_distance", "test_accuracy"} <= set(RESULT_FIELDS) <= set(result)


def test_the_screen_chooses_the_best_mean_over_its_seeds_not_the_best_single_seed(tmp_path):
    bench = protocol_2(tmp_path)
    jobs = Ledger(bench, []).missing()
    assert bench.tuning_seeds == [0, 1] and {(job.lr, job.seed) for job in jobs} == {
        (lr, seed) for lr in (0.0003, 0.001, 0.003) for seed in (0, 1)}
    validation = {(0.0003, 0): 0.99, (0.0003, 1): 0.50,  # the best single seed, the worse mean
                  (0.001, 0): 0.80, (0.001, 1): 0.80,  # the best mean
                  (0.003, 0): 0.60, (0.003, 1): 0.60}
    study = optuna.create_study()
    for job in jobs:
        add(study, job, TrialState.COMPLETE, val=validation[job.lr, job.seed], test=0.5)
    state = Ledger(bench, study.get_trials()).cells[0]
    assert state.best_lr == 0.001
    # Each screening run trains its fraction of the budget; confirmation the whole budget, on the seeds after the
    # screen's.
    assert bench.config(jobs[0]).train.steps == 5 and bench.screen_fraction == 0.25
    confirmation = Ledger(bench, study.get_trials()).missing()
    assert {job.stage for job in confirmation} == {"confirm"} and [job.seed for job in confirmation] == [2, 3]
    assert bench.config(confirmation[0]).train.steps == 20


def test_a_learning_rate_with_a_diverged_screening_seed_is_not_chosen(tmp_path):
    bench = protocol_2(tmp_path, extend_grid="0")
    study = optuna.create_study()
    for job in Ledger(bench, []).missing():
        if (job.lr, job.seed) == (0.001, 1):
            add(study, job, TrialState.FAIL, outcome="diverged")
        else:
            add(study, job, TrialState.COMPLETE, val={0.0003: 0.7, 0.001: 0.9, 0.003: 0.6}[job.lr], test=0.5)
    assert Ledger(bench, study.get_trials()).cells[0].best_lr == 0.0003


def test_a_new_benchmark_runs_protocol_2_with_six_confirmation_seeds_by_default(tmp_path):
    flags = vars(build_parser().parse_args(["benchmark"]))
    assert flags["task_seeds"] is None  # left out, so that protocol 2's suite can give its rows' seeds
    defaults = from_flags(BenchmarkOptions, flags)
    assert (defaults.protocol, defaults.seeds) == (revisions.PROTOCOL, 6) == (2, 6)
    bench = benchmark.build(dataclasses.replace(defaults, variants=("dense",), tasks=("passkey",),
                                                sets=tuple(TINY_SETS)), device="cpu", runs_dir=tmp_path)
    assert bench.protocol == 2 and bench.confirmation_seeds() == [2, 3, 4, 5, 6, 7]
    assert (bench.target_accuracy, bench.interim_validation, bench.screen_seeds, bench.screen_fraction) == (
        None, None, 2, 0.25)
    command = schema.command(bench)
    assert "--screen-seeds 2 --screen-fraction 0.25" in command and "--target-accuracy" not in command


def test_a_seed_fixes_the_data_order_and_the_initialisation_for_every_variant(tmp_path):
    def first_batch_and_embedding(variant, seed):
        config = configs.resolve(variant=variant, task="passkey", profile="quick", seed=seed, device="cpu",
                                 overrides={**{section: {} for section in configs.SECTIONS},
                                            "model": {"dim": 32, "depth": 1}})
        run = set_up(build(config), RunRecord.create(tmp_path, f"{variant}-{seed}"), {})
        return run.task.batch(16, run.generator, run.device).inputs, run.model.embed.weight.detach().clone()

    dense, local = first_batch_and_embedding("dense", 2), first_batch_and_embedding("local", 2)
    assert torch.equal(dense[0], local[0]) and torch.equal(dense[1], local[1])  # the same batches, the same start
    other = first_batch_and_embedding("dense", 3)
    assert not torch.equal(dense[0], other[0]) and not torch.equal(dense[1], other[1])


def test_a_protocol_1_benchmark_reads_and_is_not_continued_as_protocol_2(tmp_path):
    earlier = plan(tmp_path, task="passkey", variants="dense", target_accuracy="0.99")  # protocol 1, as the record
    benchmark.open_study(earlier)
    assert (earlier.protocol, earlier.tuning_seeds, earlier.confirmation_seeds()) == (1, [0], [1, 2])
    again = benchmark.rebuild(schema.stored(earlier), study_name=earlier.study_name, device="cpu",
                              storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)
    assert again == earlier and "--protocol 1 --target-accuracy 0.99" in schema.command(again)
    refused = r"created for another benchmark \(its .*protocol.* differ\); accepted: the protocol"
    with pytest.raises(ValueError, match=refused):
        benchmark.open_study(plan(tmp_path, task="passkey", variants="dense", protocol=2, interim_validation="all"))


def test_a_protocol_2_benchmark_without_a_name_is_never_protocol_1s_benchmark_of_the_same_profile(tmp_path):
    def named(protocol, **rules):
        options = from_flags(BenchmarkOptions, {"variant": "dense", "task": "passkey", "seeds": 2,
                                                "capacity_widths": "none", "capacity_scales": "none",
                                                "set": TINY_SETS, "extend_grid": "0", "protocol": protocol,
                                                **rules})
        return benchmark.build(options, device="cpu", runs_dir=tmp_path).name

    assert named(1) == "quick"  # protocol 1's record is benchmark-quick
    assert named(2, interim_validation="all") == "quick-protocol2"


def test_a_row_given_more_seeds_trains_the_same_first_seeds_and_then_its_own(tmp_path):
    bench = plan(tmp_path, task="passkey,flipflop", variants="dense", protocol=2, interim_validation="all",
                 capacity_widths="none", capacity_scales="none", task_seeds="flipflop=4")
    assert (bench.seeds_of("passkey"), bench.seeds_of("flipflop")) == (2, 4)
    confirm = benchmark.STAGES["confirm"]
    seeds = {cell.task: [job.seed for job in confirm.jobs(bench, cell, 0.001)] for cell in bench.cells}
    assert seeds == {"passkey": [2, 3], "flipflop": [2, 3, 4, 5]}
    assert "2 fresh seeds (2, 3); 4 on flipflop (2, 3, 4, 5)" in confirm.protocol(bench)
    assert "--task-seeds flipflop=4" in schema.command(bench)
    again = benchmark.rebuild(schema.stored(bench), study_name=bench.study_name, device="cpu",
                              storage_url=None, runs_dir=tmp_path, heartbeat_seconds=1)
    assert again == bench and schema.stored(bench)["task_seeds"] == {"flipflop": 4}
    assert "--task-seeds" not in schema.command(plan(tmp_path, task="passkey", variants="dense"))  # none: not named


@pytest.mark.parametrize("given, refused", [
    ("flipflop", "task-seeds got 'flipflop'; accepted: ROW=N pairs"),
    ("flipflop=0", "task-seeds got 'flipflop=0'; accepted"),
    ("flipflop=x", "task-seeds got 'flipflop=x'; accepted"),
    ("mqar=3", "task-seeds names 'mqar', not a task row of the benchmark; accepted: .* \\(its rows: passkey, "
               "flipflop\\)"),
    ("flipflop=3,flipflop=4", "task-seeds names 'flipflop', named twice"),
])
def test_a_bad_task_seeds_is_one_sentence_naming_it(tmp_path, given, refused):
    with pytest.raises(ValueError, match=refused):
        plan(tmp_path, task="passkey,flipflop", variants="dense", protocol=2, interim_validation="all",
             capacity_widths="none", capacity_scales="none", task_seeds=given)


def test_a_benchmark_continued_with_more_seeds_keeps_its_study_and_one_with_fewer_is_refused(tmp_path):
    def grown(**extra):
        return protocol_2(tmp_path, **extra)

    first = grown()
    study = benchmark.open_study(first)
    add(study, first.planned_jobs()[0], TrialState.COMPLETE, val=0.5, test=0.5)
    more = grown(task_seeds="passkey=3")
    assert estimate.stored(more).benchmark == more  # an estimate reads the study as grown and stores nothing
    assert benchmark.open_study(first).user_attrs["definition"]["task_seeds"] == {}
    assert benchmark.open_study(more).user_attrs["definition"]["task_seeds"] == {"passkey": 3}
    assert len(benchmark.open_study(grown(seeds=4)).get_trials()) == 1  # the settled job stays the benchmark's
    fewer = r"created for another benchmark \(its seeds differ\); accepted: .*at least its seeds on every row"
    with pytest.raises(ValueError, match=fewer):
        benchmark.open_study(grown(seeds=3))  # 4 stored: 3 would drop the fourth seed's jobs
    with pytest.raises(ValueError, match=r"\(its seeds, lr_multiples differ\)"):
        benchmark.open_study(grown(seeds=5, lr_multiples="1,3,9"))  # more seeds, but another grid
    stored = schema.stored(first)
    assert grows(stored, {**stored, "seeds": 2}) and not grows(
        {**stored, "task_seeds": {"passkey": 3}}, stored)


def test_a_rows_last_seed_may_be_the_largest_seed_and_not_one_past_it(tmp_path):
    last = 2**31 - 6  # + 2 tuning + 4 confirmation seeds: the last one 2**31 - 1, the largest a task draws with
    rows = dict(task="passkey,flipflop", variants="dense", protocol=2, interim_validation="all",
                capacity_widths="none", capacity_scales="none", seed=last)
    assert plan(tmp_path, task_seeds="flipflop=4", **rows).confirmation_seeds("flipflop")[-1] == 2**31 - 1
    with pytest.raises(ValueError, match=f"seed {last} with 2 tuning and 5 confirmation seeds passes the largest"):
        plan(tmp_path, task_seeds="flipflop=5", **rows)


def test_a_fixed_learning_rate_under_protocol_2_screens_nothing_and_confirms_from_the_first_seed(tmp_path):
    bench = protocol_2(tmp_path, lr_multiples="3", extend_grid="0")
    assert bench.fixed_rate and bench.tuning_seeds == [] and bench.confirmation_seeds() == [0, 1]
    jobs = Ledger(bench, []).missing()
    assert [(job.stage, job.lr, job.seed) for job in jobs] == [("confirm", 0.003, 0), ("confirm", 0.003, 1)]
    assert bench.config(jobs[0]).train.steps == 20  # the whole budget: no screen compresses it
    study = optuna.create_study()
    for job in jobs:
        add(study, job, TrialState.COMPLETE, val=0.9, test=0.8)
    state = Ledger(bench, study.get_trials()).cells[0]
    assert (state.best_lr, state.tuning, state.settled("confirm")) == (0.003, [], True)
    assert Ledger(bench, study.get_trials()).complete
    assert "Tuning: none. Every cell trains at one fixed learning rate, 3.0 times" in \
        benchmark.STAGES["tune"].protocol(bench)
    # The last seed allowed counts no tuning seeds: from seed s, 2 seeds end at s + 1, at most 2**31 - 1.
    last = 2**31 - 2
    assert protocol_2(tmp_path, lr_multiples="3", extend_grid="0", seed=last).confirmation_seeds() == [
        2**31 - 2, 2**31 - 1]
    with pytest.raises(ValueError, match=f"seed {last + 1} with 0 tuning and 2 confirmation seeds passes the largest"):
        protocol_2(tmp_path, lr_multiples="3", extend_grid="0", seed=last + 1)
    with pytest.raises(ValueError, match="at least 3"):  # two rates screen too little, whatever the protocol
        protocol_2(tmp_path, lr_multiples="1,3", extend_grid="0")
    # Protocol 1 at one rate still tunes it once, at the first seed.
    once = plan(tmp_path, task="passkey", variants="dense", lr_multiples="3", extend_grid="0")
    assert not once.fixed_rate and once.tuning_seeds == [0] and once.confirmation_seeds() == [1, 2]
