"""The task registry: deterministic generators whose labels an independent solver agrees with, a fixed
test set on its own seed, and one-sentence errors for bad names, profiles and options."""

import dataclasses
import inspect
from pathlib import Path

import pytest
import torch
from solvers import solver

import variants
from experiments import tasks

SOLVERS = {name: solver(name) for name in tasks.list_tasks()}  # a missing solver fails the test below
SMALL = {name: module.SMALL for name, module in SOLVERS.items() if module}
WORKED = {name: module.WORKED for name, module in SOLVERS.items() if module}
CALIBRATION = Path(__file__).resolve().parents[2] / "docs" / "calibration.md"


def assert_solver_agrees(task, batch):
    """Targets and distances equal the solver's at its positions, and IGNORE / -1 everywhere else."""
    for index, tokens in enumerate(batch.inputs.tolist()):
        answers = SOLVERS[task.name].solve(task, tokens)
        targets, distances = batch.targets[index].tolist(), batch.distance[index].tolist()
        for position in range(task.seq_len):
            answer, distance = answers.get(position, (tasks.IGNORE, -1))
            assert (targets[position], distances[position]) == (answer, distance), (index, position)
        if "distance" in batch.metadata:
            assert batch.metadata["distance"][index].item() == max(distance for _, distance in answers.values())


def batches_equal(first, second):
    return (torch.equal(first.inputs, second.inputs) and torch.equal(first.targets, second.targets)
            and torch.equal(first.distance, second.distance) and first.metadata.keys() == second.metadata.keys()
            and all(torch.equal(first.metadata[name], second.metadata[name]) for name in first.metadata))


def draw(task, size, seed):
    return task.batch(size, tasks.train_generator(seed), "cpu")


def test_every_registered_task_has_a_solver_small_sizes_and_a_worked_example():
    assert [name for name, module in SOLVERS.items() if module is None] == []
    assert all(callable(module.solve) and module.SMALL and module.WORKED for module in SOLVERS.values())
    assert tasks.list_tasks("p*") == ["passkey", "pathfinder"]


@pytest.mark.parametrize("name", tasks.list_tasks() + tasks.list_data_tasks())
def test_a_task_declares_its_shortcuts_and_blind_spots_per_profile_it_has(name):
    cls = tasks.task_class(name)
    for declared in (cls.known_shortcut, cls.not_discriminative):
        assert isinstance(declared, dict) and set(declared) <= set(cls.profiles), declared
        assert all(isinstance(reason, str) and reason and not reason.endswith(".") for reason in declared.values())


def test_the_default_suite_is_the_tasks_that_take_a_place_in_it_in_that_order_but_those_that_fail_a_control(
        monkeypatch):
    suite = ["passkey", "mqar", "selective_copy", "induction", "flipflop", "listops"]
    assert tasks.DEFAULT_SUITE == suite  # ListOps since its quick profile left out SM and dense learned it
    assert tasks.caveats("listops", "quick") == []
    # Pathfinder returns once dense learns its quick profile (its probes stay within chance + 0.10 since quick grew
    # to 24x24).
    pathfinder = tasks.task_class("pathfinder")
    assert pathfinder.suite_position is not None and pathfinder.known_shortcut == {}
    reason = pathfinder.not_discriminative["quick"]
    assert tasks.caveats("pathfinder", "quick") == [
        f"Task pathfinder is not discriminative at quick, so its results there tell no variants apart: {reason}."]
    assert f"not discriminative at quick, so not in the default suite: {reason}" in tasks.describe_tasks()
    assert "known shortcut" not in tasks.describe_tasks() and tasks.caveats("pathfinder", "standard") == []
    monkeypatch.setattr(pathfinder, "known_shortcut", {"quick": "the end cues read the break"})
    assert tasks.caveats("pathfinder", "quick")[0] == (
        "Task pathfinder has a known shortcut at quick, so its results there measure that as much as the dependency: "
        "the end cues read the break.")
    assert "known shortcut at quick, so not in the default suite: the end cues read the break" in tasks.describe_tasks()
    positions = [tasks.task_class(name).suite_position for name in suite]
    assert len(set(positions)) == len(positions)  # no two tasks share a place, so the order is the positions'


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_task_documents_options_example_cost_and_profiles_and_a_suite_task_has_calibration_rows(name):
    cls = tasks.task_class(name)
    assert cls.Options.__dataclass_params__.frozen
    assert all(field.metadata["help"] for field in dataclasses.fields(cls.Options))
    module_doc = inspect.getmodule(cls).__doc__
    assert "Profiles:" in module_doc and "Cost:" in module_doc and "Purpose:" in module_doc
    assert "docs/calibration.md" in module_doc and "Calibration (" not in module_doc  # the figures live in one table
    page = CALIBRATION.read_text()  # written by `make calibration`, a table per profile
    assert page.startswith("# Task calibration") and "## The quick profile" in page
    measured = {line.split(" | ")[1] for line in page.splitlines() if line.startswith(f"| {name} | ")}
    if cls.suite_position is not None:  # the suite is chosen by these figures; a task not yet measured stays out
        assert "dense" in measured and any(variant.startswith("local") for variant in measured)
    else:
        assert "Calibration: not measured yet" in module_doc or measured
    task = tasks.create_task(name, **WORKED[name])
    batch = task.test_set("cpu")
    docstring = " ".join(cls.__doc__.replace("|", " ").split())  # an input may be shown across lines
    assert " ".join(task.decode(batch.inputs[0])) in docstring
    assert f'task.label_text(batch, 0) == "{task.label_text(batch, 0)}"' in docstring


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_same_seed_gives_the_same_batch_and_other_seeds_other_batches(name):
    task = tasks.create_task(name)
    assert batches_equal(draw(task, 16, 0), draw(task, 16, 0))
    assert not torch.equal(draw(task, 16, 0).inputs, draw(task, 16, 1).inputs)
    assert not torch.equal(draw(task, 16, 0).targets, draw(task, 16, 1).targets)


