"""The seaborn figures of a softmax saturation study (`figures(study)`), drawn from the tables that
`analysis.saturation.study.load` reads; `analysis.saturation.readback.write` saves them under figures/ and the
report's "Softmax saturation" section (`analysis.report.sections.saturation`) shows them.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import LogFormatter, NullFormatter

from analysis.report import figures as style
from analysis.saturation.study import THRESHOLD, SaturationStudy, learning_speed, normaliser_dynamics, shown_dtype
from analysis.saturation.text import fading_label, listing, plus_minus
from experiments.saturation.tables import VANISHING_DERIVATIVE

Drawn = tuple[str, str, MplFigure, pd.DataFrame]  # (name, caption, figure, the data it draws)


def _normalisation_label(row: pd.Series) -> str:
    if row["normalisation"] == "unscaled":
        return "unscaled q.k"
    if row["normalisation"] == "scaled":
        return "scaled q.k/√d (τ = 1)"
    return f"τ = {row['temperature']:g}: q.k/(τ√d)"


def _labelled_init(init: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """init_stats with a legend label per normalisation, labels ordered unscaled, then by temperature."""
    table = init.assign(logits=[_normalisation_label(row) for _, row in init.iterrows()])
    scaled = table[table["normalisation"] != "unscaled"].sort_values("temperature")
    order = [*table.loc[table["normalisation"] == "unscaled", "logits"].unique(), *scaled["logits"].unique()]
    return table, order


def _legend_outside(ax) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)


def _log_y(ax) -> None:
    """y on a log10 scale with plain-number tick labels (the report draws text literally)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def _log_x(ax, values) -> None:
    """x on a log10 scale ticked at the measured values, labelled as plain numbers."""
    ticks = sorted(set(float(value) for value in values))
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{tick:g}" for tick in ticks], rotation=30 if len(ticks) > 5 else 0)
    ax.xaxis.set_minor_formatter(NullFormatter())


def _head_dim_panel(ax, head_dims, ylabel: str, num_keys: int) -> None:
    """A study A panel: log head dims on x, the statistic on y, titled by its key count, legend drawn apart."""
    style.log_axes(ax, head_dims, y=False)
    ax.set_xlabel("head dim d_k (log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"n = {num_keys} keys")
    _no_legend(ax)


def _no_legend(ax) -> None:
    if ax.get_legend() is not None:
        ax.get_legend().remove()


def _init_figures(init: pd.DataFrame) -> list[Drawn]:
    table, order = _labelled_init(init)
    colours = dict(zip(order, style.palette(order).values(), strict=True))  # sorted colours, shown in order
    key_counts = sorted(table["num_keys"].unique())
    head_dims = sorted(table["head_dim"].unique())
    dtype = shown_dtype(table)
    drawn = table[table["dtype"] == dtype]
    fig, axes = style.figure(2, len(key_counts), width=4.6 * len(key_counts) + 2.2, height=8.0)
    for column, num_keys in enumerate(key_counts):
        cell = drawn[drawn["num_keys"] == num_keys]
        for row, (statistic, ylabel) in enumerate((("max_weight", "mean largest weight"),
                                                   ("jacobian_norm", "softmax Jacobian norm (log)"))):
            ax = axes[row, column]
            sns.lineplot(data=cell, x="head_dim", y=statistic, hue="logits", hue_order=order, palette=colours,
                         marker="o", errorbar=None, ax=ax)
            for label, line in cell.groupby("logits"):
                ax.errorbar(line["head_dim"], line[statistic], yerr=line[f"{statistic}_se"], fmt="none",
                            ecolor=colours[label], capsize=3)
            if statistic == "jacobian_norm":
                _log_y(ax)
            _head_dim_panel(ax, head_dims, ylabel, num_keys)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, f"Study A at initialisation ({dtype}): how much weight one key takes, and how much "
                        "gradient the softmax passes, against head dim")
    first = ("a-init-weights", f"Study A (init_stats.csv, {dtype}): mean largest weight and softmax Jacobian norm "
             "against head dim, per key count, unscaled, scaled and at temperatures; bars: ± 1 standard error",
             fig, drawn)

    fig, axes = style.figure(1, len(key_counts), width=4.6 * len(key_counts) + 2.4, height=4.4)
    for ax, num_keys in zip(axes[0], key_counts, strict=True):
        sns.lineplot(data=table[table["num_keys"] == num_keys], x="head_dim", y="frac_grad_below_1e-10",
                     hue="logits", hue_order=order, palette=colours, style="dtype", markers=True, errorbar=None, ax=ax)
        style.log_axes(ax, head_dims, y=False)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("head dim d_k (log scale)")
        ax.set_ylabel(f"fraction of p(1 - p) below {VANISHING_DERIVATIVE:g}")
        ax.set_title(f"vanishing derivatives, n = {num_keys}")
        _no_legend(ax)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, "Study A: the softmax derivatives that vanish, in float32 and float64")
    second = ("a-vanishing-derivatives", "Study A (init_stats.csv): the fraction of softmax derivatives p(1 - p) "
              f"below {VANISHING_DERIVATIVE:g} against head dim, per key count, in float32 and float64",
              fig, table)
    return [first, second]


