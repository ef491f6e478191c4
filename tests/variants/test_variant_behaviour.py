"""Properties every registered variant must have: shapes, gradients, causality, masks, weights."""

import pytest
import torch
from cases import (
    GRADIENT_TEST_QUERIES,
    HEADS,
    MAX_LEN,
    case_id,
    create_case,
    key_length,
    random_inputs,
    skip_if_bidirectional,
    trains_on_cpu,
    unread_inputs,
    variant_cases,
)

import variants
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


def prefix_consistency_gaps(module, length: int, seed: int) -> tuple[float, float]:
    """How far the causal outputs at the positions before p move, over several p: once every q, k and v from p on
    is moved, and against the call on the first p positions alone (the largest absolute change of each)."""
    q, k, v = (tensor.detach() for tensor in random_inputs(2, length, length, seed=seed)[:3])
    whole = module(q, k, v, causal=True)
    moved_gap = prefix_gap = 0.0
    for end in range(2, length, 3):
        moved = [tensor.clone() for tensor in (q, k, v)]
        for tensor in moved:
            tensor[:, :, end:] += torch.randn_like(tensor[:, :, end:]) * 3
        earlier = module(*moved, causal=True)[:, :, :end]
        prefix = module(q[:, :, :end], k[:, :, :end], v[:, :, :end], causal=True)
        moved_gap = max(moved_gap, (earlier - whole[:, :, :end]).abs().max().item())
        prefix_gap = max(prefix_gap, (prefix - whole[:, :, :end]).abs().max().item())
    return moved_gap, prefix_gap


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_causal_output_up_to_a_position_is_what_the_prefix_up_to_it_gives(case):
    """What causal=True promises: before position p, the outputs of the call on the first p positions, whatever
    follows (q moved too: Reformer's keys are its queries, and later ones move its chunks)."""
    name, options = case
    skip_if_bidirectional(name, causal=True)
    if not variants.variant_class(name).prefix_consistent:
        pytest.skip(f"{name}'s causal form is not prefix-consistent (pinned below); runs take it bidirectional")
    for kernel in kernels_of(name, options):
        module = create_case(name, options, kernel).double()
        moved_gap, prefix_gap = prefix_consistency_gaps(module, 20, seed=4)
        assert moved_gap == 0 and prefix_gap <= 1e-12, (kernel, moved_gap, prefix_gap)
        q, k, v = (tensor.detach() for tensor in random_inputs(2, 12, 12, seed=4)[:3])
        later = v.clone()
        later[:, :, 6:] += 1.0
        assert not torch.allclose(module(q, k, later, causal=True)[:, :, 6:], module(q, k, v, causal=True)[:, :, 6:])


@pytest.mark.parametrize("name", [name for name in variants.list_variants()
                                  if not variants.variant_class(name).prefix_consistent])
def test_a_variant_that_says_its_causal_form_is_not_prefix_consistent_lets_later_inputs_move_earlier_outputs(name):
    """The flag is not a formality: with some of the options its cases test, later inputs move earlier outputs
    (Reformer: with short chunks, where a query's bucket neighbours fall depends on the later positions' buckets)."""
    gaps = [prefix_consistency_gaps(create_case(name, options).double(), MAX_LEN, seed=4)
            for case_name, options in CASES if case_name == name]
    assert max(moved_gap for moved_gap, _ in gaps) > 1e-3 and max(prefix_gap for _, prefix_gap in gaps) > 1e-3, gaps


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
