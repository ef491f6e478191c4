"""The training loop and its run records: learning, determinism, resume, divergence."""

import json

import pytest
import torch

from experiments.run import config as configs
from experiments.run.model import Transformer
from experiments.run.records import RunRecord
from experiments.run.train import learning_rate, train

TINY = {
    "task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 64},
    "model": {"dim": 32, "depth": 1, "heads": 2},
    "train": {"steps": 40, "batch_size": 16, "lr": 3e-3, "warmup_steps": 5, "eval_every": 20,
              "checkpoint_every": 10, "log_every": 5},
}


def tiny_config(variant="dense", **train_overrides):
    overrides = {"variant": {}, "task": dict(TINY["task"]), "model": dict(TINY["model"]),
                 "train": {**TINY["train"], **train_overrides}}
    return configs.resolve(variant=variant, task="passkey", profile="quick", seed=3, device="cpu",
                           overrides=overrides)


def new_record(tmp_path, config, name="run"):
    record = RunRecord.create(tmp_path, name)
    record.write_config(config.to_dict())
    return record


def test_a_tiny_run_learns_passkey(tmp_path):
    config = tiny_config(steps=150, eval_every=150, checkpoint_every=150)
    summary = train(config, new_record(tmp_path, config), quiet=True)
    assert summary.status == "completed" and summary.steps == 150
    assert summary.test_accuracy >= 0.9 > 3 * summary.chance_accuracy, summary.test_accuracy
    assert sum(bucket["count"] for bucket in summary.accuracy_by_distance) == 64


