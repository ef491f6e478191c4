"""`make saturation`'s runner: what each setting trains, and that a second call keeps what finished."""

import dataclasses
import json
import math
import subprocess
import sys

import pandas as pd
import pytest
import torch

import experiments.run.build
import variants
from experiments import tasks
from experiments.run.build import build
from experiments.run.model import Transformer
from experiments.run.planned import open_record, train_all
from experiments.run.records import RecordError, RunRecord
from experiments.run.train import train
from experiments.saturation import runs as saturation
from experiments.saturation import tables as saturation_tables
from experiments.saturation.settings import SETTINGS

TINY = dataclasses.replace(
    SETTINGS["quick"], name="tiny", dynamics_head_dims=(8,), normaliser_head_dims=(8,), seeds=(0,),
    steps=4, batch_size=4,
    eval_every=2, additive_hidden_dim=8, learning_rates=(1e-3,), lr_seeds=(0,), length_seeds=(0,), length_steps=4,
    train_length=12, eval_lengths=(24,), seq_len=12, model={"dim": 16, "depth": 1, "heads": 2},
    fading_key_counts=(2, 16, 128), fading_draws=4)  # the quick setting's fading table draws up to 16,384 keys


@pytest.mark.parametrize("name", list(SETTINGS))
def test_each_setting_trains_what_the_studies_ask_for(name):
    setting = SETTINGS[name]
    runs = saturation.plan(setting)
    assert len({run.name for run in runs}) == len(runs)
    dynamics = [run for run in runs if run.tags["saturation"] == "B"]
    trained = [(run.config.variant, run.config.variant_options.normaliser, run.config.model.attention_head_dim,
                run.config.seed) for run in dynamics]
    normaliser_head_dims = (64,) if name == "quick" else (16, 64, 256)  # quick keeps its budget: one head dim
    assert len(trained) == len(set(trained))
    assert set(trained) == {
        (variant, "softmax", head_dim, seed) for variant in ("dense", "unscaled", "temperature", "qknorm", "softcap",
                                                              "additive")
        for head_dim in (16, 64, 256) for seed in setting.seeds} | {
        ("dense", normaliser, head_dim, seed) for normaliser in ("sparsemax", "entmax15", "sigmoid")
        for head_dim in normaliser_head_dims for seed in setting.seeds}
    assert set(setting.init_normalisers) == {"sigmoid", "sparsemax", "entmax15", "entmax_adaptive"}
    assert len(setting.seeds) >= 3
    assert all(run.config.train.attention_stats for run in dynamics)
    assert {run.config.model.dim for run in dynamics} == {64}  # the same model; only the heads' width changes
    learned = [run for run in dynamics if run.config.variant == "temperature"]
    assert all(run.config.variant_options.learnable for run in learned)

    rates = [run for run in runs if run.tags["saturation"] == "C"]
    assert {run.config.variant for run in rates} == {"dense", "qknorm"}
    learning_rates = sorted({run.config.train.lr for run in rates})
    assert math.log10(learning_rates[-1] / learning_rates[0]) >= 3  # orders of magnitude
    assert all(run.config.train.attention_stats for run in rates)

    lengths = [run for run in runs if run.tags["saturation"] == "D"]
    assert {(run.config.variant, getattr(run.config.variant_options, "kind", None)) for run in lengths} == {
        ("dense", None), ("ssmax", None), ("temperature", None), ("relative", "alibi")}
    assert all(run.config.task == "passkey" and run.config.model.positions == "none" for run in lengths)
    assert all(max(run.config.task_options.eval_lengths) >= 8 * run.config.task_options.seq_len
               for run in lengths)


def test_a_second_call_keeps_finished_runs_and_resumes_interrupted_ones(tmp_path):
    planned = saturation.plan(TINY)[-1]
    whole, interrupted = tmp_path / "whole", tmp_path / "interrupted"
    assert train_all([planned], whole, workers=1, quiet=True) == []
    finished = (whole / planned.name / "summary.json").read_text()
    assert train_all([planned], whole, workers=1, quiet=True) == []
    assert (whole / planned.name / "summary.json").read_text() == finished  # not trained again

    interrupted.mkdir()
    record = open_record(interrupted, planned)
    stopped = train(planned.config, record, quiet=True, should_stop=lambda step: step >= 2)
    assert stopped.status == "interrupted" and stopped.steps == 2
    assert train_all([planned], interrupted, workers=1, quiet=True) == []

    def numbers(folder):
        return [{key: value for key, value in line.items() if key != "wall_seconds"}
                for line in RunRecord.open(folder, planned.name).read_metrics()]

    assert RunRecord.open(interrupted, planned.name).read_summary().status == "completed"
    assert numbers(interrupted) == numbers(whole)  # resumed at step 2: the numbers of the uninterrupted run


def test_a_run_folder_of_other_settings_is_refused_in_one_sentence(tmp_path):
    planned = saturation.plan(TINY)[0]
    record = RunRecord.create(tmp_path, planned.name)
    record.write_config({**planned.config.to_dict(), "seed": 5})
    with pytest.raises(RecordError) as error:
        train_all([planned], tmp_path, workers=1, quiet=True)
    assert planned.name in str(error.value) and "\n" not in str(error.value)


