"""What a speed table (`attnlab speed`) says, computed from synthetic tables whose times follow known power laws: the
fitted n^a d^b beside each row's claim, sequential steps at fixed total work, and the goals' lines."""

import pandas as pd
import pytest

from experiments.speed import fits

SIZES = {"heads": 4, "dtype": "float32", "device": "cpu", "status": "ok", "peak_mib": 1.0}


def sweeps(variant, name, family, kernel, *, a, b, s, causal=True, overhead_at_64=True):
    """Rows of the three sweeps with time = n^a (length sweep, head_dim 64), d^b (dim sweep at n = 1024) and, at
    fixed work, time proportional to the work done times n^s (batches rounded, lengths not powers of two)."""
    row = {"variant": variant, "name": name, "family": family, "kernel": kernel, "causal": causal, **SIZES}
    rows = [{**row, "sweep": "length", "seq_len": n, "batch": 1, "head_dim": 64, "ms": 1e-3 * n**a}
            for n in (512, 1024, 2048, 4096)]
    if overhead_at_64:  # a fixed cost dominates the shortest length, three octaves below the rest: not fitted
        rows.append({**row, "sweep": "length", "seq_len": 64, "batch": 1, "head_dim": 64, "ms": 1e3})
    rows += [{**row, "sweep": "dim", "seq_len": 1024, "batch": 1, "head_dim": dim // 4, "ms": 1e-3 * dim**b}
             for dim in (64, 128, 256, 512, 1024)]
    power = fits.work_exponent(name, family)
    for n in (300, 1000, 2048):
        batch = round((2048 / n) ** power)
        rows.append({**row, "sweep": "steps", "seq_len": n, "batch": batch, "head_dim": 64,
                     "ms": batch * n**power * n**s * 1e-6})
    return rows


def test_the_complexity_table_recovers_the_exponents_of_time_in_n_d_and_sequential_steps():
    table = pd.DataFrame(sweeps("dense", "dense", "dense", "auto=sdpa", a=2.0, b=1.0, s=0.0)
                         + sweeps("lstm", "lstm", "baseline", "torch", a=1.0, b=1.7, s=0.9))
    summary = fits.complexity(table).set_index("variant")
    assert summary.loc["dense", "claimed"] == "O(n^2 d)" and summary.loc["lstm", "claimed"] == "O(n d^2)"
    assert summary.loc["dense", ["a", "b", "steps_exponent"]].tolist() == pytest.approx([2.0, 1.0, 0.0], abs=1e-9)
    assert summary.loc["lstm", ["a", "b", "steps_exponent"]].tolist() == pytest.approx([1.0, 1.7, 0.9], abs=1e-9)
    assert summary.loc["lstm", "measured"] == "n^1.00 d^1.70"
    # Fitted over the top three octaves: the length 64 (a fixed cost) and the width 64 are left out.
    assert summary.loc["lstm", ["lengths", "dims", "step_lengths"]].tolist() == ["512-4096", "128-1024", "300-2048"]
    assert summary.loc["lstm", "claimed_sequential"] == "O(n)"


def test_a_measured_exponent_that_does_not_round_to_its_claim_is_said_in_a_sentence():
    table = pd.DataFrame(sweeps("lstm", "lstm", "baseline", "torch", a=1.1, b=1.2, s=0.9)
                         + sweeps("conv_k4", "conv", "baseline", "torch", a=1.0, b=2.0, s=0.8)
                         + sweeps("sparse_strided", "sparse", "sparse", "auto=blocked", a=2.0, b=3.0, s=2.0))
    sentences = fits.disagreements(fits.complexity(table))
    assert sentences == [
        "conv_k4 (torch, causal, cpu): at fixed total work time grows as n^0.80 over n = 300-2048, where O(1) "
        "sequential steps predict n^0.",
        "lstm (torch, causal, cpu): time grows as d^1.20 over d = 128-1024, not d^2 as O(n d^2) claims.",
    ]  # sparse declares no claim (its pattern decides): measured, never judged
    agreeing = pd.DataFrame(sweeps("lstm", "lstm", "baseline", "torch", a=1.1, b=1.8, s=0.9))
    assert fits.disagreements(fits.complexity(agreeing)) == [
        "Every one of the 3 measured exponents rounds to its claim."]


def test_work_held_fixed_is_n_squared_for_dense_attention_and_n_for_the_rest():
    assert fits.work_exponent("dense", "dense") == 2
    assert fits.work_exponent("relative", "dense") == 2  # declared beside its code: O(n^2 d), as dense
    assert fits.work_exponent("sparse", "sparse") == 1  # no claim: its family decides
    assert fits.work_exponent("tutorial-naive", "dense") == 2  # not registered: its family decides
    assert [fits.work_exponent(name, family) for name, family in
            (("linear", "kernelised"), ("lstm", "baseline"), ("mamba", "baseline"), ("performer", "kernelised"),
             ("linformer", "low-rank"), ("sparse", "sparse"))] == [1] * 6


def test_a_table_written_before_the_sweeps_holds_the_length_sweep_only():
    old = pd.DataFrame([{"variant": "dense", "seq_len": 512}])
    assert len(fits.in_sweep(old, "length")) == 1 and fits.in_sweep(old, "dim").empty
    tagged = pd.DataFrame({"sweep": ["length", "length+dim", "dim+steps", None]})
    assert fits.in_sweep(tagged, "dim").index.tolist() == [1, 2]
    assert fits.in_sweep(tagged, "length").index.tolist() == [0, 1, 3]


def goal_rows():
    base = {"causal": True, "batch": 1, "sweep": "length", **SIZES, "head_dim": 64}
    rows = []
    for n in (2048, 4096, 8192, 16384):
        scale = n / 16384
        rows += [{**base, "variant": "dense", "name": "dense", "family": "dense", "kernel": "auto=sdpa", "seq_len": n,
                  "ms": 8000 * scale**2, "peak_mib": 50.0},
                 {**base, "variant": "linear_phielu", "name": "linear", "family": "kernelised", "kernel": "auto=linear",
                  "seq_len": n, "ms": 800 * scale, "peak_mib": 100 * scale},
                 {**base, "variant": "linformer_k256", "name": "linformer", "family": "low-rank",
                  "kernel": "auto=lowrank", "seq_len": n, "causal": False, "ms": 500 * scale**1.05, "peak_mib": 80.0},
                 {**base, "variant": "torch-sdpa-masked", "name": "torch-sdpa-masked", "family": "dense",
                  "kernel": "masked", "seq_len": n, "ms": 16000 * scale**2, "peak_mib": 1000 * scale**2}]
    rows.append({**base, "variant": "tutorial-naive", "name": "tutorial-naive", "family": "dense", "kernel": "naive",
                 "seq_len": 16384, "status": "skipped: predicted peak 20.0 GiB > 60% of available memory"})
    return pd.DataFrame(rows)


def test_the_goal_lines_give_linear_against_dense_and_masked_dense_and_every_kernelised_or_low_rank_slope():
    lines = fits.acceptance(goal_rows())
    assert "causal linear_phielu (auto=linear, kernelised): log-log slope of time over 2048-16384 = 1.00 " \
           "(goal <= 1.1)" in lines
    assert "bidirectional linformer_k256 (auto=lowrank, low-rank): log-log slope of time over 2048-16384 = 1.05 " \
           "(goal <= 1.1)" in lines
    assert "n=16384 causal (batch 1, 4 heads of 64, float32, cpu): dense (auto=sdpa) / linear_phielu (auto=linear) " \
           "= 10.0x time (goal >= 4)" in lines
    assert "n=16384 causal: linear_phielu (auto=linear) peak memory = 1/10.0 of masked dense (torch-sdpa-masked: " \
           "sdpa with an explicit boolean mask) (goal <= 1/4)" in lines
    assert not any("dense (auto=sdpa, dense)" in line or "tutorial-naive" in line for line in lines)  # skipped
    assert len(lines) == 4


def test_the_goal_lines_leave_out_the_sweeps_against_width_and_at_fixed_work():
    rows = goal_rows()
    rows["sweep"] = "dim"
    assert fits.acceptance(rows) == []
