"""Protocol 2's contrasts: every variant against dense, per task and per metric, over the confirmation seeds both
ran; which rows of a cell share a tier; which cells cannot discriminate; and the smallest difference each cell could
detect. Every interval, test, correction and power calculation is `common.statistics`' (scipy, statsmodels); the
Kaplan-Meier median is statsmodels' `SurvfuncRight`.

The input is one tidy frame (`tidy`, from the confirmation results): a row per (variant, task, seed, metric) with
its value. The metrics:

- "test accuracy"; "accuracy at length N" for each evaluation length a run reports (one metric per length);
- "steps to 0.9" and "steps to 0.99": the step of the first validation evaluation at or above the level on the full
  validation set, an event; a run that never reached it is censored at its budget and its value is the budget (the
  restricted value, min(step, budget)). No seed is dropped: a cell's summary is the restricted mean over every seed
  (a seed that never reached the level counts the budget), beside the Kaplan-Meier median where it is defined (the
  first step at which fewer than half the seeds have yet to reach the level; undefined while half or more never
  do), and the paired contrast on steps uses the restricted values;
- "curve area": the normalised area under the run's validation curve.

A confirmation seed whose run diverged or failed is never dropped (dropping it would judge a variant on its
survivors): the caller passes `at_chance`'s result for it, a run that stayed at the task's chance accuracy: its test
accuracy and its accuracy at every length at chance, both events censored at the budget, and its curve flat at chance
at the task's evaluation steps (so its area is that curve's).

Contrasts, fixed in advance: each variant against REFERENCE (dense) in each (task, metric) cell, d_i = variant_i -
dense_i over the n seeds both have, by the paired t-test with n - 1 degrees of freedom (`paired_difference`), with
the 95% interval of the mean difference. Where the differences are the same on every seed (`identical`: a steps
metric read every K steps, or two runs at the same budget that never reach a level) the test takes its limit, what
`scipy.stats.ttest_rel` returns for them: a difference other than 0 shared by every seed has p 0 (an infinite t)
and its interval is the difference itself; no difference on any seed has p 1. Either way the contrast is tested, so
a row that is worse on every seed by the same amount is told apart like one that is worse by nearly the same amount
(whose t is large and finite), never left in the best row's tier for want of a spread. The family of Holm's
correction is one metric over every task and variant (`family`: the evaluation lengths together count as the one
metric "accuracy at length"); the contrasts with a p in cells that discriminate are corrected together, and one is
told apart when its adjusted p is below ALPHA.

Not discriminating: an accuracy cell (test accuracy, accuracy at a length) where dense's mean over its seeds lies
within EDGE of the ceiling (1.0), or at most EDGE above the task's chance accuracy (below it included), inclusive
(dense at 0.99 is not discriminating, dense at 0.989 is; `accuracy_edge`, which the claims read too); a
steps-to-event cell where dense never reaches the level on any seed, or where every run of every variant reaches it
at its first evaluation. Such a cell is labelled, gets no test, no tier and no place in any family or average. The
curve area has no such edge: no stop caps it.

Detectable difference: per contrast, the smallest mean difference the paired t-test over its n seeds detects with
POWER at the level ALPHA / k, k the number of tested contrasts of its family (the first and strictest step of Holm's
procedure, so the figure is conservative), from the standard deviation of the paired differences
(`detectable_difference`, statsmodels' TTestPower). Where a contrast's own deviation is 0 or undefined (identical
differences, fewer than two seeds), the cell's pooled deviation is used: the differences' variances of every contrast
of the cell with two seeds or more, weighted by their degrees of freedom. The cell's own detectable difference (the
sentence's "how large a difference remains possible", the forest plot's band) is the pooled one at the fewest seeds
paired in the cell. For steps it is also given relative to dense's restricted mean (the protocol asks 20% in steps to
0.9).

Tiers, never ranks: in each discriminating cell the row with the best mean (highest accuracy or area, fewest
restricted steps) is compared with every other row by the same paired test; the p-values of that round are
Holm-corrected together, and the best row and every row not told apart from it (adjusted p at or above ALPHA, or no
p: fewer than two seeds in common) form tier 1. The same is repeated on the rows left, for
tier 2, and so on until every row has a tier.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.duration.survfunc import SurvfuncRight

from analysis.benchmark.verdicts import ALPHA, p_text
from common.statistics import IDENTICAL, detectable_difference, holm, mean_interval, paired_difference
from experiments.benchmark.ledger import curve_area
from experiments.benchmark.parity import REFERENCE

POWER = 0.8  # of the detectable difference
EDGE = 0.01  # dense's mean within this of the ceiling or of chance (inclusive): the accuracy cell does not discriminate
CEILING = 1.0
AT_FLOOR, AT_CEILING = "floor", "ceiling"  # where an accuracy sits that cannot discriminate (`accuracy_edge`)
LEVELS = ("0.9", "0.99")  # the validation levels whose first reaching is an event
TEST_ACCURACY, CURVE_AREA, AT_LENGTH = "test accuracy", "curve area", "accuracy at length"
COLUMNS = ["variant", "task", "seed", "metric", "value", "censored", "chance", "budget", "first evaluation"]
CURVE_COLUMNS = ["variant", "task", "seed", "step", "wall seconds", "validation accuracy"]
FAMILY = (f"Holm's correction runs over one metric at a time: every variant's contrast with {REFERENCE} on every task "
          f"(the evaluation lengths together count as one metric, '{AT_LENGTH}'), leaving out the cells that do not "
          "discriminate and the contrasts whose differences are the same on every seed, which carry no p.")


def event_metric(level: str) -> str:
    return f"steps to {level}"


def is_event(metric: str) -> bool:
    return metric in {event_metric(level) for level in LEVELS}


def family(metric: str) -> str:
    """The Holm family a metric belongs to: the metric itself, or 'accuracy at length' for every length."""
    return AT_LENGTH if metric.startswith(AT_LENGTH) else metric


def tidy(results: Iterable[tuple[str, str, int, Mapping[str, Any]]]) -> pd.DataFrame:
    """The tidy frame of `COLUMNS` from (variant, task, seed, result) of confirmation runs: a row per metric; an
    event's value is its step, or the budget where it was never reached (censored); `censored` is NA, and `budget`
    and `first evaluation` NaN, on the other metrics."""
    rows = []
    for variant, task, seed, result in results:
        key = {"variant": variant, "task": task, "seed": int(seed), "chance": result["chance_accuracy"]}
        plain = [(TEST_ACCURACY, result["test_accuracy"]), (CURVE_AREA, result["curve_area"]),
                 *((f"{AT_LENGTH} {entry['length']}", entry["accuracy"])
                   for entry in result.get("accuracy_by_length", []))]
        rows += [{**key, "metric": metric, "value": value, "censored": pd.NA} for metric, value in plain]
        budget, first = result["budget_steps"], min((step for step, _, _ in result["curve"]), default=math.nan)
        for level in LEVELS:
            step = result["events"][level]
            rows.append({**key, "metric": event_metric(level), "value": budget if step is None else step,
                         "censored": step is None, "budget": budget, "first evaluation": first})
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    return frame.astype({"value": float, "censored": "boolean", "budget": float, "first evaluation": float})


def at_chance(chance: float, budget: int, evaluations: list[int], lengths: list[int]) -> dict[str, Any]:
    """The result a diverged or failed confirmation seed counts as (the module docstring's rule): chance accuracy
    everywhere, at the evaluation steps `evaluations` and the lengths `lengths`, the events censored at `budget`."""
    curve = [[step, math.nan, chance] for step in evaluations]
    return {"chance_accuracy": chance, "test_accuracy": chance, "budget_steps": budget, "curve": curve,
            "curve_area": curve_area(curve, budget), "events": dict.fromkeys(LEVELS),
            "accuracy_by_length": [{"length": length, "accuracy": chance} for length in lengths]}


def curve_frame(results: Iterable[tuple[str, str, int, Mapping[str, Any]]]) -> pd.DataFrame:
    """The learning curves of (variant, task, seed, result): a row per validation evaluation (`CURVE_COLUMNS`)."""
    rows = [{"variant": variant, "task": task, "seed": int(seed), "step": step, "wall seconds": seconds,
             "validation accuracy": accuracy}
            for variant, task, seed, result in results for step, seconds, accuracy in result["curve"]]
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def kaplan_meier_median(steps: pd.Series, censored: pd.Series) -> float:
    """The Kaplan-Meier median of an event's steps (statsmodels: the first step at which the share of runs yet to
    reach it falls below one half); NaN where it does not within the budget."""
    fit = SurvfuncRight(steps.to_numpy(float), (~censored.astype(bool)).to_numpy(int))
    return float(fit.quantile(0.5)) if len(fit.surv_prob) else math.nan


def summaries(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (task, metric, variant): the seeds, the mean over all of them (for an event, the restricted mean: a seed
    that never reached the level counts the budget), its standard deviation and 95% interval, and for an event how
    many seeds reached it and the Kaplan-Meier median."""
    rows = []
    for (task, metric, variant), group in frame.groupby(["task", "metric", "variant"], sort=False):
        values = group["value"].tolist()
        interval = mean_interval(values) if len(values) > 1 else None
        row = {"task": task, "metric": metric, "variant": variant, "seeds": len(values),
               "mean": statistics.fmean(values), "std": interval.std if interval else math.nan,
               "low": interval.low if interval else math.nan, "high": interval.high if interval else math.nan}
        if is_event(metric):
            row |= {"seeds reaching": int((~group["censored"].astype(bool)).sum()),
                    "Kaplan-Meier median": kaplan_meier_median(group["value"], group["censored"])}
        rows.append(row)
    return pd.DataFrame(rows)


