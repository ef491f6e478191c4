import pandas as pd
import pytest
from scipy import stats

from analysis.report import figures


def test_the_palette_gives_each_variant_one_colour_whatever_the_order_it_is_met_in():
    first = figures.palette(["local_w4", "dense", "local_w4", "sparse_strided"])
    second = figures.palette(["sparse_strided", "dense", "local_w4"])
    assert first == second
    assert len(set(first.values())) == 3
    many = figures.palette([f"variant{index}" for index in range(14)])
    assert len(set(many.values())) == 14



def test_a_figures_error_bar_is_the_t_interval_of_the_mean_over_seeds_and_none_from_one_seed():
    values = [0.5, 0.6, 0.9]
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    assert figures.mean_interval_bar(pd.Series(values)) == pytest.approx((low, high))
    assert figures.mean_interval_bar(pd.Series([0.7])) == (0.7, 0.7)
