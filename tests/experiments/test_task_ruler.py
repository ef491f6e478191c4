"""RULER's tasks (niah_multikey, niah_multivalue, niah_multiquery, variable_tracking): the published counts as
defaults, the haystack each configuration hides its needles in, answers in context order, accuracy by distance, the
`ruler` task set, and a tiny run that resumes to the numbers of an uninterrupted one."""

from collections import Counter

import pytest
import torch
from test_train import TINY

from experiments import tasks
from experiments.run import config as configs
from experiments.run.records import RunRecord
from experiments.run.train import train

RULER = ["niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking"]
TINY_SIZES = {"niah_multikey": {"seq_len": 16, "num_keys": 8, "num_values": 8},
              "niah_multivalue": {"seq_len": 16, "num_needle_values": 2},
              "niah_multiquery": {"seq_len": 16, "num_needle_keys": 2, "num_queries": 2},
              "variable_tracking": {"seq_len": 16, "num_hops": 2}}


def scored(batch):
    """Per example, the scored positions."""
    return [(row != tasks.IGNORE).nonzero().flatten().tolist() for row in batch.targets]


@pytest.mark.parametrize("name, counts, answers", [
    ("niah_multikey", {"haystack": "needles", "num_needle_keys": 1, "num_needle_values": 1, "num_queries": 1}, 1),
    ("niah_multivalue", {"haystack": "distractors", "num_needle_keys": 1, "num_needle_values": 4, "num_queries": 1}, 4),
    ("niah_multiquery", {"haystack": "distractors", "num_needle_keys": 4, "num_needle_values": 1, "num_queries": 4}, 4),
    ("variable_tracking", {"num_chains": 1, "num_hops": 4}, 5),
])
def test_the_defaults_are_rulers_published_counts_with_one_scored_marker_per_answer(name, counts, answers):
    task = tasks.create_task(name)
    assert {option: getattr(task.options, option) for option in counts} == counts
    assert tasks.task_class(name).paper.startswith("Hsieh et al. 2024, RULER")
    batch = task.batch(32, tasks.train_generator(0), "cpu")
    assert {len(positions) for positions in scored(batch)} == {answers}
    assert task.decode(batch.inputs[:, scored(batch)[0]].flatten().unique()) == ["?"]  # only markers are scored


def test_the_multikey_haystack_is_needles_with_keys_and_values_of_their_own():
    task = tasks.create_task("niah_multikey")
    for row in task.batch(64, tasks.train_generator(1), "cpu").inputs.tolist():
        names = task.decode(row)
        context = names[:-2]
        assert all(key[0] == "k" for key in context[0::2]) and all(value[0] == "v" for value in context[1::2])
        assert len(set(context)) == len(context)  # distinct keys and values: the asked one is one needle of 31
        assert names[-1] == "?" and names[-2] in context[0::2]
    assert task.chance_accuracy == 1 / 31


def test_multivalue_asks_the_values_in_the_order_they_appear():
    task = tasks.create_task("niah_multivalue")
    batch = task.batch(64, tasks.train_generator(2), "cpu")
    markers = batch.distance[:, -4:]  # (batch, 4) back to each marker's value
    sources = torch.arange(task.seq_len - 4, task.seq_len) - markers
    assert (sources.diff(dim=1) > 0).all()  # each value lies after the one the previous marker asks for
    assert task.chance_accuracy == 1 / 4


def test_multiquery_asks_every_hidden_key_once_in_random_order():
    task = tasks.create_task("niah_multiquery")
    batch = task.batch(256, tasks.train_generator(3), "cpu")
    asked = batch.inputs[:, -8::2]  # (batch, 4) the keys asked
    assert all(len(set(row)) == 4 for row in asked.tolist())
    first_needle = (batch.inputs[:, :-8] >= task.num_classes) & (batch.inputs[:, :-8] < task.num_classes + 16)
    first_key = batch.inputs[torch.arange(256), first_needle.int().argmax(1)]  # (batch,) the key hidden first
    asked_at = (asked == first_key[:, None]).int().argmax(1)  # where among the questions the first hidden key is
    assert set(Counter(asked_at.tolist())) == {0, 1, 2, 3}


def test_variable_tracking_chance_is_what_counting_the_variables_reaches():
    # Every variable of a chain is assigned and then read, but the last, which is only assigned: the count names
    # the last marker's answer, and chance is 2 / (chains * (hops + 1)).
    task = tasks.create_task("variable_tracking")
    batch = task.batch(64, tasks.train_generator(4), "cpu")
    for row, answers in zip(batch.inputs.tolist(), batch.targets[:, -5:].tolist(), strict=True):
        counts = Counter(token for token in row if token < task.num_classes)
        assert [counts[answer] for answer in answers] == [2, 2, 2, 2, 1]
    assert task.chance_accuracy == 2 / 5
    assert tasks.create_task("variable_tracking", num_chains=2, num_hops=3).chance_accuracy == 2 / 8


