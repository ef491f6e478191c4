"""Induction: one earlier trigger at a uniform position, its follower asked for at the end, at every length."""

import pytest
import torch
from solvers import induction as solver

import variants
from experiments import tasks


def draw(task, size, seed=0):
    return task.batch(size, tasks.train_generator(seed), "cpu")


def trigger(task):
    return task.vocabulary.index("*")


def test_eval_sets_at_the_training_and_every_eval_length_agree_with_the_solver():
    task = tasks.create_task("induction", **solver.SMALL)
    sets = {f"length={task.seq_len}": task.test_set("cpu"), **task.extra_test_sets("cpu")}
    assert sorted(sets) == ["length=24", "length=40"]
    for name, batch in sets.items():
        length = int(name.removeprefix("length="))
        assert batch.inputs.shape == (task.test_size, length)
        for index, tokens in enumerate(batch.inputs.tolist()):
            ((position, (answer, distance)),) = solver.solve(task, tokens).items()
            assert (batch.targets[index] != tasks.IGNORE).nonzero().flatten().tolist() == [position]
            assert (batch.targets[index, position], batch.distance[index, position]) == (answer, distance)
            assert batch.metadata["distance"][index] == distance


@pytest.mark.parametrize("length", [32, 64, 128])
def test_the_trigger_appears_exactly_twice_the_second_time_at_the_end(length):
    task = tasks.create_task("induction").at_length(length)
    inputs = draw(task, 2048).inputs  # (batch, seq)
    is_trigger = inputs == trigger(task)
    assert (is_trigger.sum(dim=1) == 2).all() and is_trigger[:, -1].all()
    assert not is_trigger[:, -2].any()  # the first trigger is followed by its answer, not by the final trigger


def test_answers_and_the_filling_tokens_are_uniform_over_the_vocabulary():
    task = tasks.create_task("induction")
    batch = draw(task, 4096)
    answers = torch.bincount(batch.targets[:, -1], minlength=task.num_classes).float()  # (num_tokens,)
    assert answers.min() > 0.75 * answers.mean() and answers.max() < 1.25 * answers.mean()
    filling = batch.inputs[batch.inputs != trigger(task)]
    counts = torch.bincount(filling, minlength=task.num_classes).float()  # (num_tokens,)
    assert counts.min() > 0.95 * counts.mean() and counts.max() < 1.05 * counts.mean()


def test_training_distances_are_uniform_over_1_to_seq_len_minus_2():
    task = tasks.create_task("induction")
    distance = draw(task, 8192).metadata["distance"]
    counts = torch.bincount(distance, minlength=task.seq_len - 1)[1:].float()  # (seq_len - 2,)
    assert counts.numel() == task.seq_len - 2 and counts.min() > 0.6 * counts.mean()
    assert counts.max() < 1.4 * counts.mean()


def test_longer_eval_lengths_put_most_answers_farther_back_than_any_training_distance():
    task = tasks.create_task("induction")
    assert task.eval_lengths == (64, 128) and task.default_model["positions"] == "none"
    longest_trained = task.seq_len - 2
    sets = task.extra_test_sets("cpu")
    for length in task.eval_lengths:
        distance = sets[f"length={length}"].metadata["distance"]
        assert distance.max() > longest_trained and distance.max() <= length - 2
        expected = (length - 2 - longest_trained) / (length - 2)  # the share of 1..length-2 beyond training
        assert abs((distance > longest_trained).float().mean() - expected) < 0.1


def test_at_length_keeps_every_other_option_and_each_length_has_its_own_fixed_eval_set():
    task = tasks.create_task("induction", num_tokens=7)
    longer = task.at_length(200)
    assert (longer.seq_len, longer.options.num_tokens, longer.eval_lengths, longer.vocabulary) == (
        200, 7, (), task.vocabulary)
    first, second = task.extra_test_sets("cpu"), task.extra_test_sets("cpu")
    assert all(torch.equal(first[name].inputs, second[name].inputs) for name in first)
    assert not torch.equal(first["length=64"].inputs[:, :32], task.test_set("cpu").inputs)


def test_chance_vocabulary_and_answer_ids_follow_the_options():
    task = tasks.create_task("induction", num_tokens=5)
    assert (task.num_classes, task.vocab_size, task.chance_accuracy) == (5, 6, 0.2)
    assert task.decode([0, 4, 5]) == ["t0", "t4", "*"]


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"eval_lengths": (64, 2)}, ["'eval_lengths'", "got 2", "'seq_len' got 2", "an integer >= 3"]),
        ({"eval_lengths": (64, 64)}, ["'eval_lengths'", "(64, 64)", "distinct lengths"]),
        ({"eval_lengths": "long"}, ["'eval_lengths'", "'long'", "a comma-separated list of integers"]),
        ({"seq_len": 2}, ["'seq_len'", "2", ">= 3"]),
        ({"num_tokens": 1}, ["'num_tokens'", "1", ">= 2"]),
        ({"test_size": 0}, ["'test_size'", "0", ">= 1"]),
    ],
)
def test_bad_options_and_eval_lengths_get_one_sentence_naming_option_value_and_accepted(options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("induction", **options)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "Task 'induction'" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)
