"""Study A's other normalisers: their statistics against hand computations, their Jacobians against autograd, and
their rows in the table on the softmax rows' draws."""

import math

import pytest
import torch

from experiments.saturation import normaliser_weights
from experiments.saturation import tables as saturation_tables
from experiments.saturation.tables import COLUMNS, init_stats, init_table
from variants import normalisers

OTHERS = ("sigmoid", "sparsemax", "entmax15", "entmax_adaptive")


def _statistics(logits, normaliser, alphas=None):
    """Each statistic of each row of hand-written float64 logits (scale 1, as init_stats computes them)."""
    values = saturation_tables._per_sample(torch.tensor(logits, dtype=torch.float64), 1.0, normaliser, alphas)
    return {name: value.tolist() for name, value in values.items()}


def test_sparsemax_of_hand_computed_rows_has_the_zeros_one_can_count():
    # [1, 0, -1]: only the first key clears the threshold tau = 0, so p = [1, 0, 0]: two zeros of three keys.
    # [0.5, 0, -0.5]: tau = -0.25, p = [0.75, 0.25, 0]: one zero; the Jacobian is the projection onto the
    # support's sum-zero line, norm 1.
    rows = _statistics([[1.0, 0.0, -1.0], [0.5, 0.0, -0.5]], "sparsemax")
    assert rows["zero_fraction"] == [2 / 3, 1 / 3]
    assert rows["max_weight"] == [1.0, 0.75]
    assert rows["entropy_over_log_n"] == pytest.approx(
        [0.0, -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) / math.log(3)], abs=1e-15)
    assert rows["jacobian_norm"] == pytest.approx([0.0, 1.0], abs=1e-15)
    assert rows["frac_grad_below_1e-10"] == [1.0, 1 / 3]  # a one-key support passes no gradient at all
    assert rows["weight_sum"] == [1.0, 1.0]


def test_sigmoid_reports_the_entropy_of_its_weights_divided_by_their_sum_and_its_raw_largest_weight():
    # Two logits 0: each weight sigmoid(0 - log 2) = 1/3, a row summing to 2/3; divided by that sum, uniform.
    rows = _statistics([[0.0, 0.0]], "sigmoid")
    assert rows["max_weight"] == pytest.approx([1 / 3], rel=1e-15)
    assert rows["weight_sum"] == pytest.approx([2 / 3], rel=1e-15)
    assert rows["entropy_over_log_n"] == pytest.approx([1.0], rel=1e-15)
    assert rows["jacobian_norm"] == pytest.approx([2 / 9], rel=1e-15)  # diag(w (1 - w))
    assert rows["zero_fraction"] == [0.0]


@pytest.mark.parametrize("normaliser", normaliser_weights.MEASURED)
def test_the_jacobian_norm_and_own_derivatives_are_those_autograd_gives(normaliser):
    generator = torch.Generator().manual_seed(4)
    sharpness = torch.tensor([0.3, 1, 2, 4, 8, 16.0], dtype=torch.float64)[:, None]  # flat rows to peaked ones
    logits = torch.randn(6, 7, generator=generator, dtype=torch.float64) * sharpness
    alphas = normaliser_weights.initial_alphas(0, 6, 6) if normaliser == "entmax_adaptive" else None
    weights = normaliser_weights.weights(normaliser, logits, alphas)
    norms = normaliser_weights.jacobian_norm(weights, normaliser, alphas)
    derivatives = normaliser_weights.own_derivatives(normaliser, weights, alphas)
    for row in range(len(logits)):
        alpha = None if alphas is None else alphas[row : row + 1]

        def row_weights(x, alpha=alpha):
            return normaliser_weights.weights(normaliser, x[None], alpha)[0]

        full = torch.autograd.functional.jacobian(row_weights, logits[row])  # (n, n)
        assert norms[row].item() == pytest.approx(torch.linalg.matrix_norm(full, ord=2).item(), abs=1e-9), row
        assert derivatives[row].tolist() == pytest.approx(full.diagonal().tolist(), abs=1e-9), row
    if normaliser in ("sparsemax", "entmax15"):
        assert (weights == 0).any()  # the sharper rows leave keys out, so the test sees the zero derivatives too


