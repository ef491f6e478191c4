"""Every kernel that trains on the CPU, under CPU autocast to bfloat16 (`train.precision=bf16` on a CPU), against
the float64 reference: outputs and gradients, held to the error of the reference formula run the same way
(`cases.assert_as_close_as_the_reference_formula`, the criterion tests/variants/test_gpu_kernels.py applies on CUDA).

Fresh random inputs: batch 2, the cases' heads, MAX_LEN queries and keys, causal where the variant has a causal
form, with a key padding mask that leaves a batch element and some rows without keys; q, k and v are drawn in
bfloat16 and the reference sees those same values in float64, parameters stay float32 as in training."""

import pytest
import torch
from cases import (
    MAX_LEN,
    assert_as_close_as_the_reference_formula,
    build_pair,
    case_id,
    create_case,
    key_length,
    random_inputs,
    trains_on_cpu,
    variant_cases,
)


def cpu_cases() -> list[tuple[str, dict, str]]:
    """(variant, options, kernel) for every kernel the variant lists that trains on this CPU, the reference too."""
    return [(name, options, kernel) for name, options in variant_cases()
            for kernel in create_case(name, options).kernels if trains_on_cpu(kernel)]


def kernel_id(case):
    return f"{case_id(case[:2])}-{case[2]}"


@pytest.mark.parametrize("case", cpu_cases(), ids=kernel_id)
def test_kernel_on_cpu_in_bfloat16_is_as_close_to_float64_as_the_reference_formula_in_bfloat16(case):
    name, options, kernel = case
    module, reference = build_pair(name, options, kernel, dtype=torch.float32)
    naive, _ = build_pair(name, options, "reference", dtype=torch.float32)
    q, k, v, mask = random_inputs(2, MAX_LEN, key_length(name, MAX_LEN, MAX_LEN), seed=11, dtype=torch.bfloat16,
                                  padding=True)
    assert_as_close_as_the_reference_formula(module, naive, reference.double(), q, k, v, mask)
