"""The benchmark's verdicts (`analysis.benchmark.verdicts`): a paired test over the confirmation seeds that adds the
fixed test set's binomial error, Holm-corrected within a task; and the saturation study's comparison of two means
(`analysis.saturation.findings._compare`). Every expected number is computed here, from scipy or the formula, not
by the code under test."""

import math
import statistics

import pandas as pd
import pytest
from scipy import stats

from analysis.benchmark import verdicts
from analysis.saturation.findings import _b_unscaled, _compare

TEST_SIZE = 256


def table(rows: dict[str, list[float]], test_size: float = TEST_SIZE) -> pd.DataFrame:
    """`task_verdicts` of task 't' whose rows score `rows[variant]` on seeds 1, 2, 3, ..."""
    cells = pd.DataFrame([{"variant": variant, "task": "t", "test mean": statistics.fmean(values),
                           "seeds scored": len(values), "test size": test_size} for variant, values in rows.items()])
    scores = {(variant, "t"): dict(enumerate(values, start=1)) for variant, values in rows.items()}
    return verdicts.task_verdicts("t", cells, scores).set_index("variant")


def normal_p(difference: float, variance: float) -> float:
    """Two-sided p of a difference whose seeds agree exactly (s_d = 0): only the test set's error, so the normal."""
    return 2 * stats.norm.sf(abs(difference) / math.sqrt(variance))


def test_a_gap_of_one_test_example_at_the_ceiling_is_not_told_apart():
    found = table({"dense": [1.0, 1.0, 1.0], "other": [0.999, 0.999, 0.999]})
    # the seeds agree (zero width), but the test set of 256 examples still has its binomial error
    expected = normal_p(0.001, 0.999 * 0.001 / TEST_SIZE)
    assert found.loc["other", "p"] == pytest.approx(expected, rel=1e-6) and expected > 0.5
    assert found.loc["other", "told apart"] == "no"


def test_a_steady_gap_is_told_apart_though_the_seed_intervals_overlap():
    best, other = [0.90, 0.92, 0.94], [0.84, 0.86, 0.88]
    half = stats.t.ppf(0.975, 2) * statistics.stdev(best) / math.sqrt(3)
    assert statistics.fmean(other) + half > statistics.fmean(best) - half  # the intervals over seeds overlap
    found = table({"dense": best, "other": other})
    expected = normal_p(0.06, (0.92 * 0.08 + 0.86 * 0.14) / TEST_SIZE)  # paired by seed, every difference is 0.06
    assert found.loc["other", "p"] == pytest.approx(expected, rel=1e-6) and expected < 0.05
    assert found.loc["other", "mean difference"] == pytest.approx(-0.06)
    assert found.loc["other", "told apart"] == "yes"


def test_a_spread_out_row_at_three_seeds_is_not_told_apart_and_shows_its_effect_size():
    other, best = [0.46, 0.20, 0.80], [1.0, 1.0, 1.0]
    # without the test set's error the statistic is the paired t-test's
    plain = verdicts.paired_test(other, best, math.inf)
    assert plain.p == pytest.approx(stats.ttest_rel(other, best).pvalue)
    found = table({"dense": best, "other": other})
    differences = [a - b for a, b in zip(other, best, strict=True)]
    seeds_part = statistics.variance(differences) / 3
    mean = statistics.fmean(other)
    variance = seeds_part + mean * (1 - mean) / TEST_SIZE
    df = 2 * variance**2 / seeds_part**2
    assert found.loc["other", "degrees of freedom"] == pytest.approx(df)
    assert found.loc["other", "p"] == pytest.approx(2 * stats.t.sf(abs(statistics.fmean(differences)) /
                                                                   math.sqrt(variance), df))
    assert found.loc["other", "p"] == pytest.approx(0.10, abs=0.01)
    half = stats.t.ppf(0.975, df) * math.sqrt(variance)
    assert found.loc["other", "mean difference"] == pytest.approx(statistics.fmean(differences))
    assert (found.loc["other", "interval low"], found.loc["other", "interval high"]) == pytest.approx(
        (statistics.fmean(differences) - half, statistics.fmean(differences) + half))
    assert found.loc["other", "told apart"] == "no"


