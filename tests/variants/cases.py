"""What the variant tests iterate over: every registered variant, plus options that change its math."""

import contextlib

import pytest
import torch

import variants
from variants.kernels import KERNELS

# The normalisers other than the softmax (`variants.normalisers`), each tested with dense scores, a local window
# and two sparse layouts (BigBird's differs per head), and some with a learned scale, a position bias, a per-pair
# score and additive scoring.
NORMALISERS = ("sigmoid", "sparsemax", "entmax15", "entmax_adaptive")
BIGBIRD = {"pattern": "bigbird", "block_size": 3, "num_global_blocks": 1, "num_random_blocks": 2, "seed": 7}
LONGFORMER = {"pattern": "longformer", "window": 5, "num_global": 2}

# Non-default options worth testing on their own; every registered variant is also tested as created
# with no options, so a new variant is covered the moment it is registered.
EXTRA_OPTIONS = {
    "dense": [{"normaliser": normaliser} for normaliser in NORMALISERS],
    "temperature": [{"temperature": 0.5}, {"temperature": 2.0, "learnable": True},
                    {"temperature": 2.0, "learnable": True, "normaliser": "entmax_adaptive"}],
    "relative": [{"kind": "shaw", "max_distance": 3}, {"kind": "t5", "num_buckets": 8, "max_distance": 12},
                 {"kind": "rope"}, {"kind": "t5", "num_buckets": 8, "max_distance": 12, "normaliser": "sigmoid"}],
    "additive": [{"hidden_dim": 5}, {"hidden_dim": 5, "normaliser": "sparsemax"}],
    "local": [{"window": 1}, {"window": 20}, *({"window": 5, "normaliser": normaliser} for normaliser in NORMALISERS)],
    "sparse": [{"pattern": "strided", "stride": 6}, {"pattern": "fixed", "stride": 8, "summary": 3}, LONGFORMER,
               BIGBIRD, *({**BIGBIRD, "normaliser": normaliser} for normaliser in NORMALISERS),
               {**LONGFORMER, "normaliser": "entmax15"}],
    "qknorm": [{"norm": "rms"}],
    "softcap": [{"cap": 2.0}],
    "ssmax": [{"length_scale": 1.5, "fixed": True}, {"normaliser": "entmax15"}],
    "linformer": [{"rank": 5}, {"rank": 3, "share": "kv"}],
    "nystromformer": [{"num_landmarks": 4}, {"num_landmarks": 5, "pinv_iterations": 3}],
    "linear": [{"feature_map": "relu"}, {"feature_map": "identity"}],
    "performer": [{"num_features": 32, "orthogonal": False}, {"num_features": 12, "redraw": 0}],
    "based": [{"window_every": 0, "feature_dim": 3}, {"window_every": 1, "window": 10}],  # 1: every block a window
    "reformer": [{"num_hashes": 3, "num_buckets": 4, "chunk_size": 3},
                 {"num_hashes": 1, "num_buckets": 2, "chunk_size": 5}],
    "sinkhorn": [{"block_size": 3, "sinkhorn_iters": 2, "temperature": 0.5}, {"block_size": 4, "sinkhorn_iters": 0}],
    "synthesizer": [{"kind": "random"}, {"kind": "random", "fixed": True}, {"kind": "factorized_dense", "factor": 3},
                    {"kind": "factorized_random", "rank": 4}],
}

HEADS, HEAD_DIM = 3, 8
# The longest sequence every module is created for (Linformer, Sinkhorn and Synthesizer size parameters by it): the
# longest the generic tests give (41), so shorter calls run the shorter-than-max_len path, and no more (the gradient
# check perturbs every entry of the random Synthesizer's MAX_LEN x MAX_LEN tables).
MAX_LEN = 41
# Self-attention only (the keys sit at the queries' positions): tested on as many keys as queries, and checked to
# refuse other lengths (tests/variants/test_lra_variants.py).
EQUAL_LENGTHS_ONLY = ("reformer", "sinkhorn")
# Queries the gradient test gives a variant whose parameters take part only beyond some length (6 for the others):
# the Sinkhorn sorting network sorts blocks, of 16 positions by default, so it needs more than one.
GRADIENT_TEST_QUERIES = {"sinkhorn": 40}
QUERIES_PER_CHUNK = 3  # divides none of the test lengths but 9: every chunked call crosses chunk boundaries
BATCHES_PER_CHUNK = 2  # divides no odd batch: the additive kernel's chunks cross batch elements too


