"""The flex kernel's translation, checked on CPU: score_mod and BlockMask for every variant that lists flex.

FlexAttention runs on CPU eagerly and forward only, applying the element mask (mask_mod) to every pair
and ignoring which tiles the BlockMask lists. So the translation is checked in two halves: the outputs
(score_mod and element mask) against the float64 reference, and the BlockMask's tiles, read the way
the fused CUDA kernel reads them (listed partial tiles through the element mask, listed full tiles
without it, unlisted tiles never), against the reference's own mask. Each new score or mask costs
FlexAttention about half a second of tracing on CPU, hence two calls per variant case and small sizes.
"""

import sys

import pytest
import torch
from cases import MAX_LEN, assert_close_relative, case_id, random_inputs, variant_cases
from torch.nn.attention.flex_attention import BlockMask

import variants
from variants import layouts
from variants.dense import Dense
from variants.kernels import KERNELS, flex
from variants.kernels import xformers as xformers_kernel

HEADS, HEAD_DIM = 2, 16  # the fused CUDA kernel needs head_dim >= 16
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def create(name, options, kernel="auto", head_dim=HEAD_DIM):
    return variants.create(name, num_heads=HEADS, head_dim=head_dim, kernel=kernel, max_len=MAX_LEN, **options)


FLEX_CASES = [case for case in variant_cases() if "flex" in create(*case).kernels]
LAYOUT_CASES = [case for case in FLEX_CASES if create(*case).block_layout is not None] + [("dense", {})]


def test_flex_claims_every_per_pair_score_and_every_layout():
    claimed = {case_id(case) for case in FLEX_CASES}
    for expected in ("dense", "unscaled", "temperature-temperature=0.5", "temperature-temperature=2.0-learnable=True",
                     "relative", "relative-kind=shaw-max_distance=3", "relative-kind=t5-num_buckets=8-max_distance=12",
                     "relative-kind=rope", "local-window=1", "local-window=20", "sparse-pattern=strided-stride=6",
                     "sparse-pattern=fixed-stride=8-summary=3", "sparse-pattern=longformer-window=5-num_global=2",
                     "sparse-pattern=bigbird-block_size=3-num_global_blocks=1-num_random_blocks=2-seed=7",
                     "qknorm", "qknorm-norm=rms", "softcap", "softcap-cap=2.0", "ssmax",
                     "ssmax-length_scale=1.5-fixed=True"):
        assert expected in claimed, expected
    assert not any(case_id(case).startswith("additive") for case in FLEX_CASES)  # w^T tanh(...) is not per pair


