"""`attnlab speed`'s three sweeps (length, width d, length at fixed total work), bidirectional-only variants, the
sizes each variant is built at, and the family each is reported in. Tiny sizes; nothing here is timed."""

import pytest
import torch

import variants
from attnlab.cli import build_parser
from experiments.speed import kernels, plan
from variants.base import Attention

CPU = torch.device("cpu")


def fake(variant, *, name="", family="dense", swept=True, supports_causal=True, built=None):
    """A contender whose build records the (max_len, head_dim) it was asked for."""
    def build(max_len, head_dim):
        if built is not None:
            built.append((max_len, head_dim))
        return kernels.torch_sdpa

    return kernels.Contender(variant, "fake", build, (None, 8), name=name or variant, family=family,
                           supports_causal=supports_causal, swept=swept)


SETTINGS = {"lengths": [64, 128], "causal_modes": [True], "batch": 1, "heads": 2, "head_dim": 8, "dims": [8, 16, 32],
            "dim_length": 128, "step_lengths": [32, 64, 128]}


def test_the_plan_measures_each_sweep_and_tags_a_case_two_sweeps_share_with_both():
    field = [fake("dense"), fake("lstm", family="baseline"), fake("tutorial-naive", swept=False)]
    cases = plan.plan(field, **SETTINGS)
    tags = {(case.seq_len, case.head_dim, case.batch, index): measured[index]
            for case, measured in cases.items() for index in measured}
    # The length sweep at head_dim 8 = 16 / 2 heads; the sweep against d at n = 128; n = 128 and d = 16 are shared.
    assert tags[(64, 8, 1, 0)] == ["length"] and tags[(128, 8, 1, 0)] == ["length", "dim", "steps"]
    assert tags[(128, 4, 1, 0)] == ["dim"] and tags[(128, 16, 1, 1)] == ["dim"]
    # At fixed total work the batch grows as n^2 shrinks for dense attention, as n shrinks for the rest.
    assert tags[(32, 8, 16, 0)] == ["steps"] and tags[(64, 8, 4, 0)] == ["steps"]
    assert tags[(32, 8, 4, 1)] == ["steps"] and tags[(64, 8, 2, 1)] == ["steps"]
    # A direct contender (not the kernel auto picks) is measured against length only.
    assert {key[:3] for key in tags if key[3] == 2} == {(64, 8, 1), (128, 8, 1)}
    order = list(cases)
    assert order == sorted(order)  # each sweep reaches its larger cases after its smaller ones


def test_a_bidirectional_only_variant_is_measured_non_causal_and_its_causal_rows_say_why(tmp_path):
    built = []
    field = [fake("linformer_k4", family="low-rank", supports_causal=False, built=built), fake("dense")]
    cases = plan.plan(field, **{**SETTINGS, "dims": [], "step_lengths": []})
    rows = []
    for case, measured in cases.items():
        rows += kernels.measure_case(case, [(field[index], tags) for index, tags in measured.items()], heads=2,
                                     repeats=1, budget=30.0, device=CPU, last={}, done=lambda label: None)
    by_row = {(row["variant"], row["seq_len"], row["causal"]): row["status"] for row in rows}
    assert by_row == {
        ("linformer_k4", 64, False): "ok", ("linformer_k4", 128, False): "ok",
        ("linformer_k4", 64, True): "skipped: bidirectional in its paper (supports_causal = False); "
                                    "measured non-causal only",
        ("linformer_k4", 128, True): "skipped: bidirectional in its paper (supports_causal = False); "
                                     "measured non-causal only",
        ("dense", 64, True): "ok", ("dense", 128, True): "ok"}  # --causal yes: dense is not measured non-causal
    assert built == [(64, 8), (128, 8)]  # built per case, with max_len the length measured


def test_registered_variants_are_built_with_max_len_the_length_measured(monkeypatch):
    asked = []
    create = variants.create

    def recording(name, **settings):
        asked.append((name, settings.get("max_len"), settings["head_dim"]))
        return create(name, **settings)

    monkeypatch.setattr(kernels.variants, "create", recording)
    (contender,) = kernels.contenders(["linear"], ["auto"], 2, 8, CPU, max_len=512)
    assert (contender.kernel, contender.family, contender.name, contender.swept) == (
        "auto=linear", "kernelised", "linear", True)
    contender.build(96, 16)
    assert asked == [("linear", 512, 8), ("linear", 96, 16)]  # the probe at the longest length, then the case's