def not_discriminating(cell: pd.DataFrame) -> str:
    """Why a (task, metric) cell of the tidy frame does not discriminate (the module docstring's rule), or ''."""
    metric, dense = cell["metric"].iloc[0], cell[cell["variant"] == REFERENCE]
    if dense.empty:
        return ""
    if is_event(metric):
        if dense["censored"].astype(bool).all():
            return f"{REFERENCE} never reaches the level on any seed"
        if (~cell["censored"].astype(bool) & (cell["value"] == cell["first evaluation"])).all():
            return "every run reaches the level at its first evaluation"
        return ""
    if metric == CURVE_AREA:
        return ""
    mean, chance = statistics.fmean(dense["value"]), dense["chance"].iloc[0]
    edge = accuracy_edge(mean, chance)
    if edge == AT_CEILING:
        return f"{REFERENCE}'s mean {mean:.3f} is within {EDGE:g} of the ceiling {CEILING:g}"
    if edge == AT_FLOOR:
        return f"{REFERENCE}'s mean {mean:.3f} is within {EDGE:g} of chance ({chance:.3f}) or below it"
    return ""


def accuracy_edge(mean: float, chance: float) -> str:
    """AT_CEILING where an accuracy `mean` lies within EDGE of the ceiling, AT_FLOOR where it lies at most EDGE above
    the task's `chance` (below it included), each inclusive; '' where it can discriminate (or is NaN)."""
    if CEILING - mean <= EDGE + IDENTICAL:
        return AT_CEILING
    return AT_FLOOR if mean - chance <= EDGE + IDENTICAL else ""


