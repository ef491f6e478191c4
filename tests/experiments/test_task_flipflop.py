"""Flip-flop: reads scored at their `r` against the last written bit, the paper's instruction
frequencies in training, the test set and the dense and sparse splits, and one-sentence option errors."""

import math

import pytest
import torch
from solvers import flipflop as solver

import variants
from experiments import tasks

WRITE, READ, IGNORE_INSTRUCTION = 2, 3, 4


def draw(task, size, seed=0):
    return task.batch(size, tasks.train_generator(seed), "cpu")


def assert_solver_agrees(task, batch):
    for index, tokens in enumerate(batch.inputs.tolist()):
        answers = solver.solve(task, tokens)
        expected_targets = [answers.get(position, (tasks.IGNORE, -1))[0] for position in range(len(tokens))]
        expected_distance = [answers.get(position, (tasks.IGNORE, -1))[1] for position in range(len(tokens))]
        assert batch.targets[index].tolist() == expected_targets, index
        assert batch.distance[index].tolist() == expected_distance, index
        assert batch.metadata["reads"][index].item() == len(answers)
        assert batch.metadata["distance"][index].item() == max(distance for _, distance in answers.values())


def inner_instructions(batch):
    """(batch, pairs - 2): the randomly drawn instructions, without the fixed first write and last read."""
    return batch.inputs[:, 0::2][:, 1:-1]


def assert_binomial(count, trials, probability):
    """`count` successes in `trials` lies within 5 standard deviations of a Binomial(trials, probability)."""
    spread = 5 * math.sqrt(trials * probability * (1 - probability)) + 1
    assert abs(count - trials * probability) <= spread, (count, trials, probability)


def held_out_sets(task):
    return {"eval": task.test_set("cpu"), **task.extra_test_sets("cpu")}


def test_eval_splits_are_dense_and_sparse_with_the_papers_ignore_probabilities():
    task = tasks.create_task("flipflop")
    assert task.eval_splits == ("dense", "sparse")
    options = task.options
    assert (options.ignore_prob, options.dense_ignore_prob, options.sparse_ignore_prob) == (0.8, 0.1, 0.98)
    assert set(task.extra_test_sets("cpu")) == {"dense", "sparse"}
    assert tasks.create_task("flipflop", profile="standard").seq_len == 512  # the paper's T


@pytest.mark.parametrize("options", [{}, solver.SMALL, {"seq_len": 64, "eval_lengths": (96, 160)}])
def test_training_batches_eval_set_and_every_split_match_the_solver(options):
    task = tasks.create_task("flipflop", **options)
    assert_solver_agrees(task, draw(task, 64, seed=5))
    sets = held_out_sets(task)
    assert set(sets) == {"eval", "dense", "sparse", *(f"length={length}" for length in task.eval_lengths)}
    for name, batch in sets.items():
        length = int(name.removeprefix("length=")) if name.startswith("length=") else task.seq_len
        assert batch.inputs.shape == (task.test_size, length), name
        assert_solver_agrees(task, batch)


def test_every_sequence_starts_with_a_write_ends_with_a_read_and_alternates_instructions_and_bits():
    task = tasks.create_task("flipflop")
    for name, batch in {"train": draw(task, 1024), **held_out_sets(task)}.items():
        instructions, bits = batch.inputs[:, 0::2], batch.inputs[:, 1::2]
        assert (instructions[:, 0] == WRITE).all() and (instructions[:, -1] == READ).all(), name
        assert ((instructions >= WRITE) & (instructions <= IGNORE_INSTRUCTION)).all(), name
        assert (bits <= 1).all(), name


def test_a_read_is_scored_at_its_r_and_the_next_input_shows_the_answer():
    task = tasks.create_task("flipflop")
    batch = draw(task, 512)
    rows, positions = (batch.targets != tasks.IGNORE).nonzero().unbind(-1)
    assert (positions % 2 == 0).all() and (batch.inputs[rows, positions] == READ).all()
    assert torch.equal(batch.inputs[rows, positions + 1], batch.targets[rows, positions])
    assert (batch.distance[rows, positions] % 2 == 1).all()  # back to a bit, at an odd position
    assert torch.equal(batch.metadata["reads"], (batch.inputs[:, 0::2] == READ).sum(dim=1))


@pytest.mark.parametrize("split", ["train", "eval", "dense", "sparse"])
def test_instruction_frequencies_match_their_probabilities_within_binomial_bounds(split):
    task = tasks.create_task("flipflop")
    batch = draw(task, 2048) if split == "train" else held_out_sets(task)[split]
    ignore_prob = {"train": task.options.ignore_prob, "eval": task.options.ignore_prob,
                   "dense": task.options.dense_ignore_prob, "sparse": task.options.sparse_ignore_prob}[split]
    instructions = inner_instructions(batch)
    trials = instructions.numel()
    assert_binomial(int((instructions == IGNORE_INSTRUCTION).sum()), trials, ignore_prob)
    for instruction in (WRITE, READ):
        assert_binomial(int((instructions == instruction).sum()), trials, (1 - ignore_prob) / 2)


