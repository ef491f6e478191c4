"""Protocol 2's contrasts (`analysis.benchmark.contrasts`) and their figures (`analysis.benchmark.contrast_page`), on
small made-up confirmation results: each expected number comes from scipy or statsmodels called here, or is worked by
hand (a 6-seed paired difference, its interval from the printed t table and its Holm step; a restricted mean and a
Kaplan-Meier median with a seed that never reached the level)."""

import html
import math
import statistics

import pandas as pd
import pytest
from scipy import stats
from statsmodels.duration.survfunc import SurvfuncRight
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from analysis.benchmark import contrasts
from analysis.benchmark.contrast_page import contrast_blocks
from analysis.benchmark.contrast_section import MOST_SEEDS, exploratory, power_check, power_lines
from analysis.report.build import write_page
from analysis.report.render import Section
from common.statistics import pairs_to_detect

BUDGET, FIRST = 1000, 50
T_975_FIVE_DEGREES = 2.5706  # Student's t, 97.5th percentile, 5 degrees of freedom, as printed tables give it
DENSE = [0.60, 0.62, 0.58, 0.61, 0.59, 0.60]


def result(test: float, to_90: int | None = 100, area: float | None = None, chance: float = 0.25) -> dict:
    """A confirmation result of the protocol-2 shape; 0.99 is never reached."""
    return {"test_accuracy": test, "chance_accuracy": chance, "curve_area": test if area is None else area,
            "budget_steps": BUDGET, "events": {"0.9": to_90, "0.99": None},
            "curve": [[FIRST, 1.0, chance], [BUDGET, 20.0, test]],
            "accuracy_by_length": [{"length": 64, "accuracy": test}, {"length": 128, "accuracy": test / 2}]}


def runs(task: str, variant: str, test: list[float], to_90: list[int | None] | None = None,
         area: list[float] | None = None, chance: float = 0.25) -> list[tuple]:
    """(variant, task, seed, result) for seeds 0, 1, ...: one per value of `test`."""
    to_90 = to_90 if to_90 is not None else [100 + 10 * seed for seed in range(len(test))]
    area = area if area is not None else test
    return [(variant, task, seed, result(accuracy, steps, share, chance))
            for seed, (accuracy, steps, share) in enumerate(zip(test, to_90, area, strict=True))]


def shifted(values: list[float], by: list[float]) -> list[float]:
    return [value + step for value, step in zip(values, by, strict=True)]


def table_of(*groups: list[tuple], metric: str = contrasts.TEST_ACCURACY):
    """The contrast table of the runs in `groups`, the rows of `metric`, indexed by (task, variant)."""
    table = contrasts.contrasts(contrasts.tidy([run for group in groups for run in group]))
    return table[table["metric"] == metric].set_index(["task", "variant"])


def test_the_adapter_counts_a_seed_that_never_reached_a_level_at_the_budget_and_marks_it_censored():
    frame = contrasts.tidy(runs("t", "dense", [0.6, 0.7], to_90=[300, None]))
    steps = frame[frame["metric"] == "steps to 0.9"].set_index("seed")
    assert steps["value"].tolist() == [300, BUDGET] and steps["censored"].tolist() == [False, True]
    assert set(steps["first evaluation"]) == {FIRST}
    plain = frame[~frame["metric"].map(contrasts.is_event)]
    assert plain["censored"].isna().all()
    assert set(plain["metric"]) == {"test accuracy", "curve area", "accuracy at length 64", "accuracy at length 128"}
    assert len(contrasts.curve_frame(runs("t", "dense", [0.6, 0.7]))) == 4


def test_each_contrast_is_scipys_paired_t_test_over_the_seeds_both_ran():
    other = [0.50, 0.57, 0.51, 0.55, 0.52, 0.49]
    short = [0.65, 0.60, 0.66, 0.62]  # seeds 0-3 only: paired over 4
    table = table_of(runs("t", "dense", DENSE), runs("t", "a", other), runs("t", "b", short))
    for variant, values in (("a", other), ("b", short)):
        expected = stats.ttest_rel(values, DENSE[:len(values)])
        low, high = expected.confidence_interval(0.95)
        row = table.loc[("t", variant)]
        assert row["seeds paired"] == len(values)
        assert (row["difference"], row["low"], row["high"], row["p"]) == pytest.approx(
            (statistics.fmean(values) - statistics.fmean(DENSE[:len(values)]), low, high, expected.pvalue), rel=1e-9)