@pytest.mark.parametrize("sizes", ["quick", "small"])
@pytest.mark.parametrize("name", tasks.list_tasks())
def test_training_labels_and_distances_match_an_independent_solver(name, sizes):
    task = tasks.create_task(name, **(SMALL[name] if sizes == "small" else {}))
    assert_solver_agrees(task, draw(task, 64, 3))


@pytest.mark.parametrize("sizes", ["quick", "small"])
@pytest.mark.parametrize("name", tasks.list_tasks())
def test_eval_labels_and_distances_match_an_independent_solver(name, sizes):
    # quick's options but a smaller test set: the sizes under test are the examples', not the set's
    task = tasks.create_task(name, **(SMALL[name] if sizes == "small" else {"test_size": 256}))
    batch = task.test_set("cpu")
    assert batch.inputs.shape == (task.test_size, task.seq_len)
    assert_solver_agrees(task, batch)


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_eval_set_is_identical_on_every_call_and_is_no_training_batch(name):
    task = tasks.create_task(name, **SMALL[name])
    first, second = task.test_set("cpu"), task.test_set("cpu")
    assert batches_equal(first, second)
    eval_rows = {tuple(row) for row in first.inputs.tolist()}
    for seed in range(4):
        training = draw(task, task.test_size, seed)
        assert not batches_equal(training, first)
        assert not eval_rows & {tuple(row) for row in training.inputs.tolist()}, seed


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_large_batches_come_vectorised_on_the_requested_device(name):
    task = tasks.create_task(name)
    batch = draw(task, 4096, 0)
    tensors = [batch.inputs, batch.targets, batch.distance, *batch.metadata.values()]
    assert all(tensor.device == torch.device("cpu") and tensor.dtype == torch.long for tensor in tensors)
    assert batch.inputs.shape == batch.targets.shape == batch.distance.shape == (4096, task.seq_len)
    assert all(values.shape == (4096,) for values in batch.metadata.values())
    assert 0 <= batch.inputs.min() and batch.inputs.max() < task.vocab_size
    scored = batch.targets != tasks.IGNORE
    assert (batch.targets[scored] < task.num_classes).all() and (batch.targets[scored] >= 0).all()
    assert torch.equal(scored, batch.distance >= 1) and (batch.distance[~scored] == -1).all()


@pytest.mark.gpu
@pytest.mark.parametrize("name", tasks.list_tasks())
def test_batches_and_eval_sets_live_on_cuda_when_asked(name):
    task = tasks.create_task(name)
    batch = task.batch(256, tasks.train_generator(0, "cuda"), "cuda")
    assert all(tensor.is_cuda for tensor in [batch.inputs, batch.targets, batch.distance, *batch.metadata.values()])
    assert_solver_agrees(task, batch.to("cpu"))
    assert batches_equal(task.test_set("cuda").to("cpu"), task.test_set("cpu"))