@pytest.mark.parametrize("name, options, fragments", [
    ("niah_multiquery", {"num_queries": 5}, ["'num_queries'", "5", "from 1 to num_needle_keys = 4"]),
    ("niah_multivalue", {"seq_len": 12}, ["'seq_len'", "12", ">= 13", "4 needles"]),
    ("niah_multikey", {"seq_len": 128}, ["'num_values'", "32", ">= 63"]),
    ("niah_multikey", {"eval_lengths": (128,)}, ["'eval_lengths'", "128", "'num_values'"]),
    ("variable_tracking", {"num_variables": 4}, ["'num_variables'", "4", ">= 5"]),
    ("variable_tracking", {"seq_len": 20}, ["'seq_len'", "20", ">= 21"]),
])
def test_sizes_that_cannot_hold_the_needles_are_one_sentence(name, options, fragments):
    with pytest.raises(ValueError) as error:
        tasks.create_task(name, **options)
    message = str(error.value)
    assert all(fragment in message for fragment in fragments) and message.count(".") <= 2, message


def test_accuracy_is_read_by_distance_buckets_and_at_other_lengths():
    task = tasks.create_task("niah_multiquery", eval_lengths=(256,), test_size=256)
    assert task.report_buckets() == tasks.distance_buckets(127, 8)
    distances = task.test_set("cpu").distance
    buckets = torch.tensor([lo for lo, _ in task.report_buckets()])
    filled = torch.bucketize(distances[distances > 0], buckets, right=True) - 1
    assert set(filled.tolist()) == set(range(8))  # needles lie at every depth
    assert task.extra_test_sets("cpu")["length=256"].inputs.shape == (256, 256)


def test_the_ruler_set_expands_to_its_tasks_and_each_is_listed_with_its_paper_and_deviations():
    assert tasks.expand_tasks("passkey,ruler") == ["passkey", *RULER]
    text = tasks.describe_tasks()
    for name in RULER:
        block = text.split(f"\n{name}: ")[1].split("\n", 1)[1]
        assert block.startswith("    paper: Hsieh et al. 2024, RULER") and "    deviation: tokens, not text" in block
        assert name not in tasks.DEFAULT_SUITE  # until calibrated
    assert "deviation: niah_multikey_3 differs from niah_multikey_2 only" in text


@pytest.mark.parametrize("name", RULER)
def test_a_tiny_run_interrupted_then_resumed_equals_an_uninterrupted_one(tmp_path, name):
    overrides = {"variant": {}, "task": {**TINY_SIZES[name], "test_size": 32}, "model": dict(TINY["model"]),
                 "train": {**TINY["train"], "steps": 20, "eval_every": 10}}
    config = configs.resolve(variant="dense", task=name, profile="quick", seed=3, device="cpu", overrides=overrides)
    records = {}
    for run in ("whole", "split"):
        records[run] = RunRecord.create(tmp_path, run)
        records[run].write_config(config.to_dict())
    whole = train(config, records["whole"], quiet=True)
    assert train(config, records["split"], quiet=True, should_stop=lambda step: step == 13).status == "interrupted"
    resumed = train(config, RunRecord.open(tmp_path, "split"), quiet=True)
    assert resumed.status == whole.status == "completed"
    assert (resumed.test_accuracy, resumed.test_loss) == (whole.test_accuracy, whole.test_loss)
    assert resumed.accuracy_by_distance == whole.accuracy_by_distance
    assert sum(bucket["count"] for bucket in whole.accuracy_by_distance) == 32 * len(scored(
        tasks.create_task(name, **TINY_SIZES[name], test_size=32).test_set("cpu"))[0])


def test_calibration_takes_the_ruler_set_as_its_four_tasks(tmp_path, monkeypatch):
    from analysis.calibration import table
    from attnlab import cli
    from experiments.calibration import runs as calibration

    asked = []
    monkeypatch.setattr(calibration, "run", lambda options, **_: asked.append(list(options.tasks)) or [])
    monkeypatch.setattr(table, "write", lambda folder, out: out)
    out = tmp_path / "calibration.md"
    assert cli.main(["calibration", "--task", "ruler", "--runs-dir", str(tmp_path), "--out", str(out)]) == 0
    assert asked == [RULER]