def test_a_six_seed_difference_worked_by_hand_with_its_interval_and_its_holm_step():
    steady = shifted(DENSE, [0.01, 0.02, 0.03, 0.04, 0.05, 0.06])  # differences 1..6 hundredths
    noisy = shifted(DENSE, [0.05, -0.03, 0.02, -0.01, 0.04, 0.0])
    table = table_of(runs("t", "dense", DENSE), runs("t", "steady", steady), runs("t", "noisy", noisy))
    # mean 0.035; standard deviation 0.01 sqrt(3.5) (the variance of 1..6 is 3.5); standard error over sqrt(6)
    error = 0.01 * math.sqrt(3.5) / math.sqrt(6)
    row = table.loc[("t", "steady")]
    assert row["difference"] == pytest.approx(0.035)
    assert (row["low"], row["high"]) == pytest.approx((0.035 - T_975_FIVE_DEGREES * error,
                                                       0.035 + T_975_FIVE_DEGREES * error), abs=1e-5)
    assert row["p"] == pytest.approx(2 * stats.t.sf(0.035 / error, 5))
    # Holm with two contrasts in the family: the smaller p doubles, the larger keeps the larger of itself and that
    p_steady, p_noisy = row["p"], table.loc[("t", "noisy"), "p"]
    assert p_steady < p_noisy
    assert table.loc[("t", "steady"), "Holm-adjusted p"] == pytest.approx(2 * p_steady)
    assert table.loc[("t", "noisy"), "Holm-adjusted p"] == pytest.approx(max(2 * p_steady, p_noisy))
    assert (table.loc[("t", "steady"), "told apart"], table.loc[("t", "noisy"), "told apart"]) == ("yes", "no")


def test_holm_runs_over_one_metric_across_every_task_and_variant():
    groups = [runs(task, "dense", DENSE, area=[0.5] * 3 + [0.52] * 3) for task in ("t1", "t2")]
    groups += [runs("t1", "a", shifted(DENSE, [0.02, 0.03, 0.01, 0.04, 0.02, 0.03])),
               runs("t1", "b", shifted(DENSE, [0.05, -0.03, 0.02, -0.01, 0.04, 0.0])),
               runs("t2", "a", shifted(DENSE, [-0.1, -0.12, -0.08, -0.11, -0.09, -0.1])),
               runs("t2", "b", shifted(DENSE, [0.01, 0.0, -0.02, 0.03, 0.0, 0.01]))]
    table = table_of(*groups)
    assert (table["family size"] == 4).all()
    expected = multipletests(table["p"].tolist(), method="holm")[1]
    assert table["Holm-adjusted p"].tolist() == pytest.approx(list(expected))
    areas = table_of(*groups, metric=contrasts.CURVE_AREA)
    assert (areas["family size"] == 4).all()  # its own family: the same four contrasts of another metric
    lengths = table_of(*groups, metric="accuracy at length 64")
    assert (lengths["family size"] == 8).all()  # the two lengths of both tasks are one metric


def test_the_best_row_and_one_not_told_apart_share_tier_1_and_a_clearly_worse_row_is_tier_2():
    frame = contrasts.tidy([*runs("t", "dense", DENSE), *runs("t", "close", shifted(DENSE, [0.01, -0.02, 0.0,
                                                                                            0.01, -0.01, 0.0])),
                            *runs("t", "worse", shifted(DENSE, [-0.2, -0.22, -0.19, -0.21, -0.2, -0.18]))])
    found = contrasts.tiers(frame)
    accuracy = found[found["metric"] == contrasts.TEST_ACCURACY].set_index("variant")
    assert accuracy["tier"].to_dict() == {"dense": 1, "close": 1, "worse": 2}
    assert accuracy.loc["close", "best of its tier"] == "dense"
    steps = found[found["metric"] == "steps to 0.9"].set_index("variant")
    assert set(steps["tier"]) == {1}  # the same steps on every seed, as dense's: no row told apart
    tables = [found, contrasts.contrasts(frame), contrasts.summaries(frame)]
    assert not [column for table in tables for column in table.columns if "rank" in column.lower()]


