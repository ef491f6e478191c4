"""Local and sparse layouts: the rules element by element, the blocked kernel on many blocks, cost, and the share
of the pairs each attends (coverage), which says where a layout computes dense attention."""

import pytest
import torch
from cases import (
    HEADS,
    assert_close_relative,
    build_pair,
    case_id,
    create_case,
    output_and_grads,
    random_inputs,
    skip_if_bidirectional,
    variant_cases,
)

import variants
from variants import layouts
from variants.kernels import blocked


def spec_local(i, j, window, causal):
    return (0 <= i - j <= window // 2) if causal else abs(i - j) <= window // 2


def spec_strided(i, j, stride):
    return abs(i - j) < stride or (i - j) % stride == 0


def spec_fixed(i, j, stride, summary):
    return j // stride == i // stride or j % stride >= stride - summary


def spec_longformer(i, j, window, num_global):
    return abs(i - j) <= window // 2 or i < num_global or j < num_global


SPECS = [
    ("local", {"window": 1}, lambda i, j: spec_local(i, j, 1, False)),
    ("local", {"window": 7}, lambda i, j: spec_local(i, j, 7, False)),
    ("local", {"window": 8}, lambda i, j: spec_local(i, j, 8, False)),
    ("local", {"window": 40}, lambda i, j: spec_local(i, j, 40, False)),
    ("sparse", {"pattern": "strided", "stride": 5}, lambda i, j: spec_strided(i, j, 5)),
    ("sparse", {"pattern": "strided", "stride": 16}, lambda i, j: spec_strided(i, j, 16)),
    ("sparse", {"pattern": "fixed", "stride": 6, "summary": 2}, lambda i, j: spec_fixed(i, j, 6, 2)),
    ("sparse", {"pattern": "fixed", "stride": 16, "summary": 4}, lambda i, j: spec_fixed(i, j, 16, 4)),
    ("sparse", {"pattern": "longformer", "window": 4, "num_global": 3}, lambda i, j: spec_longformer(i, j, 4, 3)),
    ("sparse", {"pattern": "longformer", "window": 33, "num_global": 0},
     lambda i, j: spec_longformer(i, j, 33, 0)),
]


@pytest.mark.parametrize("sizes", [(1, 1), (13, 13), (50, 50), (37, 70), (70, 37)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s[0]}-{'-'.join(f'{k}{v}' for k, v in s[1].items())}")
def test_layout_is_what_the_rule_says_element_by_element(spec, causal, sizes):
    name, options, rule = spec
    seq_q, seq_k = sizes
    attn = variants.create(name, num_heads=1, head_dim=4, **options)
    expected = torch.tensor([[rule(i, j) and (j <= i or not causal) for j in range(seq_k)] for i in range(seq_q)])
    assert torch.equal(attn.layout(seq_q, seq_k, causal=causal), expected)


@pytest.mark.parametrize("name, options, window", [
    ("local", {}, 32), ("local", {"window": 8}, 8), ("local", {"window": 9}, 9),
    ("sparse", {"pattern": "longformer", "num_global": 0}, 64), ("sparse", {"pattern": "longformer", "window": 8,
                                                                             "num_global": 0}, 8),
])
def test_a_window_of_w_keys_sees_w_over_2_keys_on_each_side_and_the_query_itself(name, options, window):
    """Beltagy et al. 2020: "each token attends to 1/2 w tokens on each side"; causal keeps the half before."""
    attn = variants.create(name, num_heads=1, head_dim=4, **options)
    seq, middle, half = 160, 80, window // 2
    full, causal = attn.layout(seq, seq).sum(dim=1), attn.layout(seq, seq, causal=True).sum(dim=1)
    assert full[middle] == 2 * half + 1 and causal[middle] == half + 1
    assert full[0] == half + 1 and causal[0] == 1  # the first query has no keys before it
    assert attn.layout(seq, seq)[middle, middle - half] and not attn.layout(seq, seq)[middle, middle - half - 1]


def test_every_window_option_states_the_convention_in_the_listing():
    window_lines = [line for line in variants.describe_variants().splitlines() if line.strip().startswith("window=")]
    assert len(window_lines) == 3  # local's, sparse's (longformer) and based's window layers
    for line in window_lines:
        assert "window // 2 keys on each side, |i - j| <= window // 2" in line, line


# Lengths that are and are not multiples of the block sizes, shorter and longer than windows.
LAYOUT_CASES = [
    ("local", {"window": 5}), ("local", {"window": 40}), ("local", {"window": 100}),
    ("sparse", {"pattern": "strided", "stride": 6}), ("sparse", {"pattern": "fixed", "stride": 8, "summary": 2}),
    ("sparse", {"pattern": "fixed", "stride": 12, "summary": 5}),
    ("sparse", {"pattern": "longformer", "window": 10, "num_global": 3}),
    ("sparse", {"pattern": "longformer", "window": 20, "num_global": 40}),
    ("sparse", {"pattern": "bigbird", "block_size": 4, "num_random_blocks": 2, "seed": 1}),
    ("sparse", {"pattern": "bigbird", "block_size": 5, "num_global_blocks": 2, "num_random_blocks": 1, "seed": 2}),
]


@pytest.mark.parametrize("shape", [(2, 37, 37, False), (2, 64, 64, True), (3, 70, 45, True), (1, 45, 70, False)],
                         ids=lambda s: "b{}-q{}-k{}{}".format(*s[:3], "-padded" if s[3] else ""))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=lambda c: f"{c[0]}-{'-'.join(f'{k}{v}' for k, v in c[1].items())}")
def test_blocked_kernel_matches_reference_across_many_blocks(case, causal, shape, monkeypatch):
    monkeypatch.setattr(blocked, "CHUNK_ELEMENTS", 1024)  # several chunks, sorted rows of several widths
    plans = []
    real_plan = blocked.plan
    monkeypatch.setattr(blocked, "plan", lambda *args: plans.append(real_plan(*args)) or plans[-1])
    name, options = case
    batch, seq_q, seq_k, padding = shape
    module, reference = build_pair(name, options, "blocked")
    q, k, v, mask = random_inputs(batch, seq_q, seq_k, seed=seq_q + seq_k, padding=padding)
    out, grads = output_and_grads(module, q, k, v, causal=causal, key_padding_mask=mask)
    ref_out, ref_grads = output_and_grads(reference, q, k, v, causal=causal, key_padding_mask=mask)
    assert len(plans) == 1 and len(plans[0].chunks) > 1
    assert_close_relative(out, ref_out, 1e-9, "output")
    for label, grad, ref_grad in zip("qkv", grads, ref_grads, strict=True):
        assert_close_relative(grad, ref_grad, 1e-9, f"gradient of {label}")


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=lambda c: f"{c[0]}-{'-'.join(f'{k}{v}' for k, v in c[1].items())}")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_perturbing_a_key_changes_exactly_the_queries_whose_layout_allows_it(case, causal):
    name, options = case
    seq = 41
    attn = variants.create(name, num_heads=2, head_dim=8, **options).double()
    layout = torch.stack([attn.layout(seq, seq, causal=causal, head=head) for head in range(2)])  # (H, seq, seq)
    q, k, v, _ = random_inputs(1, seq, seq, seed=11, heads=2)
    base = attn(q, k, v, causal=causal).detach()
    for key in (0, 7, 20, 40):
        k2, v2 = k.detach().clone(), v.detach().clone()
        k2[:, :, key] += 1.0
        v2[:, :, key] += 1.0
        changed = (attn(q, k2, v2, causal=causal).detach() - base).abs().amax(dim=(0, 3)) > 1e-12  # (H, seq)
        assert torch.equal(changed, layout[:, :, key]), key


