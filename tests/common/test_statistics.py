"""The statistics module (`common.statistics`) against scipy and statsmodels called directly, and each function once
against a case worked by hand: Student's t with 2 degrees of freedom has a closed form (quantile
t_F = (2F - 1) / sqrt(2F(1 - F)), two-sided p = 1 - |t| / sqrt(2 + t²)), Holm's steps and Wilson's formula are
written out."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from common import statistics as module

T_975_TWO_DEGREES = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 4.3027: Student's t, 97.5th percentile, 2 degrees
Z_975 = 1.959963984540054  # the normal's 97.5th percentile


def two_degrees_p(t: float) -> float:
    return 1 - abs(t) / math.sqrt(2 + t**2)


def test_the_t_quantile_written_out_is_scipys():
    assert T_975_TWO_DEGREES == pytest.approx(stats.t.ppf(0.975, 2), rel=1e-12)
    assert two_degrees_p(3.0) == pytest.approx(2 * stats.t.sf(3.0, 2), rel=1e-12)


def test_the_interval_of_a_mean_of_three_values_is_students_t_worked_by_hand():
    found = module.mean_interval([1.0, 2.0, 3.0])  # mean 2, standard deviation 1, standard error 1/sqrt(3)
    half = T_975_TWO_DEGREES / math.sqrt(3)
    assert (found.mean, found.std) == (2.0, 1.0)
    assert (found.low, found.high, found.half_width) == pytest.approx((2 - half, 2 + half, half), rel=1e-12)


@pytest.mark.parametrize("values", [[0.5, 0.7], [0.9, 0.92, 0.97], [0.1, 0.4, 0.35, 0.8, 0.62, 0.5]])
@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_the_interval_of_a_mean_is_scipys_one_sample_t_interval(values, confidence):
    found = module.mean_interval(values, confidence)
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    assert (found.low, found.high) == pytest.approx((low, high), rel=1e-12)
    assert found.mean == pytest.approx(np.mean(values)) and found.std == pytest.approx(np.std(values, ddof=1))


def test_identical_values_have_an_interval_of_zero_width_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = module.mean_interval([0.1, 0.1, 0.1])
    assert found.low == found.mean == found.high == pytest.approx(0.1) and (found.std, found.half_width) == (0, 0)


def test_an_interval_of_the_mean_needs_two_values():
    with pytest.raises(ValueError, match="needs 2 values or more; got 1"):
        module.mean_interval([0.5])


def test_the_standard_error_is_scipys_and_the_standard_deviation_over_root_n():
    assert module.standard_error([1.0, 2.0, 3.0]) == pytest.approx(1 / math.sqrt(3), rel=1e-12)
    values = np.array([0.2, 0.25, 0.4, 0.31])
    assert module.standard_error(values) == pytest.approx(stats.sem(values), rel=1e-12)
    assert math.isnan(module.standard_error([0.5]))


@pytest.mark.parametrize("degrees", [2, 7.3, math.inf])
def test_a_t_test_at_given_degrees_of_freedom_is_scipys_t_distribution(degrees):
    found = module.t_test(0.04, 0.015, degrees)
    low, high = stats.t.interval(0.95, degrees, loc=0.04, scale=0.015)
    assert (found.low, found.high) == pytest.approx((low, high), rel=1e-12)
    assert found.p == pytest.approx(2 * stats.t.sf(0.04 / 0.015, degrees), rel=1e-12)
    assert module.t_half_width(0.015, degrees) == pytest.approx((high - low) / 2, rel=1e-12)


def test_a_t_test_worked_by_hand_at_two_degrees_and_at_the_normal():
    found = module.t_test(-3.0, 1.0, 2)
    assert (found.low, found.high) == pytest.approx((-3 - T_975_TWO_DEGREES, -3 + T_975_TWO_DEGREES), rel=1e-12)
    assert found.p == pytest.approx(two_degrees_p(3.0), rel=1e-12)
    assert module.t_half_width(2.0, math.inf) == pytest.approx(2 * Z_975, rel=1e-12)


def test_a_t_test_needs_a_positive_standard_error():
    with pytest.raises(ValueError, match="positive standard error; got 0.0"):
        module.t_test(0.1, 0.0, 3)


def test_a_paired_difference_worked_by_hand():
    # differences 2, 3, 4: mean 3, standard deviation 1, t = 3 sqrt(3) on 2 degrees of freedom
    found = module.paired_difference([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])
    half = T_975_TWO_DEGREES / math.sqrt(3)
    assert (found.estimate, found.degrees_of_freedom, found.identical) == (3.0, 2, False)
    assert (found.low, found.high) == pytest.approx((3 - half, 3 + half), rel=1e-12)
    assert found.p == pytest.approx(two_degrees_p(3 * math.sqrt(3)), rel=1e-12)


@pytest.mark.parametrize("a, b", [([0.46, 0.20, 0.80], [1.0, 1.0, 1.0]),
                                  ([0.91, 0.93, 0.88, 0.95, 0.90, 0.92], [0.90, 0.90, 0.89, 0.91, 0.88, 0.93])])
def test_a_paired_difference_is_scipys_paired_t_test(a, b):
    found = module.paired_difference(a, b)
    expected = stats.ttest_rel(a, b)
    assert found.p == pytest.approx(expected.pvalue, rel=1e-12)
    assert (found.low, found.high) == pytest.approx(tuple(expected.confidence_interval()), rel=1e-12)
    assert found.degrees_of_freedom == expected.df == len(a) - 1


def test_identical_paired_differences_say_so_instead_of_an_infinite_t():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = module.paired_difference([1.0, 0.9, 0.8], [0.9, 0.8, 0.7])  # every difference 0.1, up to rounding
    assert found.identical and found.estimate == pytest.approx(0.1) and found.degrees_of_freedom == 2
    assert math.isnan(found.low) and math.isnan(found.high) and math.isnan(found.p)


def test_a_paired_difference_needs_as_many_values_on_each_side_and_two_pairs():
    with pytest.raises(ValueError, match="as many values on each side; got 3 and 2"):
        module.paired_difference([0.1, 0.2, 0.3], [0.1, 0.2])
    with pytest.raises(ValueError, match="needs 2 values or more; got 1"):
        module.paired_difference([0.1], [0.2])


def test_holm_worked_by_hand_steps_down_in_the_given_order():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 raised to the running maximum 0.06
    assert module.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert module.holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert module.holm([]) == []


def test_holm_is_statsmodels_multipletests():
    p_values = [0.21, 0.001, 0.04, 0.013, 0.5, 0.0301, 0.9]
    assert module.holm(p_values) == pytest.approx(list(multipletests(p_values, method="holm")[1]), rel=1e-12)


def test_holm_refuses_a_p_value_outside_zero_to_one():
    with pytest.raises(ValueError, match=r"p-values in \[0, 1\]; got \[0.1, nan\]"):
        module.holm([0.1, math.nan])


def wilson_by_formula(proportion: float, trials: float) -> tuple[float, float]:
    shrink = 1 + Z_975**2 / trials
    centre = (proportion + Z_975**2 / (2 * trials)) / shrink
    half = Z_975 * math.sqrt(proportion * (1 - proportion) / trials + Z_975**2 / (4 * trials**2)) / shrink
    return max(0.0, centre - half), min(1.0, centre + half)


def test_the_wilson_interval_is_its_formula_and_its_published_values():
    assert module.wilson(50, 100) == pytest.approx(wilson_by_formula(0.5, 100), rel=1e-12)
    assert module.wilson(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    assert module.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)


@pytest.mark.parametrize("successes, trials", [(0, 10), (3, 10), (10, 10), (2401, 2432), (1, 608)])
def test_the_wilson_interval_of_a_whole_count_is_scipys_binomial_test_interval(successes, trials):
    expected = stats.binomtest(successes, trials).proportion_ci(confidence_level=0.95, method="wilson")
    assert module.wilson(successes, trials) == pytest.approx((expected.low, expected.high), rel=1e-12, abs=1e-15)


def test_a_fractional_count_is_not_rounded():
    # a mean accuracy over seeds times the test set's size: 2432 * 0.99876 examples is no whole number
    count = 0.99876 * 2432
    assert module.wilson(count, 2432) == pytest.approx(wilson_by_formula(0.99876, 2432), rel=1e-12)
    assert module.wilson(count, 2432) != module.wilson(round(count), 2432)


def test_a_wilson_interval_refuses_more_successes_than_trials():
    with pytest.raises(ValueError, match="0 <= successes <= trials and trials > 0; got 11 of 10"):
        module.wilson(11, 10)


def test_the_log_log_slope_of_a_power_law_is_its_exponent():
    lengths = [256, 512, 1024, 2048]
    assert module.loglog_slope(lengths, [3.0 * length**1.5 for length in lengths]) == pytest.approx(1.5)
    assert module.loglog_slope(lengths, [7.0 * length for length in lengths]) == pytest.approx(1.0)


def test_the_log_log_slope_is_scipys_linear_regression_on_the_logs_of_the_positive_pairs():
    x, y = [256, 512, 1024, 2048, 4096, 0], [1.1, 2.5, 4.0, 9.7, 17.0, 3.0]
    expected = stats.linregress(np.log(x[:-1]), np.log(y[:-1])).slope
    assert module.loglog_slope(x, y) == pytest.approx(expected, rel=1e-12)
    assert module.loglog_slope(x, y) == pytest.approx(np.polyfit(np.log(x[:-1]), np.log(y[:-1]), 1)[0], rel=1e-9)


def test_the_log_log_slope_needs_two_distinct_x():
    assert module.loglog_slope([512, 512], [1.0, 2.0]) is None
    assert module.loglog_slope([512, 1024], [1.0, 0.0]) is None


@pytest.mark.parametrize("pairs", [3, 6, 10])
def test_the_detectable_difference_is_statsmodels_power_solution_in_units_of_the_spread(pairs):
    expected = TTestPower().solve_power(effect_size=None, nobs=pairs, alpha=0.01, power=0.8, alternative="two-sided")
    assert module.detectable_difference(0.02, pairs, 0.01) == pytest.approx(0.02 * expected, rel=1e-9)


def test_a_paired_test_detects_the_detectable_difference_four_times_in_five():
    # the power of the two-sided paired t-test at a true difference delta, from the noncentral t: written out
    std, pairs, alpha = 0.03, 6, 0.05
    delta = module.detectable_difference(std, pairs, alpha)
    critical = stats.t.ppf(1 - alpha / 2, pairs - 1)
    noncentrality = delta / std * math.sqrt(pairs)
    power = stats.nct.sf(critical, pairs - 1, noncentrality) + stats.nct.cdf(-critical, pairs - 1, noncentrality)
    assert power == pytest.approx(0.8, abs=1e-6)


def test_a_detectable_difference_needs_two_pairs():
    with pytest.raises(ValueError, match="2 pairs or more; got 1"):
        module.detectable_difference(0.1, 1, 0.05)


@pytest.mark.parametrize(("difference", "std"), [(0.05, 0.02), (0.1, 0.1), (0.2, 0.05), (0.03, 0.05)])
def test_the_pairs_to_detect_a_difference_are_the_fewest_whose_detectable_difference_reaches_it(difference, std):
    pairs = module.pairs_to_detect(difference, std, 0.05)
    assert module.detectable_difference(std, pairs, 0.05) <= difference
    assert pairs == 2 or module.detectable_difference(std, pairs - 1, 0.05) > difference


def test_the_pairs_to_detect_one_sided_are_statsmodels_solution_rounded_up():
    solved = TTestPower().solve_power(effect_size=0.5, nobs=None, alpha=0.05, power=0.8, alternative="larger")
    assert module.pairs_to_detect(0.05, 0.1, 0.05, alternative="larger") == math.ceil(solved)
    assert module.pairs_to_detect(0.05, 0.0, 0.05) == 2  # no spread: the fewest pairs a test takes
    assert module.pairs_to_detect(0.001, 1.0, 0.05) is None  # beyond MOST_PAIRS
    assert module.pairs_to_detect(0.16, 0.0152, 0.05) == 3  # a large effect, where the far tail's power is NaN
    with pytest.raises(ValueError, match="difference > 0"):
        module.pairs_to_detect(0.0, 0.1, 0.05)


def paired_margin_test(a, b, low, high=math.inf):
    differences = np.subtract(a, b)
    return module.margin_test(float(differences.mean()), float(stats.sem(differences)), len(a) - 1, low, high)


def test_two_one_sided_tests_worked_by_hand_at_two_degrees_of_freedom():
    # differences 0.01, 0.02, 0.03: mean 0.02, standard error 0.01 / sqrt(3); margins +-0.05
    found = paired_margin_test([0.51, 0.52, 0.53], [0.5, 0.5, 0.5], -0.05, 0.05)
    standard_error = 0.01 / math.sqrt(3)
    above, below = (0.02 + 0.05) / standard_error, (0.02 - 0.05) / standard_error  # t = 12.12 and -5.20
    assert found.p_above == pytest.approx(two_degrees_p(above) / 2, rel=1e-9)
    assert found.p_below == pytest.approx(two_degrees_p(below) / 2, rel=1e-9)
    assert found.p == pytest.approx(0.0175, abs=1e-4)  # equivalent at 0.05, not at 0.01


@pytest.mark.parametrize(("a", "b"), [([0.9, 0.92, 0.95], [0.91, 0.9, 0.96]),
                                      ([0.6, 0.7, 0.65, 0.62, 0.71], [0.5, 0.72, 0.61, 0.66, 0.7])])
@pytest.mark.parametrize("margin", [0.02, 0.1])
def test_two_one_sided_tests_are_statsmodels_paired_tost(a, b, margin):
    from statsmodels.stats.weightstats import ttost_paired

    p, (_, p_above, _), (_, p_below, _) = ttost_paired(np.array(a), np.array(b), -margin, margin)
    found = paired_margin_test(a, b, -margin, margin)
    assert (found.p, found.p_above, found.p_below) == pytest.approx((p, p_above, p_below), rel=1e-9)
    # p below alpha on both sides is the (1 - 2 alpha) interval of scipy's paired test lying inside the margins
    low, high = stats.ttest_rel(a, b).confidence_interval(0.9)
    assert (found.p < 0.05) == (-margin < low and high < margin)


def test_one_margin_is_scipys_one_sided_paired_test_shifted_by_it():
    a, b, margin = [0.8, 0.83, 0.79, 0.85], [0.82, 0.81, 0.84, 0.83], 0.05
    found = paired_margin_test(a, b, -margin)
    expected = stats.ttest_rel(np.add(a, margin), b, alternative="greater").pvalue
    assert found.p == pytest.approx(expected, rel=1e-9) and found.p_below == 0.0


def test_a_margin_test_without_spread_reads_the_estimate_against_the_margins():
    assert module.margin_test(0.01, 0.0, math.inf, -0.05, 0.05).p == 0.0
    assert module.margin_test(0.06, 0.0, math.inf, -0.05, 0.05).p == 1.0
    with pytest.raises(ValueError, match="low_margin < high_margin"):
        module.margin_test(0.0, 0.1, 2, 0.05, -0.05)