def test_a_seed_that_never_reaches_the_level_counts_the_budget_in_the_mean_and_the_contrast():
    dense_steps = [100, 200, None, 300, 400, 500]
    slow_steps = [300, None, None, 600, 500, None]
    frame = contrasts.tidy([*runs("t", "dense", DENSE, to_90=dense_steps),
                            *runs("t", "slow", DENSE, to_90=slow_steps)])
    summary = contrasts.summaries(frame).set_index(["metric", "variant"]).loc["steps to 0.9"]
    # (100 + 200 + 1000 + 300 + 400 + 500) / 6: the seed that never reached counts the budget, none is dropped
    assert summary.loc["dense", "mean"] == pytest.approx(2500 / 6)
    assert (summary.loc["dense", "seeds"], summary.loc["dense", "seeds reaching"]) == (6, 5)
    # Kaplan-Meier: 5/6, 4/6, 3/6 yet to reach after 100, 200, 300 (not below one half), 2/6 after 400
    assert summary.loc["dense", "Kaplan-Meier median"] == 400
    assert math.isnan(summary.loc["slow", "Kaplan-Meier median"])  # half never reach it: no median
    restricted = [BUDGET if steps is None else steps for steps in slow_steps]
    fit = SurvfuncRight([BUDGET if steps is None else steps for steps in dense_steps],
                        [0 if steps is None else 1 for steps in dense_steps])
    assert fit.quantile(0.5) == 400
    row = contrasts.contrasts(frame).set_index("metric").loc["steps to 0.9"]
    expected = stats.ttest_rel(restricted, [BUDGET if steps is None else steps for steps in dense_steps])
    assert (row["seeds paired"], row["p"]) == (6, pytest.approx(expected.pvalue))


@pytest.mark.parametrize(("dense", "chance", "discriminating"), [
    ([0.98, 1.0, 0.99, 0.99, 0.985, 0.995], 0.25, False),  # mean 0.99: 0.01 from the ceiling, inclusive
    ([0.979, 0.999, 0.989, 0.989, 0.984, 0.994], 0.25, True),  # mean 0.989: 0.011 from it
    ([0.25, 0.27, 0.26, 0.26, 0.255, 0.265], 0.25, False),  # mean 0.26: 0.01 above chance, inclusive
    ([0.251, 0.271, 0.261, 0.261, 0.256, 0.266], 0.25, True),  # mean 0.261
    ([0.12, 0.14, 0.13, 0.13, 0.125, 0.135], 0.25, False),  # mean 0.13: below chance is the floor too
])
def test_an_accuracy_cell_within_001_of_the_ceiling_or_of_chance_does_not_discriminate(dense, chance, discriminating):
    other = shifted(dense, [-0.05, -0.04, -0.06, -0.05, -0.03, -0.05])
    frame = contrasts.tidy([*runs("t", "dense", dense, chance=chance), *runs("t", "other", other, chance=chance)])
    cell = frame[frame["metric"] == contrasts.TEST_ACCURACY]
    assert (contrasts.not_discriminating(cell) == "") == discriminating
    row = contrasts.contrasts(frame).set_index("metric").loc[contrasts.TEST_ACCURACY]
    assert (row["told apart"] != "not discriminating") == discriminating
    assert math.isnan(row["Holm-adjusted p"]) != discriminating and (row["family size"] == 1) == discriminating
    assert (contrasts.TEST_ACCURACY in set(contrasts.tiers(frame)["metric"])) == discriminating


def test_a_steps_cell_does_not_discriminate_where_dense_never_reaches_or_every_run_reaches_at_its_first_evaluation():
    never = contrasts.tidy([*runs("t", "dense", DENSE, to_90=[None] * 6), *runs("t", "a", DENSE)])
    assert "never reaches" in contrasts.not_discriminating(never[never["metric"] == "steps to 0.9"])
    first = contrasts.tidy([*runs("t", "dense", DENSE, to_90=[FIRST] * 6), *runs("t", "a", DENSE, to_90=[FIRST] * 6)])
    assert "first evaluation" in contrasts.not_discriminating(first[first["metric"] == "steps to 0.9"])
    later = contrasts.tidy([*runs("t", "dense", DENSE, to_90=[FIRST] * 6),
                            *runs("t", "a", DENSE, to_90=[FIRST] * 5 + [2 * FIRST])])
    assert contrasts.not_discriminating(later[later["metric"] == "steps to 0.9"]) == ""


