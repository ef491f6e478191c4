"""The findings of a softmax saturation study (`findings(study)`): sentences stating the measured numbers,
computed from the tables that `analysis.saturation.study.load` reads, never typed in; the numbers are
written by `analysis.saturation.text`, as in the figures' annotations and the report's tables. Study D's
synthetic findings are stated in `analysis.saturation.fading_findings`, the other normalisers' (A and B) in
`analysis.saturation.normaliser_findings`.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.aggregate import over_seeds
from analysis.saturation.fading_findings import fading_findings
from analysis.saturation.normaliser_findings import dynamics_normaliser_findings, init_normaliser_findings
from analysis.saturation.study import MAKE, THRESHOLD, SaturationStudy, learning_speed, shown_dtype
from analysis.saturation.text import (
    early_text,
    listing,
    number,
    percent,
    plus_minus,
    steps_text,
    variance_text,
)
from common.statistics import t_half_width
from experiments.run.attention_stats import SATURATED
from experiments.saturation.tables import VANISHING_DERIVATIVE

CONFIDENCE = 0.95  # study B's comparisons: a difference of means counts beyond its two-sided t interval at this level


def _values(runs: pd.DataFrame, column: str) -> str:
    return listing(sorted(runs[column].dropna().unique().tolist())) if column in runs else "?"


def _experiment(runs: pd.DataFrame, letter: str, *, lr: bool = True) -> str:
    """What the runs of one study are, read from their configs."""
    text = (f"{len(runs)} run{'' if len(runs) == 1 else 's'} {letter}-* on {_values(runs, 'task')} at "
            f"{_values(runs, 'task.seq_len')} tokens, "
            f"model dim {_values(runs, 'model.dim')}, depth {_values(runs, 'model.depth')}, "
            f"{_values(runs, 'model.heads')} heads, {_values(runs, 'train.steps')} steps of batch "
            f"{_values(runs, 'train.batch_size')}")
    if lr:
        text += f" at lr {_values(runs, 'lr')}"
    return text + f", seeds {_values(runs, 'seed')}"


def _missing_runs(study: SaturationStudy, letter: str, what: str) -> str:
    return (f"Study {letter} ({what}): no finished runs tagged {letter} under {study.path / 'runs'}; {MAKE} trains "
            "them (and resumes unfinished ones).")


def _largest_cell(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the largest head dim and key count."""
    return table[(table["head_dim"] == table["head_dim"].max()) & (table["num_keys"] == table["num_keys"].max())]


def _a_largest_cell(init: pd.DataFrame, table: pd.DataFrame, source: str) -> list[str]:
    """Unscaled against scaled at the largest head dim and key count, and the derivatives that vanish there."""
    cell = _largest_cell(table)
    unscaled, scaled = cell[cell["normalisation"] == "unscaled"], cell[cell["normalisation"] == "scaled"]
    if not len(unscaled) or not len(scaled):
        return []
    u, s = unscaled.iloc[0], scaled.iloc[0]
    largest_dim, largest_n = u["head_dim"], u["num_keys"]
    float_rows = init[(init["normalisation"] == "unscaled") & (init["head_dim"] == largest_dim)
                      & (init["num_keys"] == largest_n)].sort_values("dtype")
    return [
        f"{source}: at d_k = {largest_dim} and n = {largest_n} unscaled attention puts a mean largest weight of "
        f"{plus_minus(u['max_weight'], u['max_weight_se'])} on one key and "
        f"{percent(u['frac_max_above_0.99'])} of rows above {SATURATED:g}; scaled by 1/√d_k: "
        f"{plus_minus(s['max_weight'], s['max_weight_se'])} and {percent(s['frac_max_above_0.99'])}. "
        "In the same cell entropy / log n is "
        f"{plus_minus(u['entropy_over_log_n'], u['entropy_over_log_n_se'])} unscaled against "
        f"{plus_minus(s['entropy_over_log_n'], s['entropy_over_log_n_se'])} scaled, and the softmax Jacobian's "
        f"norm {plus_minus(u['jacobian_norm'], u['jacobian_norm_se'])} against "
        f"{plus_minus(s['jacobian_norm'], s['jacobian_norm_se'])}.",
        f"Study A (init_stats.csv, unscaled, d_k = {largest_dim}, n = {largest_n}): the fraction of softmax "
        f"derivatives p(1 - p) below {VANISHING_DERIVATIVE:g} is "
        + " and ".join(f"{plus_minus(row['frac_grad_below_1e-10'], row['frac_grad_below_1e-10_se'])} "
                       f"in {row['dtype']}" for _, row in float_rows.iterrows()) + ".",
    ]