class Factored(Attention):
    """A low-rank stand-in: overriding `factors` is what puts a variant on the lowrank kernel."""

    def factors(self, q, k, key_padding_mask):
        return [q, k.transpose(-2, -1)]


@pytest.mark.parametrize("name, options, expected", [
    ("dense", {}, "dense"), ("relative", {"kind": "t5"}, "dense"), ("local", {"window": 8}, "local"),
    ("sparse", {"pattern": "strided"}, "sparse"), ("linear", {}, "kernelised"),
    ("linear", {"feature_map": "identity"}, "kernelised")])
def test_the_family_of_a_variant_follows_from_the_kernels_and_layout_it_runs_on(name, options, expected):
    assert kernels.family(variants.create(name, num_heads=2, head_dim=8, **options)) == expected


def test_a_variant_the_lowrank_kernel_runs_is_of_the_low_rank_family():
    assert kernels.family(Factored(None, num_heads=2, head_dim=8, kernel="auto")) == "low-rank"


def test_the_sweeps_rows_carry_their_tags_sizes_and_family(tmp_path):
    table, _ = kernels.run(specs=["linear", "conv"], kernels=["auto", "masked"], lengths=[16], causal_modes=[True],
                           batch=1, heads=2, head_dim=4, repeats=1, budget=30.0, device=CPU, out_dir=tmp_path,
                           quiet=True, dims=[4, 8], dim_length=16, step_lengths=[8, 16])
    assert (table["status"] == "ok").all()
    cells = {(row.variant, row.sweep, row.seq_len, row.batch, row.dim) for row in table.itertuples()}
    assert cells == {("torch-sdpa-masked", "length", 16, 1, 8),
                     ("linear_phielu", "length+dim+steps", 16, 1, 8), ("conv_k4", "length+dim+steps", 16, 1, 8),
                     ("linear_phielu", "dim", 16, 1, 4), ("conv_k4", "dim", 16, 1, 4),
                     ("linear_phielu", "steps", 8, 2, 8), ("conv_k4", "steps", 8, 2, 8)}
    assert dict(zip(table["variant"], table["family"], strict=False)) == {
        "torch-sdpa-masked": "dense", "linear_phielu": "kernelised", "conv_k4": "baseline"}


def test_a_width_the_heads_cannot_share_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(ValueError, match=r"--dims got 6, which 4 heads cannot share; accepted: multiples of --heads"):
        kernels.run(specs=["dense"], kernels=["auto"], lengths=[16], causal_modes=[True], batch=1, heads=4,
                    head_dim=4, repeats=1, budget=1.0, device=CPU, out_dir=tmp_path, quiet=True, dims=[6])


def test_the_command_line_sweeps_d_and_fixed_work_by_default_and_the_bare_flag_turns_a_sweep_off():
    parser = build_parser()
    defaults = parser.parse_args(["speed"])
    assert (defaults.dims, defaults.dim_length, defaults.step_lengths) == ([64, 128, 256, 512, 1024], 1024,
                                                                           [256, 512, 1024, 2048])
    off = parser.parse_args(["speed", "--dims", "--step-lengths"])
    assert off.dims == [] and off.step_lengths == []


def test_the_masked_dense_contender_agrees_with_sdpa_and_hands_it_a_mask():
    q, k, v = (torch.randn(1, 2, 9, 4) for _ in range(3))
    for causal in (True, False):
        torch.testing.assert_close(kernels.torch_sdpa_masked(q, k, v, causal), kernels.torch_sdpa(q, k, v, causal))
    assert kernels.torch_sdpa_masked(q, k, v, True)[..., 0, :].allclose(v[..., 0, :])  # the first query sees key 0 only


def test_sizes_a_kernel_refuses_are_recorded_as_skipped_with_its_sentence():
    def build(max_len, head_dim):
        raise ValueError("Kernel 'flex' cannot fit head_dim 256 here.")

    contender = kernels.Contender("dense", "flex", build, (None, 8))
    (row,) = kernels.measure_case(plan.TimedCase(8, 16, 1, True), [(contender, ["dim"])], heads=2, repeats=1,
                                 budget=1.0, device=CPU, last={}, done=lambda label: None)
    assert row["status"] == "skipped: Kernel 'flex' cannot fit head_dim 256 here." and "ms" not in row