def force_small_chunks(monkeypatch) -> None:
    """The chunked kernel in chunks of QUERIES_PER_CHUNK queries, the additive kernel in chunks of as many queries
    and BATCHES_PER_CHUNK batch elements, the blocked kernel one query block per chunk and the linear kernel's
    causal chunks of QUERIES_PER_CHUNK positions, whatever the sizes: a bug that shows only across chunks
    (forward, or the recomputed backward; the running state of linear attention) then shows at test sizes, which
    would otherwise fit in one chunk."""
    from variants.kernels import additive, blocked, chunked, linear

    monkeypatch.setattr(chunked, "queries_per_chunk", lambda call: QUERIES_PER_CHUNK)
    monkeypatch.setattr(additive, "chunk_sizes", lambda call: (BATCHES_PER_CHUNK, QUERIES_PER_CHUNK))
    monkeypatch.setattr(blocked, "CHUNK_ELEMENTS", 1)
    monkeypatch.setattr(linear, "CHUNK", QUERIES_PER_CHUNK)


def create_case(name: str, options: dict, kernel: str = "auto", *, heads=HEADS, head_dim=HEAD_DIM, max_len=MAX_LEN):
    """A case's module as the generic tests create it: for sequences of at most `max_len` positions."""
    return variants.create(name, num_heads=heads, head_dim=head_dim, kernel=kernel, max_len=max_len, **options)


def skip_if_bidirectional(name: str, causal: bool) -> None:
    """Skip a causal case of a variant that has no causal form (Linformer, Nystromformer refuse causal=True)."""
    if causal and not variants.variant_class(name).supports_causal:
        pytest.skip(f"{name} is bidirectional in its paper and has no causal form")


def variant_cases() -> list[tuple[str, dict]]:
    cases = []
    for name in variants.list_variants():
        cases.append((name, {}))
        cases.extend((name, options) for options in EXTRA_OPTIONS.get(name, []))
    return cases


def case_id(case: tuple[str, dict]) -> str:
    name, options = case
    return "-".join([name] + [f"{key}={value}" for key, value in options.items()])


def key_length(name: str, seq_q: int, seq_k: int) -> int:
    """The number of keys a test gives the variant: seq_k, or seq_q for a variant that takes equal lengths only."""
    return seq_q if name in EQUAL_LENGTHS_ONLY else seq_k


def unread_inputs(name: str, options: dict) -> set[str]:
    """Of q and k, those the variant's weights are not computed from (they get no gradient): Reformer's keys are
    its normalised queries, the dense Synthesizers read the queries alone and the random ones neither."""
    if name == "reformer":
        return {"k"}
    if name == "synthesizer":
        return {"k"} if options.get("kind", "dense").endswith("dense") else {"q", "k"}
    return set()


def trains_on_cpu(kernel: str) -> bool:
    """Whether a kernel runs forward and backward on this CPU (flex is forward only there, and xformers
    needs CUDA): the CPU tests check the others here; tests/variants/test_flex.py checks flex's forward."""
    return KERNELS[kernel].runs_on(torch.device("cpu"))


def kernel_cases() -> list[tuple[str, dict, str]]:
    """(variant, options, kernel) for every kernel the variant lists that trains on CPU, other than the
    reference."""
    cases = []
    for name, options in variant_cases():
        module = create_case(name, options)
        cases.extend((name, options, kernel) for kernel in module.kernels
                     if kernel != "reference" and trains_on_cpu(kernel))
    return cases


def build_pair(name: str, options: dict, kernel: str, dtype=torch.float64, heads=HEADS, head_dim=HEAD_DIM,
               max_len=MAX_LEN):
    """Two modules with the same parameters: one on `kernel`, one on the reference kernel."""
    torch.manual_seed(0)
    module = create_case(name, options, kernel, heads=heads, head_dim=head_dim, max_len=max_len).to(dtype)
    reference = create_case(name, options, "reference", heads=heads, head_dim=head_dim, max_len=max_len).to(dtype)
    reference.load_state_dict(module.state_dict())
    return module, reference