def _a_qk_variance(init: pd.DataFrame, dtype: str) -> list[str]:
    exact = init[(init["normalisation"] == "unscaled") & (init["num_keys"] == init["num_keys"].max())]
    exact = exact[exact["dtype"] == ("float64" if (exact["dtype"] == "float64").any() else dtype)]
    if not len(exact):
        return []
    return [f"Study A (init_stats.csv, unscaled, {exact['dtype'].iloc[0]}, n = {exact['num_keys'].iloc[0]}): the "
            "measured variance of q.k is " + "; ".join(
                f"{plus_minus(row['qk_variance'], row['qk_variance_se'])} at d_k = {row['head_dim']}"
                for _, row in exact.sort_values("head_dim").iterrows()) + " (closed form: d_k)."]


def _a_onset(table: pd.DataFrame, source: str) -> list[str]:
    parts = []
    for num_keys, group in table[table["normalisation"] == "unscaled"].groupby("num_keys", sort=True):
        group = group.sort_values("head_dim")
        onset = _onset(group["head_dim"].tolist(), (group["frac_max_above_0.99"] > 0.5).tolist())
        parts.append(f"at n = {num_keys} {onset}")
    if not parts:
        return []
    scaled = table[table["normalisation"] == "scaled"]
    largest = scaled["frac_max_above_0.99"].max() if len(scaled) else math.nan
    return [f"{source}: unscaled, more than half the rows have a largest weight above {SATURATED:g} "
            + "; ".join(parts) + f"; scaled, the largest such fraction in any cell is {percent(largest)}."]


def _a_temperatures(table: pd.DataFrame, source: str) -> list[str]:
    cell = _largest_cell(table)
    tempered = cell[cell["normalisation"] != "unscaled"].sort_values("temperature")
    if len(tempered) <= 1:
        return []
    return [f"{source}: with temperature τ (logits q.k/(τ√d_k)) at d_k = {cell['head_dim'].iloc[0]} and n = "
            f"{cell['num_keys'].iloc[0]} the mean largest weight is "
            + ", ".join(f"{plus_minus(row['max_weight'], row['max_weight_se'])} at τ = {row['temperature']:g}"
                        for _, row in tempered.iterrows()) + "."]


def _findings_a(study: SaturationStudy) -> list[str]:
    init = study.init
    if init is None or init.empty:
        return [f"Study A (at initialisation): no init_stats.csv in {study.path}; {MAKE} writes it."]
    dtype = shown_dtype(init)
    samples = (f"{study.setting.samples} samples per cell, seed {study.setting.init_seed}" if study.setting
               else "samples per cell not recorded")
    source = f"Study A (init_stats.csv: {samples}, {dtype})"
    table = init[init["dtype"] == dtype]
    return [*_a_largest_cell(init, table, source), *_a_qk_variance(init, dtype), *_a_onset(table, source),
            *_a_temperatures(table, source), *_a_model(study)]