def test_entmax_adaptive_starts_at_the_quantiles_of_its_heads_initial_alpha():
    alphas = normaliser_weights.initial_alphas(0, 3, 3)
    expected = normalisers.adaptive_alpha(torch.special.ndtri(torch.tensor([1 / 6, 1 / 2, 5 / 6], dtype=torch.float64)))
    assert alphas.tolist() == expected.tolist() and alphas[1].item() == 1.5  # the median head: 1.5-entmax
    assert normaliser_weights.initial_alphas(1, 2, 3).tolist() == alphas[1:].tolist()  # chunks see their own
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    at_median = normaliser_weights.weights("entmax_adaptive", logits, torch.full((4,), 1.5, dtype=torch.float64))
    assert (at_median - normaliser_weights.weights("entmax15", logits)).abs().max().item() < 1e-12


@pytest.mark.parametrize("normaliser", OTHERS)
def test_a_normalisers_row_does_not_depend_on_the_chunk_size(normaliser, monkeypatch):
    arguments = {"scale": 1.0, "dtype": torch.float64, "samples": 10, "seed": 5, "normaliser": normaliser}
    first = init_stats(16, 32, **arguments)
    monkeypatch.setattr(saturation_tables, "CHUNK_ELEMENTS", 3 * 32)  # chunks of 3 samples
    assert init_stats(16, 32, **arguments) == first


def test_on_the_same_peaked_draws_softmax_has_no_exact_zero_and_the_sparse_normalisers_many():
    rows = {name: init_stats(64, 32, scale=1.0, dtype=torch.float64, samples=32, seed=2, normaliser=name)
            for name in normaliser_weights.MEASURED}
    assert {row["qk_variance"] for row in rows.values()} == {rows["softmax"]["qk_variance"]}  # the same draws
    assert rows["softmax"]["zero_fraction"] == rows["sigmoid"]["zero_fraction"] == 0.0
    for name in ("sparsemax", "entmax15", "entmax_adaptive"):
        assert rows[name]["zero_fraction"] > 0.5, name
        assert rows[name]["weight_sum"] == pytest.approx(1.0, abs=1e-12)
    # sparsemax (alpha 2) is sparser than 1.5-entmax on the same rows
    assert rows["sparsemax"]["zero_fraction"] > rows["entmax15"]["zero_fraction"]


def test_softmax_zeros_in_float32_are_underflow_that_float64_does_not_have():
    single, double = (init_stats(1024, 256, scale=1.0, dtype=dtype, samples=16, seed=0)
                      for dtype in (torch.float32, torch.float64))
    assert single["zero_fraction"] > 0 and double["zero_fraction"] == 0.0


def test_init_table_adds_unscaled_and_scaled_rows_of_each_normaliser_at_unit_variance_on_the_same_draws():
    table = init_table([4, 16], [8], [2.0], samples=8, seed=1, variances=[(0.5, 0.5)], normalisers=OTHERS,
                       quiet=True)
    others = table[table["normaliser"] != "softmax"]
    keys = set(zip(others["normaliser"], others["normalisation"], others["head_dim"], others["dtype"], strict=True))
    assert len(others) == len(keys) == 4 * 2 * 2 * 2 == len(table) - (2 * 3 * 2 + 2 * 2 * 2)
    assert set(others["q_variance"]) == set(others["k_variance"]) == {1.0}
    for _, row in others[others["dtype"] == "float64"].iterrows():
        scale = 1.0 if row["normalisation"] == "unscaled" else 1 / math.sqrt(row["head_dim"])
        direct = init_stats(row["head_dim"], 8, scale=scale, dtype=torch.float64, samples=8, seed=1,
                            normaliser=row["normaliser"])
        assert row[list(COLUMNS[2:])].tolist() == [direct[name] for name in COLUMNS[2:]]


def test_an_unknown_normaliser_is_refused_in_one_sentence():
    for call in (lambda: init_stats(8, 4, scale=1.0, dtype=torch.float64, samples=2, seed=0, normaliser="relu"),
                 lambda: init_table([8], [4], [], samples=2, seed=0, normalisers=["relu"], quiet=True)):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == ("normaliser 'relu' is not accepted; accepted: softmax, sigmoid, sparsemax, "
                                    "entmax15, entmax_adaptive.")
