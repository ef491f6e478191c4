"""BigBird's random blocks as Zaheer et al. 2020 draw them: exactly num_random_blocks per query block among
the blocks neither neighbouring nor global (past ones when causal), per head and per layer, from the run's
seed; and every kernel that runs the layout runs each head's own blocks."""

import pytest
import torch
from cases import assert_close_relative, build_pair, force_small_chunks, output_and_grads, random_inputs

import variants
from variants.kernels import KERNELS
from variants.normalisers import softmax as masked_softmax


def bigbird(num_heads=4, layer_index=0, run_seed=0, **options):
    return variants.create("sparse", num_heads=num_heads, head_dim=4, pattern="bigbird", layer_index=layer_index,
                           run_seed=run_seed, **options)


def block_level(attn, seq, causal, head, block):
    """Bool (query blocks, key blocks): the blocks holding a pair `head` attends, read from `layout()`."""
    drawn = attn.layout(seq, seq, causal=causal, head=head)
    blocks = -(-seq // block)
    padded = torch.zeros(blocks * block, blocks * block, dtype=torch.bool)
    padded[:seq, :seq] = drawn
    return padded.view(blocks, block, blocks, block).any(dim=(1, 3))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq, block, num_global, num_random", [
    (16 * 64, 16, 1, 2),  # the case of the issue: 64 blocks, plenty eligible
    (3 * 7 - 1, 3, 1, 2),  # 7 blocks, the last partial: rows near the start have fewer than 2 eligible
    (2 * 9, 2, 2, 3),
])
def test_bigbird_draws_exactly_num_random_blocks_per_query_block_among_the_eligible(
        causal, seq, block, num_global, num_random):
    attn = bigbird(block_size=block, num_global_blocks=num_global, num_random_blocks=num_random, run_seed=5)
    blocks = -(-seq // block)
    rows, columns = torch.arange(blocks)[:, None], torch.arange(blocks)[None, :]
    fixed = ((rows - columns).abs() <= 1) | (rows < num_global) | (columns < num_global)
    eligible = ~fixed & (columns < rows) if causal else ~fixed
    expected = eligible.sum(dim=1).clamp(max=num_random)
    assert (expected < num_random).any() and (expected == num_random).any()  # both cases are exercised
    for head in range(attn.num_heads):
        seen = block_level(attn, seq, causal, head, block)
        assert (seen | ~(fixed & (columns <= rows if causal else True))).all()  # neighbours and globals kept
        random = seen & ~fixed
        assert not (random & ~eligible).any()  # only eligible blocks are drawn
        assert torch.equal(random.sum(dim=1), expected), head  # exactly that many, or all when fewer exist


def test_bigbird_random_key_blocks_are_attended_whole():
    attn = bigbird(block_size=4, num_random_blocks=2)
    drawn = attn.layout(40, 40, head=1).view(10, 4, 10, 4)
    touched = drawn.any(dim=(1, 3))
    assert torch.equal(drawn.all(dim=(1, 3)), touched)


def test_bigbird_heads_draw_different_random_blocks():
    attn = bigbird(num_heads=4, block_size=16, num_random_blocks=2)
    drawn = [attn.layout(1024, 1024, head=head) for head in range(4)]
    assert all(not torch.equal(drawn[a], drawn[b]) for a in range(4) for b in range(a + 1, 4))


def test_bigbird_same_seed_and_layer_same_layout_other_layer_or_seed_another():
    def drawn(**kwargs):
        attn = bigbird(block_size=16, num_random_blocks=2, **kwargs)
        return torch.stack([attn.layout(512, 512, head=head) for head in range(attn.num_heads)])

    first = drawn(layer_index=1, run_seed=3)
    assert torch.equal(drawn(layer_index=1, run_seed=3), first)
    assert not torch.equal(drawn(layer_index=2, run_seed=3), first)
    assert not torch.equal(drawn(layer_index=1, run_seed=4), first)
    # an explicit seed replaces the run's seed, and layers still differ
    assert torch.equal(drawn(layer_index=1, run_seed=3, seed=9), drawn(layer_index=1, run_seed=4, seed=9))
    assert not torch.equal(drawn(layer_index=1, seed=9), drawn(layer_index=2, seed=9))


def test_the_model_gives_each_layer_its_own_layout_from_the_run_seed():
    from experiments.run.config import ModelConfig
    from experiments.run.model import Transformer

    def layouts(seed):
        model = Transformer(ModelConfig(depth=2), vocab_size=8, num_classes=2, max_len=64, variant="sparse",
                            variant_options={"pattern": "bigbird", "block_size": 4}, seed=seed)
        return [block.attn.layout(64, 64) for block in model.blocks]

    first, second = layouts(seed=1)
    assert not torch.equal(first, second)
    assert torch.equal(layouts(seed=1)[0], first) and not torch.equal(layouts(seed=2)[0], first)


# Block size 2 over 37 positions with one random block: the heads' layouts differ (checked below).
PER_HEAD = {"pattern": "bigbird", "block_size": 2, "num_global_blocks": 1, "num_random_blocks": 1}


def naive_per_head(attn, q, k, v, causal):
    """softmax(q k^T / sqrt(d)) v with head h masked by `layout(head=h)`: what every kernel must compute."""
    allowed = torch.stack([attn.layout(q.shape[2], k.shape[2], causal=causal, head=head)
                           for head in range(attn.num_heads)])  # (H, seq_q, seq_k)
    logits = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return masked_softmax(logits, allowed[None]) @ v


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kernel", variants.create("sparse", num_heads=3, head_dim=8, **PER_HEAD).kernels)
def test_every_kernel_runs_each_heads_own_random_blocks(kernel, causal, monkeypatch):
    force_small_chunks(monkeypatch)
    module, reference = build_pair("sparse", PER_HEAD, kernel)
    drawn = [module.layout(37, 37, causal=causal, head=head) for head in range(3)]
    assert not torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[1], drawn[2])
    q, k, v, _ = random_inputs(2, 37, 37, seed=4)
    assert_close_relative(reference(q, k, v, causal=causal), naive_per_head(module, q, k, v, causal), 1e-12)
    if not KERNELS[kernel].runs_on(torch.device("cpu")):  # flex: forward only on CPU
        with torch.no_grad():
            out, expected = module(q, k, v, causal=causal), reference(q, k, v, causal=causal)
        assert_close_relative(out, expected, 1e-9, "output")
        return
    out, grads = output_and_grads(module, q, k, v, causal=causal)
    ref_out, ref_grads = output_and_grads(reference, q, k, v, causal=causal)
    assert_close_relative(out, ref_out, 1e-9, "output")
    for label, grad, ref_grad in zip("qkv", grads, ref_grads, strict=True):
        assert_close_relative(grad, ref_grad, 1e-9, f"gradient of {label}")
