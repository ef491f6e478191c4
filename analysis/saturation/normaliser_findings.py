"""The normalisers' findings of the saturation studies: how sigmoid, sparsemax and entmax weigh the same q.k as
the softmax at initialisation (study A, `SaturationStudy.normalisers`) and how sparse dense attention with them
is during training (study B, `study.normaliser_dynamics`), stated from the tables' numbers.
"""

from __future__ import annotations

import pandas as pd

from analysis.saturation.study import MAKE, SaturationStudy, normaliser_dynamics, shown_dtype
from analysis.saturation.text import listing, number, percent
from experiments.saturation.normaliser_weights import MEASURED

UNDERFLOW = ("softmax", "sigmoid")  # normalisers whose weights are 0 only by underflow


def _in_order(names) -> list[str]:
    """The softmax first, then the others in the order `variants.normalisers` lists them (unknown ones last)."""
    return sorted(names, key=lambda name: (MEASURED.index(name) if name in MEASURED else len(MEASURED), name))


def _cell_text(name: str, unscaled: pd.Series, scaled: pd.Series) -> str:
    return (f"{name}: largest weight {number(unscaled['max_weight'])} against {number(scaled['max_weight'])}, "
            f"exact zeros {percent(unscaled['zero_fraction'])} against {percent(scaled['zero_fraction'])} of a "
            f"row's keys, entropy / log n {number(unscaled['entropy_over_log_n'])} against "
            f"{number(scaled['entropy_over_log_n'])}")


def _a_largest_cell(table: pd.DataFrame, dtype: str) -> list[str]:
    """Each normaliser unscaled against scaled at the largest head dim and key count."""
    cell = table[(table["head_dim"] == table["head_dim"].max()) & (table["num_keys"] == table["num_keys"].max())]
    rows = cell.set_index(["normaliser", "normalisation"])
    names = _in_order(name for name in cell["normaliser"].unique()
                      if (name, "unscaled") in rows.index and (name, "scaled") in rows.index)
    if not names:
        return []
    parts = [_cell_text(name, rows.loc[(name, "unscaled")], rows.loc[(name, "scaled")]) for name in names]
    notes = ""
    if "sigmoid" in names:
        notes += (f" Sigmoid's rows sum to {number(rows.loc[('sigmoid', 'unscaled'), 'weight_sum'])} unscaled and "
                  f"{number(rows.loc[('sigmoid', 'scaled'), 'weight_sum'])} scaled, not 1: its entropy is that of "
                  "its weights divided by that sum, its largest weight the raw one.")
    underflow = [name for name in names if name in UNDERFLOW and (cell.loc[cell["normaliser"] == name,
                                                                           "zero_fraction"] > 0).any()]
    if underflow:
        notes += (f" The zeros of {listing(underflow)} are {dtype} underflow: in exact arithmetic they give every "
                  "key some weight.")
    return [f"Study A, normalisers (init_stats.csv, unit variance, {dtype}, d_k = {cell['head_dim'].iloc[0]}, n = "
            f"{cell['num_keys'].iloc[0]}; unscaled against scaled, means over samples; the same draws for every "
            "normaliser): " + "; ".join(parts) + "." + notes]


def _a_zeros_by_head_dim(table: pd.DataFrame, dtype: str) -> list[str]:
    """The fraction of exact zeros per row against head dim at the largest key count, unscaled and scaled."""
    cell = table[table["num_keys"] == table["num_keys"].max()]
    parts = []
    for name in _in_order(cell["normaliser"].unique()):
        rows = cell[cell["normaliser"] == name]
        if not (rows["zero_fraction"] > 0).any():
            continue
        by = {normalisation: rows[rows["normalisation"] == normalisation].sort_values("head_dim")
              for normalisation in ("unscaled", "scaled")}
        parts.append(f"{name} " + " / ".join(", ".join(percent(value) for value in by[normalisation]["zero_fraction"])
                                             for normalisation in ("unscaled", "scaled")))
    if not parts:
        return []
    return [f"Study A, normalisers ({dtype}, n = {cell['num_keys'].iloc[0]}): the fraction of a row's keys with "
            f"weight exactly 0 at d_k = {listing(sorted(cell['head_dim'].unique()))}, unscaled / scaled: "
            + "; ".join(parts) + "."]


def init_normaliser_findings(study: SaturationStudy) -> list[str]:
    """Study A's normalisers: each unscaled against scaled at the largest cell, and their exact zeros against
    head dim; a study without them says how to make them."""
    table = study.normalisers
    if table is None or not (table["normaliser"] != "softmax").any():
        return [f"Study A, normalisers: init_stats.csv holds softmax rows only; {MAKE} adds the setting's other "
                "normalisers (sigmoid, sparsemax, entmax15, entmax_adaptive) on the same draws."]
    dtype = shown_dtype(table)
    shown = table[table["dtype"] == dtype]
    return [*_a_largest_cell(shown, dtype), *_a_zeros_by_head_dim(shown, dtype)]


def dynamics_normaliser_findings(study: SaturationStudy) -> list[str]:
    """Study B's dense runs per normaliser: exact zeros, largest weight and entropy at the first and last
    evaluation (nothing when B trained no other normaliser)."""
    compared = normaliser_dynamics(study)
    result = []
    for head_dim, rows in compared.groupby("head_dim", sort=True):
        rows = rows.set_index("normaliser").loc[_in_order(rows["normaliser"])].reset_index()  # the softmax first
        end_steps, seeds = listing(sorted(rows["end_step"].unique())), int(rows["runs"].max())

        def change(statistic: str, rows: pd.DataFrame = rows) -> str:
            return ", ".join(f"{row['variant_name']} {number(row[f'start_{statistic}'])} → "
                             f"{number(row[f'end_{statistic}'])}" for _, row in rows.iterrows())

        undefined = rows.loc[rows["end_entropy_over_log_n"].isna(), "variant_name"].tolist()
        result.append(
            f"Study B, normalisers (dense runs B-dense*-d{head_dim}-*, up to {seeds} seed{'s' * (seeds != 1)} each; "
            f"mean over rows, layers, heads and seeds at step 0 → step {end_steps}): the fraction of a "
            f"row's keys with weight exactly 0: {change('zero_fraction')}; the largest weight: "
            f"{change('max_weight')}; entropy / log n: {change('entropy_over_log_n')}"
            + (f" ({listing(undefined)}: n/a, rows that do not sum to 1)" if undefined else "") + ".")
    return result


__all__ = ["dynamics_normaliser_findings", "init_normaliser_findings"]