def _a_model(study: SaturationStudy) -> list[str]:
    """Study A at the variance of q and k that study B's model has at initialisation, against unit variance."""
    rows, variance = study.init_model, study.variance
    if rows is None or rows.empty or variance is None or variance.empty:
        return ["Study A at the model's variance: no rows in init_stats.csv at the variance of q and k that study "
                f"B's model has at initialisation (model_variance.csv); {MAKE} measures it and adds them."]
    dtype = shown_dtype(rows)
    at_model = _largest_cell(rows[rows["dtype"] == dtype]).set_index("normalisation")
    unit = _largest_cell(study.init[study.init["dtype"] == dtype]).set_index("normalisation")
    dims, layers = listing(sorted(variance["head_dim"].unique())), listing(sorted(variance["layer"].unique()))
    measured = (f"measured on study B's dense model at initialisation at d_k = {dims}, layers {layers}: "
                f"Var q from {number(variance['q_variance'].min())} to {number(variance['q_variance'].max())}, "
                f"Var k from {number(variance['k_variance'].min())} to {number(variance['k_variance'].max())}")
    first = at_model.iloc[0]
    parts = [f"{name} {plus_minus(at_model.loc[name, 'max_weight'], at_model.loc[name, 'max_weight_se'])} (unit "
             f"variance: {plus_minus(unit.loc[name, 'max_weight'], unit.loc[name, 'max_weight_se'])})"
             for name in ("unscaled", "scaled") if name in at_model.index and name in unit.index]
    return [f"Study A at the model's variance (model_variance.csv, {measured}; the rows use their means, "
            f"{variance_text(first['q_variance'], first['k_variance'])}, {dtype}): the variance of q.k is "
            f"{plus_minus(first['qk_variance'], first['qk_variance_se'])} at d_k = {first['head_dim']} (closed form "
            f"d_k Var q Var k = {number(first['head_dim'] * first['q_variance'] * first['k_variance'])}, not d_k), "
            f"and at n = {first['num_keys']} the mean largest weight is " + "; ".join(parts) + "."]


def _onset(head_dims: list[int], flags: list[bool]) -> str:
    """'from d_k = 64 on' when the flags hold from some head dim to the largest, else which ones."""
    if not any(flags):
        return f"at no measured d_k (largest {head_dims[-1]})"
    first = flags.index(True)
    if all(flags[first:]):
        return f"from d_k = {head_dims[first]} on"
    return "at d_k = " + listing([dim for dim, flag in zip(head_dims, flags, strict=True) if flag]) + " only"


def _compare(a: pd.Series, b: pd.Series, column: str = "early_accuracy") -> int | None:
    """-1, 0 or 1: a's mean of `column` below, within noise of, or above b's (rows of `learning_speed`: mean, se,
    runs); None, no verdict, where a standard error is unknown (one seed). The noise is the combined standard error
    times Student's t quantile at CONFIDENCE (two-sided), at Welch-Satterthwaite's degrees of freedom: with 3 seeds
    a side that is about 2.8, not 2."""
    a_se, b_se = a[f"{column}_se"], b[f"{column}_se"]
    if not (math.isfinite(a_se) and math.isfinite(b_se)):
        return None
    difference, combined = a[f"{column}_mean"] - b[f"{column}_mean"], a_se**2 + b_se**2
    noise = 0.0
    if combined > 0:
        degrees = combined**2 / (a_se**4 / (a["runs"] - 1) + b_se**4 / (b["runs"] - 1))
        noise = t_half_width(math.sqrt(combined), degrees, CONFIDENCE)
    return 0 if abs(difference) <= noise else (1 if difference > 0 else -1)


def _b_unscaled(speed: pd.DataFrame, source: str, head_dims: list, margin: str, early_until: str) -> list[str]:
    """Does unscaled attention learn slower than dense, and what both look like at step 0."""
    compared = [dim for dim in head_dims if ("dense", dim) in speed.index and ("unscaled", dim) in speed.index]
    pairs = [(speed.loc[("unscaled", dim)], speed.loc[("dense", dim)]) for dim in compared]
    verdicts = [_compare(u, d) for u, d in pairs]
    details = [f"d_k = {dim}: {early_text(u)} against {early_text(d)}" for dim, (u, d) in zip(compared, pairs,
                                                                                              strict=True)]
    known = [(dim, verdict == -1) for dim, verdict in zip(compared, verdicts, strict=True) if verdict is not None]
    unknown = [dim for dim, verdict in zip(compared, verdicts, strict=True) if verdict is None]
    onset = _onset([dim for dim, _ in known], [flag for _, flag in known]) if known else ""
    if compared and not known:
        verdict = f"Unknown: no standard error at any measured d_k ({listing(compared)}), so no verdict"
    else:
        verdict = (f"Yes, {onset}: its early accuracy there is below dense's {margin}" if any(flag for _, flag in known)
                   else f"Not here: at no measured d_k ({listing(compared)}) is its early accuracy below dense's "
                   f"{margin}") + (f" (no verdict at d_k = {listing(unknown)}: no standard error)" if unknown else "")
    result = [f"{source}: does unscaled attention learn slower than dense, by early accuracy (the mean test accuracy "
              f"over steps 0 to {early_until})? {verdict}: unscaled against dense, " + "; ".join(details) + "."]
    if compared:
        top = compared[-1]
        u, d = speed.loc[("unscaled", top)], speed.loc[("dense", top)]
        result.append(
            f"{source}: at the first evaluation (step 0) with d_k = {top}, unscaled heads put a mean largest "
            f"weight of {number(u['start_max_weight'])} on one key "
            f"({percent(u['start_saturated_fraction'])} of rows above {SATURATED:g}) and pass a gradient of "
            f"norm {number(u['start_grad_norm_q'])} to W_q; dense: "
            f"{number(d['start_max_weight'])}, {percent(d['start_saturated_fraction'])} and "
            f"{number(d['start_grad_norm_q'])}."
        )
    return result