def _normaliser_init_figure(table: pd.DataFrame) -> Drawn:
    """Study A per normaliser, unscaled and scaled on the same draws: the largest weight, the fraction of exact
    zeros per row and entropy / log n against head dim, one column per key count."""
    dtype = shown_dtype(table)
    drawn = table[table["dtype"] == dtype]
    colours = style.palette(drawn["normaliser"])
    key_counts, head_dims = sorted(drawn["num_keys"].unique()), sorted(drawn["head_dim"].unique())
    statistics = (("max_weight", "mean largest weight"), ("zero_fraction", "fraction of exact zeros per row"),
                  ("entropy_over_log_n", "entropy / log n"))
    fig, axes = style.figure(len(statistics), len(key_counts), width=4.6 * len(key_counts) + 2.6, height=12.0)
    for column, num_keys in enumerate(key_counts):
        for row, (statistic, ylabel) in enumerate(statistics):
            ax = axes[row, column]
            sns.lineplot(data=drawn[drawn["num_keys"] == num_keys], x="head_dim", y=statistic, hue="normaliser",
                         hue_order=list(colours), palette=colours, style="normalisation",
                         style_order=["scaled", "unscaled"], markers=True, errorbar=None, ax=ax)
            ax.set_ylim(-0.03, 1.03)
            _head_dim_panel(ax, head_dims, ylabel, num_keys)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, f"Study A at initialisation ({dtype}): each normaliser on the same q.k, scaled (solid) and "
                        "unscaled (dashed)")
    return ("a-normalisers", f"Study A (init_stats.csv, {dtype}, unit variance): per normaliser, the mean largest "
            "weight, the mean fraction of a row's keys whose weight is exactly 0 and entropy / log n (sigmoid: of its "
            "weights divided by their row sum) against head dim, per key count; solid: scaled q.k/√d, dashed: "
            "unscaled q.k; entmax_adaptive at the alphas its heads start at", fig, drawn)


