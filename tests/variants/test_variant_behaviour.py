"""Properties every registered variant must have: shapes, gradients, causality, masks, weights."""

import pytest
import torch
from cases import (
    GRADIENT_TEST_QUERIES,
    HEAD_DIM,
    HEADS,
    OWN_KEY_ONLY_ALONE,
    case_id,
    key_length,
    random_inputs,
    trains_on_cpu,
    unread_inputs,
    variant_cases,
)

import variants

CASES = variant_cases()


def kernels_of(name, options):
    """The kernels the variant lists that train on CPU."""
    return [kernel for kernel in variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, **options).kernels
            if trains_on_cpu(kernel)]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_output_shape_is_finite_and_every_parameter_gets_a_gradient(case):
    name, options = case
    module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, **options)
    queries = GRADIENT_TEST_QUERIES.get(name, 6)
    keys = key_length(name, queries, 9)
    q, k, v, _ = random_inputs(2, queries, keys, seed=0, dtype=torch.float32)
    v = torch.randn(2, HEADS, keys, 5, requires_grad=True)  # values may have their own width
    out = module(q, k, v, causal=False)
    assert out.shape == (2, HEADS, queries, 5)
    assert torch.isfinite(out).all()
    out.square().sum().backward()
    for param_name, param in module.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, f"{param_name} received no gradient"
    if module.layout(queries, keys).sum(-1).max() > 1:  # with one key per query, its weight is 1 whatever q and k
        unread = unread_inputs(name, options)
        for label, tensor in (("q", q), ("k", k)):
            assert tensor.grad is None if label in unread else tensor.grad.abs().sum() > 0, label


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_causal_output_never_depends_on_future_keys_or_values(case):
    name, options = case
    for kernel in kernels_of(name, options):
        module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, kernel=kernel, **options).double()
        q, k, v, _ = random_inputs(2, 12, 12, seed=4)
        base = module(q, k, v, causal=True).detach()
        for position in (0, 5, 10):
            k2, v2 = k.detach().clone(), v.detach().clone()
            k2[:, :, position + 1 :] += torch.randn_like(k2[:, :, position + 1 :]) * 3
            v2[:, :, position + 1 :] += torch.randn_like(v2[:, :, position + 1 :]) * 3
            moved = module(q, k2, v2, causal=True).detach()
            assert torch.equal(moved[:, :, : position + 1], base[:, :, : position + 1]), (kernel, position)
            if position + 2 < 12 or name not in OWN_KEY_ONLY_ALONE:  # else only the last query sees a change: its own
                assert not torch.allclose(moved[:, :, position + 1 :], base[:, :, position + 1 :]), (kernel, position)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_padded_keys_are_ignored_and_rows_without_keys_are_zero(case):
    name, options = case
    for kernel in kernels_of(name, options):
        module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, kernel=kernel, **options).double()
        q, k, v, mask = random_inputs(3, 8, 8, seed=6, padding=True)
        out = module(q, k, v, key_padding_mask=mask)
        real = mask[:, None, :, None]  # (B, 1, seq_k, 1)
        k2, v2 = torch.where(real, k.detach(), 100.0), torch.where(real, v.detach(), -100.0)
        assert torch.allclose(module(q, k2, v2, key_padding_mask=mask), out, rtol=0, atol=1e-12), kernel
        assert torch.equal(out[0], torch.zeros_like(out[0])), kernel  # batch element 0 is all padding
        out.sum().backward()
        unread = unread_inputs(name, options)
        for label, tensor in (("q", q), ("k", k), ("v", v)):
            assert tensor.grad is None if label in unread else torch.isfinite(tensor.grad).all(), (kernel, label)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_returned_weights_are_a_distribution_over_allowed_keys(case):
    name, options = case
    module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, **options).double()
    keys = key_length(name, 6, 7)
    q, k, v, mask = random_inputs(3, 6, keys, seed=8, padding=True)
    out, weights = module(q, k, v, causal=True, key_padding_mask=mask, return_weights=True)
    assert weights.shape == (3, HEADS, 6, keys)
    allowed = module.layout(6, keys, causal=True)[None, None] & mask[:, None, None, :]
    assert torch.equal(weights[~allowed.expand_as(weights)], torch.zeros_like(weights[~allowed.expand_as(weights)]))
    sums = weights.sum(-1)
    has_key = allowed.any(-1).expand_as(sums)
    assert torch.allclose(sums[has_key], torch.ones_like(sums[has_key]))
    assert torch.equal(sums[~has_key], torch.zeros_like(sums[~has_key]))
    assert torch.allclose(out, weights @ v)
    assert torch.allclose(out, module(q, k, v, causal=True, key_padding_mask=mask))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_describe_names_the_variant_and_is_filename_safe(case):
    name, options = case
    described = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, **options).describe()
    assert described.startswith(name)
    assert all(char.isalnum() or char in "._-" for char in described), described
