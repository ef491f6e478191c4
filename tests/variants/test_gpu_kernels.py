"""Every kernel against the float64 reference on CUDA: outputs and gradients, in float32 and bfloat16.

Marked gpu: skipped without CUDA (tests/conftest.py); `make gpu-check` runs them. Fresh random inputs:
batch 2, 2 heads of 16 (flex's smallest head_dim), 200 queries and keys (two tiles of 128, the second
partial), causal (bidirectional for a variant without a causal form), with a key padding mask that leaves a
batch element and some rows without keys (xformers takes no padding mask: it runs without one). Every kernel
a variant lists that trains on CUDA here is checked; xformers only where it is installed.

Tolerances, per tensor, relative to its largest magnitude (`assert_close_relative`'s scale):
- float32: |kernel - reference| <= FLOAT32_TOLERANCE = 1e-4 of the scale. The fused kernels reorder
  sums (online softmax, split reductions, the atomic adds of FlexAttention's backward), which costs a
  few float32 ulps per term over 200 keys; matmuls run in IEEE float32 (PyTorch's default: no TF32).
- bfloat16, under autocast with float32 parameters as in training: q, k and v are drawn in bfloat16
  and the reference sees those same values in float64, so only the kernel's arithmetic is measured. Its
  error must be at most twice that of the reference formula (the reference kernel) run the same way in
  bfloat16, plus BF16_FLOOR = 1e-2 of the scale: FlashAttention's own criterion, which holds a fused
  kernel to the precision the naive formula gets in the same dtype.
FlexAttention compiles a graph per score, mask and dtype, so bfloat16 is checked on the variants that
stand for each kind of score and layout (BF16_CASES) rather than on every option.
"""

import pytest
import torch
from cases import (
    assert_as_close_as_the_reference_formula,
    build_pair,
    case_id,
    create_case,
    errors,
    random_inputs,
    variant_cases,
)

from experiments.run.config import ModelConfig
from experiments.run.model import Transformer
from experiments.run.train import scored_loss
from variants.kernels import KERNELS

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
HEADS, HEAD_DIM, SEQ = 2, 16, 200
FLOAT32_TOLERANCE = 1e-4
BF16_CASES = {"dense", "relative-kind=t5-num_buckets=8-max_distance=12", "local-window=20",
              "sparse-pattern=bigbird-block_size=3-num_global_blocks=1-num_random_blocks=2-seed=7", "additive"}


def gpu_cases() -> list[tuple[str, dict, str]]:
    cases = []
    for name, options in variant_cases():
        module = create_case(name, options, heads=HEADS, head_dim=HEAD_DIM, max_len=SEQ)
        cases.extend((name, options, kernel) for kernel in module.kernels
                     if kernel != "reference" and KERNELS[kernel].runs_on(CUDA))
    return cases


CASES = gpu_cases()


def kernel_id(case):
    return f"{case_id(case[:2])}-{case[2]}"


def inputs_on_cuda(kernel: str, dtype: torch.dtype):
    q, k, v, mask = random_inputs(2, SEQ, SEQ, seed=11, heads=HEADS, head_dim=HEAD_DIM, padding=kernel != "xformers",
                                  dtype=dtype)
    q, k, v = (tensor.detach().to(CUDA).requires_grad_() for tensor in (q, k, v))
    return q, k, v, None if mask is None else mask.to(CUDA)


@pytest.mark.parametrize("case", CASES, ids=kernel_id)
def test_kernel_on_cuda_in_float32_matches_the_float64_reference(case):
    name, options, kernel = case
    module, reference = build_pair(name, options, kernel, dtype=torch.float32, heads=HEADS, head_dim=HEAD_DIM,
                                   max_len=SEQ)
    module, reference = module.to(CUDA), reference.double().to(CUDA)
    assert module.kernel == kernel
    for index, (error, scale) in enumerate(errors(module, reference, *inputs_on_cuda(kernel, torch.float32))):
        assert error <= FLOAT32_TOLERANCE * max(scale, 0.1), (index, error, scale)


@pytest.mark.parametrize("case", [case for case in CASES if case_id(case[:2]) in BF16_CASES], ids=kernel_id)
def test_kernel_on_cuda_in_bfloat16_is_as_close_to_float64_as_the_seeds_formula_in_bfloat16(case):
    name, options, kernel = case
    module, reference = build_pair(name, options, kernel, dtype=torch.float32, heads=HEADS, head_dim=HEAD_DIM,
                                   max_len=SEQ)
    naive, _ = build_pair(name, options, "reference", dtype=torch.float32, heads=HEADS, head_dim=HEAD_DIM,
                          max_len=SEQ)
    module, naive, reference = module.to(CUDA), naive.to(CUDA), reference.double().to(CUDA)
    q, k, v, mask = inputs_on_cuda(kernel, torch.bfloat16)
    assert_as_close_as_the_reference_formula(module, naive, reference, q, k, v, mask)


def test_flex_compiles_once_and_reuses_its_graph_across_batches():
    from torch._dynamo.utils import counters

    module, _ = build_pair("local", {"window": 20}, "flex", dtype=torch.float32, heads=HEADS, head_dim=HEAD_DIM)
    module = module.to(CUDA)
    q, k, v, _ = inputs_on_cuda("flex", torch.float32)
    module(q, k, v, causal=True).sum().backward()
    graphs = counters["stats"]["unique_graphs"]
    for seed in range(3):  # new batches of the same shape: no new graph
        generator = torch.Generator(device=CUDA).manual_seed(seed)
        q2, k2, v2 = (torch.randn(q.shape, device=CUDA, generator=generator, requires_grad=True) for _ in range(3))
        module(q2, k2, v2, causal=True).sum().backward()
    assert counters["stats"]["unique_graphs"] == graphs


@pytest.mark.parametrize("variant", ["dense", "local"])
def test_a_training_step_on_cuda_never_waits_for_the_device(variant):
    """Forward under bf16 autocast, loss, backward, clipping and the optimiser step, as the loop runs
    them (data comes from the task, outside this check), with CUDA's sync debug mode set to raise."""
    config = ModelConfig(dim=64, depth=2, heads=4)
    model = Transformer(config, vocab_size=16, num_classes=8, max_len=256, variant=variant,
                        variant_options={}, kernel="auto").to(CUDA)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs = torch.randint(16, (4, 256), device=CUDA)
    targets = torch.randint(8, (4, 256), device=CUDA).masked_fill(torch.rand(4, 256, device=CUDA) < 0.5, -100)
    window = torch.zeros(3, dtype=torch.float64, device=CUDA)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
            loss = scored_loss(logits, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        window.add_(torch.stack([loss.detach().double(), grad_norm.double(), (targets != -100).sum().double()]))

    step()  # the first step builds caches (block masks, compiled kernels) and may wait for the device
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(window).all()
