"""Runs recorded before this version's renames (`backend`, one-sided windows, no validation set) still load,
mean the layout they trained with, and report; tests/fixtures/recorded-before holds two such runs as the
earlier version wrote them (local with window 16, and sparse longformer with window 8)."""

import shutil
from pathlib import Path

import pytest
import torch

import analysis
from experiments.run import config as configs
from experiments.run.model import Transformer
from experiments.run.records import RunRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded-before"


@pytest.fixture
def runs_dir(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "runs")
    return tmp_path / "runs"


def test_they_load_with_the_kernel_that_ran_and_no_validation_figures(runs_dir):
    runs = analysis.load_runs(runs_dir).set_index("run_id")
    assert not runs.attrs["skipped"]
    assert set(runs.index) == {"local-passkey-s0", "longformer-passkey-s0"}
    assert set(runs["status"]) == {"completed"} and set(runs["kernel_requested"]) == {"auto"}
    assert runs.loc["local-passkey-s0", "kernel"] == "blocked"  # the summary's `backend`, under its name today
    assert runs["val_accuracy"].isna().all()


@pytest.mark.parametrize(("run", "reach"), [("local-passkey-s0", 15), ("longformer-passkey-s0", 7)])
def test_a_one_sided_window_keeps_the_reach_it_trained_with(runs_dir, run, reach):
    config = configs.from_dict(RunRecord(runs_dir / run).read_config())  # as `attnlab resume` reads it
    model = Transformer(config.model, vocab_size=20, num_classes=16, max_len=128, variant=config.variant,
                        variant_options=config.variant_options)
    layout = model.blocks[0].attn.layout(40, 40, causal=True)
    distance = torch.arange(40)[:, None] - torch.arange(40)[None, :]
    globals_ = layout[:, 0] if config.variant == "sparse" else torch.zeros(40, dtype=torch.bool)
    expected = (distance >= 0) & (distance <= reach)  # the earlier |i - j| < window, causal
    assert torch.equal(layout[:, 1:], expected[:, 1:]) and (config.variant == "sparse" or not globals_.any())


def test_they_report_and_their_checkpoints_draw_attention(runs_dir, tmp_path):
    index = analysis.build_report(runs_dir, tmp_path / "reports", name="before")
    page = index.read_text()
    assert "local-passkey-s0" in page and "longformer-passkey-s0" in page
    assert "attention not drawn" not in page


def test_the_test_set_they_called_eval_loads_under_its_name_today(runs_dir):
    runs = analysis.load_runs(runs_dir).set_index("run_id")
    record = RunRecord(runs_dir / "local-passkey-s0")
    saved = record._read_json("summary.json")
    assert "eval_accuracy" in saved and "test_accuracy" not in saved  # as the earlier version wrote it
    assert runs.loc["local-passkey-s0", "test_accuracy"] == saved["eval_accuracy"]
    saved_config = record._read_json("config.json")
    assert runs.loc["local-passkey-s0", "task.test_size"] == saved_config["task_options"]["eval_size"]
    evaluations = [line for line in record.read_metrics() if line["kind"] == "eval"]
    assert evaluations and all("test_accuracy" in line and "eval_accuracy" not in line for line in evaluations)
    history = torch.load(record.checkpoint_path, weights_only=True)["history"]
    assert any("eval_accuracy" in line for line in history)  # resume renames these (experiments.run.train.resume)


def test_a_resumed_history_uses_todays_names(runs_dir):
    from experiments.run.build import build
    from experiments.run.train import resume, set_up

    record = RunRecord(runs_dir / "local-passkey-s0")
    state = resume(set_up(build(configs.from_dict(record.read_config())), record, {}))
    assert state.last_eval is not None and "test_accuracy" in state.last_eval
    assert not any("eval_accuracy" in line for line in state.history)
