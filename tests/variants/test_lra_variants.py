"""Reformer, Sinkhorn and Synthesizer (the rest of the Long Range Arena's Table 1) against their papers: the LSH
buckets, chunks and Sinkhorn balancing on cases worked out by hand, and each variant against its formula
written out with loops in float64; the randomness and learned layouts are the run's, kept by the state dict.
(The registry-wide tests in this folder run them on every kernel they list, causally and with padding.)"""

import itertools
import math

import pytest
import torch
from cases import MAX_LEN, random_inputs

import variants
from variants.reformer import lsh_attended, lsh_buckets
from variants.sinkhorn import sinkhorn

HEADS, HEAD_DIM = 2, 4


def create(name, **options):
    return variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, max_len=MAX_LEN, **options).double()


# -- Reformer -----------------------------------------------------------------------------------------------

def test_lsh_buckets_of_2d_vectors_under_known_rotations_by_hand():
    # Four buckets: argmax over [x R, -x R]. Round 0 rotates by the identity, round 1 by 90 degrees (x R = (x2, -x1)).
    rotations = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]], [[0.0, -1.0], [1.0, 0.0]]]])  # (H=1, rounds=2, d=2, 2)
    vectors = torch.tensor([[[[1.0, 0.2], [0.1, 1.0], [-1.0, 0.3], [0.2, -1.0]]]])  # (B=1, H=1, 4, d=2)
    buckets = lsh_buckets(vectors, rotations)
    assert buckets[0, 0, 0].tolist() == [0, 1, 2, 3]  # the largest of x1, x2, -x1, -x2
    assert buckets[0, 0, 1].tolist() == [3, 0, 1, 2]  # of x2, -x1, -x2, x1


