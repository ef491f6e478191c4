"""What qknorm, softcap and ssmax each promise about the size of the logits, pinned on their formulas.

qknorm and softcap bound the logits however large q and k grow; ssmax scales them with log(n) so that a
key that stands out keeps its weight however many keys there are. All in float64.
"""

import math

import pytest
import torch
from cases import assert_close_relative, random_inputs

import variants

HEADS, HEAD_DIM = 3, 8


def create(name, heads=HEADS, **options):
    return variants.create(name, num_heads=heads, head_dim=HEAD_DIM, **options).double()


def module_logits(module, q, k, causal=False):
    """The logits (B, H, seq_q, seq_k) the module computes, before masking and the softmax."""
    q_pos, k_pos = torch.arange(q.shape[2]), torch.arange(k.shape[2])
    return module.logits(*module.prepare(q, k), q_pos, k_pos, causal)


def scaled_dot_product(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM)


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_qknorm_logits_and_output_do_not_change_when_q_and_k_grow_a_thousandfold(norm):
    module = create("qknorm", norm=norm)
    with torch.no_grad():  # away from the initial gains and bias, so that they take part
        for param in module.parameters():
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(1), dtype=param.dtype))
    q, k, v, _ = random_inputs(2, 7, 9, seed=1)
    with torch.no_grad():
        # eps = 1e-5 under the square root moves each normalised vector by eps / (2 variance) relatively,
        # a few 1e-5 here; without the norm the logits would grow a millionfold.
        assert_close_relative(module_logits(module, 1000 * q, 1000 * k), module_logits(module, q, k), 1e-4, "logits")
        assert_close_relative(module(1000 * q, 1000 * k, v), module(q, k, v), 1e-4, "output")


@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_qknorm_prepares_queries_and_keys_normalised_over_head_dim(norm):
    module = create("qknorm", norm=norm)
    q, k, _, _ = random_inputs(2, 7, 9, seed=2)
    q = 3 * q + 5  # a mean and a scale the norm must remove (LayerNorm) or divide out (RMSNorm)
    with torch.no_grad():
        for prepared, raw in zip(module.prepare(q, k), (q, k), strict=True):
            centred = raw - raw.mean(-1, keepdim=True) if norm == "layer" else raw
            expected = centred / (centred.square().mean(-1, keepdim=True) + 1e-5).sqrt()  # gains 1, bias 0
            assert_close_relative(prepared, expected, 1e-12, "prepared")


def test_softcap_logits_are_cap_tanh_of_the_score_and_never_exceed_the_cap():
    cap = 50.0
    module = create("softcap", cap=cap)
    q, k, _, _ = random_inputs(2, 7, 9, seed=3)
    with torch.no_grad():
        assert_close_relative(module_logits(module, q, k), cap * torch.tanh(scaled_dot_product(q, k) / cap), 1e-12)
        huge = 1000 * q
        assert scaled_dot_product(huge, k).abs().max() > 10 * cap  # the scores go far past the cap ...
        # ... the logits do not (in floating point tanh rounds to 1 beyond about 19 caps: <=, not <).
        assert module_logits(module, huge, k).abs().max() <= cap


@pytest.mark.parametrize("causal", [False, True])
def test_softcap_with_a_cap_far_above_the_scores_equals_dense(causal):
    q, k, v, _ = random_inputs(2, 9, 9, seed=4)
    with torch.no_grad():
        capped = create("softcap", cap=1e4)(q, k, v, causal=causal)
        dense = create("dense")(q, k, v, causal=causal)
    assert (capped - dense).abs().max() < 1e-6  # cap * tanh(s / cap) = s - s^3 / (3 cap^2) + ...


def test_ssmax_keeps_the_weight_of_a_standout_key_as_the_number_of_keys_grows():
    """One key scored a, n - 1 keys scored 0: weight n^(s a) / (n^(s a) + n - 1), ~1/2 for every n when
    s a = 1, where dense's e^a / (e^a + n - 1) falls as 1/n."""
    module = create("ssmax", heads=1)
    s = module.length_scale.item()
    a = 1 / s
    q = torch.zeros(1, 1, 1, HEAD_DIM, dtype=torch.float64)
    q[..., 0] = math.sqrt(HEAD_DIM)  # q.k / sqrt(d) = k[0]
    ssmax_weights, dense_weights = [], []
    for n in (16, 256, 4096):
        k = torch.zeros(1, 1, n, HEAD_DIM, dtype=torch.float64)
        k[..., 0, 0] = a  # key 0 scores a; the others score 0
        with torch.no_grad():
            _, weights = module(q, k, k, return_weights=True)
            _, plain = create("dense", heads=1)(q, k, k, return_weights=True)
        expected = n ** (s * a) / (n ** (s * a) + n - 1)
        assert weights[0, 0, 0, 0].item() == pytest.approx(expected, rel=1e-12), n
        assert weights[0, 0, 0].argmax() == 0, n
        ssmax_weights.append(weights[0, 0, 0, 0].item())
        dense_weights.append(plain[0, 0, 0, 0].item())
    assert all(0.5 < weight < 0.52 for weight in ssmax_weights), ssmax_weights
    assert dense_weights[0] > dense_weights[1] > dense_weights[2] and dense_weights[2] < 0.01, dense_weights


@pytest.mark.parametrize("causal", [False, True])
def test_ssmax_multiplies_each_row_by_its_heads_s_times_log_of_the_keys_the_query_sees(causal):
    module = create("ssmax")
    s = torch.tensor([0.2, 0.43, 1.0], dtype=torch.float64)
    with torch.no_grad():
        module.length_scale.copy_(s)
    q, k, _, _ = random_inputs(2, 7, 5, seed=5)  # rows 4 to 6 see all 5 keys when causal
    seen = torch.arange(1, 8).clamp(max=5) if causal else torch.full((7,), 5)
    expected = s[:, None, None] * seen.double().log()[:, None] * scaled_dot_product(q, k)  # (H, 1, 1) (7, 1)
    with torch.no_grad():
        assert_close_relative(module_logits(module, q, k, causal=causal), expected, 1e-12, "logits")


def test_ssmax_counts_padded_positions_in_the_number_of_keys_seen():
    """Padding removes keys from the softmax, not from n: the weights of the real keys are those of the
    unpadded call renormalised over them, as for any variant whose logits ignore the mask."""
    module = create("ssmax", fixed=True)
    q, k, v, _ = random_inputs(1, 4, 6, seed=6)
    real = torch.tensor([[True, True, False, True, False, True]])
    with torch.no_grad():
        _, padded = module(q, k, v, key_padding_mask=real, return_weights=True)
        _, unpadded = module(q, k, v, return_weights=True)
        _, fewer_keys = module(q, k[:, :, real[0]], v[:, :, real[0]], return_weights=True)
    kept = unpadded * real[:, None, None, :]
    assert_close_relative(padded, kept / kept.sum(-1, keepdim=True), 1e-12, "weights")
    assert not torch.allclose(padded[..., real[0]], fewer_keys)  # n = 4 instead of 6 would change them