def test_run_records_hold_config_metrics_summary_and_a_safe_checkpoint(tmp_path):
    config = tiny_config()
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    assert configs.from_dict(json.loads((record.path / "config.json").read_text())) == config
    saved = json.loads((record.path / "summary.json").read_text())
    assert saved == json.loads(json.dumps(summary.to_dict()))
    for key in ("run_id", "variant", "variant_options", "task", "profile", "seed", "status", "test_accuracy",
                "chance_accuracy", "accuracy_by_distance", "steps", "wall_seconds", "tokens_per_second",
                "peak_memory_bytes", "device", "torch_version", "git_commit", "decayed_parameters"):
        assert key in saved, key
    assert "embed.weight" in saved["decayed_parameters"] and "blocks.0.qkv.weight" in saved["decayed_parameters"]
    assert "positions" not in saved["decayed_parameters"]
    lines = [json.loads(line) for line in (record.path / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines if line["kind"] == "train"] == list(range(5, 41, 5))
    assert [line["step"] for line in lines if line["kind"] == "eval"] == [20, 40]
    state = torch.load(record.checkpoint_path, weights_only=True)
    assert state["step"] == 40
    assert not list(record.path.glob(".*.tmp"))  # atomic writes leave no temporary files behind


def test_same_seed_same_numbers(tmp_path):
    config = tiny_config()
    first = train(config, new_record(tmp_path, config, "a"), quiet=True)
    second = train(config, new_record(tmp_path, config, "b"), quiet=True)
    assert first.test_accuracy == second.test_accuracy and first.test_loss == second.test_loss
    metrics = [RunRecord(tmp_path / name).read_metrics() for name in ("a", "b")]
    strip = [[{k: v for k, v in line.items() if k != "wall_seconds"} for line in lines] for lines in metrics]
    assert strip[0] == strip[1]


@pytest.mark.parametrize("stop_at", [10, 23])  # on a checkpoint boundary and between two
def test_interrupted_then_resumed_equals_uninterrupted_bit_for_bit(tmp_path, stop_at):
    config = tiny_config()
    whole = train(config, new_record(tmp_path, config, "whole"), quiet=True)
    record = new_record(tmp_path, config, "split")
    interrupted = train(config, record, quiet=True, should_stop=lambda step: step == stop_at)
    assert interrupted.status == "interrupted" and interrupted.steps == stop_at
    assert record.read_summary().status == "interrupted"
    resumed = train(config, RunRecord.open(tmp_path, "split"), quiet=True)
    assert resumed.status == "completed"
    assert (resumed.test_accuracy, resumed.test_loss) == (whole.test_accuracy, whole.test_loss)
    assert resumed.accuracy_by_distance == whole.accuracy_by_distance

    def without_times(name):
        lines = RunRecord(tmp_path / name).read_metrics()
        return [{key: value for key, value in line.items() if key != "wall_seconds"} for line in lines]

    assert without_times("split") == without_times("whole")


def test_a_checkpoint_that_calls_the_running_sums_window_still_resumes_bit_for_bit(tmp_path):
    config = tiny_config()
    whole = train(config, new_record(tmp_path, config, "whole"), quiet=True)
    record = new_record(tmp_path, config, "old")
    train(config, record, quiet=True, should_stop=lambda step: step == 23)
    state = torch.load(record.checkpoint_path, weights_only=True)
    state["window"] = state.pop("running_sums")  # as checkpoints were written before the rename
    record.save_checkpoint(state)
    resumed = train(config, RunRecord.open(tmp_path, "old"), quiet=True)
    assert (resumed.test_loss, resumed.val_loss) == (whole.test_loss, whole.val_loss)


def test_a_non_finite_loss_ends_the_run_as_diverged_and_keeps_its_record(tmp_path, monkeypatch):
    config = tiny_config()
    calls = {"count": 0}
    forward = Transformer.forward

    def poisoned(self, tokens, return_weights=False):
        calls["count"] += 1
        logits = forward(self, tokens, return_weights)
        return logits * float("nan") if calls["count"] == 13 else logits

    monkeypatch.setattr(Transformer, "forward", poisoned)
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    assert summary.status == "diverged" and "non-finite" in summary.error
    assert summary.steps == 15  # noticed at the next check (logging every 5 steps), before a checkpoint
    assert record.read_summary().status == "diverged"
    assert torch.load(record.checkpoint_path, weights_only=True)["step"] == 10  # the last good checkpoint


def test_learning_rate_warms_up_then_decays_to_its_floor():
    schedule = configs.TrainConfig(steps=100, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    rates = [learning_rate(step, schedule) for step in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert all(later <= earlier for earlier, later in zip(rates[9:], rates[10:], strict=False))
    assert learning_rate(100, schedule) == pytest.approx(0.1)


def test_eval_lengths_are_one_config_line_and_give_accuracy_by_length(tmp_path):
    overrides = configs.parse_sets(["task.eval_lengths=16,24", *(f"train.{k}={v}" for k, v in TINY["train"].items())])
    overrides["task"].update({k: v for k, v in TINY["task"].items()})
    overrides["model"].update({**TINY["model"], "positions": "sinusoidal"})  # learned ones cannot reach 16 and 24
    config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=3, device="cpu",
                             overrides=overrides)
    assert config.task_options.eval_lengths == (16, 24)
    record = new_record(tmp_path, config)
    summary = train(config, record, quiet=True)
    assert [entry["length"] for entry in summary.accuracy_by_length] == [12, 16, 24]
    assert summary.accuracy_by_length[0]["accuracy"] == summary.test_accuracy
    # Each length's accuracy is that of the task drawn at that length, scored by the saved model.
    last_eval = [line for line in record.read_metrics() if line["kind"] == "eval"][-1]
    assert set(last_eval["splits"]) == {"length=16", "length=24"}
    assert all(0 <= entry["accuracy"] <= 1 for entry in summary.accuracy_by_length)
    assert configs.from_dict(json.loads((record.path / "config.json").read_text())) == config  # tuples survive JSON


def test_length_evaluation_scores_the_task_drawn_at_that_length(tmp_path):
    from experiments import tasks
    from experiments.run.evaluation import evaluate

    config = tiny_config()
    task = tasks.create_task("passkey", **{**TINY["task"], "eval_lengths": (20,)})
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes,
                        max_len=task.max_len, variant="dense", variant_options={})
    longer = task.extra_test_sets("cpu")["length=20"]
    assert longer.inputs.shape == (64, 20) and task.max_len == 20
    assert batches_equal_inputs(longer, task.at_length(20).sample_test(
        64, torch.Generator().manual_seed(tasks.test_seed("passkey@20")), torch.device("cpu")))
    assert evaluate(model, longer, 16, [])["test_accuracy"] == evaluate(model, longer, 64, [])["test_accuracy"]


def batches_equal_inputs(first, second):
    return torch.equal(first.inputs, second.inputs) and torch.equal(first.targets, second.targets)


def test_a_pruned_run_stops_after_the_evaluation_that_pruned_it_and_keeps_its_record(tmp_path):
    config = tiny_config()
    record = new_record(tmp_path, config)
    asked = []
    summary = train(config, record, quiet=True, tags={"study": "s", "trial": 4},
                    should_prune=lambda step, accuracy: asked.append((step, accuracy)) or step >= 20)
    assert summary.status == "pruned" and summary.steps == 20
    assert asked == [(20, summary.val_accuracy)]
    saved = record.read_summary()
    assert saved.status == "pruned" and saved.tags == {"study": "s", "trial": 4}
    assert torch.load(record.checkpoint_path, weights_only=True)["step"] == 20


def test_the_last_evaluation_is_never_pruned(tmp_path):
    config = tiny_config()
    summary = train(config, new_record(tmp_path, config), quiet=True, should_prune=lambda step, accuracy: step == 40)
    assert summary.status == "completed" and summary.tags == {}


def test_a_head_dim_apart_from_the_model_width_sizes_q_k_and_v():
    sizes = {"dim": 30, "depth": 1, "heads": 2, "head_dim": 48}
    overrides = {"variant": {}, "task": dict(TINY["task"]), "model": sizes, "train": {}}
    config = configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cpu",
                             overrides=overrides)
    assert config.model.attention_head_dim == 48  # dim 30 need not be a multiple of heads any more
    model = Transformer(config.model, vocab_size=9, num_classes=4, max_len=12, variant="dense", variant_options={})
    block = model.blocks[0]
    assert tuple(block.qkv.weight.shape) == (3 * 2 * 48, 30) and tuple(block.out.weight.shape) == (30, 2 * 48)
    q, k, v = block.heads_qkv(torch.randn(3, 12, 30))
    assert q.shape == k.shape == v.shape == (3, 2, 12, 48)
    assert model(torch.randint(0, 9, (3, 12))).shape == (3, 12, 4)
    with pytest.raises(configs.OptionError, match="'head_dim' got 0"):
        configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cpu",
                        overrides={**overrides, "model": {**sizes, "head_dim": 0}})


