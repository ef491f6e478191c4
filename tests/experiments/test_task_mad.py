"""MAD's six tasks (Poli et al. 2024): the mad profile holds MAD's baseline, the ladder MAD's levels, `--task mad`
names the six, a fixed training set serves every batch and resumes, and each generator keeps MAD's layout."""

import pytest
import torch

from common.schema import from_flags
from experiments import benchmark, tasks
from experiments.run import config as configs
from experiments.run.model import Transformer
from experiments.run.records import RunRecord
from experiments.run.train import train
from experiments.schemas.benchmark import BenchmarkOptions

MAD_TASKS = ["in_context_recall", "fuzzy_in_context_recall", "noisy_in_context_recall", "selective_copy",
             "compression", "memorization"]

# MAD's configs/tasks/*.yml baselines, in attnlab's options (selective copying's vocabulary of 16 holds 14 data
# tokens and its two special tokens), with MAD's num_train_examples.
MAD_BASELINES = {
    "in_context_recall": {"vocab_size": 16, "seq_len": 128, "train_examples": 12800},
    "fuzzy_in_context_recall": {"vocab_size": 16, "seq_len": 128, "train_examples": 12800, "max_key_tokens": 3,
                                "max_value_tokens": 3},
    "noisy_in_context_recall": {"vocab_size": 32, "noise_vocab_size": 16, "frac_noise": 0.2, "seq_len": 128,
                                "train_examples": 12800},
    "selective_copy": {"num_data_tokens": 14, "seq_len": 256, "num_tokens": 16, "train_examples": 12800},
    "compression": {"vocab_size": 16, "seq_len": 32, "train_examples": 12800},
    "memorization": {"vocab_size": 256, "seq_len": 32, "train_examples": 256},
}
RECALL_LADDER = {"vocab_size": (32, 64, 128), "seq_len": (256, 512, 1024), "train_examples": (6400, 3200, 1600, 800)}
MAD_LADDERS = {  # MAD's `changes`, in attnlab's options
    "in_context_recall": RECALL_LADDER,
    "fuzzy_in_context_recall": RECALL_LADDER,
    "noisy_in_context_recall": {**RECALL_LADDER, "vocab_size": (48, 80, 144), "frac_noise": (0.4, 0.6, 0.8)},
    "selective_copy": {"num_data_tokens": (30, 62, 126), "seq_len": (512, 1024),
                       "train_examples": (6400, 3200, 1600, 800), "num_tokens": (32, 64, 96)},
    "compression": {**RECALL_LADDER, "seq_len": (64, 128, 256)},
    "memorization": {"vocab_size": (512, 1024, 2048, 4096, 8192)},
}


def test_the_mad_task_set_names_the_six_tasks_and_only_they_have_a_mad_profile_and_ladder():
    assert tasks.expand_tasks("mad") == MAD_TASKS and tasks.expand_tasks("mad,passkey")[-1] == "passkey"
    having = [name for name in tasks.list_tasks() if "mad" in tasks.task_class(name).profiles]
    assert sorted(having) == sorted(MAD_TASKS)
    assert all(tasks.task_class(name).mad_ladder == {} for name in tasks.list_tasks() if name not in MAD_TASKS)


@pytest.mark.parametrize("name", MAD_TASKS)
def test_the_mad_profile_is_mads_baseline_task_model_and_budget(name):
    task = tasks.create_task(name, profile="mad")
    assert {option: getattr(task.options, option) for option in MAD_BASELINES[name]} == MAD_BASELINES[name]
    assert task.test_size == 1280 and task.vocab_size == (16 if name == "selective_copy" else task.options.vocab_size)
    assert task.default_model == {"dim": 128, "depth": 2, "heads": 16}
    epochs = task.default_train["steps"] * 128 / task.train_examples
    assert 200 <= epochs < 200 * (1 + 128 / task.train_examples)  # 200 epochs of batches of 128
    assert {key: task.default_train[key] for key in ("batch_size", "lr", "weight_decay", "warmup_steps")} == {
        "batch_size": 128, "lr": 5e-4, "weight_decay": 0.0, "warmup_steps": 0}
    assert task.default_train["lr"] * task.default_train["min_lr_ratio"] == pytest.approx(1e-6)  # cosine to 1e-6


