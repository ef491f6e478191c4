"""The training loop's precision and compile settings: float32 by default on CPU, bf16 under autocast
with float32 master weights when asked (CPU autocast on CPU, the default on CUDA), torch.compile when asked."""

import pytest
import torch

from common.options import OptionError
from experiments.run import config as configs
from experiments.run.records import RunRecord
from experiments.run.train import train

TINY = {
    "task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 64},
    "model": {"dim": 32, "depth": 1, "heads": 2},
    "train": {"steps": 40, "batch_size": 16, "lr": 3e-3, "warmup_steps": 5, "eval_every": 20,
              "checkpoint_every": 20, "log_every": 5},
}


def tiny_run(tmp_path, name, variant="dense", device="cpu", **train_overrides):
    overrides = {"variant": {}, "task": dict(TINY["task"]), "model": dict(TINY["model"]),
                 "train": {**TINY["train"], **train_overrides}}
    config = configs.resolve(variant=variant, task="passkey", profile="quick", seed=3, device=device,
                             overrides=overrides)
    record = RunRecord.create(tmp_path, name)
    record.write_config(config.to_dict())
    summary = train(config, record, quiet=True)
    metrics = [{key: value for key, value in line.items() if key != "wall_seconds"} for line in record.read_metrics()]
    return summary, metrics, record


def test_defaults_on_cpu_are_the_uncompiled_float32_loop_bit_for_bit(tmp_path):
    default, default_metrics, _ = tiny_run(tmp_path, "default")
    assert configs.TrainConfig().precision == "auto" and configs.TrainConfig().compile is False
    assert default.precision == "float32" and default.compiled is False
    explicit, explicit_metrics, _ = tiny_run(tmp_path, "explicit", precision="float32", compile=False)
    assert explicit_metrics == default_metrics
    assert explicit.test_loss == default.test_loss


def test_bf16_on_cpu_trains_under_autocast_and_keeps_float32_master_weights(tmp_path):
    full, full_metrics, _ = tiny_run(tmp_path, "float32", precision="float32")
    half, half_metrics, record = tiny_run(tmp_path, "bf16", precision="bf16")
    assert half.status == "completed" and half.precision == "bf16"
    assert half.test_accuracy >= 0.9  # it still learns the task
    assert half_metrics != full_metrics  # autocast ran the matmuls in bf16
    weights = torch.load(record.checkpoint_path, weights_only=True)["model"]
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}


def test_an_unknown_precision_is_refused_in_one_sentence():
    with pytest.raises(OptionError, match=r"option 'precision' got 'fp16'; accepted: one of 'auto', 'float32', "
                                          r"'bf16'\.$"):
        configs.resolve(variant="dense", task="passkey", profile="quick", seed=0, device="cpu",
                        overrides={"variant": {}, "task": {}, "model": {}, "train": {"precision": "fp16"}})


@pytest.mark.gpu
def test_a_compiled_bf16_run_on_cuda_learns_and_records_its_kernel_and_precision(tmp_path):
    """local: the compiled model calls the flex kernel, itself compiled, inside its graph."""
    summary, _, _ = tiny_run(tmp_path, "local", variant="local", device="cuda", compile=True, steps=150,
                             eval_every=150, checkpoint_every=150)
    assert summary.status == "completed" and summary.precision == "bf16" and summary.compiled is True
    assert summary.kernel == "flex"
    assert summary.test_accuracy >= 0.9
