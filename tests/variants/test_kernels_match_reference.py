"""Every kernel computes the reference formula: outputs and gradients, in float64 and float32.

The kernels that chunk run in small chunks here (`small_chunks`): the chunked kernel a few queries at a
time, the blocked kernel one query block at a time, at lengths that are not multiples of either, and
at lengths of several blocks of the layouts' smallest block size (16)."""

import functools

import pytest
import torch
from cases import (
    NORMALISERS,
    assert_close_relative,
    build_pair,
    case_id,
    force_small_chunks,
    kernel_cases,
    key_length,
    output_and_grads,
    random_inputs,
    skip_if_bidirectional,
    variant_cases,
)
from torch.func import functional_call

import variants

# (batch, seq_q, seq_k, padding): equal and unequal lengths, odd lengths, padding with empty rows, and
# lengths spanning three blocks of 16.
SHAPES = [(2, 7, 7, False), (3, 5, 9, False), (2, 9, 5, True), (2, 16, 16, True), (1, 37, 41, True)]
KERNEL_CASES = kernel_cases()


@pytest.fixture
def small_chunks(monkeypatch):
    force_small_chunks(monkeypatch)


def kernel_id(case):
    return f"{case_id(case[:2])}-{case[2]}"


def compare(module, reference, inputs, rtol, causal, mask):
    out, grads = output_and_grads(module, *inputs, causal=causal, key_padding_mask=mask)
    ref_inputs = [tensor.detach().double().requires_grad_() for tensor in inputs]
    ref_out, ref_grads = output_and_grads(reference, *ref_inputs, causal=causal, key_padding_mask=mask)
    assert torch.isfinite(out).all()
    assert_close_relative(out.double(), ref_out, rtol, "output")
    labels = ["q", "k", "v"] + [name for name, _ in module.named_parameters()]
    for label, grad, ref_grad in zip(labels, grads, ref_grads, strict=True):
        assert (grad is None) == (ref_grad is None), label
        if grad is not None:
            assert_close_relative(grad.double(), ref_grad, rtol, f"gradient of {label}")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}-q{}-k{}{}".format(*s[:3], "-padded" if s[3] else ""))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", KERNEL_CASES, ids=kernel_id)
def test_kernel_matches_reference_in_float64(case, causal, shape, small_chunks):
    name, options, kernel = case
    skip_if_bidirectional(name, causal)
    batch, seq_q, seq_k, padding = shape
    seq_k = key_length(name, seq_q, seq_k)
    module, reference = build_pair(name, options, kernel)
    assert module.kernel == kernel
    q, k, v, mask = random_inputs(batch, seq_q, seq_k, seed=seq_q * 31 + seq_k, padding=padding)
    compare(module, reference, (q, k, v), 1e-9, causal, mask)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", KERNEL_CASES + [(*c, "reference") for c in variant_cases()], ids=kernel_id)
def test_kernel_in_float32_matches_float64_reference(case, causal, small_chunks):
    name, options, kernel = case
    skip_if_bidirectional(name, causal)
    module, reference = build_pair(name, options, kernel, dtype=torch.float32)
    reference.double()
    q, k, v, mask = random_inputs(2, 11, 11, seed=5, dtype=torch.float32, padding=True)
    compare(module, reference, (q, k, v), 1e-5, causal, mask)


def gradcheck_module(module, q, k, v, mask, causal, fast_mode=True):
    """torch.autograd.gradcheck of the module's output in q, k, v and every parameter. Fast mode compares the
    analytic and numerical Jacobians along random directions (u^T J v): one numerical derivative per output
    direction, not one per input element, which for a variant with thousands of parameters (Linformer's
    projections, Synthesizer's logits) is the difference between seconds and minutes."""
    params = dict(module.named_parameters())

    def attend(q, k, v, *param_values):
        return functional_call(module, dict(zip(params, param_values, strict=True)), (q, k, v),
                               {"causal": causal, "key_padding_mask": mask})

    leaves = [p.detach().clone().requires_grad_() for p in params.values()]
    return torch.autograd.gradcheck(attend, (q, k, v, *leaves), fast_mode=fast_mode)