def test_two_gaps_under_005_alone_are_not_told_apart_after_holm_over_three_comparisons():
    best = [0.9, 0.9, 0.9]
    found = table({"dense": best, "a": [0.84] * 3, "b": [0.83] * 3, "c": [0.89] * 3})
    raw = {name: normal_p(0.9 - mean, (0.9 * 0.1 + mean * (1 - mean)) / TEST_SIZE)
           for name, mean in (("a", 0.84), ("b", 0.83), ("c", 0.89))}
    assert found["p"].to_dict() == pytest.approx(raw) and raw["a"] < 0.05 and raw["b"] < 0.05
    smallest, middle, largest = sorted(raw, key=raw.get)  # b, a, c
    adjusted = {smallest: 3 * raw[smallest]}
    adjusted[middle] = max(adjusted[smallest], 2 * raw[middle])
    adjusted[largest] = min(1.0, max(adjusted[middle], raw[largest]))
    assert found["Holm-adjusted p"].to_dict() == pytest.approx(adjusted)
    assert set(found["told apart"]) == {"no"}


def test_rows_pair_by_seed_number_over_the_seeds_both_scored():
    cells = pd.DataFrame([{"variant": "dense", "task": "t", "test mean": 0.92, "seeds scored": 3, "test size": 256},
                          {"variant": "other", "task": "t", "test mean": 0.7, "seeds scored": 4, "test size": 256}])
    scores = {("dense", "t"): {1: 0.90, 2: 0.92, 3: 0.94}, ("other", "t"): {4: 0.1, 3: 0.88, 1: 0.84, 2: 0.86}}
    found = verdicts.task_verdicts("t", cells, scores).set_index("variant")
    assert found.loc["other", "seeds paired"] == 3
    assert found.loc["other", "mean difference"] == pytest.approx(-0.06)


def test_equal_rows_without_any_spread_have_p_one():
    assert verdicts.paired_test([1.0, 1.0], [1.0, 1.0], TEST_SIZE).p == 1.0
    assert verdicts.paired_test([0.0, 0.0], [1.0, 1.0], TEST_SIZE).p == 0.0


def speed_row(mean: float, se: float, runs: int) -> pd.Series:
    return pd.Series({"early_accuracy_mean": mean, "early_accuracy_se": se, "runs": runs})


def test_the_saturation_comparison_gives_no_verdict_without_a_standard_error():
    assert _compare(speed_row(0.9, math.nan, 1), speed_row(0.1, 0.01, 3)) is None


def test_the_saturation_comparison_uses_the_t_quantile_at_welchs_degrees_of_freedom():
    # 3 seeds a side with equal standard errors: 4 degrees of freedom, t = 2.776, so a gap of 2.5 combined
    # standard errors, which 2 standard errors would count, is within noise
    se = 0.01
    combined = math.sqrt(2) * se
    assert stats.t.ppf(0.975, 4) > 2.5
    assert _compare(speed_row(0.5 + 2.5 * combined, se, 3), speed_row(0.5, se, 3)) == 0
    assert _compare(speed_row(0.5 + 2.9 * combined, se, 3), speed_row(0.5, se, 3)) == 1
    assert _compare(speed_row(0.5 - 2.9 * combined, se, 3), speed_row(0.5, se, 3)) == -1


def test_one_seed_per_cell_makes_the_saturation_finding_unknown_not_yes():
    speed = pd.DataFrame([{"variant_name": name, "head_dim": 64, "runs": 1, "reached": 1, "steps_mean": 100.0,
                           "steps_se": math.nan, "early_accuracy_mean": mean, "early_accuracy_se": math.nan,
                           "final_accuracy_mean": mean, "final_accuracy_se": math.nan, "start_max_weight": 0.5,
                           "start_saturated_fraction": 0.1, "start_grad_norm_q": 1.0}
                          for name, mean in (("dense", 0.5), ("unscaled", 0.3))])
    (sentence, _) = _b_unscaled(speed.set_index(["variant_name", "head_dim"]), "Study B", [64], "beyond its noise",
                                "50")
    assert "Unknown: no standard error at any measured d_k (64), so no verdict" in sentence and "Yes" not in sentence