def test_a_row_worse_by_the_same_amount_on_every_seed_is_told_apart_and_never_shares_the_best_rows_tier():
    """Steps read every K steps often differ by the same amount on every seed (a run that never reaches the level
    sits at the budget on each): the paired test's limit tells such a row apart (p 0), as it tells apart one that is
    worse by nearly the same amount on every seed (a large finite t), and a row equal on every seed is not (p 1)."""
    frame = contrasts.tidy([*runs("t", "dense", DENSE, to_90=[200] * 6), *runs("t", "fast", DENSE, to_90=[100] * 6),
                            *runs("t", "never", DENSE, to_90=[None] * 6),
                            *runs("t", "nearly", DENSE, to_90=[None] * 5 + [950])])
    steps = frame[frame["metric"] == "steps to 0.9"]
    tiers = contrasts.tiers(steps).set_index("variant")["tier"].to_dict()
    assert tiers == {"fast": 1, "dense": 2, "never": 3, "nearly": 3}
    table = contrasts.contrasts(steps).set_index("variant")
    assert table.loc["never", "p"] == 0.0 and table.loc["never", "told apart"] == "yes"
    assert (table.loc["never", "low"], table.loc["never", "high"]) == (BUDGET - 200, BUDGET - 200)
    assert table.loc["nearly", "told apart"] == "yes" and 0 < table.loc["nearly", "p"] < 1e-6
    line = contrasts.sentence(table.reset_index())
    assert f"never by +{BUDGET - 200} (the same on every seed; Holm-adjusted p < 0.001)" in line
    same = contrasts.contrasts(contrasts.tidy([*runs("t", "dense", DENSE), *runs("t", "same", DENSE)]))
    accuracy = same[same["metric"] == contrasts.TEST_ACCURACY].iloc[0]
    assert (accuracy["p"], accuracy["told apart"]) == (1.0, "no")


def test_the_detectable_difference_is_ttestpowers_at_the_first_holm_step_pooled_where_a_spread_is_zero():
    a = shifted(DENSE, [0.02, 0.03, 0.01, 0.04, 0.02, 0.03])
    b = shifted(DENSE, [0.05, -0.03, 0.02, -0.01, 0.04, 0.0])
    same = shifted(DENSE, [0.01] * 6)  # identical differences: no spread of its own; tested, p 0
    table = table_of(runs("t", "dense", DENSE), runs("t", "a", a), runs("t", "b", b), runs("t", "same", same))
    effect = TTestPower().solve_power(effect_size=None, nobs=6, alpha=0.05 / 3, power=0.8, alternative="two-sided")
    deviations = {name: statistics.stdev(x - y for x, y in zip(values, DENSE, strict=True))
                  for name, values in (("a", a), ("b", b))}
    for name, deviation in deviations.items():
        assert table.loc[("t", name), "detectable difference"] == pytest.approx(effect * deviation)
    pooled = math.sqrt((5 * deviations["a"] ** 2 + 5 * deviations["b"] ** 2 + 5 * 0.0) / 15)
    assert table.loc[("t", "same"), "detectable difference"] == pytest.approx(effect * pooled)
    assert table.loc[("t", "same"), "cell detectable difference"] == pytest.approx(effect * pooled)
    assert table.loc[("t", "same"), "told apart"] == "yes" and table.loc[("t", "same"), "p"] == 0.0


def test_a_cell_whose_every_difference_is_the_same_on_every_seed_states_no_detectable_difference_rather_than_0():
    table = table_of(runs("t", "dense", DENSE), runs("t", "same", shifted(DENSE, [0.01] * 6)),
                     runs("t", "also", shifted(DENSE, [-0.02] * 6)))
    assert math.isnan(table.loc[("t", "same"), "detectable difference"])
    assert math.isnan(table.loc[("t", "also"), "cell detectable difference"])


