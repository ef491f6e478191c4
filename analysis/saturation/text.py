"""How the softmax saturation read-back writes its numbers: in the findings, the figures' annotations and
the report's tables alike (`number`, `plus_minus` and the texts of one table row each).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd


def number(value: float, digits: int = 3) -> str:
    """`digits` significant digits, no exponent between 1e-4 and 10^digits ('n/a' for NaN)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= digits - 1:
        return f"{value:.0f}"
    if magnitude < -4:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits - 1 - magnitude}f}"


def percent(fraction: float) -> str:
    return f"{number(100 * fraction)}%"


def plus_minus(mean: float, se: float) -> str:
    """mean ± standard error, both to the standard error's second significant digit."""
    if se is None or not math.isfinite(se) or not math.isfinite(mean):
        return number(mean)
    if se == 0:
        return f"{number(mean)} ± 0"
    if 0 < abs(mean) < 1e-4:
        return f"{mean:.2e} ± {se:.1e}"
    decimals = min(max(1 - math.floor(math.log10(se)), 0), 6)
    return f"{mean:.{decimals}f} ± {se:.{decimals}f}"


def listing(values: list[Any]) -> str:
    return ", ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in values)


def steps_text(row: pd.Series) -> str:
    """A learning_speed row's steps to THRESHOLD as 'mean ± se (reached/runs)', or 'never (0/runs)'."""
    reached, runs = int(row["reached"]), int(row["runs"])
    if not reached:
        return f"never (0/{runs})"
    return f"{plus_minus(row['steps_mean'], row['steps_se'])} ({reached}/{runs})"


def early_text(row: pd.Series) -> str:
    """A learning_speed row's early accuracy as 'mean ± se'."""
    return plus_minus(row["early_accuracy_mean"], row["early_accuracy_se"])


def fading_label(row: pd.Series) -> str:
    """A fading.csv row's normaliser as the legend and the text name it: softmax, ssmax with its length scale,
    or a drawn variant with the options it was given (`performer num_features=512`)."""
    if row["normaliser"] == "softmax":
        return "softmax"
    if row["normaliser"] == "ssmax":
        return f"ssmax s = {row['length_scale']:g}"
    text = row.get("variant_options")
    try:
        options = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        options = None
    if not isinstance(options, dict):  # not what fading_table writes: shown as it is
        return f"{row['normaliser']} {text}"
    return " ".join([str(row["normaliser"]), *(f"{name}={value}" for name, value in sorted(options.items()))])


def variance_text(q_variance: float, k_variance: float) -> str:
    """The per-component variances of q and k as the figures and findings name them."""
    return f"Var q = {number(q_variance)}, Var k = {number(k_variance)}"