@pytest.mark.parametrize("case", KERNEL_CASES + [(*c, "reference") for c in variant_cases()], ids=kernel_id)
def test_gradcheck_on_tiny_inputs(case, small_chunks):
    name, options, kernel = case
    module, _ = build_pair(name, options, kernel, heads=2, head_dim=4)
    q, k, v, mask = random_inputs(2, 4, key_length(name, 4, 5), seed=3, heads=2, head_dim=4, padding=True)
    mask[0] = True  # gradcheck needs every input to matter somewhere
    # a variant without a causal form is checked bidirectional
    assert gradcheck_module(module, q, k, v, mask, causal=module.supports_causal)


def test_chunked_kernel_is_exact_across_many_chunks(monkeypatch):
    from variants.kernels import chunked

    monkeypatch.setattr(chunked, "CHUNK_ELEMENTS", 50)  # forces chunks of a single query or two
    module, reference = build_pair("additive", {}, "chunked")
    q, k, v, mask = random_inputs(2, 13, 10, seed=9, padding=True)
    compare(module, reference, (q, k, v), 1e-9, True, mask)


# (CHUNK_ELEMENTS, the (batch elements, queries) per chunk it gives 3 heads of hidden width 8 over 10 keys, 13
# queries and 3 batch elements, bidirectional and causal): one query; 4 queries (13 is no multiple of 4); two whole
# sequences, or with causality ceil(13 / CAUSAL_BLOCKS) = 4 queries of every sequence.
ADDITIVE_CHUNKS = [(50, (1, 1), (1, 1)), (3 * 10 * 8 * 4, (1, 4), (1, 4)), (3 * 10 * 8 * 13 * 2, (2, 13), (3, 4))]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("elements, full_sizes, causal_sizes", ADDITIVE_CHUNKS, ids=lambda value: str(value))
def test_additive_kernel_is_exact_across_chunks_of_queries_and_of_batch_elements(monkeypatch, elements, full_sizes,
                                                                                 causal_sizes, causal):
    from variants.kernels import additive

    monkeypatch.setattr(additive, "CHUNK_ELEMENTS", elements)
    monkeypatch.setattr(additive, "CAUSAL_BLOCKS", 4)
    module, reference = build_pair("additive", {}, "additive")
    q, k, v, mask = random_inputs(3, 13, 10, seed=elements, padding=True)
    sizes = causal_sizes if causal else full_sizes
    assert additive.chunk_sizes(module.kernel_call(q, k, v, causal, mask)) == sizes
    compare(module, reference, (q, k, v), 1e-9, causal, mask)


def _preactivations_at(module, q, k, largest):
    """q and k scaled (the projections are linear) so that the largest |pre-activation| of the tanh is `largest`."""
    with torch.no_grad():
        a, b = module.prepare(q, k)
        factor = largest / torch.maximum(a.abs().amax(), b.abs().amax())
    return (q.detach() * factor).requires_grad_(), (k.detach() * factor).requires_grad_()


@pytest.mark.parametrize("fraction, exponentiated", [(0.9, True), (1.5, False)], ids=["products", "pair-by-pair"])
def test_additive_kernel_in_float32_is_exact_near_and_beyond_the_range_of_its_exponentials(fraction, exponentiated):
    from variants.kernels import additive

    module, reference = build_pair("additive", {"hidden_dim": 5}, "additive", dtype=torch.float32)
    reference.double()
    q, k, v, mask = random_inputs(2, 11, 11, seed=6, dtype=torch.float32, padding=True)
    q, k = _preactivations_at(module, q, k, fraction * additive.exponent_limit(torch.float32))
    with torch.no_grad():
        assert additive._pair_factors(*module.prepare(q, k))[2] == exponentiated
    for causal in (False, True):
        compare(module, reference, (q, k, v), 1e-5, causal, mask)


