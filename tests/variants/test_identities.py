"""Identities between variants, and constants that must equal the papers' own."""

import math

import pytest
import torch
from cases import random_inputs

import variants
from variants.relative import t5_bucket


def outputs(name, q, k, v, heads=3, head_dim=8, causal=False, **options):
    module = variants.create(name, num_heads=heads, head_dim=head_dim, **options).double()
    return module(q, k, v, causal=causal)


@pytest.mark.parametrize("causal", [False, True])
def test_temperature_one_equals_dense(causal):
    q, k, v, _ = random_inputs(2, 9, 9, seed=1)
    expected = outputs("dense", q, k, v, causal=causal)
    assert torch.allclose(outputs("temperature", q, k, v, causal=causal, temperature=1.0), expected, atol=1e-12)
    assert torch.allclose(outputs("temperature", q, k, v, causal=causal, learnable=True), expected, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_temperature_one_over_sqrt_d_equals_unscaled(causal):
    q, k, v, _ = random_inputs(2, 9, 9, seed=2)
    expected = outputs("unscaled", q, k, v, causal=causal)
    got = outputs("temperature", q, k, v, causal=causal, temperature=1 / math.sqrt(8))
    assert torch.allclose(got, expected, atol=1e-12)


def test_unscaled_is_sharper_than_dense():
    q, k, v, _ = random_inputs(2, 9, 9, seed=2, head_dim=64)
    entropy = {}
    for name in ("dense", "unscaled"):
        module = variants.create(name, num_heads=3, head_dim=64).double()
        _, weights = module(q, k, v, return_weights=True)
        entropy[name] = -(weights * weights.clamp_min(1e-300).log()).sum(-1).mean()
    assert entropy["unscaled"] < entropy["dense"] / 2


@pytest.mark.parametrize("kind", ["shaw", "t5"])
@pytest.mark.parametrize("causal", [False, True])
def test_relative_with_zero_tables_equals_dense(kind, causal):
    q, k, v, _ = random_inputs(2, 10, 10, seed=3)
    for kernel in ("auto", "reference"):
        module = variants.create("relative", num_heads=3, head_dim=8, kind=kind, kernel=kernel).double()
        with torch.no_grad():
            for param in module.parameters():
                param.zero_()
        assert torch.allclose(module(q, k, v, causal=causal), outputs("dense", q, k, v, causal=causal), atol=1e-12)


def test_relative_tables_change_the_output():
    q, k, v, _ = random_inputs(2, 10, 10, seed=3)
    for kind in ("shaw", "t5", "alibi", "rope"):
        assert not torch.allclose(outputs("relative", q, k, v, kind=kind), outputs("dense", q, k, v)), kind


# Press et al. 2022, section 3: for 8 heads the slopes are 1/2, 1/4, ..., 1/256; for 12 heads, the 8-head
# slopes followed by every other slope of the 16-head sequence 2^(-0.5 h): 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
PAPER_SLOPES = {
    8: [2.0**-h for h in range(1, 9)],
    12: [2.0**-h for h in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5],
}


@pytest.mark.parametrize("heads", [8, 12])
def test_alibi_slopes_equal_the_papers(heads):
    # With q = 0 the logits are the ALiBi bias alone, so neighbouring weights differ by exp(-slope).
    q = torch.zeros(1, heads, 4, 8, dtype=torch.float64)
    k = torch.randn(1, heads, 4, 8, dtype=torch.float64)
    module = variants.create("relative", num_heads=heads, head_dim=8, kind="alibi").double()
    _, weights = module(q, k, k, return_weights=True)
    slopes = torch.log(weights[0, :, 0, 0] / weights[0, :, 0, 1])
    assert torch.allclose(slopes, torch.tensor(PAPER_SLOPES[heads], dtype=torch.float64), rtol=1e-12)


def test_t5_buckets_follow_t5():
    # Hand-computed from T5's rule: exact below max_exact, then max_exact + log(d / max_exact) /
    # log(max_distance / max_exact) * (buckets - max_exact), truncated and clamped to the last bucket.
    relative = torch.tensor([0, -1, -3, 3, -8, -20, 20, -200, 200])
    bidirectional = t5_bucket(relative, bidirectional=True, num_buckets=32, max_distance=128)
    assert bidirectional.tolist() == [0, 1, 3, 19, 8, 10, 26, 15, 31]
    causal = t5_bucket(relative, bidirectional=False, num_buckets=32, max_distance=128)
    assert causal.tolist() == [0, 1, 3, 0, 8, 17, 0, 31, 0]


def rotate_with_complex_numbers(x):
    """Rotary embedding written independently: pairs (t, t + d/2) as complex numbers times e^(i p theta_t)."""
    half = x.shape[-1] // 2
    theta = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    angles = torch.arange(x.shape[2], dtype=torch.float64)[:, None] * theta
    rotated = torch.complex(x[..., :half], x[..., half:]) * torch.polar(torch.ones_like(angles), angles)
    return torch.cat([rotated.real, rotated.imag], dim=-1)


@pytest.mark.parametrize("causal", [False, True])
def test_rope_equals_dense_on_rotated_queries_and_keys(causal):
    q, k, v, _ = random_inputs(2, 11, 11, seed=4)
    expected = outputs("dense", rotate_with_complex_numbers(q), rotate_with_complex_numbers(k), v, causal=causal)
    assert torch.allclose(outputs("relative", q, k, v, causal=causal, kind="rope"), expected, atol=1e-12)


def test_rope_logits_depend_only_on_relative_position():
    q = torch.randn(1, 3, 1, 8, dtype=torch.float64).expand(1, 3, 12, 8)  # the same query at every position
    k = torch.randn(1, 3, 1, 8, dtype=torch.float64).expand(1, 3, 12, 8)
    module = variants.create("relative", num_heads=3, head_dim=8, kind="rope").double()
    _, weights = module(q, k, k, return_weights=True)
    logits = weights.log()  # f(j - i) + a constant per row (the normaliser)
    step = logits[..., 1:, 1:] - logits[..., :-1, :-1]  # f cancels for the same offset: row constants remain
    assert torch.allclose(step, step[..., :1].expand_as(step), atol=1e-10)
    assert logits.std(dim=-1).min() > 1e-3  # and the logits do depend on the offset
