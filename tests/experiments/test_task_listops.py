"""ListOps: labels are the recursive value of the expression (LRA's truncated MED, SM mod 10), expressions
fill the length window left padded before the query, depth metadata is the bracket nesting, trees grow as
LRA's generator grows them (with arrangements = 0), rearranged digits make the answers nearly uniform whatever
the root operator, chance is the test set's majority answer, and option errors are one sentence."""

import math
import random

import pytest
import torch
from solvers import listops as solver

import variants
from experiments import tasks

OPERATORS = ["[MIN", "[MAX", "[MED", "[SM"]
ALL = ("MIN", "MAX", "MED", "SM")  # LRA's operators; quick leaves out SM
LRA = {"arrangements": 0, "min_answers": 1, "operators": ALL}  # trees and labels exactly as LRA's generator grows them
FLAT = {"seq_len": 13, "min_length": 4, "max_depth": 1, "max_args": 10, **LRA}  # every expression: [OP d ... d ]
UNBOUNDED = {"seq_len": 123, "min_length": 4, "max_depth": 2, "max_args": 10, **LRA}  # the window refuses no tree


def draw(task, size, seed=0):
    return task.batch(size, tasks.train_generator(seed), "cpu")


def expression(task, batch, index):
    """The decoded expression of example `index`, without the padding and the query."""
    return [name for name in task.decode(batch.inputs[index, :-1]) if name != "_"]


def parse(names, position=0):
    """(tree, position after it): a digit as an int, an operator as (name, [argument trees])."""
    if names[position].isdigit():
        return int(names[position]), position + 1
    name, arguments, position = names[position], [], position + 1
    while names[position] != "]":
        argument, position = parse(names, position)
        arguments.append(argument)
    return (name, arguments), position + 1


def nesting(names):
    """The deepest count of open brackets around any token."""
    depth = deepest = 0
    for name in names:
        depth += name in OPERATORS
        depth -= name == "]"
        deepest = max(deepest, depth)
    return deepest


def assert_binomial(count, trials, probability):
    """`count` successes in `trials` lies within 5 standard deviations of a Binomial(trials, probability)."""
    spread = 5 * math.sqrt(trials * probability * (1 - probability)) + 1
    assert abs(count - trials * probability) <= spread, (count, trials, probability)


def assert_solver_agrees(task, batch):
    for index, tokens in enumerate(batch.inputs.tolist()):
        ((position, (answer, distance)),) = solver.solve(task, tokens).items()
        assert position == task.seq_len - 1
        assert batch.targets[index].tolist() == [tasks.IGNORE] * position + [answer], index
        assert batch.distance[index].tolist() == [-1] * position + [distance], index


@pytest.mark.parametrize("profile, size", [("quick", 512), ("standard", 8), ("long", 4)])
def test_every_label_is_the_recursive_value_of_its_expression_at_every_profile(profile, size):
    task = tasks.create_task("listops", profile=profile)
    assert_solver_agrees(task, draw(task, size))


def test_labels_stay_right_when_a_narrow_window_needs_many_rounds_of_candidate_trees():
    task = tasks.create_task("listops", seq_len=30, min_length=28, max_depth=3, max_args=4)
    batch = draw(task, 64)
    assert (batch.metadata["length"] >= 28).all()
    assert_solver_agrees(task, batch)
    assert torch.equal(batch.inputs, draw(task, 64).inputs)


@pytest.mark.parametrize("options", [{}, {"profile": "standard"}, {"seq_len": 20, "min_length": 10, "max_depth": 3}])
def test_expressions_fill_the_length_window_just_before_the_query_with_padding_on_the_left(options):
    task = tasks.create_task("listops", **options)
    batch = draw(task, 256 if task.seq_len < 100 else 16)
    length = batch.metadata["length"]
    assert (length >= task.options.min_length).all() and (length <= task.seq_len - 1).all()
    for index in range(batch.inputs.shape[0]):
        names = task.decode(batch.inputs[index])
        start = task.seq_len - 1 - length[index].item()
        assert names[:start] == ["_"] * start and "_" not in names[start:] and names[-1] == "="
        assert batch.distance[index, -1].item() == length[index].item()


def test_lengths_reach_both_ends_of_the_window():
    task = tasks.create_task("listops", seq_len=20, min_length=10, max_depth=3, max_args=4, **LRA)
    assert set(draw(task, 2048).metadata["length"].tolist()) == set(range(10, 20))


def test_depth_metadata_is_the_deepest_bracket_nesting_and_every_depth_occurs():
    task = tasks.create_task("listops", **solver.SMALL, **LRA)
    batch = draw(task, 1024)
    depths = [nesting(expression(task, batch, index)) for index in range(1024)]
    assert batch.metadata["depth"].tolist() == depths
    assert set(depths) == {1, 2, 3}  # SMALL's max_depth, and no deeper


