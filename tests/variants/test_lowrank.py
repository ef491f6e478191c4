"""The low-rank family: Linformer and Nystromformer against their papers' formulas written out, exactness where
the approximation is exact, padding, and what they refuse (causal attention; Linformer without max_len).

The registry-wide tests (kernels against the reference, gradients, padding) run them too; these pin what is
particular to the family: that the factors are the papers' formulas, not just that two kernels agree."""

import math

import pytest
import torch
from cases import output_and_grads, random_inputs

import variants
from variants.nystromformer import iterative_pinv

HEADS, HEAD_DIM = 2, 8
LOWRANK_CASES = [("linformer", {"rank": 5}), ("linformer", {"rank": 4, "share": "kv"}),
                 ("nystromformer", {"num_landmarks": 4}), ("nystromformer", {"num_landmarks": 3})]


def create(name, options, kernel="auto", max_len=16):
    return variants.create(name, num_heads=HEADS, head_dim=HEAD_DIM, kernel=kernel, max_len=max_len,
                           **options).double()


def test_auto_runs_the_family_on_the_lowrank_kernel():
    for name, options in LOWRANK_CASES:
        module = create(name, options)
        assert module.kernels == ("lowrank", "reference") and module.kernel == "lowrank", (name, options)


@pytest.mark.parametrize("share", ["none", "kv"])
def test_linformer_weights_are_the_papers_formula_written_out(share):
    module = create("linformer", {"rank": 5, "share": share}, max_len=12)
    with torch.no_grad():  # parameters away from their initial values
        for parameter in module.parameters():
            parameter.normal_()
    q, k, v, mask = random_inputs(3, 7, 9, seed=2, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    E = module.key_projection.detach()
    F = E if share == "kv" else module.value_projection.detach()
    assert [name for name, _ in module.named_parameters()] == (["key_projection"] if share == "kv"
                                                              else ["key_projection", "value_projection"])
    expected = torch.zeros(3, HEADS, 7, 9, dtype=torch.float64)
    for b in range(3):
        real = mask[b].double()  # the first 9 of max_len=12 columns, zero where the key is padded
        E_b, F_b = E[:, :9] * real, F[:, :9] * real  # (rank, 9)
        for h in range(HEADS):
            scores = q[b, h] @ (E_b @ k[b, h]).T / math.sqrt(HEAD_DIM)  # (7, rank)
            expected[b, h] = torch.softmax(scores, dim=-1) @ F_b
    out, weights = module(q, k, v, key_padding_mask=mask, return_weights=True)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, expected @ v, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(module(q, k, v, key_padding_mask=mask), expected @ v, rtol=1e-12, atol=1e-12)


def test_linformer_is_initialised_as_the_papers_code():
    module = variants.create("linformer", num_heads=2, head_dim=8, max_len=4096, rank=256)
    bound = math.sqrt(6 / (256 + 4096)) / math.sqrt(2)  # Xavier uniform, gain 1/sqrt(2)
    for projection in (module.key_projection, module.value_projection):
        assert projection.shape == (256, 4096)
        assert projection.abs().max() <= bound and projection.abs().max() > 0.99 * bound
        assert abs(projection.std().item() - bound / math.sqrt(3)) < 0.01 * bound


@pytest.mark.parametrize("lengths", [(7, 7), (6, 9), (9, 5)], ids=lambda s: f"q{s[0]}-k{s[1]}")
def test_nystromformer_with_one_landmark_per_position_is_exact_softmax_attention(lengths):
    seq_q, seq_k = lengths
    module = create("nystromformer", {"num_landmarks": 32, "pinv_iterations": 60})  # 32 > n: one per position
    dense = variants.create("dense", num_heads=HEADS, head_dim=HEAD_DIM, kernel="reference").double()
    q, k, v, mask = random_inputs(3, seq_q, seq_k, seed=seq_q + seq_k, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    for key_padding_mask in (None, mask):
        expected = dense(q, k, v, key_padding_mask=key_padding_mask)
        torch.testing.assert_close(module(q, k, v, key_padding_mask=key_padding_mask), expected, rtol=1e-9, atol=1e-9)
    fewer = create("nystromformer", {"num_landmarks": 3, "pinv_iterations": 60})
    assert not torch.allclose(fewer(q, k, v), dense(q, k, v), atol=1e-3)  # fewer landmarks: an approximation


def softmax_matrices(rows, cols, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = 2 * torch.randn(3, 2, rows, cols, generator=generator, dtype=torch.float64)
    return torch.softmax(logits, dim=-1)


@pytest.mark.parametrize("shape", [(6, 6), (4, 7), (7, 4)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_iterative_pinv_converges_to_torch_linalg_pinv(shape):
    matrix = softmax_matrices(*shape, seed=sum(shape))
    matrix[0, 0, :, 1] = 0.0  # a landmark without real keys: a zero column
    exact = torch.linalg.pinv(matrix)
    errors = [(iterative_pinv(matrix, iterations) - exact).abs().max().item() for iterations in (2, 6, 40)]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-10, errors


def test_iterative_pinv_starts_each_matrix_from_its_own_norms():
    """Per (batch, head) matrix, where the paper's code takes the largest sums over the whole batch tensor:
    an example's result does not depend on the others in its batch."""
    matrix = softmax_matrices(5, 5, seed=0)
    scaled = matrix.clone()
    scaled[1] *= 50.0  # another batch element with far larger sums
    torch.testing.assert_close(iterative_pinv(scaled, 3)[0], iterative_pinv(matrix, 3)[0], rtol=1e-13, atol=0)
    assert torch.equal(iterative_pinv(torch.zeros(2, 4, 4), 6), torch.zeros(2, 4, 4))


def test_nystromformer_landmarks_are_segment_means_over_real_keys_and_an_empty_segment_gets_no_weight():
    module = create("nystromformer", {"num_landmarks": 4})
    q, k, v, _ = random_inputs(2, 10, 10, seed=1, heads=HEADS, head_dim=HEAD_DIM)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[0, 3:5] = False  # segments of 10 positions over 4 landmarks: 0-2, 3-4, 5-7, 8-9; the second is empty
    mask[1, 5] = False
    to_landmarks, _, from_landmarks = module.factors(q, k, mask)
    assert torch.equal(to_landmarks[0, :, :, 1], torch.zeros(HEADS, 10))
    assert (to_landmarks[1] > 0).all()
    assert torch.equal(from_landmarks[~mask[:, None, None, :].expand_as(from_landmarks)],
                       torch.zeros(int((~mask).sum()) * HEADS * 4, dtype=torch.float64))
    # The third landmark of the second example is the mean of its real keys 6 and 7, seen by query 0 as such.
    landmark = k[1, :, 6:8].mean(dim=1)  # (H, d)
    q_landmarks = torch.stack([q[1, :, 0:3].mean(1), q[1, :, 3:5].mean(1), q[1, :, 5:8].mean(1), q[1, :, 8:].mean(1)])
    key_landmarks = torch.stack([k[1, :, 0:3].mean(1), k[1, :, 3:5].mean(1), landmark, k[1, :, 8:].mean(1)])
    logits = torch.einsum("hd,mhd->hm", q[1, :, 0], key_landmarks) / math.sqrt(HEAD_DIM)
    torch.testing.assert_close(to_landmarks[1, :, 0], torch.softmax(logits, dim=-1), rtol=1e-12, atol=1e-12)
    logits = torch.einsum("mhd,hkd->hmk", q_landmarks, k[1]).masked_fill(~mask[1], -math.inf) / math.sqrt(HEAD_DIM)
    torch.testing.assert_close(from_landmarks[1], torch.softmax(logits, dim=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["lowrank", "reference"])
@pytest.mark.parametrize("case", LOWRANK_CASES, ids=lambda c: "-".join([c[0], *map(str, c[1].values())]))
def test_perturbing_padded_keys_and_values_changes_nothing(case, kernel):
    name, options = case
    module = create(name, options, kernel)
    q, k, v, mask = random_inputs(3, 12, 12, seed=3, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    mask[1, 3:9] = False  # whole segments of padding (every landmark count above)
    out, grads = output_and_grads(module, q, k, v, key_padding_mask=mask)
    real = mask[:, None, :, None]
    k2, v2 = torch.where(real, k.detach(), 1e3 * torch.randn_like(k)), torch.where(real, v.detach(), -1e3)
    torch.testing.assert_close(module(q, k2, v2, key_padding_mask=mask), out, rtol=0, atol=1e-12)
    assert torch.equal(out[0], torch.zeros_like(out[0]))  # batch element 0 is all padding
    assert all(torch.isfinite(grad).all() for grad in grads if grad is not None)
    assert torch.equal(grads[1][~real.expand_as(k)], torch.zeros(int((~real).expand_as(k).sum()), dtype=k.dtype))


@pytest.mark.parametrize("case", LOWRANK_CASES, ids=lambda c: "-".join([c[0], *map(str, c[1].values())]))
def test_returned_weights_give_padded_keys_no_weight_and_are_what_the_output_applies(case):
    name, options = case
    module = create(name, options)
    q, k, v, mask = random_inputs(3, 6, 11, seed=8, heads=HEADS, head_dim=HEAD_DIM, padding=True)
    out, weights = module(q, k, v, key_padding_mask=mask, return_weights=True)
    assert weights.shape == (3, HEADS, 6, 11)
    padded = ~mask[:, None, None, :].expand_as(weights)
    assert torch.equal(weights[padded], torch.zeros_like(weights[padded]))
    torch.testing.assert_close(out, weights @ v, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, module(q, k, v, key_padding_mask=mask), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["linformer", "nystromformer"])
def test_causal_attention_is_refused_in_one_sentence(name):
    module = create(name, {})
    q, k, v, _ = random_inputs(1, 4, 4, seed=0, heads=HEADS, head_dim=HEAD_DIM)
    with pytest.raises(ValueError, match=rf"^Variant '{name}' is bidirectional in its paper and has no causal form; "
                                         r"accepted: causal=False\.$"):
        module(q, k, v, causal=True)
    assert not variants.variant_class(name).supports_causal


def test_linformer_without_max_len_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match=r"^Variant 'linformer' sizes its projections by the longest sequence, and "
                                         r"max_len is None; accepted: .*max_len=N") as error:
        variants.create("linformer", num_heads=2, head_dim=8)
    assert "\n" not in str(error.value)
    module = create("linformer", {}, max_len=8)
    q, k, v, _ = random_inputs(1, 4, 9, seed=0, heads=HEADS, head_dim=HEAD_DIM)
    with pytest.raises(ValueError, match=r"^Variant 'linformer' got 9 keys but its projections cover max_len=8 "
                                         r"positions; accepted: at most 8 keys\.$"):
        module(q, k, v)


@pytest.mark.parametrize("name, options, expected", [
    ("linformer", {"rank": 0}, ["'rank'", "0", ">= 1"]),
    ("linformer", {"share": "layer"}, ["'share'", "'layer'", "'none'", "'kv'"]),
    ("nystromformer", {"num_landmarks": 0}, ["'num_landmarks'", "0", ">= 1"]),
    ("nystromformer", {"pinv_iterations": 0}, ["'pinv_iterations'", "0", ">= 1"]),
])
def test_bad_options_are_named(name, options, expected):
    with pytest.raises(variants.OptionError) as error:
        create(name, options)
    assert all(fragment in str(error.value) for fragment in expected), str(error.value)


def test_describe_and_list_name_the_options_and_say_bidirectional():
    assert create("linformer", {}).describe() == "linformer_r64_sharenone"
    assert create("linformer", {"rank": 8, "share": "kv"}).describe() == "linformer_r8_sharekv"
    assert create("nystromformer", {}).describe() == "nystromformer_m32_it6"
    listing = variants.describe_variants().splitlines()
    for name in ("linformer", "nystromformer"):
        start = next(index for index, line in enumerate(listing) if line.startswith(f"{name}: "))
        end = next(index for index in range(start + 1, len(listing)) if not listing[index].startswith(" "))
        block = "\n".join(listing[start + 1 : end])
        for expected in ("approximation: ", "causal: no (bidirectional", "kernels: lowrank, reference"):
            assert f"    {expected}" in block, (name, expected)


@pytest.mark.parametrize("name", ["linformer", "nystromformer"])
def test_the_lowrank_kernel_never_forms_the_n_by_n_weights(name):
    from experiments.speed.memory import cpu_peak_supported, peak_memory_bytes

    if not cpu_peak_supported():
        pytest.skip("peak resident memory is read from /proc (Linux)")
    length = 4096
    module = variants.create(name, num_heads=1, head_dim=16, max_len=length)
    q, k, v = (torch.randn(1, 1, length, 16, requires_grad=True) for _ in range(3))
    def step():
        module(q, k, v).sum().backward()

    step()  # the first call also pays for one-time set-up
    peak = peak_memory_bytes(step, torch.device("cpu"))
    assert peak < length * length * 4 / 4, peak / 2**20  # a quarter of one float32 n x n matrix (16 MiB)