def test_the_detectable_difference_in_steps_is_also_given_relative_to_denses_restricted_mean():
    dense_steps, other_steps = [100, 200, None, 300, 400, 500], [150, 200, 500, 250, None, 600]
    table = table_of(runs("t", "dense", DENSE, to_90=dense_steps), runs("t", "a", DENSE, to_90=other_steps),
                     metric="steps to 0.9")
    row = table.loc[("t", "a")]
    effect = TTestPower().solve_power(effect_size=None, nobs=6, alpha=0.05, power=0.8, alternative="two-sided")
    differences = [(BUDGET if x is None else x) - (BUDGET if y is None else y)
                   for x, y in zip(other_steps, dense_steps, strict=True)]
    assert row["cell detectable difference"] == pytest.approx(effect * statistics.stdev(differences))
    assert row["detectable relative to dense"] == pytest.approx(row["cell detectable difference"] / (2500 / 6))


def test_each_cell_has_a_sentence_of_what_differs_and_how_large_a_difference_remains_possible():
    worse = shifted(DENSE, [-0.2, -0.22, -0.19, -0.21, -0.2, -0.18])
    close = shifted(DENSE, [0.01, -0.02, 0.0, 0.01, -0.01, 0.0])
    table = contrasts.contrasts(contrasts.tidy([*runs("t", "dense", DENSE),
                                                *runs("t", "worse", worse, to_90=[110, 100, 140, 120, 160, 150]),
                                                *runs("t", "close", close)]))
    lines = {line.split(",")[1].split(":")[0].strip(): line for line in contrasts.sentences(table)}
    accuracy = table[(table["metric"] == contrasts.TEST_ACCURACY) & (table["variant"] == "worse")].iloc[0]
    assert f"worse by {accuracy['difference']:+.3f} (95% interval {accuracy['low']:+.3f} to" in lines["test accuracy"]
    detectable = f"a difference of {accuracy['cell detectable difference']:.3f} or more"
    assert "close is not told apart" in lines["test accuracy"] and detectable in lines["test accuracy"]
    assert lines["steps to 0.99"].endswith("not discriminating (dense never reaches the level on any seed); left out "
                                           "of every average.")
    steps = lines["steps to 0.9"]  # worse: steps 10, -10, 20, -10, 20, 0 from dense's; close: dense's own
    assert "no variant is told apart (close, worse)" in steps and " steps (" in steps


def test_the_forest_plots_and_learning_curves_are_written_and_not_empty(tmp_path):
    results = [*runs("t1", "dense", DENSE), *runs("t1", "a", shifted(DENSE, [-0.1, -0.12, -0.08, -0.11, -0.09, -0.1])),
               *runs("t2", "dense", DENSE), *runs("t2", "a", shifted(DENSE, [0.01, 0.0, -0.02, 0.03, 0.0, 0.01]))]
    blocks = contrast_blocks(contrasts.tidy(results), contrasts.curve_frame(results), ["dense", "a"])
    write_page(tmp_path, "page", "page", [], [Section("contrasts", "Contrasts", blocks)])
    pictures = sorted(path.name for path in (tmp_path / "page" / "figures").iterdir())
    assert pictures == ["contrasts-0.png", "contrasts-1.png", "learning-curves.png"]
    for name in pictures:
        assert (tmp_path / "page" / "figures" / name).stat().st_size > 10_000
        assert len((tmp_path / "page" / "tables" / name.replace(".png", ".csv")).read_text().splitlines()) > 1
    forest = next(block for block in blocks if getattr(block, "name", "") == "contrasts-0").figure
    panel = forest.axes[0]
    assert panel.get_title() == contrasts.TEST_ACCURACY and len(panel.patches) == 1  # the detectable band
    assert html.escape(contrasts.FAMILY) in (tmp_path / "page" / "index.html").read_text()


