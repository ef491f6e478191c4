"""The LRA tasks in runs: kept out of the suite and the registry-wide lists, LRA's published sizes as the lra
profile, the two-tower model of retrieval, a run that resumes bit for bit, the command line (`run`, `make lra`'s
task set, `data-check`) and the report's published column."""

import subprocess
import sys

import lra_fixtures as fx
import pandas as pd
import pytest
import torch

from analysis import build_report
from experiments import tasks
from experiments.run import config as configs
from experiments.run.build import build
from experiments.run.config import ModelConfig
from experiments.run.model import Transformer
from experiments.run.records import RunRecord
from experiments.run.train import train

LRA = ["lra_listops", "lra_text", "lra_retrieval", "lra_image", "lra_pathfinder"]
TINY = {"model": {"dim": 16, "depth": 1, "heads": 2},
        "train": {"steps": 6, "batch_size": 4, "eval_every": 3, "checkpoint_every": 3, "log_every": 1}}


def attnlab(*args):
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)


def test_the_lra_tasks_read_nothing_unless_named_and_stay_out_of_the_suite_and_the_registry_wide_lists():
    assert tasks.list_data_tasks() == sorted([*LRA, "lra_pathx"]) and tasks.expand_tasks("lra,passkey") == [
        *LRA, "passkey"]
    assert not set(tasks.list_data_tasks()) & {*tasks.list_tasks(), *tasks.DEFAULT_SUITE}
    listing = tasks.describe_tasks()
    assert all(f"{name}: " in listing for name in tasks.list_data_tasks()) and "profile lra: " in listing
    with pytest.raises(ValueError, match=r"Unknown profile 'lra' for task 'passkey'; available: quick, standard, long"):
        tasks.create_task("passkey", profile="lra")
    with pytest.raises(ValueError, match=r"Unknown profile 'long' for task 'lra_text'; available: quick, lra\."):
        tasks.create_task("lra_text", profile="long")


# LRA's transformer_base configs (lra_benchmarks/*/configs/), as docs/lra.md states them.
PUBLISHED_SIZES = {
    "lra_listops": ({"seq_len": 2001}, {"dim": 512, "depth": 4, "heads": 8, "mlp_ratio": 2, "head_dim": None},
                    {"steps": 5000, "batch_size": 32, "weight_decay": 0.1, "warmup_steps": 1000}, 0.05),
    "lra_text": ({"seq_len": 4001}, {"dim": 256, "depth": 4, "heads": 4, "mlp_ratio": 4, "head_dim": None},
                 {"steps": 20000, "batch_size": 32, "weight_decay": 0.1, "warmup_steps": 8000}, 0.05),
    "lra_retrieval": ({"seq_len": 8002}, {"dim": 128, "depth": 4, "heads": 4, "mlp_ratio": 4, "head_dim": None},
                      {"steps": 5000, "batch_size": 32, "weight_decay": 0.1, "warmup_steps": 8000}, 0.05),
    "lra_image": ({"seq_len": 1025}, {"dim": 128, "depth": 1, "heads": 8, "mlp_ratio": 1, "head_dim": 8},
                  {"steps": 35000, "batch_size": 256, "weight_decay": 0.0, "warmup_steps": 175, "lr": 5e-4}, None),
    "lra_pathfinder": ({"seq_len": 1025}, {"dim": 32, "depth": 4, "heads": 4, "mlp_ratio": 1, "head_dim": 4},
                       {"steps": 62400, "batch_size": 512, "weight_decay": 0.0, "warmup_steps": 312, "lr": 1e-3}, None),
    "lra_pathx": ({"seq_len": 16385}, {"dim": 32, "depth": 1, "heads": 2, "mlp_ratio": 1, "head_dim": 8},
                  {"steps": 500000, "batch_size": 64, "grad_clip": 1.0, "warmup_steps": 2500, "lr": 1e-3}, None),
}


