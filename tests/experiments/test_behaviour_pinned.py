"""Refactoring leaves the numbers alone: a short run of dense and of local, from one seed, gives the losses and
accuracies it gave before the code that builds and trains a run moved (recorded at commit ead47d5)."""

import pytest

from experiments.run import config as configs
from experiments.run.records import RunRecord
from experiments.run.train import train

SIZES = {"task": {"seq_len": 12, "num_keys": 4, "num_distractors": 4, "num_buckets": 4, "test_size": 64},
         "model": {"dim": 32, "depth": 1, "heads": 2},
         "train": {"steps": 30, "batch_size": 16, "lr": 3e-3, "warmup_steps": 5, "eval_every": 15,
                   "checkpoint_every": 30, "log_every": 10}}

# (train losses at steps 10, 20, 30), (test accuracy, test loss, validation accuracy) at steps 15 and 30.
RECORDED = {
    "dense": {"options": {}, "name": "dense", "parameters": 13572,
              "train_loss": [1.4157283067703248, 1.3203565955162049, 1.0488906681537629],
              "evaluations": [[0.359375, 1.290809988975525, 0.234375], [0.734375, 0.9786899089813232, 0.796875]]},
    "local": {"options": {"window": 4}, "name": "local_w4", "parameters": 13572,
              "train_loss": [1.418435776233673, 1.4214808344841003, 1.3642967581748962],
              "evaluations": [[0.359375, 1.3192895650863647, 0.234375], [0.265625, 1.357637643814087, 0.296875]]},
}


@pytest.mark.parametrize("variant", sorted(RECORDED))
def test_a_short_run_gives_the_numbers_recorded_before_the_refactor(tmp_path, variant):
    recorded = RECORDED[variant]
    config = configs.resolve(variant=variant, task="passkey", profile="quick", seed=5, device="cpu",
                             overrides={**SIZES, "variant": recorded["options"]})
    record = RunRecord.create(tmp_path, "run")
    record.write_config(config.to_dict())
    summary = train(config, record, quiet=True)
    lines = record.read_metrics()
    assert (summary.variant_name, summary.parameters) == (recorded["name"], recorded["parameters"])
    assert [line["loss"] for line in lines if line["kind"] == "train"] == pytest.approx(recorded["train_loss"],
                                                                                         rel=1e-5)
    evaluations = [value for line in lines if line["kind"] == "eval"
                   for value in (line["test_accuracy"], line["test_loss"], line["val_accuracy"])]
    assert evaluations == pytest.approx([value for line in recorded["evaluations"] for value in line], rel=1e-5)