@pytest.mark.parametrize("case", FLEX_CASES, ids=case_id)
def test_flex_forward_on_cpu_matches_the_float64_reference(case):
    """One call per case, all at once: causal with more queries than keys (top-left alignment; two query
    tiles of 128, the second partial) and padding (a fully padded batch element, and a padded first key
    that leaves query 0 without keys: zero rows). The score_mod is the function the reference calls, so
    this pins FlexAttention's side of it (scaled score in, positions as indices); non-causal masks are
    pinned by the BlockMask tests below, which evaluate the same mask_mod on every pair."""
    name, options = case
    torch.manual_seed(0)
    module = create(name, options, "flex").double()
    reference = create(name, options, "reference").double()
    reference.load_state_dict(module.state_dict())
    assert module.kernel == "flex"
    q, k, v, mask = random_inputs(2, 256, 130, seed=3, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    with torch.no_grad():
        out = module(q, k, v, causal=True, key_padding_mask=mask)
        expected = reference(q, k, v, causal=True, key_padding_mask=mask)
    assert_close_relative(out, expected, 1e-9, "output")
    assert torch.equal(out[0], torch.zeros_like(out[0])) and torch.equal(out[:, :, 0], torch.zeros_like(out[:, :, 0]))


def test_a_variant_that_overrides_score_mod_runs_on_flex_as_on_the_reference():
    """What a soft-capped or otherwise per-pair score declares is all flex needs (the variant is not
    registered: it exists for this test only)."""

    class SoftCapped(Dense):
        def score_mod(self, q, k, q_pos, causal):
            return lambda score, batch, head, q_idx, kv_idx: 2.0 * torch.tanh(score / 2.0) - 0.01 * (q_idx - kv_idx)

    module = SoftCapped(Dense.Options(), num_heads=HEADS, head_dim=HEAD_DIM, kernel="flex").double()
    reference = SoftCapped(Dense.Options(), num_heads=HEADS, head_dim=HEAD_DIM, kernel="reference").double()
    q, k, v, _ = random_inputs(1, 150, 150, seed=2, heads=HEADS, head_dim=HEAD_DIM)
    with torch.no_grad():
        out, expected = module(q, k, v, causal=True), reference(q, k, v, causal=True)
        plain = create("dense", {}, "reference").double()(q, k, v, causal=True)
    assert_close_relative(out, expected, 1e-9, "output")
    assert not torch.allclose(out, plain)  # the override changed the scores


def read_as_the_fused_kernel_does(mask: BlockMask, batch: int, seq_q: int, seq_k: int) -> torch.Tensor:
    """Bool (batch, mask heads, seq_q, seq_k): the pairs a block-sparse kernel attends with this BlockMask
    (mask heads: 1 for a layout the same in every head)."""
    tile_q, tile_k = mask.BLOCK_SIZE
    heads, query_tiles, key_tiles = mask.kv_indices.shape[-3:]

    def listed(counts, indices, head):
        tiles = torch.zeros(query_tiles, key_tiles, dtype=torch.bool)
        if counts is not None:
            for row in range(query_tiles):
                tiles[row, indices[0, head, row, : counts[0, head, row]].long()] = True
        return tiles

    i, j = torch.arange(seq_q)[:, None], torch.arange(seq_k)[None, :]
    per_head = []
    for head in range(heads):
        partial = listed(mask.kv_num_blocks, mask.kv_indices, head)
        full = listed(mask.full_kv_num_blocks, mask.full_kv_indices, head)
        assert not (partial & full).any()  # a tile listed twice would be attended twice
        elements = mask.mask_mod(torch.arange(batch)[:, None, None], torch.tensor(head), i, j)
        attended = full[i // tile_q, j // tile_k] | (partial[i // tile_q, j // tile_k] & elements)
        per_head.append(attended.expand(batch, seq_q, seq_k))
    return torch.stack(per_head, dim=1)


@pytest.mark.parametrize("padding", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("tile", [16, 128])
@pytest.mark.parametrize("lengths", [(200, 200), (70, 300), (300, 70)], ids=lambda s: f"q{s[0]}-k{s[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=case_id)
def test_block_mask_read_as_the_fused_kernel_reads_it_is_the_reference_mask(case, causal, lengths, tile, padding):
    seq_q, seq_k = lengths
    module = create(*case)
    *_, real = random_inputs(3, seq_q, seq_k, seed=seq_k, heads=HEADS, head_dim=HEAD_DIM, padding=padding)
    mask = flex.block_mask(module.block_layout, seq_q, seq_k, causal, real, CPU, tile)
    expected = module.allowed(torch.arange(seq_q), torch.arange(seq_k), causal, real)  # (3 or 1, H or 1, q or 1, k)
    if expected is None:
        expected = torch.ones(1, 1, seq_q, seq_k, dtype=torch.bool)
    read = read_as_the_fused_kernel_does(mask, 3, seq_q, seq_k)
    assert torch.equal(read, expected.expand(3, read.shape[1], seq_q, seq_k))


@pytest.mark.parametrize("size", [8, 16, 128])
@pytest.mark.parametrize("lengths", [(200, 200), (70, 300), (300, 70)], ids=lambda s: f"q{s[0]}-k{s[1]}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=case_id)
def test_tiles_are_skipped_partial_or_full_exactly_as_their_pairs_are(case, causal, lengths, size):
    seq_q, seq_k = lengths
    module = create(*case)
    tiles = layouts.tiles(module.block_layout, seq_q, seq_k, causal, size)
    query_tiles, key_tiles = layouts.blocks_for(seq_q, size), layouts.blocks_for(seq_k, size)
    attended_in_all = 0
    for head in range(tiles.full.shape[0]):  # the heads the layout tells apart
        attended = module.layout(seq_q, seq_k, causal=causal, head=head)
        padded = torch.zeros(query_tiles * size, key_tiles * size, dtype=torch.bool)
        padded[:seq_q, :seq_k] = attended  # positions beyond the lengths are not attended
        counts = padded.view(query_tiles, size, key_tiles, size).sum(dim=(1, 3))
        assert torch.equal(tiles.full[head], counts == size * size)
        assert torch.equal(tiles.partial[head], (counts > 0) & (counts < size * size))
        attended_in_all += int(attended.sum())
    assert tiles.attended == attended_in_all


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", [case for case in LAYOUT_CASES if case[0] != "dense"], ids=case_id)
def test_a_layout_whose_rule_decides_needs_no_block_map_lookup(case, causal):
    layout = create(*case).block_layout
    if not layout.rule_decides:
        pytest.skip(f"{type(layout).__name__}'s block map is part of its pattern")
    i, j = torch.arange(150)[:, None], torch.arange(170)[None, :]
    assert torch.equal(layouts.pairs(layout, None, i, j, causal), layouts.dense(layout, 150, 170, causal)[0])


def test_block_masks_are_cached_per_layout_lengths_causality_and_device():
    layout = create("local", {"window": 20}).block_layout
    first = flex.block_mask(layout, 300, 300, True, None, CPU)
    assert flex.block_mask(layout, 300, 300, True, None, "cpu") is first
    assert flex.block_mask(layouts.Local(20), 300, 300, True, None, CPU) is first  # equal layouts, one mask
    assert flex.block_mask(layout, 301, 300, True, None, CPU) is not first
    assert flex.block_mask(layout, 300, 300, False, None, CPU) is not first
    hits = flex._layout_tiles.cache_info().hits
    real = torch.ones(2, 300, dtype=torch.bool)
    padded = flex.block_mask(layout, 300, 300, True, real, CPU)
    assert padded is not first and flex._layout_tiles.cache_info().hits == hits + 1  # tiles reused, not rebuilt
    assert padded.full_kv_num_blocks is None  # padding changes per batch: every tile goes through the mask


def test_auto_never_picks_flex_or_xformers_on_cpu():
    for case in variant_cases():
        module = create(*case)
        assert module.kernel not in ("flex", "xformers"), case
        assert KERNELS[module.kernel].runs_on(CPU), case


def test_auto_on_cuda_picks_flex_for_scores_and_layouts_and_sdpa_for_plain_dot_products():
    picks = {case_id(case): create(*case).kernel_on(CUDA).name for case in variant_cases()}
    assert picks["dense"] == picks["unscaled"] == picks["relative-kind=rope"] == "sdpa"
    assert picks["qknorm"] == picks["qknorm-norm=rms"] == "sdpa"  # q and k normalised in prepare, then q.k
    for name in ("local", "local-window=20", "sparse", "sparse-pattern=bigbird-block_size=3-num_global_blocks=1-"
                 "num_random_blocks=2-seed=7", "relative", "relative-kind=t5-num_buckets=8-max_distance=12",
                 "relative-kind=shaw-max_distance=3", "softcap", "softcap-cap=2.0", "ssmax",
                 "ssmax-length_scale=1.5-fixed=True"):
        assert picks[name] == "flex", name
    assert picks["additive"] == "additive"  # its own kernel, pure PyTorch, on any device
    if not xformers_kernel.available():
        assert "xformers" not in picks.values()


def test_auto_on_cuda_passes_over_flex_below_its_minimum_head_dim():
    module = create("local", {"window": 20}, head_dim=8)
    assert module.kernel_on(CUDA).name == "blocked"
    forced = create("local", {"window": 20}, "flex", head_dim=8)
    with pytest.raises(ValueError, match=r"^Kernel 'flex' needs head_dim >= 16 on cuda .*got head_dim=8; "):
        forced.kernel_on(CUDA)


def test_training_through_flex_on_cpu_is_refused_in_one_sentence():
    module = create("local", {"window": 20}, "flex")
    q, k, v, _ = random_inputs(1, 40, 40, seed=1, heads=HEADS, head_dim=HEAD_DIM, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"^Kernel 'flex' has no backward pass on cpu .*train with kernel 'auto'\.$"):
        module(q, k, v, causal=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_xformers_is_absent_without_error_on_cpu_and_forcing_it_says_why():
    assert KERNELS["xformers"].available() is False
    assert not KERNELS["xformers"].runs_on(CPU) and not KERNELS["xformers"].runs_on(CUDA)
    module = create("dense", {}, "xformers")  # creating it is fine: the device is known at the first call
    with pytest.raises(ValueError, match=r"^Kernel 'xformers' is not available here: it needs the xformers package "
                                         r"\(pip install 'attnlab\[gpu\]'\) and a CUDA device\.$"):
        module(*random_inputs(1, 8, 8, seed=0, heads=HEADS, head_dim=HEAD_DIM)[:3])


def test_xformers_counts_as_absent_when_its_import_fails(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "xformers", None)  # makes `import xformers.ops` raise ImportError
    xformers_kernel.available.cache_clear()
    try:
        assert xformers_kernel.available() is False
    finally:
        xformers_kernel.available.cache_clear()