def _paired(wide: pd.DataFrame, variant: str, other: str) -> dict[str, Any]:
    """`variant` against `other` over the seeds (rows of `wide`) both have: the seeds paired, the mean difference,
    its interval, the p-value, whether the differences are identical and their standard deviation."""
    both = wide[[variant, other]].dropna()
    row: dict[str, Any] = {"seeds paired": len(both), "difference": math.nan, "low": math.nan, "high": math.nan,
                           "p": math.nan, "identical": False, "sd of differences": math.nan}
    if len(both) < 2:
        return row
    found = paired_difference(both[variant].tolist(), both[other].tolist())
    if found.identical:  # the t-test's limit (the module docstring): p 0 for a shared difference, 1 for none
        return row | {"difference": found.estimate, "low": found.estimate, "high": found.estimate,
                      "p": 0.0 if abs(found.estimate) > IDENTICAL else 1.0, "identical": True,
                      "sd of differences": 0.0}
    return row | {"difference": found.estimate, "low": found.low, "high": found.high, "p": found.p,
                  "identical": False,
                  "sd of differences": float(np.std(both[variant] - both[other], ddof=1))}


def _pooled_sd(rows: pd.DataFrame) -> float:
    """The standard deviation of the paired differences pooled over contrasts with two seeds or more (weighted by
    their degrees of freedom); NaN without any, and NaN where none has any spread (every difference the same on every
    seed), which leaves no detectable difference to state rather than one of 0."""
    rows = rows[rows["seeds paired"] >= 2]
    degrees = rows["seeds paired"] - 1
    pooled = math.sqrt((degrees * rows["sd of differences"] ** 2).sum() / degrees.sum()) if len(rows) else math.nan
    return pooled if pooled > 0 else math.nan