def test_lsh_pairs_are_a_bucket_within_its_chunk_and_the_one_before_by_hand():
    # Round 0: buckets [1,0,1,0,1,1] sort to positions 1,3 | 0,2 | 4,5 (chunks of 2). Round 1: one bucket, in order.
    buckets = torch.tensor([[[[1, 0, 1, 0, 1, 1], [0, 0, 0, 0, 0, 0]]]])
    positions = torch.arange(6)
    expected_first = [{0, 2}, {1, 3}, {0, 2}, {1, 3}, {0, 2, 4, 5}, {0, 2, 4, 5}]
    expected_second = [{0, 1}, {0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {2, 3, 4, 5}, {2, 3, 4, 5}]
    for rounds, expected in ((slice(0, 1), expected_first), (slice(1, 2), expected_second),
                             (slice(0, 2), [a | b for a, b in zip(expected_first, expected_second, strict=True)])):
        attended = lsh_attended(buckets[:, :, rounds], 2, positions)[0, 0]
        assert [set(row.nonzero().flatten().tolist()) for row in attended] == expected
    some = lsh_attended(buckets, 2, torch.tensor([4, 1]))[0, 0]  # the rows of the queries asked for
    assert torch.equal(some, lsh_attended(buckets, 2, positions)[0, 0, [4, 1]])


def naive_reformer(module, q, v, causal):
    """The paper's LSH attention with loops: per round, sort (bucket, position), chunk, keep the own bucket in the
    own chunk and the one before; the union of the rounds, each pair once; the own key only when nothing else."""
    batch, heads, seq, dim = q.shape
    keys = q / q.norm(dim=-1, keepdim=True)
    out = torch.zeros_like(v)
    for b in range(batch):
        for h in range(heads):
            attended = [set() for _ in range(seq)]
            for rotation in module.rotations[h]:
                rotated = keys[b, h] @ rotation
                bucket = torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1).tolist()
                order = sorted(range(seq), key=lambda j: (bucket[j], j))  # noqa: B023 (used at once)
                chunk = {j: place // module.options.chunk_size for place, j in enumerate(order)}
                for i in range(seq):
                    attended[i] |= {j for j in range(seq)
                                    if bucket[j] == bucket[i] and chunk[i] - 1 <= chunk[j] <= chunk[i]}
            for i in range(seq):
                seen = {j for j in attended[i] if j <= i or not causal}
                chosen = sorted(seen - {i} or {i})
                logits = torch.stack([q[b, h, i] @ keys[b, h, j] for j in chosen]) / math.sqrt(dim)
                out[b, h, i] = logits.softmax(dim=0) @ v[b, h, chosen]
    return out


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("options", [{"num_hashes": 2, "num_buckets": 4, "chunk_size": 3},
                                     {"num_hashes": 3, "num_buckets": 6, "chunk_size": 2}])
@pytest.mark.parametrize("kernel", ["reference", "chunked"])
def test_reformer_computes_the_papers_lsh_attention(kernel, options, causal):
    module = variants.create("reformer", num_heads=HEADS, head_dim=HEAD_DIM, kernel=kernel, **options).double()
    q, k, v, _ = random_inputs(2, 11, 11, seed=1, heads=HEADS, head_dim=HEAD_DIM)
    with torch.no_grad():
        expected = naive_reformer(module, q, v, causal)
        assert torch.allclose(module(q, k, v, causal=causal), expected, rtol=0, atol=1e-12)
        assert torch.allclose(module(q, torch.randn_like(k), v, causal=causal), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_reformer_draws_on_an_example_the_pairs_it_attends_and_its_own_key_only_when_alone(causal):
    module = create("reformer", num_hashes=2, num_buckets=4, chunk_size=2)
    q, k, v, _ = random_inputs(1, 12, 12, seed=2, heads=HEADS, head_dim=HEAD_DIM)
    with torch.no_grad():
        _, weights = module(q, k, v, causal=causal, return_weights=True)
    alone = 0
    prepared_q, prepared_k = module.prepare(q[0], q[0])  # the keys are the queries, normalised
    for head in range(HEADS):
        drawn = module.example_layout(prepared_q, prepared_k, causal=causal, head=head)
        assert set(drawn.unique().tolist()) <= {0.0, 1.0}
        drawn = drawn.bool()
        assert torch.equal(drawn, weights[0, head] > 0)
        own = drawn.diagonal()
        assert (drawn.sum(dim=-1)[own] == 1).all()  # the own key is attended only alone
        alone += int(own.sum())
    if causal:  # the first query has nothing but itself
        assert alone >= HEADS and weights[0, :, 0, 0].eq(1).all()
    assert torch.equal(module.layout(12, 12, causal=causal), torch.ones(12, 12, dtype=torch.bool).tril()
                       if causal else torch.ones(12, 12, dtype=torch.bool))


def test_reformer_rotations_come_from_the_run_seed_and_layer_and_survive_a_rebuild():
    def rotations(**kwargs):
        return variants.create("reformer", num_heads=HEADS, head_dim=HEAD_DIM, **kwargs).rotations

    first = rotations(run_seed=3, layer_index=1)
    assert torch.equal(rotations(run_seed=3, layer_index=1), first)
    assert not torch.equal(rotations(run_seed=3, layer_index=2), first)
    assert not torch.equal(rotations(run_seed=4, layer_index=1), first)
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[:, 0], first[:, 1])  # per head and round


@pytest.mark.parametrize("name, options", [("reformer", {"num_buckets": 4, "chunk_size": 3}),
                                           ("sinkhorn", {"block_size": 3}), ("synthesizer", {"kind": "random",
                                                                                             "fixed": True})])
def test_a_rebuilt_module_loading_the_state_dict_gives_identical_outputs(name, options):
    torch.manual_seed(0)
    trained = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, max_len=MAX_LEN, run_seed=5, **options)
    torch.manual_seed(1)  # other initial parameters, and for the reformer other rotations, until the state dict loads
    resumed = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, max_len=MAX_LEN, run_seed=6, **options)
    q, k, v, _ = random_inputs(2, 13, 13, seed=3, heads=HEADS, head_dim=HEAD_DIM, dtype=torch.float32)
    assert not torch.equal(resumed(q, k, v, causal=True), trained(q, k, v, causal=True))
    resumed.load_state_dict(trained.state_dict())
    for causal in (False, True):
        assert torch.equal(resumed(q, k, v, causal=causal), trained(q, k, v, causal=causal))


@pytest.mark.parametrize("name", ["reformer", "sinkhorn"])
def test_self_attention_variants_refuse_unequal_lengths_in_one_sentence(name):
    q, k, v, _ = random_inputs(1, 5, 7, seed=0, heads=HEADS, head_dim=HEAD_DIM)
    with pytest.raises(ValueError, match=rf"^Variant '{name}' .* needs as many keys as queries; got 5 queries and "
                                         r"7 keys, accepted: equal lengths\.$"):
        create(name)(q, k, v)


