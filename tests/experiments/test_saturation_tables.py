"""The saturation study's numbers against closed forms and against independent recomputations.

Monte-Carlo estimates are held to 5 of their reported standard errors; exact helpers to 1e-12 or exactly.
"""

import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
import torch

import variants
from experiments.saturation import tables as saturation
from experiments.saturation.normaliser_weights import jacobian_norm
from experiments.saturation.tables import (
    COLUMNS,
    FADING_COLUMNS,
    entropy,
    fading_table,
    fading_vectors,
    init_stats,
    init_table,
)

MONTE_CARLO = ("qk_variance", "max_weight", "frac_max_above_0.99", "entropy_over_log_n", "jacobian_norm",
               "frac_grad_below_1e-10", "zero_fraction", "weight_sum")


def _dot_products(head_dim, num_keys, samples, seed, dtype):
    """The draws as the module documents them: per sample, q (float64), then n standard normals; q.k = |q| z."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(samples):
        query = torch.randn(head_dim, generator=generator, dtype=torch.float64)
        normals = torch.randn(num_keys, generator=generator, dtype=torch.float64)
        rows.append(query.to(dtype).norm() * normals.to(dtype))
    return torch.stack(rows)  # (samples, num_keys)


def _naive_statistics(dot_products, scale, dtype):
    """Each statistic per sample, the plain way: full Jacobian matrices and eigvalsh, p log p over p > 0."""
    weights = torch.softmax(scale * dot_products.to(dtype), dim=-1)
    num_keys = weights.shape[-1]
    largest = weights.max(dim=-1).values
    logs = torch.where(weights > 0, weights.log(), torch.zeros_like(weights))
    wide = weights.double()
    jacobians = torch.diag_embed(wide) - wide.unsqueeze(-1) * wide.unsqueeze(-2)  # (samples, n, n)
    derivatives = weights * (1 - weights)
    return {"qk_variance": (dot_products.double() ** 2).mean(dim=-1),
            "max_weight": largest.double(),
            "frac_max_above_0.99": (largest > 0.99).double(),
            "entropy_over_log_n": (-(weights * logs).sum(dim=-1) / math.log(num_keys)).double(),
            "jacobian_norm": torch.linalg.eigvalsh(jacobians).amax(dim=-1),
            "frac_grad_below_1e-10": (derivatives < 1e-10).double().mean(dim=-1),
            "zero_fraction": (weights == 0).double().mean(dim=-1), "weight_sum": weights.sum(dim=-1).double()}


@pytest.mark.parametrize("head_dim", [16, 64, 256])
def test_qk_variance_estimates_head_dim_within_five_standard_errors(head_dim):
    num_keys, samples = 64, 256
    row = init_stats(head_dim, num_keys, scale=1.0, dtype=torch.float64, samples=samples, seed=head_dim)
    assert abs(row["qk_variance"] - head_dim) < 5 * row["qk_variance_se"]
    # per sample |q|^2 mean_j z_j^2: variance (d^2 + 2d)(1 + 2/n) - d^2
    closed_form_se = math.sqrt((2 * head_dim + 2 * head_dim**2 / num_keys + 4 * head_dim / num_keys) / samples)
    assert row["qk_variance_se"] == pytest.approx(closed_form_se, rel=0.25)


def test_qk_variance_is_of_the_unscaled_products_whatever_the_scale_and_dtype():
    unscaled = init_stats(64, 32, scale=1.0, dtype=torch.float64, samples=64, seed=3)
    scaled = init_stats(64, 32, scale=0.125, dtype=torch.float64, samples=64, seed=3)
    single = init_stats(64, 32, scale=2.0, dtype=torch.float32, samples=64, seed=3)
    assert scaled["qk_variance"] == unscaled["qk_variance"]
    assert single["qk_variance"] == pytest.approx(unscaled["qk_variance"], rel=1e-6)
    assert single["qk_variance_se"] == pytest.approx(unscaled["qk_variance_se"], rel=1e-5)


@pytest.mark.parametrize("num_keys", [2, 3, 7, 64, 4096])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_uniform_weights_have_jacobian_norm_exactly_one_over_n_and_entropy_log_n(num_keys, dtype):
    uniform = torch.softmax(torch.zeros(2, num_keys, dtype=dtype), dim=-1)
    one_over_n = uniform[0, 0].item()
    assert one_over_n == pytest.approx(1 / num_keys, rel=1e-7)
    assert jacobian_norm(uniform).tolist() == [one_over_n, one_over_n]
    precision = 1e-12 if dtype == torch.float64 else 1e-6
    assert entropy(uniform).tolist() == pytest.approx([math.log(num_keys)] * 2, rel=precision)
    assert entropy(uniform).dtype == dtype


def test_a_single_weight_has_jacobian_norm_zero_and_one_hot_weights_zero_entropy():
    assert jacobian_norm(torch.ones(3, 1)).tolist() == [0.0, 0.0, 0.0]
    one_hot = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    assert jacobian_norm(one_hot).tolist() == [0.0, 0.0]
    assert entropy(one_hot).tolist() == [0.0, 0.0]


def _distributions(num_keys):
    """(batch, num_keys) float64 weights: Dirichlet at three concentrations, softmax of random logits at
    four sharpnesses, ties at the top, and near one-hot rows."""
    rng = np.random.default_rng(num_keys)
    rows = [rng.dirichlet(np.full(num_keys, alpha)) for alpha in (0.05, 0.5, 5.0) for _ in range(4)]
    generator = torch.Generator().manual_seed(num_keys)
    rows += [torch.softmax(sharpness * torch.randn(num_keys, generator=generator, dtype=torch.float64), dim=0)
             for sharpness in (0.1, 1.0, 5.0, 30.0) for _ in range(4)]
    tied = torch.rand(num_keys, generator=generator, dtype=torch.float64)
    tied[:2] = 2.0  # two largest equal
    rows.append(tied / tied.sum())
    rows.append(torch.full((num_keys,), 1 / num_keys, dtype=torch.float64))
    rows.append(torch.softmax(torch.tensor([40.0] + [0.0] * (num_keys - 1), dtype=torch.float64), dim=0))
    rows.append(torch.tensor([1 - 1e-9] + [1e-9 / (num_keys - 1)] * (num_keys - 1), dtype=torch.float64))
    rows.append(torch.tensor([0.0] * (num_keys - 1) + [1.0], dtype=torch.float64))
    return torch.stack([torch.as_tensor(row, dtype=torch.float64) for row in rows])


@pytest.mark.parametrize("num_keys", [2, 3, 4, 8, 64])
def test_secular_jacobian_norm_equals_the_largest_eigenvalue_of_the_full_matrix(num_keys):
    weights = _distributions(num_keys)
    jacobians = torch.diag_embed(weights) - weights.unsqueeze(-1) * weights.unsqueeze(-2)
    expected = torch.linalg.eigvalsh(jacobians).amax(dim=-1)
    assert (jacobian_norm(weights) - expected).abs().max().item() < 1e-12


def test_ties_at_the_top_give_the_tied_weight_as_the_norm():
    weights = torch.tensor([[0.3, 0.3, 0.2, 0.2], [0.1, 0.45, 0.45, 0.0]], dtype=torch.float64)
    assert jacobian_norm(weights).tolist() == [0.3, 0.45]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("head_dim", "num_keys"), [(32, 16), (128, 64)])
@pytest.mark.parametrize("normalisation", ["unscaled", "scaled"])
def test_statistics_equal_a_naive_recomputation_from_the_same_draws(dtype, head_dim, num_keys, normalisation):
    samples, seed = 48, 11
    scale = 1.0 if normalisation == "unscaled" else 1 / math.sqrt(head_dim)
    row = init_stats(head_dim, num_keys, scale=scale, dtype=dtype, samples=samples, seed=seed)
    naive = _naive_statistics(_dot_products(head_dim, num_keys, samples, seed, dtype), scale, dtype)
    for name in ("frac_max_above_0.99", "frac_grad_below_1e-10", "zero_fraction"):
        assert row[name] == naive[name].mean().item(), name
    tolerance = 1e-12 if dtype == torch.float64 else 1e-6
    for name in ("qk_variance", "max_weight", "entropy_over_log_n", "jacobian_norm", "weight_sum"):
        assert row[name] == pytest.approx(naive[name].mean().item(), rel=tolerance, abs=1e-12), name
        assert row[f"{name}_se"] == pytest.approx(naive[name].std().item() / math.sqrt(samples),
                                                  rel=1e-5, abs=1e-12), name


@pytest.mark.parametrize("normalisation", ["unscaled", "scaled"])
def test_projected_dot_products_agree_with_drawing_the_keys_within_five_standard_errors(normalisation):
    head_dim, num_keys, samples = 8, 8, 4000
    scale = 1.0 if normalisation == "unscaled" else 1 / math.sqrt(head_dim)
    generator = torch.Generator().manual_seed(2024)
    queries = torch.randn(samples, head_dim, generator=generator, dtype=torch.float64)
    keys = torch.randn(samples, num_keys, head_dim, generator=generator, dtype=torch.float64)
    drawn = _naive_statistics(torch.einsum("sd,snd->sn", queries, keys), scale, torch.float64)
    row = init_stats(head_dim, num_keys, scale=scale, dtype=torch.float64, samples=samples, seed=7)
    for name in ("qk_variance", "max_weight", "frac_max_above_0.99", "entropy_over_log_n", "jacobian_norm"):
        drawn_se = drawn[name].std().item() / math.sqrt(samples)
        assert abs(row[name] - drawn[name].mean().item()) <= 5 * math.hypot(row[f"{name}_se"], drawn_se), name


def test_unscaled_logits_saturate_at_head_dim_1024_and_scaled_ones_do_not():
    unscaled = init_stats(1024, 16, scale=1.0, dtype=torch.float64, samples=256, seed=0)
    scaled = init_stats(1024, 16, scale=1 / 32, dtype=torch.float64, samples=256, seed=0)
    assert unscaled["frac_max_above_0.99"] - 5 * unscaled["frac_max_above_0.99_se"] > 0.5
    assert scaled["frac_max_above_0.99"] + 5 * scaled["frac_max_above_0.99_se"] < 0.05
    assert unscaled["jacobian_norm"] + 5 * unscaled["jacobian_norm_se"] < scaled["jacobian_norm"]
    assert unscaled["entropy_over_log_n"] < 0.1 < 0.8 < scaled["entropy_over_log_n"]


def test_float32_loses_at_least_the_derivatives_float64_loses_on_the_same_draws():
    single, double = (init_stats(1024, 16, scale=1.0, dtype=dtype, samples=256, seed=0)
                      for dtype in (torch.float32, torch.float64))
    assert single["frac_grad_below_1e-10"] > double["frac_grad_below_1e-10"]
    dot_products = _dot_products(1024, 16, 256, 0, torch.float64)
    single_lost = _naive_statistics(dot_products, 1.0, torch.float32)["frac_grad_below_1e-10"]
    double_lost = _naive_statistics(dot_products, 1.0, torch.float64)["frac_grad_below_1e-10"]
    assert bool((single_lost >= double_lost).all())


def test_the_same_arguments_give_the_same_row_whatever_the_chunk_size(monkeypatch):
    arguments = {"scale": 0.25, "dtype": torch.float32, "samples": 10, "seed": 5}
    first = init_stats(16, 32, **arguments)
    assert init_stats(16, 32, **arguments) == first
    monkeypatch.setattr(saturation, "CHUNK_ELEMENTS", 3 * 32)  # chunks of 3 samples
    assert init_stats(16, 32, **arguments) == first


def test_a_single_key_takes_all_the_weight_and_has_no_normalised_entropy():
    row = init_stats(4, 1, scale=1.0, dtype=torch.float64, samples=3, seed=0)
    assert (row["max_weight"], row["frac_max_above_0.99"], row["jacobian_norm"]) == (1.0, 1.0, 0.0)
    assert math.isnan(row["entropy_over_log_n"])


def test_init_table_has_the_csv_columns_and_one_row_per_grid_point():
    table = init_table([4, 16], [8, 32], [0.5, 1.0, 2.0], samples=8, seed=1, quiet=True)
    assert tuple(table.columns) == COLUMNS
    assert COLUMNS[:8] == ("normalisation", "temperature", "head_dim", "num_keys", "dtype", "q_variance",
                           "k_variance", "normaliser")  # the softmax-only table's columns first, as they were
    assert COLUMNS[8:] == tuple(name for stat in MONTE_CARLO for name in (stat, f"{stat}_se"))
    assert set(table["q_variance"]) == set(table["k_variance"]) == {1.0} and set(table["normaliser"]) == {"softmax"}
    keys = list(zip(table["normalisation"], table["temperature"], table["head_dim"], table["num_keys"],
                    table["dtype"], strict=True))
    expected = {(normalisation, temperature, head_dim, num_keys, dtype)
                for head_dim in (4, 16) for num_keys in (8, 32)
                for normalisation, temperature in (("unscaled", 1 / math.sqrt(head_dim)), ("scaled", 1.0),
                                                   ("temperature", 0.5), ("temperature", 2.0))
                for dtype in ("float32", "float64")}
    assert len(keys) == len(set(keys)) == len(expected) == 32
    assert set(keys) == expected
    assert table.attrs == {"samples": 8, "seed": 1}


def test_init_table_rows_are_init_stats_at_the_normalisations_scale():
    table = init_table([16], [8], [2.0], dtypes=[torch.float64], samples=8, seed=1, quiet=True)
    rows = table.set_index("normalisation")
    for normalisation, scale in (("unscaled", 1.0), ("scaled", 0.25), ("temperature", 0.125)):
        direct = init_stats(16, 8, scale=scale, dtype=torch.float64, samples=8, seed=1)
        assert rows.loc[normalisation, list(COLUMNS[2:])].tolist() == [direct[name] for name in COLUMNS[2:]]


def _closed_form(max_weight, num_keys):
    rest = (1 - max_weight) / (num_keys - 1)
    return -(max_weight * math.log(max_weight) + (num_keys - 1) * rest * math.log(rest)) / math.log(num_keys)


def test_fading_table_matches_the_closed_forms():
    key_counts, strong_logit, length_scales = [2, 16, 256, 4096], 3.0, [0.25, 1.0]
    table = fading_table(key_counts, strong_logit=strong_logit, length_scales=length_scales)
    assert tuple(table.columns) == FADING_COLUMNS
    assert FADING_COLUMNS[:6] == ("normaliser", "length_scale", "num_keys", "strong_logit", "max_weight",
                                  "entropy_over_log_n")  # the columns readers of older tables know, first
    assert len(table) == len(key_counts) * (1 + len(length_scales))
    for row in table.itertuples():
        if row.normaliser == "softmax":
            assert math.isnan(row.length_scale)
            expected = math.exp(strong_logit) / (math.exp(strong_logit) + row.num_keys - 1)
        else:
            boosted = row.num_keys ** (row.length_scale * strong_logit)
            expected = boosted / (boosted + row.num_keys - 1)
        assert row.max_weight == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert row.strong_weight == row.max_weight and row.draws == 0 and math.isnan(row.strong_weight_se)
        assert row.entropy_over_log_n == pytest.approx(_closed_form(expected, row.num_keys), rel=1e-12, abs=1e-12)


def test_ssmax_keeps_the_strong_weight_near_one_half_while_softmax_lets_it_fade():
    key_counts = [16, 64, 256, 1024, 4096]
    table = fading_table(key_counts, strong_logit=2.0, length_scales=[0.5])  # s a = 1: n / (2n - 1)
    ssmax = table[table["normaliser"] == "ssmax"]["max_weight"].tolist()
    softmax = table[table["normaliser"] == "softmax"]["max_weight"].tolist()
    assert ssmax == pytest.approx([n / (2 * n - 1) for n in key_counts], rel=1e-12)
    assert all(abs(weight - 0.5) < 0.05 for weight in ssmax)
    assert all(later < earlier for earlier, later in pairwise(softmax))
    assert softmax[-1] < 0.01


def test_the_exact_rows_are_the_softmax_of_the_logit_vector_bit_for_bit_beside_drawn_rows():
    key_counts, strong_logit, length_scales = [2, 16, 256], 3.0, [0.25]
    table = fading_table(key_counts, strong_logit=strong_logit, length_scales=length_scales,
                         kernelised=[("linear", {})], head_dim=4, draws=2)
    exact = table[table["draws"] == 0].reset_index(drop=True)
    alone = fading_table(key_counts, strong_logit=strong_logit, length_scales=length_scales)
    pd.testing.assert_frame_equal(exact, alone, check_exact=True)
    expected = []  # as the table has always computed them
    for normaliser, length_scale in (("softmax", math.nan), ("ssmax", 0.25)):
        for num_keys in key_counts:
            logits = torch.zeros(num_keys, dtype=torch.float64)
            logits[0] = strong_logit
            if normaliser == "ssmax":
                logits *= length_scale * math.log(num_keys)
            weights = torch.softmax(logits, dim=-1)
            expected.append((normaliser, num_keys, weights.max().item(),
                             entropy(weights).item() / math.log(num_keys)))
    assert list(exact[["normaliser", "num_keys", "max_weight", "entropy_over_log_n"]].itertuples(
        index=False, name=None)) == expected


@pytest.mark.parametrize("head_dim", [1, 3, 64])
def test_fading_vectors_give_the_strong_key_the_strong_scaled_dot_product_and_the_others_zero(head_dim):
    generator = torch.Generator().manual_seed(head_dim)
    query, keys = fading_vectors(generator, head_dim, 50, -1.5)
    assert query.dtype == keys.dtype == torch.float64 and keys.shape == (50, head_dim)
    scaled = keys @ query / math.sqrt(head_dim)
    assert scaled[0].item() == pytest.approx(-1.5, rel=1e-12)
    assert scaled[1:].abs().max().item() < 1e-12


def test_linear_rows_match_a_hand_computation_in_one_dimension():
    """d = 1: the keys orthogonal to q are 0, whose feature elu(0) + 1 is 1; the strong key is a / q. So the
    strong key's weight is phi(a/q) / (phi(a/q) + n - 1), every other key's 1 / (phi(a/q) + n - 1)."""
    strong_logit, num_keys, draws = 2.0, 3, 5
    table = fading_table([num_keys], strong_logit=strong_logit, length_scales=[], kernelised=[("linear", {})],
                         head_dim=1, draws=draws, seed=4)
    row = table[table["normaliser"] == "linear"].iloc[0]
    generator = torch.Generator().manual_seed(4)
    strong, largest, entropies = [], [], []
    for _ in range(draws):  # the draws as fading_vectors documents them: q, then the keys
        query = torch.randn(1, generator=generator, dtype=torch.float64).item()
        torch.randn(num_keys, 1, generator=generator, dtype=torch.float64)
        boost = strong_logit / query
        feature = boost + 1 if boost > 0 else math.exp(boost)  # elu(x) + 1
        weights = [feature / (feature + num_keys - 1)] + [1 / (feature + num_keys - 1)] * (num_keys - 1)
        strong.append(weights[0])
        largest.append(max(weights))
        entropies.append(-sum(weight * math.log(weight) for weight in weights) / math.log(num_keys))
    for name, values in (("strong_weight", strong), ("max_weight", largest), ("entropy_over_log_n", entropies)):
        assert row[name] == pytest.approx(np.mean(values), rel=1e-12)
        assert row[f"{name}_se"] == pytest.approx(np.std(values, ddof=1) / math.sqrt(draws), rel=1e-9)
    assert (row["draws"], row["head_dim"], row["variant_options"]) == (draws, 1, "{}")


def test_dense_weighed_on_the_drawn_vectors_gives_the_exact_softmax_rows_back():
    key_counts = [2, 16, 256]
    table = fading_table(key_counts, strong_logit=3.0, length_scales=[], kernelised=[("dense", {})], head_dim=8,
                         draws=3)
    exact, drawn = (table[table["normaliser"] == name].reset_index(drop=True) for name in ("softmax", "dense"))
    for statistic in ("max_weight", "entropy_over_log_n", "strong_weight"):
        assert drawn[statistic].tolist() == pytest.approx(exact[statistic].tolist(), rel=1e-12)
        assert (drawn[f"{statistic}_se"] < 1e-12).all()


def test_linear_attention_lets_the_strong_key_fade_like_one_over_n_where_softmax_holds_it_longer():
    key_counts = [64, 256, 1024]
    table = fading_table(key_counts, strong_logit=5.0, length_scales=[], kernelised=[("linear", {})], head_dim=16,
                         draws=8)
    linear = table[table["normaliser"] == "linear"].set_index("num_keys")
    softmax = table[table["normaliser"] == "softmax"].set_index("num_keys")
    for num_keys in key_counts:
        assert 1 < num_keys * linear.loc[num_keys, "strong_weight"] < 3  # barely above uniform weights
        assert linear.loc[num_keys, "strong_weight"] < softmax.loc[num_keys, "strong_weight"]
        assert linear.loc[num_keys, "entropy_over_log_n"] > 0.99


def test_performer_approaches_the_softmax_weight_with_many_features():
    if "performer" not in variants.list_variants():
        pytest.skip("performer is not registered in this version")
    table = fading_table([16], strong_logit=2.0, length_scales=[], kernelised=[("performer", {"num_features": 4096})],
                         head_dim=16, draws=16)
    performer = table[table["normaliser"] == "performer"].iloc[0]
    softmax = table[table["normaliser"] == "softmax"].iloc[0]
    assert abs(performer["strong_weight"] - softmax["strong_weight"]) < 0.05 + 5 * performer["strong_weight_se"]


GOOD = {"head_dim": 8, "num_keys": 4, "scale": 1.0, "dtype": torch.float64, "samples": 4, "seed": 0}


@pytest.mark.parametrize(("name", "value"), [
    ("head_dim", 0), ("head_dim", 2.5), ("head_dim", True), ("num_keys", -1), ("samples", 0), ("samples", "8"),
    ("seed", -1), ("scale", 0.0), ("scale", -1.0), ("scale", math.inf), ("scale", math.nan),
    ("dtype", torch.float16), ("dtype", "float32"),
])
def test_init_stats_rejects_a_bad_argument_with_one_sentence_naming_it(name, value):
    with pytest.raises(ValueError) as error:
        init_stats(**{**GOOD, name: value})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{name} {value!r} is not accepted; accepted: ")


@pytest.mark.parametrize(("call", "prefix"), [
    (lambda: init_table([8], [4], [0.0], samples=2, seed=0, quiet=True), "temperature 0.0 is not accepted"),
    (lambda: init_table([0], [4], [], samples=2, seed=0, quiet=True), "head_dim 0 is not accepted"),
    (lambda: init_table([8], [4], [], dtypes=[torch.int64], samples=2, seed=0, quiet=True),
     "dtype torch.int64 is not accepted"),
    (lambda: fading_table([1, 8], strong_logit=1.0, length_scales=[]), "num_keys 1 is not accepted"),
    (lambda: fading_table([8], strong_logit=math.inf, length_scales=[]), "strong_logit inf is not accepted"),
    (lambda: fading_table([8], strong_logit=1.0, length_scales=[-0.5]), "length_scale -0.5 is not accepted"),
    (lambda: fading_table([8], strong_logit=1.0, length_scales=[], draws=0), "draws 0 is not accepted"),
    (lambda: fading_table([8], strong_logit=1.0, length_scales=[], head_dim=0), "head_dim 0 is not accepted"),
])
def test_tables_reject_a_bad_argument_with_one_sentence_naming_it(call, prefix):
    with pytest.raises(ValueError) as error:
        call()
    assert "\n" not in str(error.value)
    assert str(error.value).startswith(prefix + "; accepted: ")


def test_init_table_adds_unscaled_and_scaled_rows_at_each_given_variance_on_the_same_draws():
    table = init_table([16], [8], [2.0], dtypes=[torch.float64], samples=8, seed=1, variances=[(0.25, 0.5)],
                       quiet=True)
    at_variance = table[table["q_variance"] == 0.25].set_index("normalisation")
    assert sorted(at_variance.index) == ["scaled", "unscaled"] and set(at_variance["k_variance"]) == {0.5}
    unit = table[table["q_variance"] == 1.0].set_index("normalisation")
    for normalisation, scale in (("unscaled", 1.0), ("scaled", 0.25)):
        direct = init_stats(16, 8, scale=scale, dtype=torch.float64, samples=8, seed=1, q_variance=0.25,
                            k_variance=0.5)
        assert at_variance.loc[normalisation, list(COLUMNS[2:])].tolist() == [direct[name] for name in COLUMNS[2:]]
        # the same draws scaled by sqrt(0.25 * 0.5): the dot products' mean square by 0.125 exactly (to rounding)
        assert direct["qk_variance"] == pytest.approx(0.125 * unit.loc[normalisation, "qk_variance"], rel=1e-12)


@pytest.mark.parametrize("head_dim", [16, 256])
def test_qk_variance_at_given_variances_estimates_their_product_times_head_dim(head_dim):
    row = init_stats(head_dim, 64, scale=1.0, dtype=torch.float64, samples=2000, seed=3, q_variance=0.34,
                     k_variance=0.3)
    assert abs(row["qk_variance"] - 0.34 * 0.3 * head_dim) <= 5 * row["qk_variance_se"]