def test_additive_kernel_pair_by_pair_is_exact_and_passes_gradcheck(monkeypatch, small_chunks):
    from variants.kernels import additive

    monkeypatch.setattr(additive, "exponent_limit", lambda dtype: 0.0)  # sigmoid(-2 (a + b)) for every pair
    module, reference = build_pair("additive", {"hidden_dim": 5}, "additive", heads=2, head_dim=4)
    q, k, v, mask = random_inputs(3, 7, 5, seed=4, heads=2, head_dim=4, padding=True)
    with torch.no_grad():
        assert not additive._pair_factors(*module.prepare(q, k))[2]
    compare(module, reference, (q, k, v), 1e-9, True, mask)
    mask[0] = True  # gradcheck needs every input to matter somewhere
    assert gradcheck_module(module, q, k, v, mask, causal=True, fast_mode=False)


@pytest.mark.parametrize("normaliser", NORMALISERS)
def test_additive_kernel_is_exact_with_every_normaliser_and_passes_on_what_it_learns(normaliser, small_chunks):
    """Each normaliser runs on the chunks' logits through autograd; adaptive entmax's alpha is a learned tensor
    the kernel's backward pass differentiates and hands back."""
    module, reference = build_pair("additive", {"hidden_dim": 5, "normaliser": normaliser}, "additive")
    q, k, v, mask = random_inputs(3, 8, 7, seed=2, padding=True)
    for causal in (False, True):
        compare(module, reference, (q, k, v), 1e-9, causal, mask)
    small, _ = build_pair("additive", {"hidden_dim": 5, "normaliser": normaliser}, "additive", heads=2, head_dim=4)
    q, k, v, mask = random_inputs(3, 4, 5, seed=3, heads=2, head_dim=4, padding=True)
    mask[0] = True
    assert gradcheck_module(small, q, k, v, mask, causal=True)


def test_kernel_auto_picks_a_fused_kernel_where_the_variant_allows():
    assert variants.create("dense", num_heads=2, head_dim=8).kernel == "sdpa"
    assert variants.create("relative", num_heads=2, head_dim=8, kind="t5").kernel == "sdpa"
    assert variants.create("relative", num_heads=2, head_dim=8, kind="shaw").kernel == "chunked"
    assert variants.create("additive", num_heads=2, head_dim=8).kernel == "additive"


def train_step(attn, q, k, v):
    attn(q, k, v, causal=True).sum().backward()


@pytest.mark.parametrize("kernel", ["additive", "chunked"])
def test_additive_memory_stays_bounded_as_the_sequence_grows(monkeypatch, kernel):
    from experiments.speed.memory import cpu_peak_supported, peak_memory_bytes
    from variants.kernels import additive, chunked

    if not cpu_peak_supported():
        pytest.skip("peak resident memory is read from /proc (Linux)")
    chunking = {"additive": additive, "chunked": chunked}[kernel]
    monkeypatch.setattr(chunking, "CHUNK_ELEMENTS", 1 << 20)
    attn = variants.create("additive", num_heads=1, head_dim=16, hidden_dim=16, kernel=kernel)
    bound = 6 * chunking.CHUNK_ELEMENTS * 4  # a few chunk-sized float32 tensors in flight (24 MiB)
    for length in (1024, 2048):
        q, k, v = (torch.randn(1, 1, length, 16, requires_grad=True) for _ in range(3))
        step = functools.partial(train_step, attn, q, k, v)
        step()  # the first call also pays for one-time set-up (autograd threads, allocator pools)
        peak = peak_memory_bytes(step, torch.device("cpu"))
        whole_intermediate = length * length * 16 * 4  # (seq_q, seq_k, hidden) in float32
        assert peak < bound < whole_intermediate, (length, peak / 2**20)