@pytest.mark.parametrize("name", MAD_TASKS)
def test_the_ladder_is_mads_baseline_then_each_change_alone_with_200_epochs_of_fewer_examples(name):
    levels = tasks.mad_levels(name)
    expected = [{}, *({option: value} for option, values in MAD_LADDERS[name].items() for value in values)]
    assert [options for options, _ in levels] == expected
    for options, budget in levels:
        tasks.create_task(name, profile="mad", **options)  # every level can be drawn
        examples = options.get("train_examples")
        assert budget == ({} if examples is None else {**tasks.create_task(name, profile="mad").default_train,
                                                       "steps": 200 * -(-examples // 128),
                                                       "eval_every": budget["eval_every"]})


def test_a_task_outside_mads_suite_has_no_levels():
    with pytest.raises(ValueError, match="'passkey' is not one of MAD's; accepted: in_context_recall"):
        tasks.mad_levels("passkey")


def test_a_fixed_training_set_is_the_same_for_every_run_seed_and_every_batch_is_drawn_from_it():
    task = tasks.create_task("in_context_recall", seq_len=16, train_examples=24, test_size=16)
    rows = {tuple(row) for row in task.training_set("cpu").inputs.tolist()}
    assert len(rows) == 24
    again = tasks.create_task("in_context_recall", seq_len=16, train_examples=24, test_size=16)
    assert torch.equal(again.training_set("cpu").inputs, task.training_set("cpu").inputs)
    first, second = (task.batch(64, tasks.train_generator(seed), "cpu") for seed in (0, 1))
    assert all({tuple(row) for row in batch.inputs.tolist()} <= rows for batch in (first, second))
    assert not torch.equal(first.inputs, second.inputs)
    assert torch.equal(first.targets, task.batch(64, tasks.train_generator(0), "cpu").targets)
    assert not rows & {tuple(row) for row in task.test_set("cpu").inputs.tolist()}
    fresh = tasks.create_task("in_context_recall", seq_len=16, test_size=16)
    assert not {tuple(row) for row in fresh.batch(64, tasks.train_generator(0), "cpu").inputs.tolist()} <= rows


def test_a_run_on_a_fixed_training_set_resumes_bit_for_bit(tmp_path):
    overrides = {"variant": {}, "task": {"seq_len": 16, "train_examples": 48, "test_size": 32},
                 "model": {"dim": 32, "depth": 1, "heads": 2},
                 "train": {"steps": 30, "batch_size": 16, "eval_every": 15, "checkpoint_every": 10, "log_every": 5}}
    config = configs.resolve(variant="dense", task="in_context_recall", profile="quick", seed=1, device="cpu",
                             overrides=overrides)

    def record(name):
        created = RunRecord.create(tmp_path, name)
        created.write_config(config.to_dict())
        return created

    whole = train(config, record("whole"), quiet=True)
    train(config, record("split"), quiet=True, should_stop=lambda step: step == 17)
    resumed = train(config, RunRecord.open(tmp_path, "split"), quiet=True)
    assert (resumed.test_loss, resumed.val_loss) == (whole.test_loss, whole.val_loss)


def test_a_bottleneck_model_rebuilds_every_position_from_the_last_one():
    config = configs.ModelConfig(dim=16, depth=1, heads=2)
    torch.manual_seed(0)
    model = Transformer(config, vocab_size=6, num_classes=5, max_len=8, variant="dense", variant_options={},
                        bottleneck=True)
    tokens = torch.tensor([[1, 2, 3, 4, 0, 1, 2, 5]])
    changed_last = tokens.clone()
    changed_last[0, -1] = 3
    logits, after = model(tokens), model(changed_last)
    assert not torch.allclose(logits[0, 0], after[0, 0])  # causal, yet the first position reads the last input
    plain = Transformer(config, vocab_size=6, num_classes=5, max_len=8, variant="dense", variant_options={})
    assert torch.equal(plain(tokens)[0, 0], plain(changed_last)[0, 0])
    assert tasks.task_class("compression").bottleneck and not tasks.task_class("memorization").bottleneck


def test_recall_keeps_a_keys_value_and_always_asks_for_one_at_the_last_pair():
    task = tasks.create_task("in_context_recall", test_size=64)
    batch = task.batch(512, tasks.train_generator(0), "cpu")
    assert (batch.targets[:, -2] != tasks.IGNORE).all()  # the last key has come before
    keys, values = batch.inputs[:, 0::2], batch.inputs[:, 1::2]
    for key in range(task.num_values, task.num_values + task.num_keys):
        chosen = values[keys == key].view(-1)
        rows = (keys == key).nonzero()[:, 0]
        for row in rows.unique()[:20]:
            assert len(set(chosen[rows == row].tolist())) == 1  # one value per key in an example


def test_noisy_recall_puts_noise_pairs_at_frac_noise_and_never_scores_them():
    task = tasks.create_task("noisy_in_context_recall", seq_len=64, frac_noise=0.6, test_size=64)
    batch = task.batch(2048, tasks.train_generator(0), "cpu")
    noise = batch.inputs >= task.num_values + task.num_keys  # (batch, seq)
    assert torch.equal(noise[:, 0::2], noise[:, 1::2]) and not noise[:, -2:].any()
    pairs = task.seq_len // 2
    assert noise[:, 0::2].float().mean().item() == pytest.approx(0.6 * (pairs - 2) / pairs, abs=0.01)
    assert (batch.targets[noise] == tasks.IGNORE).all()


def test_fuzzy_recall_tests_on_keys_of_the_longest_length_and_trains_on_every_length():
    task = tasks.create_task("fuzzy_in_context_recall", test_size=256)

    def key_lengths(batch):
        is_key = (batch.inputs >= task.num_values) & (batch.inputs < task.num_values + task.num_keys)
        starts = is_key[:, 1:] & ~is_key[:, :-1]
        ends = is_key[:, :-1] & ~is_key[:, 1:]
        return torch.tensor([end - start + 1 for row in range(len(batch.inputs))
                             for start, end in zip(starts[row].nonzero()[:, 0] + 1, ends[row].nonzero()[:, 0],
                                                   strict=True)])

    assert set(key_lengths(task.test_set("cpu")).tolist()) == {3}
    assert set(key_lengths(task.batch(256, tasks.train_generator(0), "cpu")).tolist()) == {1, 2, 3}


def test_memorization_asks_every_set_for_one_fixed_table_that_its_seed_draws():
    task = tasks.create_task("memorization", test_size=256)
    training, test = task.batch(256, tasks.train_generator(0), "cpu"), task.test_set("cpu")
    for batch in (training, test):
        keys = batch.inputs[:, 0::2] - task.num_values
        assert torch.equal(batch.targets[:, 1::2], task.table[keys])
    assert len(set(task.table.tolist())) == task.num_keys == 31
    other = tasks.create_task("memorization", table_seed=1)
    assert not torch.equal(other.table, task.table)
    assert "storage in weights, not a long-range dependency" in tasks.describe_tasks()


def test_compression_asks_for_every_token_but_the_last_from_the_last_position():
    task = tasks.create_task("compression", test_size=8)
    batch = task.test_set("cpu")
    assert (batch.inputs[:, -1] == task.num_classes).all() and (batch.targets[:, -1] == tasks.IGNORE).all()
    assert torch.equal(batch.targets[:, :-1], batch.inputs[:, :-1])
    assert batch.distance[0, :-1].tolist() == list(range(task.seq_len - 1, 0, -1))


def test_attnlab_list_names_each_tasks_paper_deviations_and_ladder():
    blocks, name = {}, None
    for line in tasks.describe_tasks().splitlines():
        name = name if line.startswith(" ") else line.split(":")[0]
        blocks[name] = blocks.get(name, "") + line + "\n"
    for name in MAD_TASKS:
        paper = next(line for line in blocks[name].splitlines() if line.startswith("    paper: "))
        assert "Poli et al. 2024, \"Mechanistic Design and Scaling of Hybrid Architectures\" (MAD)" in paper, name
        assert "    deviation: " in blocks[name] and "    profile mad: " in blocks[name]
        assert "MAD's ladder of difficulty (each alone over profile mad): " in blocks[name]
    assert "    paper: Gu & Dao 2023" in blocks["selective_copy"]
    assert "    deviation: at profile mad, markers `?` ask for the tokens" in blocks["selective_copy"]


def test_a_task_sized_after_mad_alone_has_quick_and_mad_and_a_profile_set_of_another_shape_is_refused():
    class Partial(tasks.task_class("compression")):
        profiles = {"quick": tasks.task_class("compression").profiles["quick"]}

    with pytest.raises(ValueError, match=r"defines profiles \['quick'\]; accepted: .*\['quick', 'mad'\]"):
        tasks.register_task("compression_partial")(Partial)

    class Unladdered(tasks.task_class("compression")):
        mad_ladder = {}

    with pytest.raises(ValueError, match="has no MAD ladder but profile 'mad'"):
        tasks.register_task("compression_unladdered")(Unladdered)
    assert "compression_partial" not in tasks.list_tasks()


def test_a_benchmark_of_the_mad_set_has_a_cell_per_task_at_the_mad_profile(tmp_path):
    def prepare(profile):
        options = from_flags(BenchmarkOptions, {"variant": "dense", "task": "mad", "profile": profile, "seeds": 2,
                                                "lr_multiples": "0.2,1,2", "name": "mad", "heartbeat_seconds": 1,
                                                "extend_grid": "0"})
        return benchmark.build(options, device="cpu", runs_dir=tmp_path)

    bench = prepare("mad")
    assert [cell.task for cell in bench.cells] == MAD_TASKS and bench.profile == "mad"
    assert all(cell.skipped is None for cell in bench.cells)
    assert bench.learning_rates(bench.cells[0]) == [1e-4, 5e-4, 1e-3]  # MAD's grid of learning rates
    with pytest.raises(ValueError, match="profile 'standard' for task 'in_context_recall'; available: quick, mad"):
        prepare("standard")