def test_written_and_ignored_bits_and_so_the_answers_are_balanced():
    batch = draw(tasks.create_task("flipflop"), 2048)
    instructions, bits = batch.inputs[:, 0::2], batch.inputs[:, 1::2]
    for instruction in (WRITE, IGNORE_INSTRUCTION):
        drawn = bits[instructions == instruction]
        assert_binomial(int(drawn.sum()), drawn.numel(), 0.5)
    answers = batch.targets[batch.targets != tasks.IGNORE]
    assert_binomial(int(answers.sum()), answers.numel(), 0.5)


def test_sparse_split_reaches_further_back_than_the_eval_set_and_the_eval_set_further_than_dense():
    sets = held_out_sets(tasks.create_task("flipflop"))
    mean = {name: batch.distance[batch.distance >= 1].float().mean().item() for name, batch in sets.items()}
    assert mean["sparse"] > mean["eval"] > mean["dense"]
    largest = {name: batch.metadata["distance"].float().mean().item() for name, batch in sets.items()}
    assert largest["sparse"] > largest["eval"] > largest["dense"]


def test_extreme_ignore_probabilities_give_only_the_final_read_or_no_ignores():
    only_ignores = draw(tasks.create_task("flipflop", seq_len=32, ignore_prob=1.0), 64)
    assert (inner_instructions(only_ignores) == IGNORE_INSTRUCTION).all()
    assert (only_ignores.metadata["reads"] == 1).all() and (only_ignores.metadata["distance"] == 32 - 3).all()
    no_ignores = draw(tasks.create_task("flipflop", seq_len=32, ignore_prob=0.0), 64)
    assert not (no_ignores.inputs[:, 0::2] == IGNORE_INSTRUCTION).any()


def test_shortest_sequence_is_one_write_then_one_read_at_distance_1():
    task = tasks.create_task("flipflop", seq_len=4, test_size=8)
    batch = task.test_set("cpu")
    assert (batch.inputs[:, 0] == WRITE).all() and (batch.inputs[:, 2] == READ).all()
    assert torch.equal(batch.targets[:, 2], batch.inputs[:, 1]) and (batch.distance[:, 2] == 1).all()


def test_splits_are_fixed_and_differ_from_the_eval_set():
    task = tasks.create_task("flipflop", **solver.SMALL)
    first, second = task.extra_test_sets("cpu"), task.extra_test_sets("cpu")
    for split in task.eval_splits:
        assert torch.equal(first[split].inputs, second[split].inputs)
        assert not torch.equal(first[split].inputs, task.test_set("cpu").inputs)


def test_vocabulary_answers_first_then_instructions_and_chance_one_half():
    task = tasks.create_task("flipflop")
    assert task.vocabulary == ["0", "1", "w", "r", "i"]
    assert (task.num_classes, task.vocab_size, task.chance_accuracy) == (2, 5, 0.5)


def test_an_unknown_split_is_one_sentence_naming_it_and_the_splits():
    task = tasks.create_task("flipflop")
    with pytest.raises(ValueError) as error:
        task.sample_split("medium", 4, tasks.train_generator(0), torch.device("cpu"))
    message = str(error.value)
    assert "\n" not in message and "'medium'" in message and "dense, sparse" in message


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"seq_len": 65}, ["'seq_len'", "65", "an even integer >= 4"]),
        ({"seq_len": 2}, ["'seq_len'", "2", "an even integer >= 4"]),
        ({"ignore_prob": 1.5}, ["'ignore_prob'", "1.5", "a probability from 0 to 1"]),
        ({"sparse_ignore_prob": -0.1}, ["'sparse_ignore_prob'", "-0.1", "a probability from 0 to 1"]),
        ({"dense_ignore_prob": math.nan}, ["'dense_ignore_prob'", "nan", "a probability from 0 to 1"]),
        ({"test_size": 0}, ["'test_size'", "0", ">= 1"]),
        ({"eval_lengths": (255,)}, ["'eval_lengths'", "255", "an even integer >= 4"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("flipflop", **options)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "Task 'flipflop'" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_split_size_sizes_only_the_splits_and_8000_give_the_sparse_split_10_to_the_4_reads():
    task = tasks.create_task("flipflop", split_size=8000)
    splits = task.extra_test_sets("cpu")
    assert {name: len(batch.inputs) for name, batch in splits.items()} == {"dense": 8000, "sparse": 8000}
    assert len(task.test_set("cpu").inputs) == task.validation_size == tasks.create_task("flipflop").test_size
    assert splits["sparse"].metadata["reads"].sum().item() >= 10_000
    # 0 (the default) sizes the splits as the test set, as before the option
    default = tasks.create_task("flipflop", test_size=40)
    assert all(len(batch.inputs) == 40 for batch in default.extra_test_sets("cpu").values())
    assert default.extra_test_sets("cpu")["sparse"].inputs.equal(
        tasks.create_task("flipflop", test_size=40, split_size=40).extra_test_sets("cpu")["sparse"].inputs)
    with pytest.raises(ValueError, match=r"'split_size' got -1; accepted: an integer >= 0 \(0: test_size\)"):
        tasks.create_task("flipflop", split_size=-1)
