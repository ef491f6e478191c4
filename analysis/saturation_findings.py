"""The findings of a softmax saturation study (`findings(study)`): sentences stating the measured numbers,
computed from the tables that `analysis.saturation_study.load` reads, never typed in; `number` and the
other text helpers write those numbers (also in the figures' annotations and the report's tables).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis import saturation
from analysis.saturation_study import MAKE, THRESHOLD, Study, learning_speed, over_seeds, shown_dtype
from experiments.attention_stats import SATURATED

NOISE = 2  # standard errors a difference of means must exceed to count (study B's comparisons)


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


def _percent(fraction: float) -> str:
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


def _listing(values: list[Any]) -> str:
    return ", ".join(f"{value:g}" if isinstance(value, float) else str(value) for value in values)


def _values(runs: pd.DataFrame, column: str) -> str:
    return _listing(sorted(runs[column].dropna().unique().tolist())) if column in runs else "?"


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


def _missing_runs(study: Study, letter: str, what: str) -> str:
    return (f"Study {letter} ({what}): no finished runs tagged {letter} under {study.path / 'runs'}; {MAKE} trains "
            "them (and resumes unfinished ones).")


def _findings_a(study: Study) -> list[str]:
    init = study.init
    if init is None or init.empty:
        return [f"Study A (at initialisation): no init_stats.csv in {study.path}; {MAKE} writes it."]
    dtype = shown_dtype(init)
    samples = (f"{study.setting.samples} samples per cell, seed {study.setting.init_seed}" if study.setting
               else "samples per cell not recorded")
    source = f"Study A (init_stats.csv: {samples}, {dtype})"
    table = init[init["dtype"] == dtype]
    largest_dim, largest_n = table["head_dim"].max(), table["num_keys"].max()
    cell = table[(table["head_dim"] == largest_dim) & (table["num_keys"] == largest_n)]
    unscaled, scaled = cell[cell["normalisation"] == "unscaled"], cell[cell["normalisation"] == "scaled"]
    result = []
    if len(unscaled) and len(scaled):
        u, s = unscaled.iloc[0], scaled.iloc[0]
        result.append(
            f"{source}: at d_k = {largest_dim} and n = {largest_n} unscaled attention puts a mean largest weight of "
            f"{plus_minus(u['max_weight'], u['max_weight_se'])} on one key and "
            f"{_percent(u['frac_max_above_0.99'])} of rows above {saturation.SATURATED_WEIGHT:g}; scaled by 1/√d_k: "
            f"{plus_minus(s['max_weight'], s['max_weight_se'])} and {_percent(s['frac_max_above_0.99'])}. "
            "In the same cell entropy / log n is "
            f"{plus_minus(u['entropy_over_log_n'], u['entropy_over_log_n_se'])} unscaled against "
            f"{plus_minus(s['entropy_over_log_n'], s['entropy_over_log_n_se'])} scaled, and the softmax Jacobian's "
            f"norm {plus_minus(u['jacobian_norm'], u['jacobian_norm_se'])} against "
            f"{plus_minus(s['jacobian_norm'], s['jacobian_norm_se'])}."
        )
        float_rows = init[(init["normalisation"] == "unscaled") & (init["head_dim"] == largest_dim)
                          & (init["num_keys"] == largest_n)].sort_values("dtype")
        result.append(
            f"Study A (init_stats.csv, unscaled, d_k = {largest_dim}, n = {largest_n}): the fraction of softmax "
            f"derivatives p(1 - p) below {saturation.VANISHING_DERIVATIVE:g} is "
            + " and ".join(f"{plus_minus(row['frac_grad_below_1e-10'], row['frac_grad_below_1e-10_se'])} "
                           f"in {row['dtype']}" for _, row in float_rows.iterrows()) + "."
        )
    exact = init[(init["normalisation"] == "unscaled") & (init["num_keys"] == init["num_keys"].max())]
    exact = exact[exact["dtype"] == ("float64" if (exact["dtype"] == "float64").any() else dtype)]
    if len(exact):
        result.append(
            f"Study A (init_stats.csv, unscaled, {exact['dtype'].iloc[0]}, n = {exact['num_keys'].iloc[0]}): the "
            "measured variance of q.k is " + "; ".join(
                f"{plus_minus(row['qk_variance'], row['qk_variance_se'])} at d_k = {row['head_dim']}"
                for _, row in exact.sort_values("head_dim").iterrows()) + " (closed form: d_k)."
        )
    saturated = table[table["normalisation"] == "unscaled"]
    parts = []
    for num_keys, group in saturated.groupby("num_keys", sort=True):
        group = group.sort_values("head_dim")
        most = group["frac_max_above_0.99"] > 0.5
        onset = _onset(group["head_dim"].tolist(), most.tolist())
        parts.append(f"at n = {num_keys} {onset}")
    scaled_all = table[table["normalisation"] == "scaled"]
    if parts:
        largest = scaled_all["frac_max_above_0.99"].max() if len(scaled_all) else math.nan
        result.append(f"{source}: unscaled, more than half the rows have a largest weight above "
                      f"{saturation.SATURATED_WEIGHT:g} " + "; ".join(parts)
                      + f"; scaled, the largest such fraction in any cell is {_percent(largest)}.")
    tempered = cell[cell["normalisation"] != "unscaled"].sort_values("temperature")
    if len(tempered) > 1:
        result.append(
            f"{source}: with temperature τ (logits q.k/(τ√d_k)) at d_k = {largest_dim} and n = {largest_n} the mean "
            "largest weight is " + ", ".join(f"{plus_minus(row['max_weight'], row['max_weight_se'])} at τ = "
                                             f"{row['temperature']:g}" for _, row in tempered.iterrows()) + "."
        )
    return result


def _onset(head_dims: list[int], flags: list[bool]) -> str:
    """'from d_k = 64 on' when the flags hold from some head dim to the largest, else which ones."""
    if not any(flags):
        return f"at no measured d_k (largest {head_dims[-1]})"
    first = flags.index(True)
    if all(flags[first:]):
        return f"from d_k = {head_dims[first]} on"
    return "at d_k = " + _listing([dim for dim, flag in zip(head_dims, flags, strict=True) if flag]) + " only"


def _compare(a_mean: float, a_se: float, b_mean: float, b_se: float) -> int:
    """-1, 0 or 1: a below, within noise of, or above b (NOISE combined standard errors; any difference
    counts when a standard error is unknown)."""
    noise = NOISE * math.sqrt(a_se**2 + b_se**2) if math.isfinite(a_se) and math.isfinite(b_se) else 0.0
    difference = a_mean - b_mean
    return 0 if abs(difference) <= noise else (1 if difference > 0 else -1)


def steps_text(row: pd.Series) -> str:
    """A learning_speed row's steps to THRESHOLD as 'mean ± se (reached/runs)', or 'never (0/runs)'."""
    reached, runs = int(row["reached"]), int(row["runs"])
    if not reached:
        return f"never (0/{runs})"
    return f"{plus_minus(row['steps_mean'], row['steps_se'])} ({reached}/{runs})"