def test_a_run_folder_written_before_an_option_existed_is_the_same_run(tmp_path):
    planned = next(run for run in saturation.plan(TINY) if run.config.variant == "dense")
    assert train_all([planned], tmp_path, workers=1, quiet=True) == []
    record = RunRecord.open(tmp_path, planned.name)
    older = planned.config.to_dict()
    del older["variant_options"]["normaliser"]  # as a version before the normaliser option wrote it
    record.write_config(older)
    assert open_record(tmp_path, planned) is None  # completed: kept, not refused and not trained again


def test_an_unknown_setting_is_one_sentence_without_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "attnlab", "saturation", "--setting", "huge",
                             "--runs-dir", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "'huge'" in result.stderr and "quick" in result.stderr


def test_settings_are_saved_as_json_the_report_can_read():
    assert json.loads(json.dumps(dataclasses.asdict(TINY)))["name"] == "tiny"


def _dense_b_config(setting):
    return next(run.config for run in saturation.plan(setting)
                if run.tags["saturation"] == "B" and run.config.variant == "dense")


def test_the_model_variance_is_that_of_q_and_k_in_the_model_the_study_trains():
    config = _dense_b_config(TINY)
    measured = saturation_tables.model_variance(config, batch_size=8)
    assert list(measured["layer"]) == list(range(config.model.depth))
    assert set(measured["head_dim"]) == {config.model.attention_head_dim}

    parts = build(config)  # as the training loop builds it
    task, model = parts.task, parts.model
    inputs = task.batch(8, tasks.train_generator(config.seed), "cpu").inputs
    with torch.no_grad():
        projected = model.blocks[0].qkv(model.blocks[0].attn_norm(model.embedded(inputs)))  # (B, T, 3 * width)
    width = projected.shape[-1] // 3
    q, k = projected[..., :width].flatten(0, 1).double(), projected[..., width: 2 * width].flatten(0, 1).double()
    first = measured.iloc[0]
    assert first["q_variance"] == pytest.approx(q.var(dim=0).mean().item(), rel=1e-9)
    assert first["k_variance"] == pytest.approx(k.var(dim=0).mean().item(), rel=1e-9)
    assert 0.2 < first["q_variance"] < 0.5  # PyTorch's Linear initialisation: about 1/3, not 1


def test_the_model_variance_follows_the_models_initialisation(monkeypatch):
    config = _dense_b_config(TINY)
    before = saturation_tables.model_variance(config, batch_size=8)

    class Doubled(Transformer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            with torch.no_grad():
                for block in self.blocks:
                    block.qkv.weight.mul_(2)
                    block.qkv.bias.mul_(2)

    monkeypatch.setattr(experiments.run.build, "Transformer", Doubled)
    after = saturation_tables.model_variance(config, batch_size=8)
    assert after.loc[0, "q_variance"] == pytest.approx(4 * before.loc[0, "q_variance"], rel=1e-5)
    assert after.loc[0, "k_variance"] == pytest.approx(4 * before.loc[0, "k_variance"], rel=1e-5)


def test_the_model_variance_is_measured_on_dense_with_the_softmax_once_per_head_dim():
    setting = dataclasses.replace(TINY, dynamics_head_dims=(8,), normaliser_head_dims=(8, 16))
    planned = saturation.plan(setting)
    assert {run.config.variant_options.normaliser for run in planned if run.config.variant == "dense"
            and run.tags["saturation"] == "B"} == {"softmax", "sparsemax", "entmax15", "sigmoid"}
    measured = saturation.measured_variance(setting, planned)
    assert measured["head_dim"].tolist() == [8]  # not the dense runs of other normalisers, at 8 or 16


def test_study_a_has_rows_at_the_variance_measured_on_the_model(tmp_path):
    setting = dataclasses.replace(TINY, head_dims=(8, 32), key_counts=(16,), temperatures=(2.0,), samples=16,
                                  dynamics_head_dims=(8, 16))
    saturation._write_tables(setting, tmp_path, saturation.plan(setting), quiet=True)
    variance = pd.read_csv(tmp_path / "model_variance.csv")
    assert sorted(set(variance["head_dim"])) == [8, 16] and set(variance["layer"]) == {0}
    expected = saturation.measured_variance(setting, saturation.plan(setting))
    pd.testing.assert_frame_equal(variance, expected, rtol=1e-12)
    init = pd.read_csv(tmp_path / "init_stats.csv")
    assert init.groupby("normaliser").size().to_dict() == {
        "softmax": 2 * 3 * 2 + 2 * 2 * 2,  # unscaled, scaled, tau 2 at unit variance; unscaled, scaled at the model's
        **{name: 2 * 2 * 2 for name in setting.init_normalisers}}  # unscaled and scaled at unit variance
    at_model = init[init["q_variance"] != 1]
    assert len(at_model) == 2 * 2 * 2  # unscaled and scaled, at 2 head dims, in float32 and float64
    assert at_model["q_variance"].tolist() == pytest.approx([variance["q_variance"].mean()] * len(at_model))
    assert at_model["k_variance"].tolist() == pytest.approx([variance["k_variance"].mean()] * len(at_model))
    assert set(at_model["normalisation"]) == {"unscaled", "scaled"}


def test_the_fading_table_draws_the_settings_registered_variants_and_leaves_out_the_others():
    setting = dataclasses.replace(TINY, fading_kernelised=(("linear", {}), ("linear", {"feature_map": "relu"}),
                                                           ("not-a-variant", {})))
    assert saturation.fading_variants(setting) == [("linear", {}), ("linear", {"feature_map": "relu"})]
    assert {name for name, _ in saturation.fading_variants(SETTINGS["quick"])} == (
        {"linear", "performer"} & set(variants.list_variants()))