def test_a_generator_on_another_device_than_the_batch_is_one_sentence():
    with pytest.raises(ValueError, match="generator") as error:
        tasks.create_task("passkey").batch(4, tasks.train_generator(0), "meta")
    assert "\n" not in str(error.value)


def test_passkey_training_distances_cover_every_distance_from_1_to_the_full_length():
    task = tasks.create_task("passkey")
    distance = draw(task, 4096, 0).metadata["distance"]
    assert set(distance.tolist()) == set(range(1, task.seq_len))


@pytest.mark.parametrize("sizes", [{}, {"seq_len": 9, "num_buckets": 8, "test_size": 64},
                                   {"seq_len": 100, "num_buckets": 7, "test_size": 70}])
def test_passkey_eval_fills_every_equal_width_distance_bucket_equally(sizes):
    task = tasks.create_task("passkey", **sizes)
    buckets, span = task.options.num_buckets, task.seq_len - 1
    distance = task.test_set("cpu").metadata["distance"].tolist()
    edges = [1 + bucket * span / buckets for bucket in range(buckets + 1)]  # bucket b: edges[b] <= d < edges[b+1]
    counts = [sum(edges[bucket] <= d < edges[bucket + 1] for d in distance) for bucket in range(buckets)]
    assert counts == [task.test_size // buckets] * buckets
    assert task.test_set("cpu").metadata["bucket"].tolist() == [
        next(bucket for bucket in range(buckets) if edges[bucket] <= d < edges[bucket + 1]) for d in distance
    ]
    if span == buckets:  # one distance per bucket: the test set reaches the full length
        assert set(distance) == set(range(1, task.seq_len))


@pytest.mark.parametrize("max_distance, count", [(127, 8), (1023, 8), (10, 4), (8, 8), (5, 8), (1, 1)])
def test_distance_buckets_tile_1_to_max_distance_with_widths_differing_by_at_most_one(max_distance, count):
    buckets = tasks.distance_buckets(max_distance, count)
    assert len(buckets) == min(count, max_distance)
    assert [d for lo, hi in buckets for d in range(lo, hi + 1)] == list(range(1, max_distance + 1))
    widths = [hi - lo + 1 for lo, hi in buckets]
    assert min(widths) >= 1 and max(widths) - min(widths) <= 1


def test_passkey_eval_buckets_are_the_shared_distance_buckets():
    task = tasks.create_task("passkey")
    metadata = task.test_set("cpu").metadata
    buckets = tasks.distance_buckets(task.seq_len - 1, task.options.num_buckets)
    for distance, bucket in zip(metadata["distance"].tolist(), metadata["bucket"].tolist(), strict=True):
        assert buckets[bucket][0] <= distance <= buckets[bucket][1]


def test_mqar_queries_come_after_the_prefix_at_even_offsets_and_mostly_soon():
    task = tasks.create_task("mqar")
    prefix = 2 * task.options.num_pairs
    positions = (draw(task, 512, 0).targets != tasks.IGNORE).nonzero()[:, 1]
    assert positions.min() >= prefix and ((positions - prefix) % 2 == 0).all()
    uniform = tasks.create_task("mqar", gap_power=1.0)
    uniform_positions = (draw(uniform, 512, 0).targets != tasks.IGNORE).nonzero()[:, 1]
    assert positions.float().mean() < uniform_positions.float().mean()  # Zoology's power law favours small gaps


def test_chance_vocabulary_and_answer_ids_follow_the_options():
    passkey = tasks.create_task("passkey", num_keys=10, num_distractors=5)
    assert (passkey.num_classes, passkey.vocab_size, passkey.chance_accuracy) == (10, 16, 0.1)
    assert passkey.decode([0, 9, 10, 15]) == ["K0", "K9", "d0", "?"]
    mqar = tasks.create_task("mqar", num_pairs=4, num_keys=6, num_values=5, num_filler=3)
    assert (mqar.num_classes, mqar.vocab_size, mqar.chance_accuracy) == (5, 14, 0.25)
    assert mqar.decode([0, 5, 11, 13]) == ["v0", "k0", "f0", "f2"]


def test_profiles_give_defaults_and_explicit_options_override_them():
    assert tasks.PROFILES == ("quick", "standard", "long")
    sized = [name for name in tasks.list_tasks() if "standard" in tasks.task_class(name).profiles]
    mad_only = {name: tuple(tasks.task_class(name).profiles) for name in tasks.list_tasks() if name not in sized}
    assert mad_only == dict.fromkeys(set(tasks.TASK_SETS["mad"]) - {"selective_copy"}, ("quick", "mad"))
    lengths = {name: [tasks.create_task(name, profile=profile).seq_len for profile in tasks.PROFILES] for name in sized}
    assert lengths["passkey"] == [128, 1024, 4096] and lengths["mqar"] == [64, 512, 2048]
    for name, (quick, standard, long) in lengths.items():
        assert quick < standard <= long and long >= 1024, name  # long is LRA-scale: 1K tokens and more
    task = tasks.create_task("mqar", profile="standard", seq_len=1024)
    assert (task.seq_len, task.options.num_pairs, task.profile) == (1024, 64, "standard")
    for name in tasks.list_tasks():
        for profile in tasks.task_class(name).profiles:
            task = tasks.create_task(name, profile=profile)
            assert {"steps", "batch_size", "lr", "eval_every"} <= task.default_train.keys()
            assert {"dim", "depth", "heads"} <= task.default_model.keys()
            assert task.test_size == task.options.test_size >= 1


@pytest.mark.parametrize("name", tasks.list_tasks())
def test_example_gives_decoded_input_labels_and_distances(name):
    task = tasks.create_task(name, **SMALL[name])
    batch = task.test_set("cpu")
    example = task.example(batch, 5)
    answers = SOLVERS[name].solve(task, batch.inputs[5].tolist())
    labels = [answer for _, (answer, _) in sorted(answers.items())]
    distances = [distance for _, (_, distance) in sorted(answers.items())]
    assert example["input"] == task.decode(batch.inputs[5])
    assert example["label"] == (labels[0] if len(labels) == 1 else labels)
    assert example["metadata"]["distance"] == (distances[0] if len(distances) == 1 else distances)
    assert task.label_text(batch, 5) == "; ".join(
        f"{position}: {example['input'][position]} -> {task.decode([answer])[0]}"
        for position, (answer, _) in sorted(answers.items())
    )


def test_describe_tasks_lists_every_task_profile_and_option():
    text = tasks.describe_tasks()
    for name in tasks.list_tasks():
        assert f"{name}: " in text
        assert all(f"{field.name}=" in text for field in dataclasses.fields(tasks.task_class(name).Options))
    assert "profile standard: seq_len=1024" in text


def test_registering_a_task_name_twice_is_an_error():
    with pytest.raises(ValueError, match="'passkey' is already registered"):
        tasks.register_task("passkey")(tasks.task_class("mqar"))


def test_a_task_whose_capacity_option_is_not_one_of_its_options_is_refused_when_it_registers():
    class Misnamed(tasks.task_class("mqar")):
        capacity_option = "num_pears"

    with pytest.raises(ValueError, match="capacity option 'num_pears'.*accepted: one of"):
        tasks.register_task("mqar_misnamed")(Misnamed)
    assert "mqar_misnamed" not in tasks.list_tasks()
    declared = {name: tasks.task_class(name).capacity_option for name in tasks.list_tasks()}
    assert declared["mqar"] == "num_pairs" and declared["passkey"] is None


def one_sentence(error):
    message = str(error.value)
    assert "\n" not in message and message.endswith(".")
    return message


def test_unknown_task_names_the_closest_match_and_the_list():
    with pytest.raises(ValueError) as error:
        tasks.create_task("paskey")
    message = one_sentence(error)
    assert "'paskey'" in message and "did you mean 'passkey'" in message and "passkey, pathfinder" in message


def test_unknown_profile_names_it_and_the_profiles():
    with pytest.raises(ValueError) as error:
        tasks.create_task("mqar", profile="quik")
    message = one_sentence(error)
    assert "'quik'" in message and "did you mean 'quick'" in message and "quick, standard, long" in message


def test_training_seeds_end_where_eval_seeds_begin():
    assert tasks.MAX_TRAIN_SEED == tasks.TEST_SEED_OFFSET == 2**31
    assert all(tasks.MAX_TRAIN_SEED <= tasks.test_seed(name) < 2**32 for name in tasks.list_tasks())
    first = tasks.train_generator(tasks.MAX_TRAIN_SEED - 1).initial_seed()
    assert first == tasks.MAX_TRAIN_SEED - 1


@pytest.mark.parametrize("seed", [-1, 2**31, 2**40, 1.5, True])
def test_training_seeds_outside_0_to_2_31_are_refused(seed):
    with pytest.raises(ValueError) as error:
        tasks.train_generator(seed)
    assert repr(seed) in one_sentence(error)


@pytest.mark.parametrize(
    "name, profile, options, expected",
    [
        ("passkey", "quick", {"num_key": 8}, ["'num_key'", "did you mean 'num_keys'", "seq_len", "test_size"]),
        ("passkey", "quick", {"seq_len": 5}, ["'seq_len'", "5", ">= num_buckets + 1 = 9"]),
        ("passkey", "quick", {"seq_len": "long"}, ["'seq_len'", "'long'", "an integer"]),
        ("passkey", "quick", {"num_keys": 1}, ["'num_keys'", "1", ">= 2"]),
        ("passkey", "quick", {"test_size": 100}, ["'test_size'", "100", "multiple of num_buckets = 8"]),
        ("passkey", "long", {"num_buckets": 0}, ["'long'", "'num_buckets'", "0", ">= 1"]),
        ("mqar", "quick", {"seq_len": 31}, ["'seq_len'", "31", ">= 4 * num_pairs = 32"]),
        ("mqar", "standard", {"seq_len": 128}, ["'standard'", "'seq_len'", "128", ">= 4 * num_pairs = 256"]),
        ("mqar", "quick", {"num_pairs": 12, "num_keys": 10}, ["'num_keys'", "10", ">= num_pairs = 12"]),
        ("mqar", "quick", {"num_values": 7}, ["'num_values'", "7", ">= num_pairs = 8"]),
        ("mqar", "quick", {"gap_power": 0}, ["'gap_power'", "0.0", "> 0"]),
        ("mqar", "quick", {"num_filler": 2.0}, ["'num_filler'", "2.0", "an integer"]),
        ("in_context_recall", "quick", {"seq_len": 13}, ["'seq_len'", "13", "an even integer >= 4"]),
        ("noisy_in_context_recall", "mad", {"vocab_size": 19}, ["'mad'", "'vocab_size'", "19", ">= 20",
                                                                "besides 16 other tokens"]),
        ("noisy_in_context_recall", "quick", {"frac_noise": 1}, ["'frac_noise'", "1", "up to (not including) 1"]),
        ("fuzzy_in_context_recall", "quick", {"max_key_tokens": 9}, ["'max_key_tokens'", "9", "1 to the 7 key"]),
        ("fuzzy_in_context_recall", "quick", {"seq_len": 12}, ["'seq_len'", "12", "> 2 * (max_key_tokens"]),
        ("memorization", "mad", {"train_examples": -1}, ["'train_examples'", "-1", "an integer >= 0"]),
        ("memorization", "quick", {"table_seed": 2**31}, ["'table_seed'", str(2**31), "0 to 2**31 - 1"]),
        ("compression", "quick", {"vocab_size": 2}, ["'vocab_size'", "2", ">= 3"]),
    ],
)
def test_bad_options_get_one_sentence_naming_option_value_and_accepted(name, profile, options, expected):
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task(name, profile=profile, **options)
    message = one_sentence(error)
    assert f"Task {name!r}" in message
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_eval_lengths_are_validated_at_each_length_in_one_sentence():
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("passkey", eval_lengths=(256, 5))
    message = one_sentence(error)
    assert "'eval_lengths' got 5" in message and ">= num_buckets + 1 = 9" in message
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("passkey", eval_lengths=(256, 256))
    assert "distinct" in one_sentence(error)
    with pytest.raises(variants.OptionError) as error:
        tasks.create_task("passkey", eval_lengths=("long",))
    message = one_sentence(error)
    assert "'eval_lengths' got ('long',)" in message and "comma-separated list of integers" in message


def test_a_task_at_another_length_keeps_its_vocabulary_and_draws_valid_examples():
    task = tasks.create_task("mqar", eval_lengths=(96,), test_size=256)
    longer = task.at_length(96)
    assert (longer.seq_len, longer.vocabulary, longer.eval_lengths) == (96, task.vocabulary, ())
    batch = task.extra_test_sets("cpu")["length=96"]
    assert batch.inputs.shape == (task.test_size, 96)
    assert_solver_agrees(longer, batch)