def random_inputs(batch, seq_q, seq_k, *, seed, dtype=torch.float64, heads=HEADS, head_dim=HEAD_DIM,
                  padding=False):
    """Fresh q, k, v (requiring grad) and, with padding, a key mask with a fully padded batch element
    and a padded first key (so that, when causal, some queries see no key at all)."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, generator=generator, dtype=dtype)
    k = torch.randn(batch, heads, seq_k, head_dim, generator=generator, dtype=dtype)
    v = torch.randn(batch, heads, seq_k, head_dim, generator=generator, dtype=dtype)
    mask = None
    if padding:
        mask = torch.rand(batch, seq_k, generator=generator) > 0.3
        mask[:, 0] = False
        mask[0] = False
    return q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), mask


def output_and_grads(module, q, k, v, *, seed=1, **kwargs):
    """The output and the gradients of a random projection of it w.r.t. q, k, v and every parameter."""
    out = module(q, k, v, **kwargs)
    return out, gradients(module, out, q, k, v, seed=seed)


def gradients(module, out, q, k, v, *, seed=1):
    """The gradients of a random projection of `out` w.r.t. q, k, v and every parameter of `module`."""
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    grad_out = grad_out.to(out.device, out.dtype)
    return torch.autograd.grad(out, [q, k, v, *module.parameters()], grad_out, allow_unused=True)


def assert_close_relative(actual, expected, rtol, what=""):
    """|actual - expected| <= rtol * max|expected| elementwise: relative to the tensor's scale. Inputs and
    intermediates are O(1), so a tensor that is zero by structure (the q gradient of a window of 1, a sum
    that cancels) is held to rtol * 0.1, rounding in its O(1) intermediates being what remains."""
    scale = expected.abs().max().item() if expected.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=rtol * max(scale, 0.1), msg=lambda m: f"{what}: {m}")


# bfloat16 under autocast: a kernel's error against the float64 reference is at most twice that of the reference
# formula run the same way, plus BF16_FLOOR of the tensor's scale (FlashAttention's own criterion).
BF16_FLOOR = 1e-2


def errors(module, reference, q, k, v, mask, autocast_dtype=None):
    """Per tensor (output, then the gradients of q, k, v and every parameter): |module - reference|.max()
    and the reference's largest magnitude; the reference runs in float64 on the same values, `module` runs its
    forward under autocast to `autocast_dtype` on q's device where one is given, and backward outside it, as a
    training step runs them."""
    autocast = torch.autocast(q.device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    with autocast:
        out = module(q, k, v, causal=module.supports_causal, key_padding_mask=mask)
    grads = gradients(module, out, q, k, v)
    ref_inputs = [tensor.detach().double().requires_grad_() for tensor in (q, k, v)]
    ref_out, ref_grads = output_and_grads(reference, *ref_inputs, causal=module.supports_causal,
                                          key_padding_mask=mask)
    assert torch.isfinite(out).all()
    assert [grad is None for grad in grads] == [ref is None for ref in ref_grads]
    pairs = [(out, ref_out)] + [(grad, ref) for grad, ref in zip(grads, ref_grads, strict=True) if ref is not None]
    return [((actual.double() - expected).abs().max().item(), expected.abs().max().item())
            for actual, expected in pairs]


def assert_as_close_as_the_reference_formula(module, naive, reference, q, k, v, mask):
    """`module` under bfloat16 autocast against the float64 `reference`, held to the error of `naive` (the same
    parameters on the reference kernel) under the same autocast, on bfloat16 q, k and v."""
    kernel_errors = errors(module, reference, q, k, v, mask, torch.bfloat16)
    naive_errors = errors(naive, reference, q, k, v, mask, torch.bfloat16)
    for index, ((error, scale), (naive_error, _)) in enumerate(zip(kernel_errors, naive_errors, strict=True)):
        assert error <= 2 * naive_error + BF16_FLOOR * max(scale, 0.1), (index, error, naive_error, scale)
