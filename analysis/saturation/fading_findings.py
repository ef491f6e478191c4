"""Study D's synthetic findings (`fading_findings(study)`): how the weight of one strong key among n fades with n
under softmax and ssmax (exact) and under the drawn kernelised variants (fading.csv,
`experiments.saturation.tables.fading_table`), stated from the table's numbers.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.saturation.study import MAKE, SaturationStudy
from analysis.saturation.text import fading_label, listing, number, plus_minus
from common.statistics import loglog_slope

FADES_LIKE_ONE_OVER_N = 0.05  # a strong weight falling as n^slope, |slope + 1| at most this, fades like 1/n


def _fading_exponents(table: pd.DataFrame) -> str:
    """How each line's strong weight falls over the upper half of the key counts: w ~ n^slope, against 1/n."""
    key_counts = sorted(table["num_keys"].unique())
    upper = key_counts[min(len(key_counts) // 2, len(key_counts) - 2):]
    parts = []
    for label, group in table[table["num_keys"].isin(upper)].groupby("label", sort=True):
        slope = loglog_slope(group["num_keys"], group["strong_weight"])
        if slope is None:
            continue
        pace = ("like 1/n" if abs(slope + 1) <= FADES_LIKE_ONE_OVER_N else "slower than 1/n" if slope > -1
                else "faster than 1/n")
        parts.append(f"{label} n^{slope:.2f} ({pace})")
    if not parts:
        return ""
    return (f" Between n = {upper[0]} and n = {upper[-1]} the strong key's weight falls as " + ", ".join(parts)
            + f" (slope of log weight against log n; 'like 1/n' within ±{FADES_LIKE_ONE_OVER_N:g}).")


def _fading_drawn(table: pd.DataFrame) -> list[str]:
    """The drawn variants' strong weight at the smallest and largest n, n times it (1: no more than uniform
    weights), beside softmax, and how each line falls with n."""
    drawn = table[table["draws"] > 0]
    if drawn.empty:
        return []
    smallest, largest = table["num_keys"].min(), table["num_keys"].max()
    parts = []
    for label, group in drawn.groupby("label", sort=True):
        first, last = (row for _, row in group.set_index("num_keys").reindex([smallest, largest]).iterrows())
        parts.append(f"{label} {plus_minus(first['strong_weight'], first['strong_weight_se'])} at n = {smallest} and "
                     f"{plus_minus(last['strong_weight'], last['strong_weight_se'])} at n = {largest}, "
                     f"{number(largest * last['strong_weight'])} times the uniform 1/n")
    softmax = table[(table["normaliser"] == "softmax") & (table["num_keys"] == largest)]["strong_weight"]
    beside = (f" (softmax: {number(softmax.iloc[0])}, {number(largest * softmax.iloc[0])} times 1/n)"
              if len(softmax) else "")
    return [f"Study D, synthetic, drawn (q and keys in d = {listing(sorted(drawn['head_dim'].unique()))} dimensions "
            f"with q.k/√d = {listing(sorted(drawn['strong_logit'].unique()))} for the strong key and 0 for the others, "
            "weighed by each variant's reference formula; mean ± se over "
            f"{listing(sorted(drawn['draws'].unique()))} draws per n): the strong key's weight is " + "; ".join(parts)
            + beside + "." + _fading_exponents(table)]


def _fading_absent(study: SaturationStudy, table: pd.DataFrame) -> list[str]:
    """The setting's drawn variants that fading.csv lacks (not registered in the version that wrote it)."""
    if study.setting is None:
        return []
    absent = sorted({str(name) for name, _ in study.setting.fading_kernelised} - set(table["normaliser"]))
    if not absent:
        return []
    return [f"Study D, synthetic: the setting's {listing(absent)} {'is' if len(absent) == 1 else 'are'} not in "
            "fading.csv: the version that wrote it registers no such variant."]


def fading_findings(study: SaturationStudy) -> list[str]:
    """Study D's synthetic part: the largest weight of the exact rows at the smallest and largest n, the drawn
    rows' strong weight, how each line fades, and the setting's drawn variants the table lacks."""
    fading = study.fading
    if fading is None or fading.empty:
        return [f"Study D, synthetic (fading with n): no fading.csv in {study.path}; {MAKE} writes it."]
    table = fading.assign(label=[fading_label(row) for _, row in fading.iterrows()])
    smallest, largest = table["num_keys"].min(), table["num_keys"].max()
    strong = listing(sorted(table["strong_logit"].unique()))
    parts = []
    for label, group in table[table["draws"] == 0].groupby("label", sort=True):
        at = group.set_index("num_keys")["max_weight"]
        parts.append(f"{label} {number(at.get(smallest, math.nan))} at n = {smallest} and "
                     f"{number(at.get(largest, math.nan))} at n = {largest}")
    return [f"Study D, synthetic (fading.csv: one logit {strong} among n - 1 zeros): the largest weight is "
            + "; ".join(parts) + ".", *_fading_drawn(table), *_fading_absent(study, table)]


__all__ = ["FADES_LIKE_ONE_OVER_N", "fading_findings"]
