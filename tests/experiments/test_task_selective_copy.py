"""Selective copying: data tokens at uniform distinct positions among noise, copied in order by the markers."""

import pytest
import torch
from solvers import selective_copy as solver

import variants
from experiments import tasks


def draw(task, size, seed=0):
    return task.batch(size, tasks.train_generator(seed), "cpu")


def test_markers_fill_the_end_and_data_tokens_the_content_part_once_each():
    task = tasks.create_task("selective_copy")
    copies, content = task.options.num_tokens, task.seq_len - task.options.num_tokens
    inputs = draw(task, 4096).inputs  # (batch, seq)
    is_data = inputs < task.num_classes
    assert (inputs[:, content:] == task.vocabulary.index("?")).all()
    assert (is_data[:, :content].sum(dim=1) == copies).all()
    assert ((inputs[:, :content] == task.vocabulary.index(".")) | is_data[:, :content]).all()


def test_source_positions_and_data_tokens_are_uniform():
    task = tasks.create_task("selective_copy")
    content = task.seq_len - task.options.num_tokens
    inputs = draw(task, 4096).inputs[:, :content]  # (batch, content)
    data = inputs < task.num_classes
    per_position = data.sum(dim=0).float()  # (content,)
    assert per_position.min() > 0.75 * per_position.mean() and per_position.max() < 1.25 * per_position.mean()
    per_token = torch.bincount(inputs[data], minlength=task.num_classes).float()  # (num_data_tokens,)
    assert per_token.min() > 0.9 * per_token.mean() and per_token.max() < 1.1 * per_token.mean()


def test_data_tokens_repeat_within_an_example_as_in_the_paper():
    task = tasks.create_task("selective_copy")
    targets = draw(task, 256).targets[:, -task.options.num_tokens:]  # (batch, copies)
    assert any(len(set(row)) < len(row) for row in targets.tolist())


def test_distances_fall_along_the_markers_and_metadata_holds_the_largest_and_the_span():
    task = tasks.create_task("selective_copy")
    copies, content = task.options.num_tokens, task.seq_len - task.options.num_tokens
    batch = draw(task, 4096)
    distance = batch.distance[:, content:]  # (batch, copies)
    assert (distance[:, 1:] <= distance[:, :-1]).all()
    assert torch.equal(batch.metadata["distance"], distance[:, 0])
    source = torch.arange(content, task.seq_len) - distance  # (batch, copies)
    assert torch.equal(batch.metadata["span"], source[:, -1] - source[:, 0])
    assert set(distance.flatten().tolist()) == set(range(copies, content + 1))


@pytest.mark.parametrize("sizes", [{"seq_len": 8, "num_tokens": 4}, {"seq_len": 10, "num_tokens": 1}])
def test_edge_sizes_without_noise_or_with_one_token_agree_with_the_solver(sizes):
    task = tasks.create_task("selective_copy", **sizes)
    batch = draw(task, 64)
    for index, tokens in enumerate(batch.inputs.tolist()):
        for position, (answer, distance) in solver.solve(task, tokens).items():
            assert (batch.targets[index, position], batch.distance[index, position]) == (answer, distance)
    if sizes["num_tokens"] == 1:
        assert (batch.metadata["span"] == 0).all()
    else:  # no room for noise: every marker copies from num_tokens positions back
        assert "." not in task.decode(batch.inputs.flatten()) and (batch.metadata["distance"] == 4).all()


def test_eval_lengths_give_the_same_task_at_each_length_agreeing_with_the_solver():
    task = tasks.create_task("selective_copy", **{**solver.SMALL, "eval_lengths": (40, 60)})
    sets = task.extra_test_sets("cpu")
    assert sorted(sets) == ["length=40", "length=60"]
    for length in (40, 60):
        batch = sets[f"length={length}"]
        assert batch.inputs.shape == (task.test_size, length)
        for index, tokens in enumerate(batch.inputs.tolist()):
            answers = solver.solve(task, tokens)
            assert sorted(answers) == (batch.targets[index] != tasks.IGNORE).nonzero().flatten().tolist()
            assert all(batch.targets[index, position] == answer for position, (answer, _) in answers.items())


def test_chance_vocabulary_and_answer_ids_follow_the_options():
    task = tasks.create_task("selective_copy", num_tokens=3, num_data_tokens=5)
    assert (task.num_classes, task.vocab_size, task.chance_accuracy) == (5, 7, 0.2)
    assert task.decode([0, 4, 5, 6]) == ["t0", "t4", ".", "?"]


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"seq_len": 7}, ["'seq_len'", "7", ">= 2 * num_tokens = 8"]),
        ({"num_tokens": 0}, ["'num_tokens'", "0", ">= 1"]),
        ({"num_data_tokens": 1}, ["'num_data_tokens'", "1", ">= 2"]),
        ({"test_size": 0}, ["'test_size'", "0", ">= 1"]),
        ({"eval_lengths": (6,)}, ["'eval_lengths'", "6", "'seq_len' got 6", ">= 2 * num_tokens = 8"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("selective_copy", **options)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "Task 'selective_copy'" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)
