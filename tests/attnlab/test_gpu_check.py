"""`attnlab gpu-check`: what it says without a GPU, and the arithmetic of its table (checked on CPU)."""

import pandas as pd
import pytest
import torch

import variants
from attnlab import gpu_check
from attnlab.cli import main

CPU = torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_gpu_check_without_cuda_says_there_is_no_gpu_and_exits_0(tmp_path, capsys):
    assert main(["gpu-check", "--out", str(tmp_path)]) == 0
    assert "no CUDA device on this machine" in capsys.readouterr().out
    assert not list(tmp_path.iterdir())  # no table without a GPU


@pytest.mark.parametrize("spec", ["dense", "relative:kind=t5", "local:window=20", "sparse:pattern=longformer:window=9",
                                  "sparse:pattern=bigbird:block_size=24", "torch-sdpa"])
@pytest.mark.parametrize("length", [100, 300])
def test_attended_pairs_are_the_pairs_the_causal_layout_attends(spec, length):
    if spec == "torch-sdpa":
        expected = torch.ones(length, length, dtype=torch.bool).tril()
    else:
        name, options = gpu_check.speed.parse_spec(spec)
        expected = variants.create(name, num_heads=1, head_dim=16, **options).layout(length, length, causal=True)
    assert gpu_check.attended_pairs(spec, length, CPU) == int(expected.sum())


def test_training_flops_are_four_per_pair_and_dimension_times_three_and_a_half():
    # forward: q.k and p.v, a multiply and an add per dimension each; backward: 2.5 forward passes
    assert gpu_check.training_flops(1000, 64) == 1000 * 64 * 2 * 2 * 3.5


def table(rows):
    base = {"batch": 4, "heads": 16, "head_dim": 64, "dtype": "bfloat16"}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_goals_compare_flex_at_16k_with_dense_flash_sdpa_on_attended_pairs():
    local, longformer, bigbird = map(gpu_check.described, gpu_check.GOAL_SPECS)
    rows = table([
        {"variant": "torch-sdpa", "kernel": "direct", "seq_len": 16384, "status": "ok", "ms": 10.0, "tflops": 400.0},
        {"variant": local, "kernel": "auto=flex", "seq_len": 16384, "status": "ok", "ms": 1.0, "tflops": 260.0},
        {"variant": local, "kernel": "blocked", "seq_len": 16384, "status": "ok", "ms": 9.0, "tflops": 390.0},
        {"variant": longformer, "kernel": "auto=flex", "seq_len": 16384, "status": "ok", "ms": 1.0, "tflops": 200.0},
        {"variant": bigbird, "kernel": "auto=flex", "seq_len": 4096, "status": "ok", "ms": 1.0, "tflops": 300.0},
    ])
    lines = gpu_check.goals(rows)
    assert lines[0] == f"n=16384: {local} on flex reaches 65% of dense flash SDPA's TFLOP/s on attended pairs " \
                       "(goal >= 60%: met)"
    assert lines[1].endswith("reaches 50% of dense flash SDPA's TFLOP/s on attended pairs (goal >= 60%: NOT met)")
    assert lines[2] == f"n=16384: {bigbird} on flex was not timed"
    assert gpu_check.goals(rows[rows["variant"] != "torch-sdpa"]) == [
        "n=16384: the dense flash SDPA line was not timed; no goal can be checked"]


def test_the_table_shows_milliseconds_and_tflops_or_why_a_row_was_not_timed():
    rows = table([
        {"variant": "torch-sdpa", "kernel": "direct", "seq_len": 1024, "status": "ok", "ms": 0.5, "tflops": 350.2},
        {"variant": "torch-sdpa", "kernel": "direct", "seq_len": 32768, "status": "skipped: time budget"},
    ])
    rendered = gpu_check.render(rows)
    assert "0.50 ms / 350" in rendered and "time budget" in rendered