def _verdict(row: pd.Series) -> str:
    if row["not discriminating"]:
        return "not discriminating"
    if row["seeds paired"] < 2:
        return "fewer than 2 seeds in common"
    return "yes" if row["Holm-adjusted p"] < ALPHA else "no"


def contrasts(frame: pd.DataFrame) -> pd.DataFrame:
    """Every variant against dense per (task, metric) of the tidy frame: the paired test, the Holm-adjusted p over
    its family, whether it is told apart, and the detectable differences (the module docstring's rules)."""
    rows = []
    for (task, metric), cell in frame.groupby(["task", "metric"], sort=False):
        wide = cell.pivot(index="seed", columns="variant", values="value")
        reason = not_discriminating(cell)
        dense = wide[REFERENCE].mean() if REFERENCE in wide else math.nan
        rows += [{"task": task, "metric": metric, "family": family(metric), "variant": variant,
                  "not discriminating": reason, "dense mean": dense, **_paired(wide, variant, REFERENCE)}
                 for variant in wide.columns if variant != REFERENCE and REFERENCE in wide]
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    tested = (table["not discriminating"] == "") & table["p"].notna()
    table["Holm-adjusted p"] = math.nan
    table["family size"] = 0
    for name in table["family"].unique():
        members = tested & (table["family"] == name)
        table.loc[members, "Holm-adjusted p"] = holm(table.loc[members, "p"].tolist())
        table.loc[table["family"] == name, "family size"] = int(members.sum())
    table["told apart"] = table.apply(_verdict, axis=1)
    return _with_detectable(table)


def _with_detectable(table: pd.DataFrame) -> pd.DataFrame:
    """The contrast table with each contrast's detectable difference and its cell's (pooled deviation, fewest
    seeds), at POWER and ALPHA / family size; for steps also relative to dense's restricted mean."""
    parts = []
    for _, cell in table.groupby(["task", "metric"], sort=False):
        pooled, fewest = _pooled_sd(cell), int(cell["seeds paired"].min())
        alpha = ALPHA / max(1, int(cell["family size"].iloc[0]))
        own = cell["sd of differences"].where(~cell["identical"] & (cell["sd of differences"] > 0), pooled)
        cell = cell.assign(**{
            "cell sd": pooled, "cell alpha": alpha,
            "detectable difference": [detectable_difference(sd, int(n), alpha) if n >= 2 and not math.isnan(sd)
                                      else math.nan for sd, n in zip(own, cell["seeds paired"], strict=True)],
            "cell detectable difference": (detectable_difference(pooled, fewest, alpha)
                                           if fewest >= 2 and not math.isnan(pooled) else math.nan)})
        parts.append(cell)
    table = pd.concat(parts, ignore_index=True)
    steps = table["metric"].map(is_event)
    table["detectable relative to dense"] = (table["cell detectable difference"] / table["dense mean"]).where(steps)
    return table


def _best(means: pd.Series, metric: str) -> str:
    return str(means.idxmin() if is_event(metric) else means.idxmax())