@pytest.mark.parametrize("name", PUBLISHED_SIZES)
def test_the_lra_profile_holds_lras_published_sizes_and_budgets(name):
    options, model, budget, rsqrt_lr = PUBLISHED_SIZES[name]
    profile = tasks.task_class(name).profiles["lra"]
    options_class = tasks.task_class(name).Options
    assert {key: getattr(options_class(**profile.options), key) for key in options} == options
    assert {key: ModelConfig(**profile.model).__getattribute__(key) for key in model} == model
    assert ModelConfig(**profile.model).causal is False  # LRA's encoders are bidirectional
    assert {key: profile.train[key] for key in budget} == budget
    if rsqrt_lr is not None:  # constant * linear_warmup * rsqrt_decay: its peak and its last value
        warmup, steps = budget["warmup_steps"], budget["steps"]
        assert profile.train["lr"] == pytest.approx(rsqrt_lr / warmup**0.5)
        assert profile.train["min_lr_ratio"] == pytest.approx(min(1.0, (warmup / steps) ** 0.5))


@pytest.mark.parametrize("causal", [True, False])
def test_two_towers_encode_each_document_alone_and_classify_the_pair_with_lras_head(causal):
    torch.manual_seed(0)
    config = ModelConfig(dim=16, depth=2, heads=2, causal=causal, positions="sinusoidal")
    model = Transformer(config, vocab_size=12, num_classes=2, max_len=20, variant="dense", variant_options={},
                        towers=2)
    tokens = torch.randint(0, 12, (3, 20))
    logits = model(tokens)

    def encoded(half):  # one tower as a sequence of its own, read at its last position
        x = model.embed(half) + model.positions[: half.shape[1]]
        for block in model.blocks:
            x, _ = block(x, causal)
        return model.norm(x)[:, -1]

    first, second = encoded(tokens[:, :10]), encoded(tokens[:, 10:])
    expected = model.head(torch.cat([first, second, first * second, first - second], -1))
    torch.testing.assert_close(logits[:, -1], expected)
    assert (logits[:, :-1] == 0).all() and model.positions.shape[0] == 10
    changed = tokens.clone()
    changed[:, 10:] = torch.randint(0, 12, (3, 10))
    torch.testing.assert_close(encoded(changed[:, :10]), first)  # the first tower never sees the second
    logits[:, -1].sum().backward()
    assert model.embed.weight.grad.abs().sum() > 0


def _resolve(name, root, seed=0, variant="dense", variant_options=None, **task):
    overrides = {"variant": variant_options or {}, "task": {"data_dir": str(root), "test_size": 0, **task}, **TINY}
    return configs.resolve(variant=variant, task=name, profile="quick", seed=seed, device="cpu", overrides=overrides)


def test_a_retrieval_run_builds_a_two_tower_model_of_half_length(tmp_path):
    fx.write_aan(tmp_path)
    parts = build(_resolve("lra_retrieval", tmp_path, seq_len=40))
    assert parts.model.towers == 2 and parts.model.positions.shape == (20, 16) and parts.task.seq_len == 40
    batch = parts.task.batch(4, tasks.train_generator(0), "cpu")
    assert parts.model(batch.inputs).shape == (4, 40, 2)


def test_a_run_on_real_data_resumes_bit_for_bit(tmp_path):
    fx.write_listops(tmp_path / "data")
    config = _resolve("lra_listops", tmp_path / "data", seq_len=40)
    whole_record = RunRecord.create(tmp_path / "runs", "whole")
    whole_record.write_config(config.to_dict())
    whole = train(config, whole_record, quiet=True)
    record = RunRecord.create(tmp_path / "runs", "split")
    record.write_config(config.to_dict())
    assert train(config, record, quiet=True, should_stop=lambda step: step == 3).status == "interrupted"
    resumed = train(configs.from_dict(record.read_config()), RunRecord.open(tmp_path / "runs", "split"), quiet=True)
    assert resumed.status == whole.status == "completed"
    assert (resumed.test_accuracy, resumed.test_loss, resumed.val_loss) == (whole.test_accuracy, whole.test_loss,
                                                                            whole.val_loss)