def early_text(row: pd.Series) -> str:
    """A learning_speed row's early accuracy as 'mean ± se'."""
    return plus_minus(row["early_accuracy_mean"], row["early_accuracy_se"])


def _findings_b(study: Study) -> list[str]:
    runs = study.part("B", study.steps_to_accuracy)
    if study.steps_to_accuracy.empty:
        return [_missing_runs(study, "B", "training dynamics")]
    speed = learning_speed(study).set_index(["variant_name", "head_dim"])
    source = f"Study B ({_experiment(runs, 'B')})"
    head_dims = sorted(speed.index.get_level_values("head_dim").unique())
    early_until = _listing([float(study.steps_to_accuracy["early_until_step"].max())])
    per_dim = [f"d_k = {head_dim}: " + ", ".join(f"{name} {steps_text(row)}" for (name, dim), row in speed.iterrows()
                                                 if dim == head_dim) for head_dim in head_dims]
    result = [f"{source}: steps to a first eval accuracy ≥ {THRESHOLD:g}, mean ± se over the seeds that reached it "
              "(reached/seeds): " + "; ".join(per_dim) + "."]
    margin = (f"by more than {NOISE} standard errors" if speed["runs"].min() > 1
              else "at all (one seed per cell: no standard error)")
    if {"dense", "unscaled"} <= set(speed.index.get_level_values("variant_name")):
        compared = [dim for dim in head_dims if ("dense", dim) in speed.index and ("unscaled", dim) in speed.index]
        flags = []
        details = []
        for dim in compared:
            u, d = speed.loc[("unscaled", dim)], speed.loc[("dense", dim)]
            flags.append(_compare(u["early_accuracy_mean"], u["early_accuracy_se"], d["early_accuracy_mean"],
                                  d["early_accuracy_se"]) < 0)
            details.append(f"d_k = {dim}: {early_text(u)} against {early_text(d)}")
        verdict = (f"Yes, {_onset(compared, flags)}: its early accuracy there is below dense's {margin}"
                   if any(flags) else
                   f"Not here: at no measured d_k ({_listing(compared)}) is its early accuracy below dense's {margin}")
        result.append(
            f"{source}: does unscaled attention learn slower than dense, by early accuracy (the mean eval accuracy "
            f"over steps 0 to {early_until})? {verdict}: unscaled against dense, " + "; ".join(details) + "."
        )
        top = compared[-1] if compared else None
        if top is not None:
            u, d = speed.loc[("unscaled", top)], speed.loc[("dense", top)]
            result.append(
                f"{source}: at the first evaluation (step 0) with d_k = {top}, unscaled heads put a mean largest "
                f"weight of {number(u['start_max_weight'])} on one key "
                f"({_percent(u['start_saturated_fraction'])} of rows above {SATURATED:g}) and pass a gradient of "
                f"norm {number(u['start_grad_norm_q'])} to W_q; dense: "
                f"{number(d['start_max_weight'])}, {_percent(d['start_saturated_fraction'])} and "
                f"{number(d['start_grad_norm_q'])}."
            )
    additive = [name for name in speed.index.get_level_values("variant_name").unique() if name.startswith("additive")]
    if additive:
        name, top = additive[0], head_dims[-1]
        others = [other for other in ("unscaled", "dense") if (other, top) in speed.index]
        if (name, top) in speed.index and others:
            a = speed.loc[(name, top)]
            words = {1: "learns faster than", 0: "learns as fast as", -1: "learns slower than"}
            verdicts = []
            for other in others:
                o = speed.loc[(other, top)]
                verdict = _compare(a["early_accuracy_mean"], a["early_accuracy_se"], o["early_accuracy_mean"],
                                   o["early_accuracy_se"])
                verdicts.append(f"{words[verdict]} {other} (early accuracy {early_text(a)} against "
                                f"{early_text(o)}; steps to {THRESHOLD:g}: {steps_text(a)} against {steps_text(o)}; "
                                f"final accuracy {plus_minus(a['final_accuracy_mean'], a['final_accuracy_se'])} "
                                f"against {plus_minus(o['final_accuracy_mean'], o['final_accuracy_se'])})")
            result.append(
                f"{source}: does additive attention, which Vaswani et al. (2017) found better than unscaled dot "
                f"product at large d_k, hold up? By early accuracy, counting a difference {margin}, at d_k = {top} "
                f"{name} " + "; it ".join(verdicts) + "."
            )
    return result


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


