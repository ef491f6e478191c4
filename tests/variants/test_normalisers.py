"""The normalisers other than the softmax: each against the optimality conditions of its paper (not against the
code that computes it), masking, adaptive entmax's alpha, exact zeros in the returned weights, and the blocked
kernel computing them on gathered key blocks without ever forming n x n."""

import math

import pytest
import torch
from cases import BIGBIRD, HEAD_DIM, HEADS, NORMALISERS, assert_close_relative, output_and_grads, random_inputs
from torch import nn

import variants
from variants import normalisers
from variants.kernels import blocked
from variants.local import Local
from variants.sparse import Sparse

SPARSE = ("sparsemax", "entmax15")


def rows_and_mask(seed: int, rows: int = 40, keys: int = 9, spread: float = 3.0):
    """(rows, keys) float64 logits and a mask with some rows that may see a single key or none."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, keys, generator=generator, dtype=torch.float64) * spread
    allowed = torch.rand(rows, keys, generator=generator) > 0.4
    allowed[0], allowed[1] = False, False
    allowed[1, 3] = True
    return logits, allowed


@pytest.mark.parametrize("name", SPARSE)
def test_sparse_normalisers_solve_their_papers_optimality_conditions_over_the_allowed_keys(name):
    """sparsemax (Martins & Astudillo 2016, eq. 2-4): w_j = [s_j - tau]_+ summing to 1. 1.5-entmax (Peters et al.
    2019, eq. 9 with alpha = 1.5): w_j = [s_j / 2 - tau]_+^2 summing to 1. So over the support the same tau
    follows from every key, and the keys outside it score at most tau."""
    logits, allowed = rows_and_mask(seed=1)
    weights = normalisers.NORMALISERS[name](logits, allowed)
    assert torch.equal(weights[~allowed], torch.zeros_like(weights[~allowed]))
    has_key = allowed.any(-1)
    torch.testing.assert_close(weights.sum(-1)[has_key], torch.ones(int(has_key.sum()), dtype=torch.float64))
    assert torch.equal(weights[~has_key], torch.zeros_like(weights[~has_key]))
    scores = logits if name == "sparsemax" else logits / 2
    thresholds = scores - (weights if name == "sparsemax" else weights.sqrt())  # tau, where w > 0
    support = weights > 0
    assert (support.sum(-1)[has_key] < allowed.sum(-1)[has_key]).any()  # some allowed keys get exactly zero
    for row in torch.nonzero(has_key).flatten():
        tau = thresholds[row, support[row]]
        torch.testing.assert_close(tau, tau[:1].expand_as(tau), rtol=0, atol=1e-12)
        outside = allowed[row] & ~support[row]
        assert (scores[row, outside] <= tau[0] + 1e-12).all()


def test_sigmoid_weighs_each_key_on_its_own_with_bias_minus_log_of_the_keys_seen():
    logits, allowed = rows_and_mask(seed=2)
    weights = normalisers.sigmoid(logits, allowed)
    seen = allowed.sum(-1, keepdim=True).double()
    for row in range(len(logits)):
        for key in range(logits.shape[1]):
            expected = 1 / (1 + math.exp(-(logits[row, key].item() - math.log(max(seen[row].item(), 1)))))
            assert weights[row, key].item() == pytest.approx(expected if allowed[row, key] else 0.0, rel=1e-12)
    everything = normalisers.sigmoid(logits, None)
    torch.testing.assert_close(everything, torch.sigmoid(logits - math.log(logits.shape[1])))


def test_adaptive_entmax_is_sparsemax_at_alpha_2_and_entmax15_at_alpha_one_and_a_half():
    logits, allowed = rows_and_mask(seed=3)
    batched, mask = logits.view(2, 2, 10, 9), allowed.view(2, 2, 10, 9)  # (batch, heads, rows, keys)
    alpha = torch.tensor([2.0, 1.5], dtype=torch.float64)  # head 0 sparsemax, head 1 1.5-entmax
    weights = normalisers.entmax_adaptive(batched, mask, alpha)
    assert_close_relative(weights[:, 0], normalisers.sparsemax(batched[:, 0], mask[:, 0]), 1e-12)
    assert_close_relative(weights[:, 1], normalisers.entmax15(batched[:, 1], mask[:, 1]), 1e-12)
    near_softmax = normalisers.entmax_adaptive(batched, mask, torch.tensor([1.01, 1.01], dtype=torch.float64))
    assert_close_relative(near_softmax, normalisers.softmax(batched, mask), 0.05)  # alpha -> 1 is the softmax


def test_adaptive_alpha_is_learned_per_head_in_the_papers_range():
    torch.manual_seed(0)
    module = variants.create("dense", num_heads=HEADS, head_dim=HEAD_DIM, normaliser="entmax_adaptive").double()
    alpha = module.entmax_alpha
    assert alpha.shape == (HEADS,) and len(set(alpha.tolist())) == HEADS  # drawn at random, as in the paper
    assert ((alpha > 1) & (alpha < 2)).all()
    with torch.no_grad():
        module.alpha_preactivation.copy_(torch.tensor([-20.0, 0.0, 20.0]))
    assert module.entmax_alpha.tolist() == pytest.approx([normalisers.ALPHA_MIN, 1.5, 2.0])
    module.alpha_preactivation.data[0] = 0.3
    q, k, v, mask = random_inputs(2, 7, 7, seed=4, padding=True)
    module(q, k, v, causal=True, key_padding_mask=mask).square().sum().backward()
    gradient = module.alpha_preactivation.grad
    assert torch.isfinite(gradient).all() and gradient[:2].abs().min() > 0  # the clamped head at 2 gets none
    assert "alpha_preactivation" not in dict(variants.create("dense", num_heads=2, head_dim=4).named_parameters())


@pytest.mark.parametrize("name", ["dense", "local", "sparse"])
@pytest.mark.parametrize("normaliser", SPARSE + ("entmax_adaptive",))
def test_exact_zeros_of_a_sparse_normaliser_reach_the_returned_weights(name, normaliser):
    module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, normaliser=normaliser).double()
    q, k, v, _ = random_inputs(2, 40, 40, seed=5)
    out, weights = module(q * 3, k, v, causal=True, return_weights=True)  # sharp logits: short supports
    allowed = module.layout(40, 40, causal=True)
    assert (weights[..., allowed] == 0).float().mean() > 0.3  # exact zeros among the keys a query may see
    assert torch.equal(weights[..., ~allowed], torch.zeros_like(weights[..., ~allowed]))
    assert_close_relative(out, weights @ v, 1e-12)


@pytest.mark.parametrize("normaliser", NORMALISERS)
def test_low_precision_logits_are_normalised_in_float32(normaliser):
    logits, allowed = rows_and_mask(seed=6)
    logits = logits.view(2, 2, 10, 9).bfloat16()
    alpha = {"alpha": torch.tensor([1.3, 1.7])} if normaliser == "entmax_adaptive" else {}
    normalise = normalisers.entmax_adaptive if alpha else normalisers.NORMALISERS[normaliser]
    weights = normalise(logits, allowed.view(2, 2, 10, 9), **alpha)
    assert weights.dtype == torch.bfloat16
    expected = normalise(logits.float(), allowed.view(2, 2, 10, 9), **alpha).bfloat16()
    assert torch.equal(weights, expected)


class Sloped:
    """A layout with a learned scale per head and a slope per head on |i - j|: what the blocked kernel folds into q
    (the scale) and adds to its gathered scores (logit_bias), which no registered variant with a layout has."""

    def __init__(self, options, **kwargs):
        super().__init__(options, **kwargs)
        self.log_scale = nn.Parameter(torch.randn(self.num_heads, 1, 1) * 0.3)

    def logit_scale(self):
        return torch.exp(self.log_scale) / math.sqrt(self.head_dim)

    def pair_bias(self, causal, device, dtype):
        slopes = torch.tensor([0.1, 0.3, 0.7], device=device, dtype=dtype)
        return lambda head, q_idx, kv_idx: -slopes[head] * (kv_idx - q_idx).abs().to(dtype)


class SlopedWindow(Sloped, Local):
    pass


class SlopedBigBird(Sloped, Sparse):  # key blocks that differ per head
    pass


@pytest.mark.parametrize("layout", [SlopedWindow, SlopedBigBird], ids=["local", "bigbird"])
@pytest.mark.parametrize("normaliser", NORMALISERS + ("softmax",))
def test_blocked_kernel_adds_the_bias_and_scale_of_each_head_to_its_gathered_scores(layout, normaliser, monkeypatch):
    monkeypatch.setattr(blocked, "CHUNK_ELEMENTS", 1)  # one query block per chunk
    options = (Local.Options(window=9, normaliser=normaliser) if layout is SlopedWindow
               else Sparse.Options(**BIGBIRD, normaliser=normaliser))
    torch.manual_seed(0)
    module = layout(options, num_heads=HEADS, head_dim=HEAD_DIM, kernel="blocked").double()
    reference = layout(options, num_heads=HEADS, head_dim=HEAD_DIM, kernel="reference").double()
    reference.load_state_dict(module.state_dict())
    assert "blocked" in module.kernels
    for causal in (False, True):
        q, k, v, mask = random_inputs(2, 37, 37, seed=7, padding=True)
        out, grads = output_and_grads(module, q, k, v, causal=causal, key_padding_mask=mask)
        ref_out, ref_grads = output_and_grads(reference, q, k, v, causal=causal, key_padding_mask=mask)
        assert_close_relative(out, ref_out, 1e-9, "output")
        for grad, ref_grad in zip(grads, ref_grads, strict=True):
            assert_close_relative(grad, ref_grad, 1e-9, "gradient")


@pytest.mark.parametrize("options", [{"window": 16}, {"pattern": "bigbird", "block_size": 16}],
                         ids=["local", "bigbird"])
@pytest.mark.parametrize("normaliser", NORMALISERS)
def test_blocked_kernel_normalises_gathered_key_blocks_never_all_keys(options, normaliser, monkeypatch):
    monkeypatch.setattr(blocked, "CHUNK_ELEMENTS", 1)  # one query block per chunk, so each call is one block's row
    name = "local" if "window" in options else "sparse"
    module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, normaliser=normaliser, **options)
    assert module.kernel == "blocked"
    scored = []  # (query rows, gathered keys) of each call
    normalise = module.normalise

    def recording(similarities, allowed):
        scored.append((similarities.shape[-3] * similarities.shape[-2], similarities.shape[-1]))
        return normalise(similarities, allowed)

    monkeypatch.setattr(module, "normalise", recording)
    seq = 512
    q, k, v, _ = random_inputs(1, seq, seq, seed=8, dtype=torch.float32)
    module(q, k, v, causal=True).sum().backward()
    assert len(scored) == seq // 16 and all(rows == 16 for rows, _ in scored)
    assert max(keys for _, keys in scored) <= 5 * 16  # window: 2 blocks; BigBird: 3, a global and 2 random
    assert sum(rows * keys for rows, keys in scored) < seq * seq / 4  # never n x n