@pytest.mark.parametrize("profile, deepest", [("standard", 2), ("long", 9)])
def test_a_profile_nests_no_deeper_than_its_max_depth(profile, deepest):
    task = tasks.create_task("listops", profile=profile)
    batch = draw(task, 8)
    depths = [nesting(expression(task, batch, index)) for index in range(8)]
    assert batch.metadata["depth"].tolist() == depths and max(depths) <= deepest == task.options.max_depth


def test_med_is_lras_int_median_truncating_the_mean_of_the_middle_two():
    task = tasks.create_task("listops", **FLAT)
    batch = draw(task, 2048)
    halves = 0
    for index in range(2048):
        (name, arguments), _ = parse(expression(task, batch, index))
        if name != "[MED":
            continue
        ordered, count = sorted(arguments), len(arguments)
        middle = ordered[(count - 1) // 2] + ordered[count // 2]
        assert batch.targets[index, -1].item() == middle // 2, arguments
        halves += count % 2 == 0 and middle % 2 == 1  # an even count whose median x.5 is truncated
    assert halves >= 50


def test_sm_is_the_sum_mod_10_and_min_max_are_the_extremes():
    task = tasks.create_task("listops", **FLAT)
    batch = draw(task, 2048)
    wrapped = 0
    for index in range(2048):
        (name, arguments), _ = parse(expression(task, batch, index))
        expected = {"[SM": sum(arguments) % 10, "[MIN": min(arguments), "[MAX": max(arguments)}.get(name)
        if expected is not None:
            assert batch.targets[index, -1].item() == expected, (name, arguments)
        wrapped += name == "[SM" and sum(arguments) >= 10
    assert wrapped >= 100


def test_without_a_binding_window_trees_grow_as_lras_generator():
    task = tasks.create_task("listops", **UNBOUNDED)
    batch = draw(task, 2048)
    roots, children, counts = [], [], []
    for index in range(2048):
        root, _ = parse(expression(task, batch, index))
        roots.append(root[0])
        children.extend(root[1])
        counts.extend(len(arguments) for _, arguments in [root, *(c for c in root[1] if isinstance(c, tuple))])
    inner = [child for child in children if isinstance(child, tuple)]
    assert_binomial(len(inner), len(children), 0.25)  # LRA's VALUE_P: the chance of an operator
    for name in OPERATORS:
        assert_binomial(roots.count(name), len(roots), 1 / 4)
    for count in range(2, 11):
        assert_binomial(counts.count(count), len(counts), 1 / 9)
    digits = [argument for _, arguments in inner for argument in arguments]
    assert all(isinstance(digit, int) for digit in digits)  # max_depth 2: operators nest no deeper
    for digit in range(10):
        assert_binomial(digits.count(digit), len(digits), 1 / 10)


def test_operators_narrows_what_every_operator_node_draws_and_the_labels_follow():
    task = tasks.create_task("listops", **{**UNBOUNDED, "operators": ("MIN", "MAX")})
    batch = draw(task, 512)
    names = [name for index in range(512) for name in expression(task, batch, index) if name in OPERATORS]
    assert {"[MIN", "[MAX"} == set(names)
    assert_binomial(names.count("[MIN"), len(names), 1 / 2)
    assert_solver_agrees(task, batch)


def test_operator_probability_zero_leaves_one_operator_over_digits():
    task = tasks.create_task("listops", **{**UNBOUNDED, "operator_probability": 0.0})
    assert (draw(task, 256).metadata["depth"] == 1).all()


def test_a_window_almost_no_tree_reaches_is_one_sentence_not_an_endless_loop():
    task = tasks.create_task("listops", seq_len=27, min_length=26, max_args=4, operator_probability=1e-9)
    with pytest.raises(RuntimeError) as error:
        draw(task, 1)
    message = str(error.value)
    assert "\n" not in message and "26 to 26 tokens" in message and "min_length" in message


@pytest.mark.parametrize("operators, most", [(ALL, 0.15), (("MIN", "MAX", "MED"), 0.19)])
def test_chance_is_the_eval_sets_majority_answer(operators, most):
    task = tasks.create_task("listops", test_size=512, operators=operators)
    answers = task.test_set("cpu").targets[:, -1].tolist()
    majority = max(answers.count(digit) for digit in range(10))
    assert task.chance_accuracy == majority / task.test_size
    # Balanced per tree; LRA's skew gave 0.18 here with all four operators. Without SM, MED roots most trees
    # (quick) and its answers lean to the middle digits.
    assert 0.1 <= task.chance_accuracy < most


@pytest.mark.parametrize("operators, most", [(ALL, 0.13), (("MIN", "MAX", "MED"), 0.16)])
def test_answers_are_nearly_uniform_and_the_root_operator_tells_little_about_them(operators, most):
    task, size = tasks.create_task("listops", operators=operators), 4000
    batch = draw(task, size)
    answers = batch.targets[:, -1]
    root = batch.inputs[torch.arange(size), task.seq_len - 1 - batch.distance[:, -1]]  # (size,) the first token
    majority = torch.bincount(answers, minlength=10).max().item() / size
    assert majority < most, majority  # LRA's labels, all four operators: 0.18
    # Guessing each root operator's commonest answer: MIN's and MAX's lean to the low and high digits, MED's to the
    # middle, but they root few trees (SM's answers are uniform), so knowing the root gains little.
    by_root = sum(torch.bincount(answers[root == operator], minlength=10).max().item() for operator in range(10, 14))
    assert by_root / size < majority + 0.03, (by_root / size, majority)


def test_every_kept_trees_digits_rearranged_reach_min_answers_answers():
    task = tasks.create_task("listops")
    batch, shuffler = draw(task, 16), random.Random(0)
    for index in range(16):
        names = expression(task, batch, index)
        slots = [position for position, name in enumerate(names) if name.isdigit()]
        digits, rearranged, answers = [names[position] for position in slots], list(names), set()
        for _ in range(400):
            shuffler.shuffle(digits)
            for position, digit in zip(slots, digits, strict=True):
                rearranged[position] = digit
            answers.add(solver.evaluate(rearranged, 0)[0])
        assert len(answers) >= task.options.min_answers and nesting(names) >= 2, (names, answers)


def test_trees_whose_digits_reach_too_few_answers_are_one_sentence_not_an_endless_loop():
    flat = {**FLAT, "arrangements": 2, "min_answers": 2}  # a flat tree has one answer however it is arranged
    with pytest.raises(RuntimeError) as error:
        draw(tasks.create_task("listops", **flat), 1)
    message = str(error.value)
    assert "\n" not in message and "digits reaching 2 answers" in message and "min_answers" in message


def test_digits_are_the_answer_ids_and_the_vocabulary_is_lras_notation():
    task = tasks.create_task("listops")
    assert (task.num_classes, task.vocab_size) == (10, 17)
    assert task.decode(range(17)) == [str(digit) for digit in range(10)] + OPERATORS + ["]", "_", "="]


def test_distance_buckets_cover_the_lengths_of_the_window():
    task = tasks.create_task("listops")
    buckets = task.report_buckets()
    assert buckets[0][0] == task.options.min_length and buckets[-1][1] == task.seq_len - 1
    assert [d for lo, hi in buckets for d in range(lo, hi + 1)] == list(range(task.options.min_length, task.seq_len))


def test_a_longer_eval_length_admits_longer_expressions():
    task = tasks.create_task("listops", max_depth=3, max_args=10, eval_lengths=(128,), test_size=64)
    longer = task.extra_test_sets("cpu")["length=128"]
    assert longer.inputs.shape == (task.test_size, 128)
    assert longer.metadata["length"].max() >= task.seq_len
    assert_solver_agrees(task.at_length(128), longer)


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"min_length": 3}, ["'min_length'", "3", "from 4", "to 122"]),
        ({"max_depth": 1, "min_length": 13}, ["'min_length'", "13", "to 12", "max_depth = 1", "max_args = 10"]),
        ({"operator_probability": 0.0, "min_length": 13}, ["'min_length'", "to 12", "operator_probability = 0.0"]),
        ({"seq_len": 16}, ["'seq_len'", "16", ">= min_length + 1 = 17"]),
        ({"max_args": 1}, ["'max_args'", "1", ">= 2"]),
        ({"max_depth": 0}, ["'max_depth'", "0", ">= 1"]),
        ({"operator_probability": 1.5}, ["'operator_probability'", "1.5", "from 0 to 1"]),
        ({"test_size": 0}, ["'test_size'", "0", ">= 1"]),
        ({"arrangements": -1}, ["'arrangements'", "-1", ">= 0"]),
        ({"min_answers": 11}, ["'min_answers'", "11", "from 1 to 10"]),
        ({"arrangements": 0}, ["'min_answers'", "6", "from 1 to 1", "arrangements = 0"]),
        ({"eval_lengths": (16,)}, ["'eval_lengths'", "16", ">= min_length + 1 = 17"]),
        ({"operators": ("MIN", "MIN")}, ["'operators'", "('MIN', 'MIN')", "each at most once"]),
        ({"operators": ("XOR",)}, ["'operators'", "XOR", "'MIN', 'MAX', 'MED', 'SM'"]),
        ({"operators": ()}, ["'operators'", "()", "each at most once"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("listops", **options)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and "Task 'listops'" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_sample_lines_show_the_expression_in_lra_notation_and_its_value():
    task = tasks.create_task("listops")
    batch = draw(task, 16, seed=5)
    for index in range(16):
        line = task.text(batch, index)
        shown, answer = line.split(" -> ")
        assert shown.split() == expression(task, batch, index) and shown.split()[0] in OPERATORS
        assert int(answer) == solver.evaluate(shown.split(), 0)[0]