# -- Sinkhorn -----------------------------------------------------------------------------------------------

def test_sinkhorn_balancing_of_a_2x2_matrix_by_hand():
    scores = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64).log()
    rows = torch.tensor([[1 / 3, 2 / 3], [3 / 7, 4 / 7]], dtype=torch.float64)
    assert torch.allclose(sinkhorn(scores, 0, causal=False), rows, rtol=0, atol=1e-15)  # a softmax over each row
    # rows -> columns (sums 16/21, 26/21) -> [[7/16, 7/13], [9/16, 6/13]] -> rows (sums 203/208, 213/208)
    once = torch.tensor([[91 / 203, 112 / 203], [117 / 213, 96 / 213]], dtype=torch.float64)
    assert torch.allclose(sinkhorn(scores, 1, causal=False), once, rtol=0, atol=1e-15)
    # The limit keeps the cross ratio s11 s22 / (s12 s21) = 4 / 6: [[x, 1 - x], [1 - x, x]], x / (1 - x) = sqrt(2/3).
    x = math.sqrt(2 / 3) / (1 + math.sqrt(2 / 3))
    limit = torch.tensor([[x, 1 - x], [1 - x, x]], dtype=torch.float64)
    assert torch.allclose(sinkhorn(scores, 60, causal=False), limit, rtol=0, atol=1e-12)


def test_sinkhorn_balancing_makes_rows_and_columns_sum_to_one():
    scores = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    balanced = sinkhorn(scores, 300, causal=False)
    assert torch.allclose(balanced.sum(dim=-1), torch.ones(2, 5, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(balanced.sum(dim=-2), torch.ones(2, 5, dtype=torch.float64), atol=1e-9)


def test_causal_sinkhorn_of_a_3x3_matrix_by_hand_sorts_each_block_among_earlier_ones():
    scores = torch.zeros(3, 3, dtype=torch.float64)
    scores[2, 0] = math.log(2.0)  # exp(scores) row 2 = [2, 1, .]
    # Row 1 can only take block 0: [1]. Row 2: rows -> [2/3, 1/3]; columns over rows 1..2 only: (2/3) / (1 + 2/3)
    # = 2/5 and (1/3) / (1/3) = 1; rows -> [2/7, 5/7]. Block 0 has no earlier block: all 0.
    expected = torch.tensor([[0, 0, 0], [1, 0, 0], [2 / 7, 5 / 7, 0]], dtype=torch.float64)
    assert torch.allclose(sinkhorn(scores, 1, causal=True), expected, rtol=0, atol=1e-15)
    later = scores.clone()
    later[2] = torch.randn(3, dtype=torch.float64)
    assert torch.equal(sinkhorn(later, 4, causal=True)[:2], sinkhorn(scores, 4, causal=True)[:2])  # no future rows


def naive_sinkhorn(module, q, k, v, causal, mask):
    """The paper's sorted attention with loops: S from the block sums (first keys when causal) through the
    sorting network and `sinkhorn`; each query's softmax over its block's keys (up to itself when causal) and
    the positions of its sorted block, sum_J S_IJ k_Jt over the blocks J that have a key at position t,
    renormalised. A padded key is left out everywhere (counted as a zero vector in the sums)."""
    batch, heads, seq, dim = q.shape
    size, blocks = module.options.block_size, math.ceil(seq / module.options.block_size)
    starts = [block * size for block in range(blocks)]
    k = k * mask[:, None, :, None]
    summaries = torch.stack([k[:, :, s] if causal else k[:, :, s : s + size].sum(dim=2) for s in starts], dim=2)
    layers = module.sort_hidden, module.sort_scores
    hidden = torch.relu(torch.einsum("bhnd,hed->bhne", summaries, layers[0].weight) + layers[0].bias[:, None])
    scores = torch.relu(torch.einsum("bhnd,hed->bhne", hidden, layers[1].weight) + layers[1].bias[:, None])
    mixing = sinkhorn(scores[..., :blocks] / module.options.temperature, module.options.sinkhorn_iters, causal)
    out = torch.zeros_like(v)
    for b, h, i in itertools.product(range(batch), range(heads), range(seq)):
        block = i // size
        own = [j for j in range(starts[block], min(starts[block] + size, i + 1 if causal else seq)) if mask[b, j]]
        keys, values = [k[b, h, j] for j in own], [v[b, h, j] for j in own]
        for t in range(size):
            having = [(mixing[b, h, block, other], starts[other] + t) for other in range(blocks)
                      if starts[other] + t < seq and mask[b, starts[other] + t] and mixing[b, h, block, other] > 0]
            total = sum(share for share, _ in having)
            if having:
                keys.append(sum(share * k[b, h, j] for share, j in having) / total)
                values.append(sum(share * v[b, h, j] for share, j in having) / total)
        if keys:
            logits = torch.stack(keys) @ q[b, h, i] / math.sqrt(dim)
            out[b, h, i] = logits.softmax(dim=0) @ torch.stack(values)
    return out


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq, options", [(12, {"block_size": 3, "sinkhorn_iters": 2, "temperature": 0.5}),
                                          (11, {"block_size": 4}), (11, {"block_size": 3, "sinkhorn_iters": 0})])
