import pytest

from analysis import figures


def test_the_palette_gives_each_variant_one_colour_whatever_the_order_it_is_met_in():
    first = figures.palette(["local_w4", "dense", "local_w4", "sparse_strided"])
    second = figures.palette(["sparse_strided", "dense", "local_w4"])
    assert first == second
    assert len(set(first.values())) == 3
    many = figures.palette([f"variant{index}" for index in range(14)])
    assert len(set(many.values())) == 14


def test_the_fitted_exponent_is_the_log_log_slope():
    lengths = [256, 512, 1024, 2048]
    assert figures.fit_exponent(lengths, [3.0 * length**1.5 for length in lengths]) == pytest.approx(1.5)
    assert figures.fit_exponent(lengths, [7.0 * length for length in lengths]) == pytest.approx(1.0)
    assert figures.fit_exponent([512, 512], [1.0, 2.0]) is None
