"""Every kernel computes the reference formula: outputs and gradients, in float64 and float32.

The kernels that chunk run in small chunks here (`small_chunks`): the chunked kernel a few queries at a
time, the blocked kernel one query block at a time, at lengths that are not multiples of either, and
at lengths of several blocks of the layouts' smallest block size (16)."""

import functools

import pytest
import torch
from cases import (
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


@pytest.mark.parametrize("case", KERNEL_CASES + [(*c, "reference") for c in variant_cases()], ids=kernel_id)
def test_gradcheck_on_tiny_inputs(case, small_chunks):
    name, options, kernel = case
    module, _ = build_pair(name, options, kernel, heads=2, head_dim=4)
    q, k, v, mask = random_inputs(2, 4, key_length(name, 4, 5), seed=3, heads=2, head_dim=4, padding=True)
    mask[0] = True  # gradcheck needs every input to matter somewhere
    params = dict(module.named_parameters())
    causal = module.supports_causal  # a variant without a causal form is checked bidirectional

    def attend(q, k, v, *param_values):
        return functional_call(module, dict(zip(params, param_values, strict=True)), (q, k, v),
                               {"causal": causal, "key_padding_mask": mask})

    leaves = [p.detach().clone().requires_grad_() for p in params.values()]
    # Fast mode compares the analytic and numerical Jacobians along random directions (u^T J v): one numerical
    # derivative per output direction, not one per input element, which for a variant with thousands of
    # parameters (Linformer's projections, Synthesizer's logits) is the difference between seconds and minutes.
    assert torch.autograd.gradcheck(attend, (q, k, v, *leaves), fast_mode=True)


def test_chunked_kernel_is_exact_across_many_chunks(monkeypatch):
    from variants.kernels import chunked

    monkeypatch.setattr(chunked, "CHUNK_ELEMENTS", 50)  # forces chunks of a single query or two
    module, reference = build_pair("additive", {}, "chunked")
    q, k, v, mask = random_inputs(2, 13, 10, seed=9, padding=True)
    compare(module, reference, (q, k, v), 1e-9, True, mask)


def test_kernel_auto_picks_a_fused_kernel_where_the_variant_allows():
    assert variants.create("dense", num_heads=2, head_dim=8).kernel == "sdpa"
    assert variants.create("relative", num_heads=2, head_dim=8, kind="t5").kernel == "sdpa"
    assert variants.create("relative", num_heads=2, head_dim=8, kind="shaw").kernel == "chunked"
    assert variants.create("additive", num_heads=2, head_dim=8).kernel == "chunked"


def train_step(attn, q, k, v):
    attn(q, k, v, causal=True).sum().backward()


def test_additive_memory_stays_bounded_as_the_sequence_grows(monkeypatch):
    from experiments.speed.memory import cpu_peak_supported, peak_memory_bytes
    from variants.kernels import chunked

    if not cpu_peak_supported():
        pytest.skip("peak resident memory is read from /proc (Linux)")
    monkeypatch.setattr(chunked, "CHUNK_ELEMENTS", 1 << 20)
    attn = variants.create("additive", num_heads=1, head_dim=16, hidden_dim=16)
    assert attn.kernel == "chunked"
    bound = 6 * chunked.CHUNK_ELEMENTS * 4  # a few chunk-sized float32 tensors in flight (24 MiB)
    for length in (1024, 2048):
        q, k, v = (torch.randn(1, 1, length, 16, requires_grad=True) for _ in range(3))
        step = functools.partial(train_step, attn, q, k, v)
        step()  # the first call also pays for one-time set-up (autograd threads, allocator pools)
        peak = peak_memory_bytes(step, torch.device("cpu"))
        whole_intermediate = length * length * 16 * 4  # (seq_q, seq_k, hidden) in float32
        assert peak < bound < whole_intermediate, (length, peak / 2**20)