@pytest.mark.parametrize("causal", [False, True])
def test_local_with_a_window_covering_the_sequence_equals_dense(causal):
    q, k, v, mask = random_inputs(2, 45, 45, seed=2, padding=True)
    dense = variants.create("dense", num_heads=3, head_dim=8).double()
    expected = dense(q, k, v, causal=causal, key_padding_mask=mask)
    for window in (88, 1000):  # exactly reaching the first key from the last query, and far beyond
        local = variants.create("local", num_heads=3, head_dim=8, window=window).double()
        assert local.kernel == "blocked"
        assert_close_relative(local(q, k, v, causal=causal, key_padding_mask=mask), expected, 1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("options", [
    {"pattern": "strided", "stride": 45}, {"pattern": "fixed", "stride": 64, "summary": 1},
    {"pattern": "longformer", "window": 8, "num_global": 45}, {"pattern": "bigbird", "block_size": 16},
])
def test_sparse_covering_every_pair_equals_dense(options, causal):
    q, k, v, _ = random_inputs(2, 45, 45, seed=3)
    attn = variants.create("sparse", num_heads=3, head_dim=8, **options).double()
    assert attn.layout(45, 45).all()
    expected = variants.create("dense", num_heads=3, head_dim=8).double()(q, k, v, causal=causal)
    assert_close_relative(attn(q, k, v, causal=causal), expected, 1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", [
    *(layouts.Local(window) for window in (1, 8, 22, 23, 40)),
    *(layouts.Strided(stride) for stride in (1, 2, 3, 8, 11, 12, 16)),
    *(layouts.Fixed(stride, summary) for stride, summary in ((4, 1), (4, 4), (12, 3), (13, 1))),
    *(layouts.Longformer(window, num_global) for window in (1, 8, 20) for num_global in (0, 5, 11)),
    *(layouts.BigBird(block_size, num_global, num_random, 0, heads=2) for block_size in (2, 4)
      for num_global in (0, 3) for num_random in (0, 4)),
], ids=repr)
def test_a_layout_covers_every_pair_exactly_when_its_expanded_pairs_are_all_attended(layout, causal):
    # where `attnlab run` says a variant computes dense attention: its coverage is exactly 1.0
    for seq in (1, 2, 3, 5, 12, 13, 17):
        attended = layouts.dense(layout, seq, seq, causal)
        every = bool((attended | ~torch.ones(seq, seq, dtype=torch.bool).tril() if causal else attended).all())
        assert (layouts.coverage(layout, seq, causal) == 1.0) == every, seq