def test_a_run_with_a_target_stops_at_the_first_evaluation_that_reaches_it_and_records_where(tmp_path):
    config = tiny_config(steps=40, eval_every=10, target_accuracy=0.01)  # any evaluation reaches 0.01
    summary = train(config, new_record(tmp_path, config), quiet=True)
    assert summary.status == "completed" and summary.steps == 10 and summary.total_steps == 40
    assert summary.target_step == 10 and 0 < summary.target_seconds <= summary.wall_seconds
    unreachable = tiny_config(steps=20, eval_every=10, lr=1e-7, target_accuracy=0.9)  # stays near chance
    summary = train(unreachable, new_record(tmp_path, unreachable, "unreached"), quiet=True)
    assert summary.steps == 20 and summary.target_step is None and summary.target_seconds is None
    plain = tiny_config(steps=20, eval_every=10)
    assert train(plain, new_record(tmp_path, plain, "plain"), quiet=True).target_step is None


def test_a_run_resumed_after_the_evaluation_that_reached_its_target_trains_no_further(tmp_path, monkeypatch):
    # The first process goes past the target (as one killed between that evaluation and stopping would have)
    # and is interrupted at step 15, its checkpoint holding the evaluation at step 10 that reached it.
    config = tiny_config(steps=40, eval_every=10, checkpoint_every=10, target_accuracy=0.01)
    record = new_record(tmp_path, config)
    monkeypatch.setattr("experiments.run.train.stopped_at_target", lambda train, line: False)
    assert train(config, record, quiet=True, should_stop=lambda step: step == 15).status == "interrupted"
    monkeypatch.undo()
    summary = train(config, record, quiet=True)
    assert summary.status == "completed" and summary.steps == 15 and summary.target_step == 10
    evaluations = [json.loads(line)["step"] for line in (record.path / "metrics.jsonl").read_text().splitlines()
                   if json.loads(line)["kind"] == "eval"]
    assert evaluations == [10]  # the figures are those of the evaluation that reached the target


def test_a_target_outside_0_to_1_is_refused_in_one_sentence():
    with pytest.raises(configs.OptionError, match=r"'target_accuracy' got 1.5; accepted: none or a number in \(0, 1\]"):
        tiny_config(target_accuracy=1.5)
