"""Interim evaluations (`experiments.run.evaluation`): what the evaluations before a run's last read, what its last
reads, and where a run that reaches its target on the interim subset stops."""

import json

import pytest
import torch

from experiments import tasks
from experiments.benchmark import estimate
from experiments.run import config as configs
from experiments.run.evaluation import spread
from experiments.run.train import train
from tests.experiments.test_train import new_record, tiny_config


def eval_lines(record):
    return [json.loads(line) for line in (record.path / "metrics.jsonl").read_text().splitlines()
            if json.loads(line)["kind"] == "eval"]


def test_interim_evaluations_read_the_validation_subset_only_and_the_last_reads_every_set_in_full(tmp_path):
    config = tiny_config(steps=40, eval_every=10, interim_test=False, interim_validation=16)
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    *interim, last = eval_lines(record)
    assert [line["step"] for line in interim] == [10, 20, 30] and last["step"] == 40
    assert all("test_accuracy" not in line and line["val_examples"] == 16 for line in interim)
    assert "val_examples" not in last and "accuracy_by_distance" in last and "target_reached" not in last
    assert (summary.test_accuracy, summary.val_accuracy) == (last["test_accuracy"], last["val_accuracy"])
    # The same run with every set read at every evaluation trains identically: evaluating changes no weights.
    full = tiny_config(steps=40, eval_every=10)
    everything = new_record(tmp_path, full, "full")
    assert train(full, everything, quiet=True).test_accuracy == summary.test_accuracy
    assert all("test_accuracy" in line and "val_examples" not in line for line in eval_lines(everything))


def test_a_run_that_reaches_its_target_on_the_subset_stops_there_with_the_full_evaluation_marked(tmp_path):
    config = tiny_config(steps=40, eval_every=10, interim_test=False, interim_validation=16, target_accuracy=0.01)
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    (line,) = eval_lines(record)  # the interim line that reached it is replaced by the full one, at the same step
    assert line["step"] == 10 and line["target_reached"] is True and "test_accuracy" in line
    assert "val_examples" not in line and summary.steps == summary.target_step == 10
    # Resumed, it trains no further, whatever the full set read.
    assert train(config, record, quiet=True).steps == 10


def test_a_full_evaluation_below_the_target_still_marks_where_the_run_stopped(tmp_path, monkeypatch):
    config = tiny_config(steps=40, eval_every=10, interim_test=False, interim_validation=16, target_accuracy=0.5)
    reads = iter([0.6, 0.4])  # the subset reaches the target, the full set then reads less

    def figures(model, test_set, batch_size, buckets):
        value = next(reads) if test_set.inputs.shape[0] in (16, 64) and not buckets else 0.3
        return {"test_accuracy": value, "test_loss": 1.0}

    monkeypatch.setattr("experiments.run.evaluation.evaluate", figures)
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    assert summary.steps == summary.target_step == 10 and summary.val_accuracy == 0.4


def test_the_subset_is_evenly_spaced_so_each_bucket_keeps_its_share():
    task = tasks.create_task("passkey", seq_len=33, num_buckets=4, test_size=64)
    validation = task.validation_set("cpu")
    part = spread(validation, 16)
    buckets = task.test_set("cpu").metadata["bucket"]
    assert torch.equal(part.inputs, validation.inputs[torch.linspace(0, 63, 16).round().long()])
    assert torch.bincount(part.metadata["bucket"], minlength=4).tolist() == [4, 4, 4, 4]
    assert torch.bincount(buckets, minlength=4).tolist() == [16, 16, 16, 16]
    assert spread(validation, None) is validation and spread(validation, 64) is validation


def test_interim_validation_must_be_a_positive_count():
    with pytest.raises(configs.OptionError, match="'interim_validation' got 0; accepted: none or an integer >= 1"):
        tiny_config(interim_validation=0)


def test_the_estimate_counts_interim_evaluations_and_the_last_one_apart():
    train_config = tiny_config(steps=40, eval_every=10, interim_test=False, interim_validation=16).train
    timing = estimate.Timing(step_seconds=0.5, eval_seconds=1.0, last_eval_seconds=4.0)
    assert timing.job_seconds(train_config, 40) == 40 * 0.5 + 3 * 1.0 + 4.0
    assert estimate.Timing(0.5, 2.0).job_seconds(train_config, 20) == 20 * 0.5 + 2 * 2.0