def gathered_pairs(attn, seq, causal):
    plan = blocked.plan(attn.block_layout, seq, seq, causal, torch.device("cpu"), 1 << 20)
    return sum(chunk.allowed.numel() for chunk in plan.chunks)


@pytest.mark.parametrize("name, options, per_query_bound", [
    ("local", {"window": 512}, 2 * 256 + 2 * 128),
    ("sparse", {"pattern": "longformer", "window": 256, "num_global": 4}, 2 * 128 + 2 * 64 + 64 + 64),
    ("sparse", {"pattern": "bigbird", "block_size": 64}, 64 * (3 + 2 + 1) + 64),
])
def test_blocked_kernel_gathers_linearly_many_pairs(name, options, per_query_bound):
    attn = variants.create(name, num_heads=1, head_dim=4, **options)
    for causal in (False, True):
        small, large = gathered_pairs(attn, 4096, causal), gathered_pairs(attn, 16384, causal)
        assert large <= 4.1 * small  # linear, not quadratic (16x)
        assert large <= per_query_bound * 16384 + 16384 * 64  # a few blocks per query, global rows aside


def test_local_memory_is_linear_in_the_sequence():
    from experiments.speed.memory import cpu_peak_supported, peak_memory_bytes

    if not cpu_peak_supported():
        pytest.skip("peak resident memory is read from /proc (Linux)")
    attn = variants.create("local", num_heads=2, head_dim=16, window=64)
    peaks = []
    for length in (4096, 16384):
        q, k, v = (torch.randn(1, 2, length, 16, requires_grad=True) for _ in range(3))

        def step(q=q, k=k, v=v):
            attn(q, k, v, causal=True).sum().backward()

        step()
        peaks.append(peak_memory_bytes(step, torch.device("cpu")))
    dense_scores = 2 * 16384 * 16384 * 4  # one float32 score matrix for 2 heads at 16K: 2 GiB
    assert peaks[1] < dense_scores / 20, [peak / 2**20 for peak in peaks]


def test_blocked_plans_are_cached_per_layout_and_never_shared_between_layouts():
    cpu = torch.device("cpu")
    first = variants.create("local", num_heads=2, head_dim=4, window=40).block_layout
    plan = blocked.plan(first, 100, 100, True, cpu, 1 << 20)
    assert blocked.plan(variants.create("local", num_heads=2, head_dim=4, window=40).block_layout,
                        100, 100, True, cpu, 1 << 20) is plan  # equal layouts share one plan
    assert blocked.plan(first, 100, 100, False, cpu, 1 << 20) is not plan
    other = variants.create("local", num_heads=2, head_dim=4, window=20).block_layout
    assert blocked.plan(other, 100, 100, True, cpu, 1 << 20) is not plan
    layers = [variants.create("sparse", num_heads=2, head_dim=4, pattern="bigbird", block_size=4, layer_index=index)
              for index in (0, 1)]
    plans = [blocked.plan(layer.block_layout, 100, 100, False, cpu, 1 << 20) for layer in layers]
    assert not torch.equal(plans[0].chunks[0].allowed, plans[1].chunks[0].allowed) or not torch.equal(
        plans[0].chunks[0].key_blocks, plans[1].chunks[0].key_blocks)  # each layer gathers its own blocks