def _b_additive(speed: pd.DataFrame, source: str, top: int, margin: str) -> list[str]:
    """Does additive attention hold up against unscaled and dense at the largest head dim."""
    additive = [name for name in speed.index.get_level_values("variant_name").unique() if name.startswith("additive")]
    others = [other for other in ("unscaled", "dense") if (other, top) in speed.index]
    if not additive or (additive[0], top) not in speed.index or not others:
        return []
    name, a = additive[0], speed.loc[(additive[0], top)]
    words = {1: "learns faster than", 0: "learns as fast as", -1: "learns slower than",
             None: "has no verdict (no standard error) against"}
    verdicts = []
    for other in others:
        o = speed.loc[(other, top)]
        verdict = _compare(a, o)
        verdicts.append(f"{words[verdict]} {other} (early accuracy {early_text(a)} against "
                        f"{early_text(o)}; steps to {THRESHOLD:g}: {steps_text(a)} against {steps_text(o)}; "
                        f"final accuracy {plus_minus(a['final_accuracy_mean'], a['final_accuracy_se'])} "
                        f"against {plus_minus(o['final_accuracy_mean'], o['final_accuracy_se'])})")
    return [f"{source}: does additive attention, which Vaswani et al. (2017) found better than unscaled dot "
            f"product at large d_k, hold up? By early accuracy, counting a difference {margin}, at d_k = {top} "
            f"{name} " + "; it ".join(verdicts) + "."]


def _findings_b(study: SaturationStudy) -> list[str]:
    runs = study.part("B", study.steps_to_accuracy)
    if study.steps_to_accuracy.empty:
        return [_missing_runs(study, "B", "training dynamics")]
    speed = learning_speed(study).set_index(["variant_name", "head_dim"])
    source = f"Study B ({_experiment(runs, 'B')})"
    head_dims = sorted(speed.index.get_level_values("head_dim").unique())
    early_until = listing([float(study.steps_to_accuracy["early_until_step"].max())])
    per_dim = [f"d_k = {head_dim}: " + ", ".join(f"{name} {steps_text(row)}" for (name, dim), row in speed.iterrows()
                                                 if dim == head_dim) for head_dim in head_dims]
    result = [f"{source}: steps to a first test accuracy ≥ {THRESHOLD:g}, mean ± se over the seeds that reached it "
              "(reached/seeds): " + "; ".join(per_dim) + "."]
    margin = (f"beyond its {CONFIDENCE:.0%} interval (Student's t at Welch-Satterthwaite's degrees of freedom "
              "times the combined standard error)" if speed["runs"].min() > 1
              else "only beyond its noise (one seed per cell: no standard error, so no verdict)")
    if {"dense", "unscaled"} <= set(speed.index.get_level_values("variant_name")):
        result += _b_unscaled(speed, source, head_dims, margin, early_until)
    return result + _b_additive(speed, source, head_dims[-1], margin)


def _by_lr(table: pd.DataFrame, column: str) -> str:
    return "; ".join(
        f"{name}: " + ", ".join(f"{number(row[column])} at lr {row['lr']:g}" for _, row in group.iterrows())
        for name, group in table.groupby("variant_name", sort=True))


def _extreme(table: pd.DataFrame, column: str, largest: bool) -> str:
    rows = []
    for name, group in table.groupby("variant_name", sort=True):
        row = group.loc[group[column].idxmax() if largest else group[column].idxmin()]
        rows.append(f"{name} {number(row[column])} at lr {row['lr']:g}")
    return ", ".join(rows)


