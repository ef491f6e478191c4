"""The validation set sweeps select on: its own seed (never a training or an test seed), measured at every
evaluation beside the test set, which stays the test set; on every quick task both sets are large enough that an
accuracy's 95% half-width is at most 0.02."""

import math

import pytest
import torch
from test_train import new_record, tiny_config

from experiments import tasks
from experiments.run.train import train, validation_accuracy


def test_validation_seeds_are_never_training_or_eval_seeds():
    # Training seeds [0, 2**31), test seeds [2**31, 2**32), validation seeds [2**32, 2**32 + 2**31).
    assert tasks.VALIDATION_SEED_OFFSET == 2**32 >= tasks.TEST_SEED_OFFSET + 2**31
    keys = [*tasks.list_tasks(), *(f"{name}@{length}" for name in tasks.list_tasks() for length in (16, 1024)),
            "flipflop/dense", "flipflop/sparse"]
    for key in keys:
        seed = tasks.validation_seed(key)
        assert tasks.VALIDATION_SEED_OFFSET <= seed < tasks.VALIDATION_SEED_OFFSET + 2**31, key
        assert seed >= tasks.MAX_TRAIN_SEED and not tasks.TEST_SEED_OFFSET <= seed < 2**32, key
        assert seed != tasks.test_seed(key)
    with pytest.raises(ValueError, match="Training seed"):
        tasks.train_generator(tasks.validation_seed("passkey"))


def half_width(examples, accuracy=0.5):
    """The binomial 95% half-width of an accuracy measured on `examples` examples (widest at 0.5). Counting
    examples, not scored positions: the answers within one example are not independent draws."""
    return 1.96 * math.sqrt(accuracy * (1 - accuracy) / examples)


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_every_quick_tasks_test_and_validation_sets_pin_accuracy_within_0_02(name):
    task = tasks.create_task(name, profile="quick")
    assert half_width(task.test_size) <= 0.02, task.test_size
    assert half_width(task.validation_size) <= 0.02, task.validation_size


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_the_validation_set_is_fixed_eval_sized_and_shares_no_example_with_eval_or_training(name):
    task = tasks.create_task(name, test_size=32)
    validation, again, evaluation = task.validation_set("cpu"), task.validation_set("cpu"), task.test_set("cpu")
    assert torch.equal(validation.inputs, again.inputs) and torch.equal(validation.targets, again.targets)
    assert validation.inputs.shape == evaluation.inputs.shape == (task.test_size, task.seq_len)
    assert task.validation_size == task.test_size
    rows = {tuple(row) for row in validation.inputs.tolist()}
    assert not rows & {tuple(row) for row in evaluation.inputs.tolist()}
    for seed in range(2):
        training = task.batch(task.test_size, tasks.train_generator(seed), "cpu")
        assert not rows & {tuple(row) for row in training.inputs.tolist()}, seed


def test_every_evaluation_and_the_summary_carry_validation_accuracy_and_loss(tmp_path):
    config = tiny_config()
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    evaluations = [line for line in record.read_metrics() if line["kind"] == "eval"]
    assert [line["step"] for line in evaluations] == [20, 40]
    for line in evaluations:
        assert 0 <= line["val_accuracy"] <= 1 and line["val_loss"] > 0
        assert 0 <= line["test_accuracy"] <= 1 and line["test_loss"] > 0  # the test set, as before
        assert validation_accuracy(line) == line["val_accuracy"]
    assert (summary.val_accuracy, summary.val_loss) == (evaluations[-1]["val_accuracy"],
                                                              evaluations[-1]["val_loss"])
    assert record.read_summary().val_accuracy == summary.val_accuracy
    # Measured on other examples than the test set's: the two losses are two measurements.
    assert any(line["val_loss"] != line["test_loss"] for line in evaluations)


def test_pruning_is_asked_with_the_validation_accuracy_not_the_test_accuracy(tmp_path):
    config = tiny_config(eval_every=5)  # at step 5 the two sets' accuracies still differ
    asked = []
    summary = train(config, new_record(tmp_path, config), quiet=True,
                    should_prune=lambda step, accuracy: asked.append((step, accuracy)) or step >= 5)
    assert summary.status == "pruned"
    assert summary.val_accuracy != summary.test_accuracy
    assert asked == [(5, summary.val_accuracy)]