@pytest.mark.parametrize("causal, attended", [
    # causal: query i sees min(i, 16) keys before it and itself: 1 + ... + 16 for i < 16, then 17 for 48 queries
    (True, sum(range(1, 17)) + 17 * 48),
    # full: the diagonal, and both sides of each offset d = 1..16, of which 64 - d pairs lie in the square
    (False, 64 + 2 * sum(64 - d for d in range(1, 17))),
], ids=["causal", "full"])
def test_local_window_coverage_is_its_share_of_the_pairs_counted_by_hand(causal, attended):
    pairs = 64 * 65 // 2 if causal else 64 * 64
    found = variants.coverage("local", 64, causal=causal, num_heads=4, head_dim=8, layers=2, options={"window": 32})
    assert found == pytest.approx(attended / pairs, abs=1e-12)


# The quick profile's BigBird: blocks of 16, one global block, two random blocks, 4 heads in 2 blocks of the model.
QUICK_BIGBIRD = {"pattern": "bigbird", "block_size": 16, "num_global_blocks": 1, "num_random_blocks": 2}


@pytest.mark.parametrize("seq_len, expected", [
    (64, 1.0),  # 4 blocks: the neighbours, the global block and two random ones are every key block in the past
    # 8 blocks: query block I sees block I (16 * 17 / 2 pairs) and whole blocks I - 1, 0 and min(2, I - 2) random
    # ones among 1..I-2: 0, 1, 2, 3, 4, 4, 4, 4 whole blocks for I = 0..7
    (128, (8 * 16 * 17 // 2 + 22 * 16 * 16) / (128 * 129 // 2)),
])
def test_bigbird_at_the_quick_settings_attends_every_causal_pair_at_64_and_81_percent_at_128(seq_len, expected):
    found = variants.coverage("sparse", seq_len, causal=True, num_heads=4, head_dim=16, layers=2, run_seed=3,
                              options=QUICK_BIGBIRD)
    masks = torch.cat([variants.create("sparse", num_heads=4, head_dim=16, layer_index=layer, run_seed=3,
                                       **QUICK_BIGBIRD).allowed(torch.arange(seq_len), torch.arange(seq_len), True,
                                                                None)[0] for layer in range(2)])  # (8, n, n)
    assert masks.shape == (8, seq_len, seq_len)
    brute_force = masks.sum().item() / (8 * seq_len * (seq_len + 1) // 2)
    assert found == pytest.approx(expected, abs=1e-12) and found == pytest.approx(brute_force, abs=1e-12)
    assert round(found, 2) == (1.0 if seq_len == 64 else 0.81)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("num_global_blocks, num_random_blocks", [(1, 2), (0, 1), (2, 0)])
def test_bigbird_computes_dense_up_to_global_plus_random_plus_two_blocks_and_no_further(
        num_global_blocks, num_random_blocks, causal):
    options = {"pattern": "bigbird", "block_size": 4, "num_global_blocks": num_global_blocks,
               "num_random_blocks": num_random_blocks}
    dense_blocks = num_global_blocks + num_random_blocks + 2
    at = [variants.coverage("sparse", 4 * blocks, causal=causal, num_heads=HEADS, head_dim=8, options=options)
          for blocks in (dense_blocks, dense_blocks + 1)]
    assert at[0] == 1.0 and at[1] < 1.0


@pytest.mark.parametrize("seq_len", [1, 37, 64])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", variant_cases(), ids=case_id)
def test_coverage_is_the_share_of_the_pairs_the_reference_kernels_mask_attends(case, causal, seq_len):
    name, options = case
    skip_if_bidirectional(name, causal)
    module = create_case(name, options, max_len=64)
    positions = torch.arange(seq_len)
    mask = module.allowed(positions, positions, causal, None)  # what the reference kernel masks with
    found = layouts.coverage(module.block_layout, seq_len, causal)
    in_view = torch.ones(seq_len, seq_len, dtype=torch.bool)
    in_view = in_view.tril() if causal else in_view
    if module.block_layout is None:  # no layout: no mask beyond causality, and no share to state
        assert found is None and (mask is None or torch.equal(mask[0, 0], in_view))
        return
    assert found == pytest.approx((mask[0].sum(dim=(1, 2)).double() / in_view.sum()).mean().item(), abs=1e-12)

