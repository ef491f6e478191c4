"""The statistics every page, sweep and claim reads, each one call of scipy or statsmodels: the interval of a mean
(`mean_interval`), a t interval and test at given degrees of freedom (`t_test`, `t_half_width`), the paired t-test
(`paired_difference`), the standard error (`standard_error`), Holm's correction (`holm`), the Wilson interval of a
proportion (`wilson`), the exponent of a power law (`loglog_slope`), the smallest difference a paired test
detects (`detectable_difference`) and the pairs it needs to detect a given one (`pairs_to_detect`), and the two
one-sided tests of an estimate against margins (`margin_test`: equivalence, and non-inferiority with one margin).

Values that are all the same (within IDENTICAL, float rounding of accuracies that are multiples of 1/m) have no
spread: their interval is the value itself, and a paired test on identical differences says so (`identical`)
instead of dividing by zero; the libraries would return an infinite t or warn of catastrophic cancellation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.proportion import proportion_confint

CONFIDENCE = 0.95  # of every interval unless a caller asks for another level
IDENTICAL = 1e-12  # values whose range is at most this times their largest magnitude (or 1) count as identical


def _identical(values: Sequence[float]) -> bool:
    return max(values) - min(values) <= IDENTICAL * max(1.0, *(abs(value) for value in values))


def _at_least_two(values: Sequence[float], what: str) -> None:
    if len(values) < 2:
        raise ValueError(f"{what} needs 2 values or more; got {len(values)}.")


@dataclass(frozen=True)
class MeanInterval:
    """The mean of a sample, its standard deviation (n - 1) and the interval of the mean (Student's t)."""

    mean: float
    std: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanInterval:
    """The mean of two or more values and its interval with n - 1 degrees of freedom (`scipy.stats.ttest_1samp`'s
    confidence interval); identical values give the value itself, with std 0."""
    values = [float(value) for value in values]
    _at_least_two(values, "an interval of the mean")
    mean = statistics.fmean(values)
    if _identical(values):
        return MeanInterval(mean, 0.0, mean, mean)
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    return MeanInterval(mean, statistics.stdev(values), float(low), float(high))


def standard_error(values: Sequence[float] | np.ndarray) -> float:
    """The standard error of the mean of independent values (`scipy.stats.sem`, n - 1); NaN from fewer than two."""
    values = np.asarray(values, dtype=float)
    return float(stats.sem(values)) if len(values) > 1 else math.nan


@dataclass(frozen=True)
class TTest:
    """An estimate (a mean difference), its interval, the degrees of freedom and the two-sided p-value. `identical`:
    the paired differences were all the same, so there is no spread to test against (interval and p are NaN)."""

    estimate: float
    low: float
    high: float
    degrees_of_freedom: float
    p: float
    identical: bool = False


def t_half_width(standard_error: float, degrees_of_freedom: float, confidence: float = CONFIDENCE) -> float:
    """The half-width of a two-sided interval from Student's t at the given degrees of freedom (math.inf: the
    normal distribution): t_{(1 + confidence) / 2, df} times the standard error."""
    return float(stats.t.ppf(0.5 + confidence / 2, degrees_of_freedom)) * standard_error


def t_test(estimate: float, standard_error: float, degrees_of_freedom: float,
           confidence: float = CONFIDENCE) -> TTest:
    """The interval and the two-sided p-value of `estimate` against 0, for a test whose standard error and degrees
    of freedom the caller derives (a Welch-Satterthwaite df, say); the standard error must be positive."""
    if not standard_error > 0:
        raise ValueError(f"a t test needs a positive standard error; got {standard_error!r}.")
    half = t_half_width(standard_error, degrees_of_freedom, confidence)
    p = 2 * float(stats.t.sf(abs(estimate) / standard_error, degrees_of_freedom))
    return TTest(estimate, estimate - half, estimate + half, degrees_of_freedom, min(p, 1.0))


def paired_difference(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> TTest:
    """The mean of a_i - b_i over pairs, its interval and two-sided p-value by the paired t-test with n - 1 degrees
    of freedom (`scipy.stats.ttest_rel`). Identical differences have no spread: the result says so (`identical`)
    with a NaN interval and p, never an infinite t."""
    if len(a) != len(b):
        raise ValueError(f"a paired test needs as many values on each side; got {len(a)} and {len(b)}.")
    differences = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    _at_least_two(differences, "a paired test")
    difference, degrees = statistics.fmean(differences), len(differences) - 1
    if _identical(differences):
        return TTest(difference, math.nan, math.nan, degrees, math.nan, identical=True)
    result = stats.ttest_rel(a, b)
    low, high = result.confidence_interval(confidence)
    return TTest(difference, float(low), float(high), degrees, float(result.pvalue))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (`statsmodels.stats.multitest.multipletests`, method "holm"), in the given
    order: the i-th smallest of k p-values becomes max over j <= i of min(1, (k - j + 1) p_(j))."""
    if not p_values:
        return []
    if not all(0 <= p <= 1 for p in p_values):
        raise ValueError(f"Holm's adjustment needs p-values in [0, 1]; got {list(p_values)}.")
    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]


def wilson(successes: float, trials: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson interval of a proportion successes / trials (`statsmodels.stats.proportion.proportion_confint`,
    method "wilson", which takes the count as it is: a mean accuracy over seeds times the test set's size is no whole
    number, and is not rounded)."""
    if not trials > 0 or not 0 <= successes <= trials:
        raise ValueError(f"a Wilson interval needs 0 <= successes <= trials and trials > 0; got {successes!r} of "
                         f"{trials!r}.")
    low, high = proportion_confint(successes, trials, alpha=1 - confidence, method="wilson")
    return float(low), float(high)


def loglog_slope(x: Iterable[float], y: Iterable[float]) -> float | None:
    """The least-squares slope of log y against log x (`scipy.stats.linregress`), y ~ x^slope, over the pairs where
    both are positive; None with fewer than 2 distinct x there."""
    x, y = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    keep = (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if len(np.unique(x)) < 2:
        return None
    return float(stats.linregress(np.log(x), np.log(y)).slope)


def detectable_difference(std: float, pairs: int, alpha: float, power: float = 0.8) -> float:
    """The smallest mean difference a two-sided paired t-test over `pairs` pairs detects with probability `power` at
    level `alpha`, where the differences have standard deviation `std`: the effect size that
    `statsmodels.stats.power.TTestPower` solves for, times `std`."""
    if pairs < 2:
        raise ValueError(f"a detectable difference needs 2 pairs or more; got {pairs}.")
    effect = TTestPower().solve_power(effect_size=None, nobs=pairs, alpha=alpha, power=power,
                                      alternative="two-sided")
    return float(effect) * std


MOST_PAIRS = 1000  # `pairs_to_detect` looks no further


def pairs_to_detect(difference: float, std: float, alpha: float, power: float = 0.8,
                    alternative: str = "two-sided") -> int | None:
    """The fewest pairs (2 or more) at which a paired t-test at level `alpha` detects a true mean difference
    `difference` with probability `power`, where the differences have standard deviation `std` (the inverse of
    `detectable_difference`: `statsmodels.stats.power.TTestPower`'s power, pair count by pair count); 2 where `std`
    is 0, None beyond MOST_PAIRS. `alternative` "larger" is the one-sided test; "two-sided" is read as the one-sided
    test at alpha / 2, leaving out its chance of rejecting with the wrong sign, which is negligible where power is
    reached and which the noncentral t of the libraries returns as NaN for large effects."""
    if not difference > 0 or not std >= 0:
        raise ValueError(f"pairs to detect a difference need a difference > 0 and a spread >= 0; got {difference!r} "
                         f"and {std!r}.")
    if alternative not in ("two-sided", "larger"):
        raise ValueError(f"pairs to detect a difference take alternative 'two-sided' or 'larger'; got {alternative!r}.")
    if std == 0:
        return 2
    level = alpha / 2 if alternative == "two-sided" else alpha
    analysis = TTestPower()
    return next((pairs for pairs in range(2, MOST_PAIRS + 1) if analysis.power(
        effect_size=difference / std, nobs=pairs, alpha=level, alternative="larger") >= power), None)


@dataclass(frozen=True)
class MarginTest:
    """Two one-sided tests of an estimate against margins low_margin < value < high_margin (Schuirmann's TOST):
    `p_above` tests the null value <= low_margin, `p_below` the null value >= high_margin; `p` is the larger, the
    TOST p-value (an infinite margin is no bound: p 0 on that side, so a single margin is a non-inferiority test)."""

    estimate: float
    p_above: float
    p_below: float

    @property
    def p(self) -> float:
        return max(self.p_above, self.p_below)


def margin_test(estimate: float, standard_error: float, degrees_of_freedom: float, low_margin: float,
                high_margin: float = math.inf) -> MarginTest:
    """The two one-sided t tests of `estimate` (standard error and degrees of freedom the caller derives, as in
    `t_test`) against the margins, each from Student's t (`scipy.stats.t`); p below alpha on both sides is the
    (1 - 2 alpha) interval lying inside the margins. A standard error of 0 leaves no spread: the estimate is the
    value, p 0 on a side it lies inside and 1 on a side it does not."""
    if not low_margin < high_margin:
        raise ValueError(f"a margin test needs low_margin < high_margin; got {low_margin!r} and {high_margin!r}.")
    if standard_error == 0:
        return MarginTest(estimate, float(not estimate > low_margin), float(not estimate < high_margin))
    if not standard_error > 0:
        raise ValueError(f"a margin test needs a standard error >= 0; got {standard_error!r}.")
    above = float(stats.t.sf((estimate - low_margin) / standard_error, degrees_of_freedom))
    below = float(stats.t.cdf((estimate - high_margin) / standard_error, degrees_of_freedom))
    return MarginTest(estimate, above, below)
