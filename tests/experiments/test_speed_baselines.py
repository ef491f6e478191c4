"""`attnlab speed` times the baselines' token mixers beside attention, at the same batch, lengths and width."""

import torch

from experiments.speed import fits, kernels

CPU = torch.device("cpu")


def test_baseline_specs_are_timed_at_the_same_sizes_as_attention_and_get_a_slope(tmp_path):
    table, _ = kernels.run(specs=["lstm", "conv:kernel_size=3", "mamba", "dense"], kernels=["auto"],
                           lengths=[16, 32], causal_modes=[True, False], batch=1, heads=2, head_dim=4, repeats=1,
                           budget=30.0, device=CPU, out_dir=tmp_path, quiet=True)
    mixers = table[table["kernel"] == "torch"]
    assert sorted(mixers["variant"].unique()) == ["conv_k3", "lstm", "mamba_n16"]
    assert (mixers["status"] == "ok").all() and len(mixers) == 3 * 2 * 2  # three mixers, two lengths, both ways
    attention = table[table["variant"] == "dense"]
    for column in ("batch", "heads", "head_dim"):
        assert set(mixers[column]) == set(attention[column])
    fitted = fits.slopes(table, low=16, high=32)
    assert {"conv_k3", "lstm", "mamba_n16"} <= set(fitted["variant"])


def test_a_mixer_contender_reads_q_as_batch_seq_dim_and_passes_gradients_back():
    contender = kernels.mixer_contender("gru", {}, heads=2, head_dim=4, device=CPU)
    q = torch.randn(2, 2, 5, 4, requires_grad=True)
    out = contender.attend(q, q, q, True)
    assert out.shape == q.shape and contender.kernel == "torch"
    out.sum().backward()
    assert q.grad is not None and q.grad.abs().sum() > 0


def test_kernel_filters_keep_or_drop_the_baselines():
    def kernels_of(names):
        return {(c.variant, c.kernel) for c in kernels.contenders(["conv", "dense"], names, 2, 4, CPU)}

    assert ("conv_k4", "torch") in kernels_of(["torch"]) and ("conv_k4", "torch") in kernels_of(["auto"])
    assert ("conv_k4", "torch") not in kernels_of(["sdpa"])
