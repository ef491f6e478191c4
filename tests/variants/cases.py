"""What the variant tests iterate over: every registered variant, plus options that change its math."""

import torch

import variants
from variants.kernels import KERNELS

# Non-default options worth testing on their own; every registered variant is also tested as created
# with no options, so a new variant is covered the moment it is registered.
EXTRA_OPTIONS = {
    "temperature": [{"temperature": 0.5}, {"temperature": 2.0, "learnable": True}],
    "relative": [{"kind": "shaw", "max_distance": 3}, {"kind": "t5", "num_buckets": 8, "max_distance": 12},
                 {"kind": "rope"}],
    "additive": [{"hidden_dim": 5}],
    "local": [{"window": 1}, {"window": 20}],
    "sparse": [{"pattern": "strided", "stride": 6}, {"pattern": "fixed", "stride": 8, "summary": 3},
               {"pattern": "longformer", "window": 5, "num_global": 2},
               {"pattern": "bigbird", "block_size": 3, "num_global_blocks": 1, "num_random_blocks": 2, "seed": 7}],
    "qknorm": [{"norm": "rms"}],
    "softcap": [{"cap": 2.0}],
    "ssmax": [{"length_scale": 1.5, "fixed": True}],
    "reformer": [{"num_hashes": 3, "num_buckets": 4, "chunk_size": 3},
                 {"num_hashes": 1, "num_buckets": 2, "chunk_size": 5}],
    "sinkhorn": [{"block_size": 3, "sinkhorn_iters": 2, "temperature": 0.5}, {"block_size": 4, "sinkhorn_iters": 0}],
    "synthesizer": [{"kind": "random"}, {"kind": "random", "fixed": True}, {"kind": "factorized_dense", "factor": 3},
                    {"kind": "factorized_random", "rank": 4}],
}
# Variants that size their parameters by the longest sequence (`variants.create`'s max_len) are built for MAX_LEN
# positions, the longest the tests here give them (no more: the gradient check perturbs every entry of the
# random Synthesizer's MAX_LEN x MAX_LEN tables): `variant_cases` passes max_len with their options.
MAX_LEN = 41
SIZED_BY_MAX_LEN = ("sinkhorn", "synthesizer")
# Self-attention only (the keys sit at the queries' positions): tested on as many keys as queries, and checked to
# refuse other lengths (tests/variants/test_lra_variants.py).
EQUAL_LENGTHS_ONLY = ("reformer", "sinkhorn")
# A query sees its own key only when it has no other (Reformer's rule): the change of the last position alone
# does not reach any output.
OWN_KEY_ONLY_ALONE = ("reformer",)
# Queries the gradient test gives a variant whose parameters take part only beyond some length (6 for the others):
# the Sinkhorn sorting network sorts blocks, of 16 positions by default, so it needs more than one.
GRADIENT_TEST_QUERIES = {"sinkhorn": 40}

HEADS, HEAD_DIM = 3, 8
QUERIES_PER_CHUNK = 3  # divides none of the test lengths but 9: every chunked call crosses chunk boundaries


def force_small_chunks(monkeypatch) -> None:
    """The chunked kernel in chunks of QUERIES_PER_CHUNK queries and the blocked kernel one query block per
    chunk, whatever the sizes: a bug that shows only across chunks (forward, or the recomputed backward)
    then shows at test sizes, which would otherwise fit in one chunk."""
    from variants.kernels import blocked, chunked

    monkeypatch.setattr(chunked, "queries_per_chunk", lambda call: QUERIES_PER_CHUNK)
    monkeypatch.setattr(blocked, "CHUNK_ELEMENTS", 1)


def variant_cases() -> list[tuple[str, dict]]:
    cases = []
    for name in variants.list_variants():
        sized = {"max_len": MAX_LEN} if name in SIZED_BY_MAX_LEN else {}
        cases.append((name, sized))
        cases.extend((name, {**sized, **options}) for options in EXTRA_OPTIONS.get(name, []))
    return cases


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


def case_id(case: tuple[str, dict]) -> str:
    name, options = case
    return "-".join([name] + [f"{key}={value}" for key, value in options.items()])


def trains_on_cpu(kernel: str) -> bool:
    """Whether a kernel runs forward and backward on this CPU (flex is forward only there, and xformers
    needs CUDA): the CPU tests check the others here; tests/variants/test_flex.py checks flex's forward."""
    return KERNELS[kernel].runs_on(torch.device("cpu"))


def kernel_cases() -> list[tuple[str, dict, str]]:
    """(variant, options, kernel) for every kernel the variant lists that trains on CPU, other than the
    reference."""
    cases = []
    for name, options in variant_cases():
        module = variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, **options)
        cases.extend((name, options, kernel) for kernel in module.kernels
                     if kernel != "reference" and trains_on_cpu(kernel))
    return cases


def build_pair(name: str, options: dict, kernel: str, dtype=torch.float64, heads=HEADS, head_dim=HEAD_DIM):
    """Two modules with the same parameters: one on `kernel`, one on the reference kernel."""
    torch.manual_seed(0)
    module = variants.create(name, num_heads=heads, head_dim=head_dim, kernel=kernel, **options).to(dtype)
    reference = variants.create(name, num_heads=heads, head_dim=head_dim, kernel="reference", **options).to(dtype)
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
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    grad_out = grad_out.to(out.device, out.dtype)
    inputs = [q, k, v, *module.parameters()]
    grads = torch.autograd.grad(out, inputs, grad_out, allow_unused=True)
    return out, grads


def assert_close_relative(actual, expected, rtol, what=""):
    """|actual - expected| <= rtol * max|expected| elementwise: relative to the tensor's scale. Inputs and
    intermediates are O(1), so a tensor that is zero by structure (the q gradient of a window of 1, a sum
    that cancels) is held to rtol * 0.1, rounding in its O(1) intermediates being what remains."""
    scale = expected.abs().max().item() if expected.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=rtol * max(scale, 0.1), msg=lambda m: f"{what}: {m}")
