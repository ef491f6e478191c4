"""Which rows of a benchmark task the confirmation seeds tell apart from the task's best row, and how far apart
they are: a paired test over the seeds both rows scored, with the fixed test set's own sampling error, its p-values
Holm-corrected within the task. The quantile, p-value and correction are `common.statistics`' (scipy, statsmodels).

Every variant trains on the same confirmation seeds (the same seed of initialisation and of the data stream) and
is scored on the same fixed test set of m examples, so a row is compared with the best row (the highest mean of
its table on that task) seed by seed: d_i = row_i - best_i over the n seeds both scored (a seed whose run diverged
or failed is scored at the task's chance accuracy and counts). With d̄ the mean and s_d the standard deviation of
the differences, and p_a, p_b the two rows' mean accuracies over those seeds:

    V = s_d² / n + (p_a (1 - p_a) + p_b (1 - p_b)) / m        t = d̄ / √V

The second term is the binomial sampling error of the fixed test set, which every seed shares, so it does not
shrink with n. It treats the two rows' errors on the test set as independent; they are positively correlated (two
models tend to miss the same hard examples), which makes the true variance of the difference smaller, so the test
is conservative. (Where a task scores several positions per example, an example's score still lies in [0, 1] and
its variance is at most p (1 - p), so counting examples, not positions, errs the same way.) The degrees of freedom
are Welch-Satterthwaite's, the binomial term counting as infinitely many: df = (n - 1) V² / (s_d² / n)², so
s_d = 0 gives the normal distribution. The p-value is two-sided, from Student's t at df; V = 0 with d̄ = 0 is p = 1.
The effect size shown is d̄ with its 95% interval, d̄ ± t_{0.975, df} √V.

About 20 rows are compared on a task, so the p-values of a task are corrected together by Holm's step-down method;
a row is told apart from the best when its adjusted p is below ALPHA. Not told apart is not shown equal: the
interval of the difference says how large a difference the seeds leave possible.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from analysis.report.render import Block, Table, Text
from analysis.report.sections.shared import count, fmt
from common.statistics import holm, t_test

ALPHA = 0.05  # a Holm-adjusted p below this tells a row apart from the best
PROTOCOL = ("Verdicts: per task and per leaderboard table (causal rows and bidirectional rows apart), each row with "
            "2 seeds or more is compared with the row of highest mean by a paired t-test over the confirmation seeds "
            "both scored (the same seeds and data streams for every variant; a seed that diverged or failed counts at "
            "chance). Its variance adds the fixed test set's binomial sampling error, (p_a(1-p_a) + p_b(1-p_b)) / m "
            "with m test examples, to the spread over seeds, s_d² / n (conservative: it ignores that two models tend "
            "to miss the same examples); degrees of freedom by Welch-Satterthwaite; two-sided p from Student's t. The "
            f"p-values of a task are Holm-corrected together, and a row is told apart when its adjusted p is below "
            f"{ALPHA:g}. Each cell's accuracy also shows the Wilson 95% interval of its mean over the m test examples.")
COLUMNS = ["task", "variant", "compared with", "seeds paired", "mean difference", "interval low", "interval high",
           "degrees of freedom", "p", "Holm-adjusted p", "told apart"]


@dataclass(frozen=True)
class Comparison:
    """A row against the best row over `seeds` paired seeds: the mean difference (row - best), its interval, the
    degrees of freedom, the two-sided p-value and the standard error (√V) the test divides by."""

    seeds: int
    difference: float
    low: float
    high: float
    degrees_of_freedom: float
    p: float
    standard_error: float


def paired_test(row: Sequence[float], best: Sequence[float], test_size: float) -> Comparison:
    """The paired test of the module docstring: `row` and `best` are the two rows' accuracies, seed by seed, in the
    same order; `test_size` is m (math.inf leaves the test set's error out: the plain paired t-test)."""
    if len(row) != len(best) or len(row) < 2:
        raise ValueError(f"A paired test needs two seeds or more scored by both rows; got {len(row)} and {len(best)}.")
    if not test_size > 0:
        raise ValueError(f"A paired test needs the test set's size m > 0; got {test_size!r}.")
    seeds = len(row)
    differences = [a - b for a, b in zip(row, best, strict=True)]
    difference = statistics.fmean(differences)
    seeds_part = statistics.variance(differences) / seeds
    test_part = sum(p * (1 - p) for p in (statistics.fmean(row), statistics.fmean(best))) / test_size
    variance = seeds_part + test_part
    df = math.inf if seeds_part == 0 else (seeds - 1) * variance**2 / seeds_part**2
    if variance == 0:
        return Comparison(seeds, difference, difference, difference, df, 1.0 if difference == 0 else 0.0, 0.0)
    found = t_test(difference, math.sqrt(variance), df)
    return Comparison(seeds, difference, found.low, found.high, df, found.p, math.sqrt(variance))


def task_verdicts(task: str, rows: pd.DataFrame, scores: Mapping[tuple[str, str], Mapping[int, float]]) -> pd.DataFrame:
    """One task's rows of one table (columns variant, test mean, seeds scored, test size) against its best row:
    one line per other row with 2 seeds or more (`COLUMNS`); `scores[(variant, task)]` maps seed -> accuracy."""
    rows = rows[(rows["seeds scored"] >= 2) & rows["test mean"].notna()]
    if len(rows) < 2:
        return pd.DataFrame(columns=COLUMNS)
    best = rows.loc[rows["test mean"].idxmax()]
    best_scores = scores[(best["variant"], task)]
    lines = []
    for _, row in rows[rows["variant"] != best["variant"]].iterrows():
        own = scores[(row["variant"], task)]
        seeds = sorted(set(own) & set(best_scores))
        line = {"task": task, "variant": row["variant"], "compared with": best["variant"], "seeds paired": len(seeds)}
        if len(seeds) >= 2:
            found = paired_test([own[seed] for seed in seeds], [best_scores[seed] for seed in seeds],
                                best["test size"])
            line |= {"mean difference": found.difference, "interval low": found.low, "interval high": found.high,
                     "degrees of freedom": found.degrees_of_freedom, "p": found.p}
        lines.append(line)
    table = pd.DataFrame(lines).reindex(columns=COLUMNS)
    tested = table["p"].notna()
    table.loc[tested, "Holm-adjusted p"] = holm(table.loc[tested, "p"].tolist())
    table["told apart"] = table["Holm-adjusted p"].map(lambda p: "no verdict: fewer than 2 seeds in common"
                                                       if math.isnan(p) else "yes" if p < ALPHA else "no")
    return table


def p_text(p: float) -> str:
    return "–" if math.isnan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def _sentence(task: str, table: pd.DataFrame, label: str) -> str:
    """'passkey: dense has the highest mean; compared with it seed by seed (2 rows), the paired test tells local
    apart (Holm-adjusted p < 0.05); it does not tell linear apart, which does not make them equal: ...'."""
    apart = table[table["told apart"] == "yes"]["variant"].tolist()
    kept = table[table["told apart"] != "yes"]["variant"].tolist()
    parts = [f"the paired test tells {', '.join(apart)} apart (Holm-adjusted p < {ALPHA:g})"] if apart else []
    if kept:
        parts.append(f"{'it' if apart else 'the paired test'} does not tell {', '.join(kept)} apart, which does not "
                     "make them equal: each difference's 95% interval says how large a difference remains possible")
    return (f"{task}{label}: {table['compared with'].iloc[0]} has the highest mean; compared with it seed by seed "
            f"({count(len(table), 'row')}), " + "; ".join(parts) + ".")


def verdict_blocks(cells: pd.DataFrame, scores: Mapping[tuple[str, str], Mapping[int, float]], tasks: Sequence[str],
                   kind: str = "") -> list[Block]:
    """A verdicts table and a sentence per task of `tasks` that has two rows or more with 2 seeds or more among
    `cells` (one leaderboard table's cells); `kind` names a table other than the causal one ('bidirectional')."""
    label = f", {kind} rows" if kind else ""
    blocks: list[Block] = []
    for task in tasks:
        table = task_verdicts(task, cells[cells["task"] == task], scores)
        if table.empty:
            continue
        shown = table[["variant", "compared with", "seeds paired"]].assign(**{
            "mean difference": table["mean difference"].map(lambda value: fmt(value) if math.isnan(value)
                                                            else f"{value:+.3f}"),
            "95% interval of the difference": [f"{low:+.3f} to {high:+.3f}" if not math.isnan(low) else "–"
                                               for low, high in zip(table["interval low"], table["interval high"],
                                                                    strict=True)],
            "p": table["p"].map(p_text), "Holm-adjusted p": table["Holm-adjusted p"].map(p_text),
            "told apart": table["told apart"]})
        caption = (f"Verdicts on {task}{label}: each row against the row of highest mean, paired over the seeds both "
                   "scored; the mean difference (row minus best) and its 95% interval, the p-value and the "
                   "Holm-adjusted p over the task's comparisons")
        blocks += [Table(f"verdicts-{task}" + (f"-{kind}" if kind else ""), caption, shown, data=table),
                   Text(_sentence(task, table, label))]
    return blocks