def _per_run_means(heads: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The statistics averaged over layers and heads, per run and evaluation."""
    keys = ["run_id", "variant_name", "head_dim", "seed", "lr", "step"]
    return heads.groupby(keys, as_index=False, dropna=False)[columns].mean()


def _dynamics_figures(study: SaturationStudy) -> list[Drawn]:
    evaluations = study.evaluations[study.evaluations["part"] == "B"]
    names = sorted(evaluations["variant_name"].unique())
    colours = style.palette(names)
    head_dims = sorted(evaluations["head_dim"].unique())
    total_steps = float(evaluations["total_steps"].max())
    half = total_steps / 2
    width = 4.8 * len(head_dims) + 2.6

    fig, axes = style.figure(1, len(head_dims), width=width, height=4.6)
    for ax, head_dim in zip(axes[0], head_dims, strict=True):
        sns.lineplot(data=evaluations[evaluations["head_dim"] == head_dim], x="step", y="test_accuracy",
                     hue="variant_name", hue_order=names, palette=colours, errorbar="se", marker="o", markersize=4,
                     ax=ax)
        ax.axhline(THRESHOLD, color="black", linestyle="--", linewidth=1)
        ax.axvline(half, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("training step")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"d_k = {head_dim}")
        _no_legend(ax)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, f"Study B: learning curves per head dim (dashed: accuracy {THRESHOLD:g}; dotted: the end "
                        "of the first half, over which the early accuracy is averaged)")
    curves = ("b-learning-curves", "Study B: test accuracy against step, one panel per head dim, one line per "
              "variant, mean over seeds with a ± 1 standard error band", fig, evaluations)

    heads = study.dynamics[study.dynamics["part"] == "B"]
    if heads.empty:  # runs trained without attention statistics
        return [curves, _steps_heatmap(study, names, head_dims, total_steps)]
    means = _per_run_means(heads, ["entropy_over_log_n", "grad_norm_q", "max_weight"])
    fig = _step_panels(means, head_dims, colours, (("entropy_over_log_n", "entropy / log n (mean over heads)"),
                                                   ("grad_norm_q", "gradient norm reaching W_q (log)")))
    style.suptitle(fig, "Study B: attention entropy and the gradient reaching W_q during training")
    dynamics = ("b-entropy-gradients", "Study B: entropy / log n and the norm of the probe loss's gradient "
                "reaching W_q against step (mean over layers and heads, then over seeds with a ± 1 standard error "
                "band)", fig, means)
    return [curves, dynamics, _steps_heatmap(study, names, head_dims, total_steps),
            *_normaliser_dynamics_figure(heads, normaliser_dynamics(study), colours)]


def _step_panels(means: pd.DataFrame, head_dims: list, colours: dict[str, Any],
                 statistics: tuple[tuple[str, str], ...]) -> MplFigure:
    """One row of panels per (statistic, y label), one column per head dim: per-run means against step, one line
    per variant (mean over seeds, ± 1 se band); the gradient norm on a log scale, the others in [0, 1]."""
    names = [name for name in colours if name in set(means["variant_name"])]
    fig, axes = style.figure(len(statistics), len(head_dims), width=4.8 * len(head_dims) + 2.6,
                             height=4.1 * len(statistics))
    for column, head_dim in enumerate(head_dims):
        for row, (statistic, ylabel) in enumerate(statistics):
            ax = axes[row, column]
            sns.lineplot(data=means[means["head_dim"] == head_dim], x="step", y=statistic, hue="variant_name",
                         hue_order=names, palette=colours, errorbar="se", ax=ax)
            if statistic == "grad_norm_q":
                _log_y(ax)
            else:
                ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel("training step")
            ax.set_ylabel(ylabel)
            ax.set_title(f"d_k = {head_dim}")
            _no_legend(ax)
    _legend_outside(axes[0, -1])
    return fig


def _normaliser_dynamics_figure(heads: pd.DataFrame, compared: pd.DataFrame, colours: dict[str, Any]) -> list[Drawn]:
    """Study B's dense runs with each normaliser, at the head dims where B trained the others: exact zeros and
    the largest weight against step."""
    if compared.empty:
        return []
    dense = heads[(heads["variant"] == "dense") & heads["head_dim"].isin(compared["head_dim"])]
    means = _per_run_means(dense, ["zero_fraction", "max_weight"])
    fig = _step_panels(means, sorted(compared["head_dim"].unique()), colours,
                       (("zero_fraction", "fraction of exact zeros per row"), ("max_weight", "mean largest weight")))
    style.suptitle(fig, "Study B: dense attention with each normaliser, how many keys get no weight at all")
    return [("b-normalisers", "Study B: dense with the softmax and with other normalisers (sparsemax, entmax15, "
             "sigmoid): the fraction of a row's keys whose weight is exactly 0, and the largest weight, against step "
             "(mean over rows, layers and heads, then over seeds with a ± 1 standard error band)", fig, means)]


def _steps_heatmap(study: SaturationStudy, names: list[str], head_dims: list[int], total_steps: float) -> Drawn:
    speed = learning_speed(study)
    steps = speed.pivot(index="variant_name", columns="head_dim", values="steps_mean").reindex(index=names,
                                                                                              columns=head_dims)
    fig, axes = style.figure(width=max(6.4, 2.2 + 2.0 * len(head_dims)), height=1.6 + 0.6 * len(names))
    ax = axes[0, 0]
    style.heatmap(ax, steps.to_numpy(dtype=float), names, [str(dim) for dim in head_dims], cmap="viridis_r",
                  vmin=0, vmax=total_steps,
                  cbar_kws={"label": f"steps to accuracy {THRESHOLD:g}"})
    ax.set_facecolor("#dddddd")  # cells where no seed reached it
    for row in speed.itertuples(index=False):
        text = (f"{plus_minus(row.steps_mean, row.steps_se)}\n({row.reached}/{row.runs})" if row.reached
                else f"never\n(0/{row.runs})")
        ax.text(head_dims.index(row.head_dim) + 0.5, names.index(row.variant_name) + 0.5, text, ha="center",
                va="center", fontsize=8, color="black",
                bbox={"facecolor": "white", "alpha": 0.6, "linewidth": 0, "boxstyle": "round,pad=0.15"})
    ax.set_xlabel("head dim d_k")
    ax.set_ylabel("variant")
    ax.set_title(f"Study B: steps to test accuracy {THRESHOLD:g}")
    return ("b-steps-to-accuracy", f"Study B: steps to a first test accuracy ≥ {THRESHOLD:g}, mean ± standard "
            "error over the seeds that reached it (reached/seeds); grey: no seed reached it (grey and empty: not "
            "trained at that head dim)", fig, speed)


def _lr_palette(learning_rates: list[float]) -> dict[float, Any]:
    return dict(zip(learning_rates, sns.color_palette("viridis", len(learning_rates)), strict=True))


def _lr_figures(study: SaturationStudy) -> list[Drawn]:
    table = study.learning_rates
    names = sorted(table["variant_name"].unique())
    colours = style.palette(names)
    fig, axes = style.figure(1, 3, width=17.0, height=4.6)
    for ax, (statistic, ylabel) in zip(axes[0], (("final_loss", "final test loss (nats)"),
                                                 ("max_logit_abs", "largest |logit| (log)"),
                                                 ("min_entropy_over_log_n", "smallest entropy / log n")),
                                       strict=True):
        sns.lineplot(data=table, x="lr", y=statistic, hue="variant_name", hue_order=names, palette=colours,
                     marker="o", errorbar="se", ax=ax)
        _log_x(ax, table["lr"])
        ax.set_xlabel("peak learning rate (log scale)")
        ax.set_ylabel(ylabel)
        if statistic == "max_logit_abs":
            _log_y(ax)
        _no_legend(ax)
    axes[0, 0].set_title("final loss")
    axes[0, 1].set_title("attention logits grow")
    axes[0, 2].set_title("entropy collapses")
    _legend_outside(axes[0, -1])
    style.suptitle(fig, "Study C: final loss, largest attention logit and smallest entropy against the learning "
                        "rate (over all evaluations, layers and heads)")
    result = [("c-learning-rates", "Study C: final test loss, largest |logit| and smallest entropy / log n against "
               "the learning rate, dense and qknorm (mean over seeds)", fig, table)]

    heads = study.dynamics[(study.dynamics["part"] == "C") & study.dynamics["entropy_bound"].notna()]
    if heads.empty:
        return result
    name = "dense" if (heads["variant_name"] == "dense").any() else sorted(heads["variant_name"].unique())[0]
    means = _per_run_means(heads[heads["variant_name"] == name], ["entropy", "entropy_bound", "sigma"])
    rates = sorted(means["lr"].unique())
    colours = _lr_palette(rates)
    fig, axes = style.figure(1, 2, width=14.0, height=4.8)
    for lr in rates:
        line = means[means["lr"] == lr].groupby("step", as_index=False)[["entropy", "entropy_bound", "sigma"]].mean()
        axes[0, 0].plot(line["step"], line["entropy"], color=colours[lr], marker="o", markersize=3,
                        label=f"lr {lr:g}: measured entropy")
        axes[0, 0].plot(line["step"], line["entropy_bound"], color=colours[lr], linestyle="--",
                        label=f"lr {lr:g}: Zhai's lower bound")
        axes[0, 1].plot(line["step"], line["sigma"], color=colours[lr], marker="o", markersize=3, label=f"lr {lr:g}")
    axes[0, 0].set_ylabel("attention entropy (nats, mean over heads)")
    axes[0, 0].set_title(f"{name}: entropy (solid) and its lower bound (dashed)")
    _log_y(axes[0, 1])
    axes[0, 1].set_ylabel("sigma = ||W_K W_Q^T||_2 ||X X^T||_2 (log)")
    axes[0, 1].set_title(f"{name}: sigma")
    for ax in axes[0]:
        ax.set_xlabel("training step")
    _legend_outside(axes[0, 0])
    _legend_outside(axes[0, 1])
    style.suptitle(fig, f"Study C: entropy collapse per learning rate ({name})")
    result.append(("c-entropy-bound", f"Study C ({name}): measured attention entropy with Zhai et al.'s lower bound "
                   "(dashed, same colour) and sigma against step, per learning rate (mean over layers, heads and "
                   "seeds)", fig, means))
    return result


def _fading_figure(fading: pd.DataFrame) -> Drawn:
    """The strong key's weight against n: softmax and ssmax exactly, the drawn variants with a ± 1 se band,
    and 1/n (uniform weights) dotted."""
    table = fading.assign(label=[fading_label(row) for _, row in fading.iterrows()])
    labels = sorted(table["label"].unique())
    key_counts = sorted(table["num_keys"].unique())
    colours = style.palette(labels)
    fig, axes = style.figure(width=8.4, height=4.6)
    ax = axes[0, 0]
    sns.lineplot(data=table, x="num_keys", y="strong_weight", hue="label", hue_order=labels, palette=colours,
                 marker="o", errorbar=None, ax=ax)
    for label, line in table[table["draws"] > 0].groupby("label", sort=True):
        line = line.sort_values("num_keys")
        ax.fill_between(line["num_keys"], line["strong_weight"] - line["strong_weight_se"],
                        line["strong_weight"] + line["strong_weight_se"], color=colours[label], alpha=0.2, linewidth=0)
    ax.plot(key_counts, [1 / count for count in key_counts], color="black", linestyle=":", linewidth=1,
            label="1/n (uniform)")
    style.log_axes(ax, key_counts[::math.ceil(len(key_counts) / 8)], y=False)
    _log_y(ax)
    ax.set_xlabel("keys n (log scale)")
    ax.set_ylabel("weight of the strong key (log scale)")
    strong = ", ".join(f"{value:g}" for value in sorted(table["strong_logit"].unique()))
    ax.set_title(f"one logit {strong} among n - 1 zeros")
    _legend_outside(ax)
    drawn = table[table["draws"] > 0]
    how = ("" if drawn.empty else f"; {', '.join(sorted(drawn['label'].unique()))} on q and keys drawn in d = "
           f"{listing(sorted(drawn['head_dim'].unique()))} dimensions with those scaled dot products, by each "
           f"variant's reference formula, mean over {listing(sorted(drawn['draws'].unique()))} draws with a ± 1 "
           "standard error band")
    return ("d-fading", f"Study D (fading.csv): the weight of one strong logit ({strong}) among n - 1 zeros against "
            f"n, plain softmax and ssmax (logits times s log n) exactly{how}; dotted: 1/n, uniform weights", fig,
            table)


def _length_figures(study: SaturationStudy) -> list[Drawn]:
    result = []
    if study.fading is not None and len(study.fading):
        result.append(_fading_figure(study.fading))
    if len(study.lengths):
        table = study.lengths
        names = sorted(table["variant_name"].unique())
        fig, axes = style.figure(width=8.4, height=4.6)
        ax = axes[0, 0]
        sns.lineplot(data=table, x="length", y="accuracy", hue="variant_name", hue_order=names,
                     palette=style.palette(names), style="variant_name", style_order=names, markers=True,
                     errorbar="se", ax=ax)  # markers and dashes tell apart lines that coincide
        for length in sorted(table.loc[table["trained"], "length"].unique()):
            ax.axvline(length, color="black", linestyle=":", linewidth=1)
        style.log_axes(ax, table["length"], y=False)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("evaluation length (tokens, log scale; dotted: trained length)")
        ax.set_ylabel("test accuracy")
        ax.set_title("passkey accuracy beyond the trained length")
        _legend_outside(ax)
        result.append(("d-lengths", "Study D: test accuracy against evaluation length per variant (trained at the "
                       "dotted length, no position embeddings), mean over seeds with a ± 1 standard error band", fig,
                       table))
    return result


def figures(study: SaturationStudy) -> list[Drawn]:
    """(name, caption, figure, data) for each part of the study that has data, in study order. Call it
    inside `analysis.report.figures.style()` for the report's look."""
    drawn: list[Drawn] = []
    if study.init is not None and len(study.init):
        drawn += _init_figures(study.init)
    if study.normalisers is not None and (study.normalisers["normaliser"] != "softmax").any():
        drawn.append(_normaliser_init_figure(study.normalisers))
    if len(study.steps_to_accuracy):
        drawn += _dynamics_figures(study)
    if len(study.learning_rates):
        drawn += _lr_figures(study)
    drawn += _length_figures(study)
    return drawn


__all__ = ["figures"]
