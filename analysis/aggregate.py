"""Aggregation shared by the report's sections and the saturation read-back."""

from __future__ import annotations

import pandas as pd


def over_seeds(frame: pd.DataFrame, keys: list[str], columns: list[str], *, spread: bool = False) -> pd.DataFrame:
    """Per group of `keys` (sorted): the mean of each column over the runs (seeds), and their number as
    `seeds`. With `spread`, each column gives `<column>_mean` and `<column>_std` (the sample standard
    deviation, NaN for one run) instead of its mean under its own name."""
    grouped = frame.groupby(keys, sort=True)
    if spread:
        stats = grouped[columns].agg(["mean", "std"])
        stats.columns = [f"{column}_{statistic}" for column, statistic in stats.columns]
    else:
        stats = grouped[columns].mean()
    return stats.join(grouped.size().rename("seeds")).reset_index()