def _findings_c(study: SaturationStudy) -> list[str]:
    runs = study.part("C", study.learning_rates)
    table = study.learning_rates
    if table.empty:
        return [_missing_runs(study, "C", "entropy collapse over learning rates")]
    seeds = table.groupby(["variant_name", "lr"]).size().max()
    means = over_seeds(table, ["variant_name", "lr"], ["final_loss", "max_logit_abs", "min_entropy_over_log_n",
                                                        "max_sigma"])
    over = "" if seeds == 1 else f", mean over {seeds} seeds"
    source = f"Study C ({_experiment(runs, 'C', lr=False)}, d_k = {_values(runs, 'head_dim')})"
    result = [
        f"{source}: the largest attention logit |q.k| (scaled as the variant scales it, over all evaluations, layers "
        f"and heads{over}) per learning rate: {_by_lr(means, 'max_logit_abs')}; it is largest for "
        f"{_extreme(means, 'max_logit_abs', True)}.",
        f"{source}: the final test loss per learning rate{over}: {_by_lr(means, 'final_loss')}; lowest for "
        f"{_extreme(means, 'final_loss', False)}.",
        f"{source}: the smallest mean entropy / log n of any head at any evaluation (1: uniform, 0: one-hot{over}) "
        f"is {_extreme(means, 'min_entropy_over_log_n', False)}; the largest sigma is "
        f"{_extreme(means, 'max_sigma', True)}.",
    ]
    checked = table[table["bound_checks"] > 0]
    if checked.empty:
        result.append(f"{source}: no run has Zhai et al.'s entropy bound (it applies to logits scale * q.k only).")
    else:
        checks, violations = int(checked["bound_checks"].sum()), int(checked["bound_violations"].sum())
        state = ("as it must be: the bound is never above the measured entropy" if violations == 0 else
                 "it must be 0: the measurement or the bound is wrong")
        result.append(
            f"{source}: Zhai et al.'s lower bound on the entropy (from sigma = ||W_K W_Q^T||_2 ||X X^T||_2) was "
            f"checked at {checks} (evaluation, layer, head) points of the "
            f"{listing(sorted(checked['variant_name'].unique()))} runs, every probe row each time; {violations} "
            f"rows had an entropy below their bound ({state}). The bound (a mean over rows) reached at most "
            f"{number(checked['max_entropy_bound'].max())} nats."
        )
    return result


def _findings_d(study: SaturationStudy) -> list[str]:
    result = fading_findings(study)
    lengths = study.lengths
    if lengths.empty:
        result.append(_missing_runs(study, "D", "length generalisation"))
        return result
    runs = study.part("D", study.lengths)
    means = over_seeds(lengths, ["variant_name", "length"], ["accuracy"])
    longest = means["length"].max()
    trained = lengths.loc[lengths["trained"], "length"]
    trained_length = listing(sorted(trained.unique()))
    at_longest = means[means["length"] == longest].sort_values("accuracy", ascending=False)
    at_trained = means[means["length"].isin(trained.unique())].sort_values("accuracy", ascending=False)
    averaged = "" if means["seeds"].max() == 1 else ", mean over seeds"
    result.append(
        f"Study D, trained ({_experiment(runs, 'D')}; no position embeddings; evaluated at "
        f"{listing(sorted(lengths['length'].unique()))} tokens): test accuracy at {longest} tokens{averaged}: "
        + ", ".join(f"{row['variant_name']} {number(row['accuracy'])}" for _, row in at_longest.iterrows())
        + f"; at the training length {trained_length}: "
        + ", ".join(f"{row['variant_name']} {number(row['accuracy'])}" for _, row in at_trained.iterrows()) + "."
    )
    return result


def findings(study: SaturationStudy) -> list[str]:
    """Sentences stating the measured numbers, each naming the experiment (study, files, sizes) behind it;
    a missing part says how to produce it."""
    return [*_findings_a(study), *init_normaliser_findings(study), *_findings_b(study),
            *dynamics_normaliser_findings(study), *_findings_c(study), *_findings_d(study)]


__all__ = ["findings", "number"]
