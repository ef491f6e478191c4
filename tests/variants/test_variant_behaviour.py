"""Properties every registered variant must have: shapes, gradients, causality, masks, weights."""

import pytest
import torch
from cases import (
    GRADIENT_TEST_QUERIES,
    HEADS,
    OWN_KEY_ONLY_ALONE,
    case_id,
    create_case,
    key_length,
    random_inputs,
    skip_if_bidirectional,
    trains_on_cpu,
    unread_inputs,
    variant_cases,
)

from variants.normalisers import EPSILON

CASES = variant_cases()


def kernels_of(name, options):
    """The kernels the variant lists that train on CPU."""
    return [kernel for kernel in create_case(name, options).kernels
            if trains_on_cpu(kernel)]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_output_shape_is_finite_and_every_parameter_gets_a_gradient(case):
    name, options = case
    module = create_case(name, options)
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
    skip_if_bidirectional(name, causal=True)
    for kernel in kernels_of(name, options):
        module = create_case(name, options, kernel).double()
        q, k, v, _ = random_inputs(2, 12, 12, seed=4)
        base = module(q, k, v, causal=True).detach()
        for position in (0, 5, 9):  # two or more keys moved: a sparse normaliser may give one no weight at all
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
        module = create_case(name, options, kernel).double()
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


def feature_similarities(module, q, k, v, mask):
    """phi(q_i) . phi(k_j) (B, H, seq_q, seq_k) of a kernelised module, from its feature maps of the prepared q
    and k, for a causal call."""
    call = module.kernel_call(q, k, v, True, mask)
    phi_q, phi_k = call.features(call.q, call.k, call.q_pos, call.k_pos, True, mask)
    return phi_q @ phi_k.transpose(-2, -1)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_returned_weights_are_a_distribution_over_allowed_keys_or_sigmoids(case):
    """Softmax, sparsemax and entmax weights sum to 1 over the allowed keys; sigmoid's are each sigmoid(logit -
    log n). The `sum` normaliser's are non-negative and sum to 1 too, unless the row's similarities sum to less
    than EPSILON (a ReLU row of zeros): then to that sum over EPSILON. The
    `none` normaliser's weights are the similarities themselves."""
    name, options = case
    skip_if_bidirectional(name, causal=True)
    module = create_case(name, options).double()
    keys = key_length(name, 6, 7)
    q, k, v, mask = random_inputs(3, 6, keys, seed=8, padding=True)
    out, weights = module(q, k, v, causal=True, key_padding_mask=mask, return_weights=True)
    assert weights.shape == (3, HEADS, 6, keys)
    allowed = (module.layout(6, keys, causal=True)[None, None] & mask[:, None, None, :]).expand_as(weights)
    assert torch.equal(weights[~allowed], torch.zeros_like(weights[~allowed]))
    sums = weights.sum(-1)
    has_key = allowed.any(-1)
    assert torch.equal(sums[~has_key], torch.zeros_like(sums[~has_key]))
    if module.normaliser in ("softmax", "sparsemax", "entmax15", "entmax_adaptive"):
        assert torch.allclose(sums[has_key], torch.ones_like(sums[has_key]))
    elif module.normaliser == "sigmoid":
        # Ramapuram et al.: each allowed weight is sigmoid(logit - log n) on its own, n the keys the row sees; the
        # row is not normalised. The logits are the variant's own (its softmax cases test them).
        prepared_q, prepared_k = module.prepare(q, k)
        logits = module.logits(prepared_q, prepared_k, torch.arange(6), torch.arange(keys), True)
        seen = allowed.sum(-1, keepdim=True).double()
        expected = torch.where(allowed, torch.sigmoid(logits - seen.clamp_min(1).log()), 0.0)
        assert torch.allclose(weights, expected, rtol=1e-12, atol=1e-15)
        assert not torch.allclose(sums[has_key], torch.ones_like(sums[has_key]))
    elif module.normaliser == "sum":
        assert (weights >= 0).all()
        totals = feature_similarities(module, q, k, v, mask).masked_fill(~allowed, 0.0).sum(-1)
        expected = torch.where(totals >= EPSILON, 1.0, totals / EPSILON)
        assert torch.allclose(sums[has_key], expected[has_key])
    else:
        assert module.normaliser == "none", f"no rule for the weights of normaliser {module.normaliser!r}"
        similarities = feature_similarities(module, q, k, v, mask)
        assert torch.allclose(weights[allowed], similarities[allowed])
    assert torch.allclose(out, weights @ v)
    assert torch.allclose(out, module(q, k, v, causal=True, key_padding_mask=mask))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_describe_names_the_variant_and_is_filename_safe(case):
    name, options = case
    described = create_case(name, options).describe()
    assert described.startswith(name)
    assert all(char.isalnum() or char in "._-" for char in described), described