def test_the_power_check_meets_the_aim_at_exactly_its_detectable_difference_and_counts_the_seeds_it_would_need():
    """A task meets protocol 2's aim where its cell could detect 0.05 in test accuracy (or 20% of dense's mean in steps
    to 0.9), the edge included; where it cannot, the page names the paired seeds its measured spread would need."""
    wide = shifted(DENSE, [-0.05, 0.05, -0.1, 0.1, 0.0, 0.02])  # differences of sd about 0.07: 0.05 is out of reach
    table = contrasts.contrasts(contrasts.tidy([*runs("t", "dense", DENSE, to_90=[200, 250, 300, 200, 250, 300]),
                                                *runs("t", "a", wide, to_90=[200, 250, 300, 200, 250, 350])]))
    power = power_check(table).set_index("metric")
    accuracy = power.loc[contrasts.TEST_ACCURACY]
    row = table[table["metric"] == contrasts.TEST_ACCURACY].iloc[0]
    assert accuracy["met"] == "no" and accuracy["detectable"] == pytest.approx(row["cell detectable difference"])
    assert accuracy["seeds the aim needs"] == pairs_to_detect(0.05, row["cell sd"], 0.05)
    assert accuracy["seeds the aim needs"] > 6
    steps = power.loc["steps to 0.9"]  # 8 steps of dense's 250 detectable: 20% is met
    assert steps["met"] == "yes" and steps["detectable"] < 0.2
    at_edge = table.assign(**{"cell detectable difference": 0.05})
    assert power_check(at_edge).set_index("metric").loc[contrasts.TEST_ACCURACY, "met"] == "yes"
    beyond = table.assign(**{"cell detectable difference": 0.0501})
    assert power_check(beyond).set_index("metric").loc[contrasts.TEST_ACCURACY, "met"] == "no"
    lines = power_lines(power_check(table))
    assert lines[0].startswith("Power: 1 of 1 tasks of record could detect 0.05 in test accuracy or 20% in steps to "
                               "0.9")
    missed = power_lines(power_check(beyond.assign(**{"detectable relative to dense": 0.3})))[1]
    assert missed.startswith("t misses the aim: test accuracy could detect 0.050 with 6 seeds, and would need about")
    needed = int(accuracy["seeds the aim needs"])  # dense and a, each (needed - 6) more seeds
    assert f"about {needed} paired seeds ({(needed - 6) * 2:,} more runs of its 2 rows)" in missed


def test_a_task_is_exploratory_only_where_its_aim_needs_more_than_the_most_seeds_on_every_metric_that_discriminates():
    """At exactly MOST_SEEDS paired seeds a task of record misses the aim (it may grow to them); one more on its only
    discriminating metric makes it exploratory, counted apart and said so; a task with no discriminating metric is
    never exploratory."""
    def check(accuracy_needs: float, steps_met: str = "not discriminating") -> pd.DataFrame:
        rows = [("t", contrasts.TEST_ACCURACY, "no", accuracy_needs), ("t", "steps to 0.9", steps_met, math.nan),
                ("u", contrasts.TEST_ACCURACY, "yes", 4.0)]
        return pd.DataFrame([{"task": task, "metric": metric, "aim": 0.05, "detectable": 0.1, "met": met,
                              "seeds paired": 6, "seeds the aim needs": needs, "rows": 2}
                             for task, metric, met, needs in rows])

    at_most = check(float(MOST_SEEDS))
    assert exploratory(at_most) == []
    assert power_lines(at_most)[0].startswith("Power: 1 of 2 tasks of record could detect")
    assert power_lines(at_most)[1].startswith("t misses the aim: test accuracy could detect 0.100 with 6 seeds")
    beyond = check(float(MOST_SEEDS + 1))
    assert exploratory(beyond) == ["t"]
    lines = power_lines(beyond)
    assert lines[0].startswith("Power: 1 of 1 tasks of record could detect")
    assert lines[0].endswith(f"; exploratory, too noisy to reach it within {MOST_SEEDS} seeds: t.")
    assert lines[1].startswith("t is exploratory: test accuracy could detect 0.100 with 6 seeds, and would need about "
                               f"{MOST_SEEDS + 1} paired seeds")
    assert "so it is no task of record" in lines[1]
    assert exploratory(check(math.nan)) == ["t"]  # beyond MOST_PAIRS: beyond MOST_SEEDS too
    assert exploratory(check(float(MOST_SEEDS + 1), steps_met="yes")) == []  # another metric meets the aim
    nothing = check(math.nan).assign(met=lambda frame: frame["met"].replace("no", "not discriminating"))
    assert exploratory(nothing) == [] and power_lines(nothing)[1].startswith("t misses the aim")