def test_run_refuses_a_missing_data_set_alone_and_skips_it_among_others(tmp_path):
    fx.write_listops(tmp_path / "data")
    sets = ["--set", f"task.data_dir={tmp_path / 'data'}", "--set", "task.seq_len=40", "--set", "model.dim=16",
            "--set", "model.depth=1", "--set", "train.steps=2", "--set", "train.eval_every=2"]
    alone = attnlab("run", "--task", "lra_text", *sets, "--runs-dir", str(tmp_path / "runs"), "--quiet")
    assert alone.returncode == 2 and alone.stderr.count("\n") == 1
    assert alone.stderr.startswith("attnlab run: Task 'lra_text' found no reviews") and "aclImdb_v1" in alone.stderr
    several = attnlab("run", "--task", "lra_listops,lra_text", *sets, "--runs-dir", str(tmp_path / "runs"), "--quiet")
    assert several.returncode == 0, several.stderr
    assert "skipped dense on lra_text: Task 'lra_text' found no reviews" in several.stderr
    assert "task lra_listops" in several.stdout and "task lra_text" not in several.stdout
    malformed = tmp_path / "data" / "lra_release" / "listops-1000" / "basic_val.tsv"
    lines = malformed.read_bytes().split(b"\r\n")
    malformed.write_bytes(b"\r\n".join([lines[0], lines[1] + b"\tx", *lines[2:]]))
    refused = attnlab("run", "--task", "lra_listops", *sets, "--runs-dir", str(tmp_path / "runs"), "--quiet")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "basic_val.tsv, line 2: 3 tab" in (
        refused.stderr)


def test_data_check_reports_each_data_set_found_with_its_splits_and_lengths(tmp_path):
    fx.write_listops(tmp_path, "double")
    fx.write_cifar(tmp_path)
    result = attnlab("data-check", str(tmp_path))
    assert result.returncode == 0, result.stderr
    table = result.stdout.splitlines()
    assert ["lra_listops", "yes", "train", "30", "0.200", "4", "8", "31", "0", "longer", "than", "2000"] in [
        line.split() for line in table]
    assert ["lra_image", "yes", "test", "12", "0.333", "1024", "1024", "1024"] in [line.split()[:8] for line in table]
    assert any(line.split()[:2] == ["lra_text", "no"] for line in table) and "aclImdb_v1.tar.gz" in result.stderr
    (tmp_path / "cifar-10-batches-py" / "test_batch").write_bytes(b"\x80\x02")
    broken = attnlab("data-check", str(tmp_path))
    assert broken.returncode == 1 and "test_batch, byte stream: not a readable CIFAR-10 batch" in broken.stderr
    assert attnlab("data-check", str(tmp_path / "nowhere")).returncode == 2


def test_the_report_puts_table_1s_published_figure_beside_each_lra_row(tmp_path):
    fx.write_listops(tmp_path / "data")
    for variant, options in (("dense", {}), ("sparse", {"pattern": "bigbird"}), ("linear", {})):
        config = _resolve("lra_listops", tmp_path / "data", variant=variant, variant_options=options, seq_len=40)
        record = RunRecord.create(tmp_path / "runs", variant)
        record.write_config(config.to_dict())
        train(config, record, quiet=True)
    report = build_report(tmp_path / "runs", tmp_path / "reports")
    table = pd.read_csv(report.parent / "tables" / "lra-published.csv")
    published = dict(zip(table["LRA model"], table["published (Tay et al. 2021, Table 1)"], strict=True))
    assert published == {"Transformer": 0.3637, "BigBird": 0.3605, "Linear Trans.": 0.1613}
    assert set(table["Transformer, published (Tay et al. 2021, Table 1)"]) == {0.3637}
    assert "published (Tay et al. 2021, Table 1)" in report.read_text()


def test_a_published_figure_needs_table_1s_task_options_and_one_of_lras_models():
    from analysis.report.sections.lra import lra_model, published, table_column

    run = pd.Series({"task": "lra_pathfinder", "task.image_size": 32.0, "task.difficulty": "hard", "variant": "sparse",
                     "variant.pattern": "longformer"})
    assert (lra_model(run), table_column(run), published(lra_model(run), table_column(run))) == (
        "Longformer", "Pathfinder", "0.6971")
    assert table_column(run.copy().replace({"hard": "easy"})) is None  # Table 1 measured curv_contour_length_14
    assert table_column(pd.Series({"task": "lra_pathx", "task.image_size": 128, "task.difficulty": "hard"})) == "Path-X"
    assert published("Transformer", "Path-X") == "fail" and published(None, "Text") == "–"
    assert lra_model(pd.Series({"variant": "relative"})) is None