def _findings_c(study: Study) -> list[str]:
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
        f"{source}: the final eval loss per learning rate{over}: {_by_lr(means, 'final_loss')}; lowest for "
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
            f"{_listing(sorted(checked['variant_name'].unique()))} runs, every probe row each time; {violations} "
            f"rows had an entropy below their bound ({state}). The bound (a mean over rows) reached at most "
            f"{number(checked['max_entropy_bound'].max())} nats."
        )
    return result


def fading_label(row: pd.Series) -> str:
    """A fading.csv row's normaliser as the legend and the text name it."""
    return "softmax" if row["normaliser"] == "softmax" else f"ssmax s = {row['length_scale']:g}"


def _findings_d(study: Study) -> list[str]:
    result = []
    fading = study.fading
    if fading is None or fading.empty:
        result.append(f"Study D, synthetic (fading with n): no fading.csv in {study.path}; {MAKE} writes it.")
    else:
        table = fading.assign(label=[fading_label(row) for _, row in fading.iterrows()])
        smallest, largest = table["num_keys"].min(), table["num_keys"].max()
        strong = _listing(sorted(table["strong_logit"].unique()))
        parts = []
        for label, group in table.groupby("label", sort=True):
            at = group.set_index("num_keys")["max_weight"]
            parts.append(f"{label} {number(at.get(smallest, math.nan))} at n = {smallest} and "
                         f"{number(at.get(largest, math.nan))} at n = {largest}")
        result.append(f"Study D, synthetic (fading.csv: one logit {strong} among n - 1 zeros): the largest weight is "
                      + "; ".join(parts) + ".")
    lengths = study.lengths
    if lengths.empty:
        result.append(_missing_runs(study, "D", "length generalisation"))
        return result
    runs = study.part("D", study.lengths)
    means = over_seeds(lengths, ["variant_name", "length"], ["accuracy"])
    longest = means["length"].max()
    trained = lengths.loc[lengths["trained"], "length"]
    trained_length = _listing(sorted(trained.unique()))
    at_longest = means[means["length"] == longest].sort_values("accuracy", ascending=False)
    at_trained = means[means["length"].isin(trained.unique())].sort_values("accuracy", ascending=False)
    result.append(
        f"Study D, trained ({_experiment(runs, 'D')}; no position embeddings; evaluated at "
        f"{_listing(sorted(lengths['length'].unique()))} tokens): eval accuracy at {longest} tokens"
        f"{'' if means['seeds'].max() == 1 else ', mean over seeds'}: "
        + ", ".join(f"{row['variant_name']} {number(row['accuracy'])}" for _, row in at_longest.iterrows())
        + f"; at the training length {trained_length}: "
        + ", ".join(f"{row['variant_name']} {number(row['accuracy'])}" for _, row in at_trained.iterrows()) + "."
    )
    return result


def findings(study: Study) -> list[str]:
    """Sentences stating the measured numbers, each naming the experiment (study, files, sizes) behind it;
    a missing part says how to produce it."""
    return [*_findings_a(study), *_findings_b(study), *_findings_c(study), *_findings_d(study)]


__all__ = ["findings", "number"]