@pytest.mark.parametrize("kernel", ["reference", "chunked"])
def test_sinkhorn_computes_the_papers_sorted_attention(kernel, seq, options, causal):
    torch.manual_seed(0)
    module = variants.create("sinkhorn", num_heads=HEADS, head_dim=HEAD_DIM, kernel=kernel, max_len=MAX_LEN,
                             **options).double()
    q, k, v, mask = random_inputs(3, seq, seq, seed=seq, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    mask[2] = True  # one example without padding
    with torch.no_grad():
        out, weights = module(q, k, v, causal=causal, key_padding_mask=mask, return_weights=True)
        assert torch.allclose(out, naive_sinkhorn(module, q, k, v, causal, mask), rtol=0, atol=1e-12)
    # Soft sorting weighs every key a query may see: the base layout (all pairs, or j <= i) is what ran.
    seen = module.layout(seq, seq, causal=causal)[None, None] & mask[:, None, None, :]
    assert torch.equal(weights > 1e-300, seen.expand_as(weights))


def test_sinkhorn_with_a_hard_permutation_attends_its_own_block_and_the_block_sorted_to_it(monkeypatch):
    module = create("sinkhorn", block_size=2)
    permutation = torch.tensor([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=torch.float64)  # block I gets block (I+2)%3
    q, k, v, _ = random_inputs(2, 6, 6, seed=4, heads=HEADS, head_dim=HEAD_DIM)
    monkeypatch.setattr(module, "sorting", lambda keys, causal: permutation.expand(2, HEADS, 3, 3))
    expected = torch.zeros_like(v)
    for i in range(6):
        block, sorted_to = i // 2, (i // 2 + 2) % 3
        chosen = [2 * block, 2 * block + 1, 2 * sorted_to, 2 * sorted_to + 1]
        logits = torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, chosen]) / 2.0  # sqrt(head_dim = 4)
        expected[:, :, i] = torch.einsum("bhj,bhjd->bhd", logits.softmax(dim=-1), v[:, :, chosen])
    with torch.no_grad():
        assert torch.allclose(module(q, k, v), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sinkhorn_draws_on_an_example_its_own_block_and_the_blocks_sorted_to_it(monkeypatch, causal):
    module = create("sinkhorn", block_size=2)
    # Block I gets block I - 1 (block 0 none: causal sorting allows only earlier blocks), or, not causal, an even
    # mixture of the other two.
    permutation = (torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0]]) if causal
                   else torch.tensor([[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])).double()
    monkeypatch.setattr(module, "sorting", lambda keys, causal: permutation.expand(1, HEADS, 3, 3))
    _, k, _, _ = random_inputs(1, 6, 6, seed=5, heads=HEADS, head_dim=HEAD_DIM)
    expected = torch.zeros(6, 6, dtype=torch.float64)
    for i, j in itertools.product(range(6), range(6)):
        if i // 2 == j // 2:
            expected[i, j] = float(j <= i or not causal)
        else:
            expected[i, j] = permutation[i // 2, j // 2]
    for head in range(HEADS):
        assert torch.equal(module.example_layout(k[0], k[0], causal=causal, head=head), expected)


def test_a_layout_the_input_does_not_change_is_drawn_on_an_example_as_it_is_everywhere():
    _, k, _, _ = random_inputs(1, 10, 10, seed=6, heads=HEADS, head_dim=HEAD_DIM)
    for name, options in [("local", {"window": 4}), ("dense", {})]:
        module = create(name, **options)
        assert not module.layout_depends_on_input
        for causal in (False, True):
            assert torch.equal(module.example_layout(k[0], k[0], causal=causal).bool(),
                               module.layout(10, 10, causal=causal))
    assert create("reformer").layout_depends_on_input and create("sinkhorn").layout_depends_on_input


# -- Synthesizer --------------------------------------------------------------------------------------------

def per_head(layer, x):
    return torch.einsum("bhnd,hed->bhne", x, layer.weight) + layer.bias[:, None]


@pytest.mark.parametrize("kind", ["dense", "factorized_dense", "random", "factorized_random"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_synthesizer_weights_are_the_softmax_of_the_synthesised_logits(kind, causal):
    module = create("synthesizer", kind=kind, **({"factor": 2} if kind == "factorized_dense" else {}))
    q, k, v, _ = random_inputs(2, 9, 7, seed=5, heads=HEADS, head_dim=HEAD_DIM)
    if kind == "dense":  # B_i = W_2 relu(W_1 q_i + b_1) + b_2 over the positions, those of the keys kept
        logits = per_head(module.to_positions, torch.relu(per_head(module.hidden, q)))[..., :7]
    elif kind == "factorized_dense":  # the outer product a c^T read row by row: a_0 c_0, a_0 c_1, ...
        hidden = torch.relu(per_head(module.hidden, q))
        first, second = per_head(module.to_first, hidden), per_head(module.to_second, hidden)
        assert first.shape[-1] == 2 and second.shape[-1] == math.ceil(MAX_LEN / 2)
        logits = torch.stack([first[..., j // second.shape[-1]] * second[..., j % second.shape[-1]]
                              for j in range(7)], dim=-1)
    elif kind == "random":
        logits = module.table[:, :9, :7].expand(2, -1, -1, -1)
    else:
        logits = (module.left[:, :9] @ module.right[:, :7].transpose(-2, -1)).expand(2, -1, -1, -1)
    if causal:
        logits = logits.masked_fill(torch.ones(9, 7, dtype=torch.bool).triu(diagonal=1), -math.inf)
    with torch.no_grad():
        expected = logits.softmax(dim=-1) @ v
        assert torch.allclose(module(q, k, v, causal=causal), expected, rtol=0, atol=1e-12)
        assert torch.allclose(module(q, torch.randn_like(k), v, causal=causal), expected, rtol=0, atol=1e-12)


def test_factorized_dense_with_a_length_that_is_not_a_product_keeps_the_first_max_len_entries():
    module = variants.create("synthesizer", num_heads=1, head_dim=2, max_len=5, kind="factorized_dense")
    assert (module.to_first.weight.shape[1], module.to_second.weight.shape[1]) == (3, 2)  # ceil(sqrt 5), ceil(5 / 3)
    q = torch.randn(1, 1, 5, 2)
    assert module.logits(q, q, torch.arange(5), torch.arange(5), False).shape == (1, 1, 5, 5)


def test_a_fixed_random_table_is_kept_as_drawn_and_a_learned_one_trains():
    q, k, v, _ = random_inputs(2, 6, 6, seed=6, heads=HEADS, head_dim=HEAD_DIM, dtype=torch.float32)
    for fixed in (False, True):
        module = variants.create("synthesizer", num_heads=HEADS, head_dim=HEAD_DIM, max_len=8, kind="random",
                                 fixed=fixed)
        before = module.table.detach().clone()
        assert ("table" in dict(module.named_parameters())) is not fixed and "table" in module.state_dict()
        if not fixed:
            optimizer = torch.optim.SGD(module.parameters(), lr=1.0)
            module(q, k, v).square().sum().backward()
            optimizer.step()
        assert torch.equal(module.table, before) is fixed


@pytest.mark.parametrize("name", ["synthesizer", "sinkhorn"])
def test_variants_sized_by_the_longest_sequence_refuse_no_max_len_and_longer_sequences(name):
    with pytest.raises(ValueError, match=rf"^Variant '{name}' .*needs max_len; got max_len=None, accepted: "
                                         r"variants\.create\(\.\.\., max_len=an integer >= 1\)\.$"):
        variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM)
    q, k, v, _ = random_inputs(1, 9, 9, seed=0, heads=HEADS, head_dim=HEAD_DIM)
    with pytest.raises(ValueError, match=r"max_len=8.*got 9 .*accepted: .*at most 8\.$"):
        variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, max_len=8).double()(q, k, v)