def _cell_tiers(wide: pd.DataFrame, metric: str) -> list[dict[str, Any]]:
    """The tiers of one cell's rows (`wide`: seeds x variants), by the module docstring's rule."""
    remaining, tier, rows = list(wide.columns), 1, []
    while remaining:
        means = wide[remaining].mean()
        best = _best(means, metric)
        tests = {variant: _paired(wide, variant, best) for variant in remaining if variant != best}
        tested = [variant for variant, test in tests.items() if not math.isnan(test["p"])]
        adjusted = dict(zip(tested, holm([tests[variant]["p"] for variant in tested]), strict=True))
        members = [best, *(variant for variant in tests if adjusted.get(variant, 1.0) >= ALPHA)]
        rows += [{"variant": variant, "tier": tier, "mean": means[variant], "best of its tier": best,
                  "Holm-adjusted p against it": adjusted.get(variant, math.nan)} for variant in members]
        remaining = [variant for variant in remaining if variant not in members]
        tier += 1
    return rows


def tiers(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (task, metric, variant) of the cells that discriminate: its tier, its mean (for steps, the restricted
    mean), the best row of its tier and its Holm-adjusted p against that row (NaN for the best itself)."""
    rows = []
    for (task, metric), cell in frame.groupby(["task", "metric"], sort=False):
        if not not_discriminating(cell):
            wide = cell.pivot(index="seed", columns="variant", values="value")
            rows += [{"task": task, "metric": metric, **row} for row in _cell_tiers(wide, metric)]
    return pd.DataFrame(rows, columns=["task", "metric", "variant", "tier", "mean", "best of its tier",
                                       "Holm-adjusted p against it"])


def number(metric: str, value: float, signed: bool = True) -> str:
    """A value of `metric` as the page writes it: steps whole, accuracies and areas to three decimals."""
    sign = "+" if signed else ""
    return "–" if math.isnan(value) else f"{value:{sign}.0f}" if is_event(metric) else f"{value:{sign}.3f}"


def _differs(row: pd.Series) -> str:
    interval = ("the same on every seed" if row["identical"] else f"95% interval {number(row['metric'], row['low'])} "
                f"to {number(row['metric'], row['high'])}")
    return (f"{row['variant']} by {number(row['metric'], row['difference'])} ({interval}; Holm-adjusted p "
            f"{p_text(row['Holm-adjusted p'])})")


def sentence(cell: pd.DataFrame) -> str:
    """One (task, metric) cell of the contrast table in a sentence: which variants differ from dense, by how much
    with its interval; the others, and how large a difference remains possible (the detectable difference)."""
    first = cell.iloc[0]
    task, metric = first["task"], first["metric"]
    head = f"{task}, {metric}"
    if first["not discriminating"]:
        return f"{head}: not discriminating ({first['not discriminating']}); left out of every average."
    apart, kept = cell[cell["told apart"] == "yes"], cell[cell["told apart"] != "yes"]
    parts = [f"differs from {REFERENCE}: " + "; ".join(_differs(row) for _, row in apart.iterrows())] if len(apart) \
        else []
    if len(kept):
        detectable = number(metric, first["cell detectable difference"], signed=False)
        relative = first["detectable relative to dense"]
        share = "" if math.isnan(relative) else f" steps ({relative:.0%} of {REFERENCE}'s restricted mean)"
        names = ", ".join(kept["variant"])
        lead = f"no variant is told apart ({names})" if apart.empty else \
            f"{names} {'is' if len(kept) == 1 else 'are'} not told apart"
        pronoun = "it" if len(kept) == 1 else "them"
        possible = ("fewer than 2 seeds in common leave no detectable difference to state"
                    if math.isnan(first["cell detectable difference"]) else
                    f"a difference of {detectable}{share} or more would have been detected with {POWER:.0%} power at "
                    "the Holm level, and smaller ones remain possible")
        parts.append(f"{lead}, which does not make {pronoun} equal to {REFERENCE}: {possible}")
    return f"{head}, each variant against {REFERENCE} paired by seed: " + "; ".join(parts) + "."


def sentences(table: pd.DataFrame) -> list[str]:
    """`sentence` for every (task, metric) cell of the contrast table, in its order."""
    return [sentence(cell) for _, cell in table.groupby(["task", "metric"], sort=False)]
