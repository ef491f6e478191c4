"""The softmax saturation studies, read back: a study folder -> tables, seaborn figures and findings
stated from the data, never typed in.

    >>> from analysis import saturation_study
    >>> study = saturation_study.load("runs/saturation/quick")
    >>> study.steps_to_accuracy.groupby(["variant_name", "head_dim"])["steps_to_threshold"].mean()
    >>> print("\\n".join(saturation_study.findings(study)))
    >>> saturation_study.write("runs/saturation/quick")  # tables/*.csv, figures/*.png, findings.md

A study folder is what `make saturation` writes (RUNS_DIR/saturation/<setting>/, see
`experiments.saturation`): setting.json, init_stats.csv (study A), fading.csv (study D's synthetic part)
and runs/<name>/, ordinary run records tagged {"saturation": "B" | "C" | "D"}.

Tables (`Study` fields; `write` saves the run tables under tables/):

    runs               load_runs' row per run, plus `part` (B, C, D), `head_dim` and `lr`
    evaluations        one row per finished run x evaluation: eval accuracy and loss at each step
    dynamics           one row per finished run x evaluation x layer x head: the attention statistics
                       (`experiments.attention_stats.STATISTICS`)
    steps_to_accuracy  B, per run: steps to a first eval accuracy >= THRESHOLD (NaN: never), the final
                       accuracy, and the early accuracy (mean eval accuracy over the first half of training)
    learning_rates     C, per run: final loss and accuracy, largest |logit|, smallest entropy / log n,
                       largest sigma, the bound's checks and violations
    lengths            D, per run and evaluation length: accuracy (`trained`: the training length)

`learning_speed(study)` aggregates steps_to_accuracy over seeds (with the statistics at step 0);
`figures`, `findings` and `blocks` (the report's "Softmax saturation" section) read only these tables.
A piece of the folder that cannot be read is left out with its reason in `Study.skipped`, never a crash.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import LogFormatter, NullFormatter

from analysis import figures as style
from analysis import saturation
from analysis.render import Block, Figure, Table, Text
from analysis.runs import load_runs
from experiments.attention_stats import SATURATED, STATISTICS
from experiments.files import atomic_write_bytes, atomic_write_text
from experiments.records import RecordError, RunRecord
from experiments.saturation import Setting

THRESHOLD = 0.9  # study B: steps to a first eval accuracy at least this
FINISHED = ("completed", "diverged")  # runs the derived tables read; others are still to train or resume
PARTS = ("B", "C", "D")
NOISE = 2  # standard errors a difference of means must exceed to count (study B's comparisons)
RUN_COLUMNS = ["run_id", "part", "variant", "variant_name", "head_dim", "seed", "lr", "status"]
MAKE = "`make saturation` (SETTING=quick: under 10 minutes on CPU; SETTING=full: the fuller grids)"


@dataclass(frozen=True)
class Study:
    """One study folder, read (see the module docstring for the tables)."""

    path: Path
    setting: Setting | None
    init: pd.DataFrame | None
    fading: pd.DataFrame | None
    runs: pd.DataFrame
    evaluations: pd.DataFrame
    dynamics: pd.DataFrame
    steps_to_accuracy: pd.DataFrame
    learning_rates: pd.DataFrame
    lengths: pd.DataFrame
    skipped: list[dict[str, str]]

    @property
    def name(self) -> str:
        return self.setting.name if self.setting is not None else self.path.name

    def part(self, letter: str, table: pd.DataFrame | None = None) -> pd.DataFrame:
        """The finished runs of study B, C or D (those in `table`'s run_id column, when given)."""
        runs = self.runs[(self.runs["part"] == letter) & self.runs["status"].isin(FINISHED)]
        return runs if table is None else runs[runs["run_id"].isin(table["run_id"])]


# -- reading ----------------------------------------------------------------------------------------


def _read_setting(path: Path, skipped: list[dict[str, str]]) -> Setting | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return Setting(**{name: tuple(value) if isinstance(value, list) else value for name, value in data.items()})
    except (OSError, ValueError, TypeError) as error:
        skipped.append({"run": path.name, "reason": f"not a setting of this version ({error})"})
        return None


def _read_csv(path: Path, columns: tuple[str, ...], skipped: list[dict[str, str]]) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as error:
        skipped.append({"run": path.name, "reason": f"not a readable CSV ({error})"})
        return None
    missing = [column for column in columns if column not in table]
    if missing:
        skipped.append({"run": path.name, "reason": f"lacks the columns {', '.join(missing)}"})
        return None
    return table


def _head_dim(run: pd.Series) -> float:
    """The attention head dim: model.head_dim, or dim // heads when the config leaves it to the model."""
    head_dim = run.get("model.head_dim")
    if head_dim is not None and not pd.isna(head_dim):
        return int(head_dim)
    try:
        return int(run.get("model.dim")) // int(run.get("model.heads"))
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def _read_runs(runs_dir: Path, skipped: list[dict[str, str]]) -> pd.DataFrame:
    """load_runs' rows of the runs tagged with a study letter, with part, head_dim and lr."""
    if not runs_dir.is_dir():
        return pd.DataFrame(columns=RUN_COLUMNS)
    runs = load_runs(runs_dir)
    skipped += [{"run": f"runs/{entry['run']}", "reason": entry["reason"]} for entry in runs.attrs["skipped"]]
    parts = []
    for run in runs.itertuples(index=False):
        try:
            tags = RunRecord(Path(run.path)).read_summary().get("tags") or {}
        except (RecordError, OSError, ValueError, AttributeError) as error:
            tags = {}
            skipped.append({"run": f"runs/{run.run_id}", "reason": f"summary.json unreadable ({error})"})
        part = tags.get("saturation") if isinstance(tags, dict) else None
        if part not in PARTS:
            skipped.append({"run": f"runs/{run.run_id}", "reason": "no saturation tag (B, C or D) in summary.json"})
        parts.append(part)
    runs["part"] = parts
    runs = runs[runs["part"].isin(PARTS)].copy()
    runs["head_dim"] = [_head_dim(run) for _, run in runs.iterrows()]
    runs["lr"] = runs["train.lr"].astype(float) if "train.lr" in runs else math.nan
    for run in runs[~runs["status"].isin(FINISHED)].itertuples(index=False):
        skipped.append({"run": f"runs/{run.run_id}", "reason": f"status {run.status}: left out of the tables "
                        "until it finishes (`make saturation` resumes it)"})
    return runs.reset_index(drop=True)


def _read_metrics(runs: pd.DataFrame, skipped: list[dict[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The evaluations and the per-head statistics of the finished runs' metrics.jsonl."""
    evaluations, heads = [], []
    for _, run in runs[runs["status"].isin(FINISHED)].iterrows():
        key = {column: run[column] for column in RUN_COLUMNS}
        key["total_steps"] = run.get("train.steps")
        try:
            lines = [line for line in RunRecord(Path(run["path"])).read_metrics() if line.get("kind") == "eval"]
            rows = [{**key, "step": int(line["step"]), "eval_accuracy": float(line["eval_accuracy"]),
                     "eval_loss": float(line["eval_loss"])} for line in lines]
            stats = [{**row, "layer": int(entry["layer"]), "head": int(entry["head"]),
                      **{name: math.nan if entry.get(name) is None else float(entry[name]) for name in STATISTICS}}
                     for row, line in zip(rows, lines, strict=True) for entry in line.get("attention") or []]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            skipped.append({"run": f"runs/{run['run_id']}", "reason": f"metrics.jsonl unreadable ({error!r})"})
            continue
        if not rows:
            skipped.append({"run": f"runs/{run['run_id']}", "reason": "metrics.jsonl holds no evaluation"})
            continue
        evaluations += rows
        heads += stats
    evaluation_columns = [*RUN_COLUMNS, "total_steps", "step", "eval_accuracy", "eval_loss"]
    return (pd.DataFrame(evaluations, columns=evaluation_columns),
            pd.DataFrame(heads, columns=[*evaluation_columns, "layer", "head", *STATISTICS]))


def _steps_to_accuracy(evaluations: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run_id, curve in evaluations[evaluations["part"] == "B"].groupby("run_id", sort=True):
        curve = curve.sort_values("step")
        first = curve.iloc[0]
        half = float(first["total_steps"]) / 2
        reached = curve.loc[curve["eval_accuracy"] >= THRESHOLD, "step"]
        rows.append({"run_id": run_id, "variant_name": first["variant_name"], "head_dim": first["head_dim"],
                     "seed": first["seed"], "status": first["status"], "threshold": THRESHOLD,
                     "steps_to_threshold": float(reached.iloc[0]) if len(reached) else math.nan,
                     "final_accuracy": curve["eval_accuracy"].iloc[-1],
                     "early_accuracy": curve.loc[curve["step"] <= half, "eval_accuracy"].mean(),
                     "early_until_step": half, "total_steps": first["total_steps"]})
    return pd.DataFrame(rows, columns=["run_id", "variant_name", "head_dim", "seed", "status", "threshold",
                                       "steps_to_threshold", "final_accuracy", "early_accuracy",
                                       "early_until_step", "total_steps"])


def _learning_rates(evaluations: pd.DataFrame, dynamics: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run_id, curve in evaluations[evaluations["part"] == "C"].groupby("run_id", sort=True):
        last = curve.sort_values("step").iloc[-1]
        heads = dynamics[dynamics["run_id"] == run_id]
        checked = heads["entropy_bound"].notna()
        rows.append({"run_id": run_id, "variant_name": last["variant_name"], "lr": last["lr"], "seed": last["seed"],
                     "status": last["status"], "final_loss": last["eval_loss"], "final_accuracy": last["eval_accuracy"],
                     "max_logit_abs": heads["logit_max_abs"].max(),
                     "min_entropy_over_log_n": heads["entropy_over_log_n"].min(), "max_sigma": heads["sigma"].max(),
                     "bound_checks": int(checked.sum()), "max_entropy_bound": heads["entropy_bound"].max(),
                     "bound_violations": heads.loc[checked, "bound_violations"].sum() if checked.any() else math.nan})
    return pd.DataFrame(rows, columns=["run_id", "variant_name", "lr", "seed", "status", "final_loss",
                                       "final_accuracy", "max_logit_abs", "min_entropy_over_log_n", "max_sigma",
                                       "bound_checks", "max_entropy_bound", "bound_violations"])


def _lengths(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run in runs[(runs["part"] == "D") & runs["status"].isin(FINISHED)].itertuples(index=False):
        entries = [entry for entry in run.accuracy_by_length if entry.get("accuracy") is not None]
        rows += [{"run_id": run.run_id, "variant_name": run.variant_name, "seed": run.seed,
                  "length": int(entry["length"]), "accuracy": float(entry["accuracy"]), "trained": index == 0}
                 for index, entry in enumerate(entries)]
    return pd.DataFrame(rows, columns=["run_id", "variant_name", "seed", "length", "accuracy", "trained"])


def load(study_dir: str | Path) -> Study:
    """Read a study folder; what is absent is None or empty, what is unreadable is in `skipped`."""
    path = Path(study_dir)
    skipped: list[dict[str, str]] = []
    setting = _read_setting(path / "setting.json", skipped)
    init = _read_csv(path / "init_stats.csv", saturation.COLUMNS, skipped)
    fading = _read_csv(path / "fading.csv", saturation.FADING_COLUMNS, skipped)
    runs = _read_runs(path / "runs", skipped)
    evaluations, dynamics = _read_metrics(runs, skipped)
    return Study(path=path, setting=setting, init=init, fading=fading, runs=runs, evaluations=evaluations,
                 dynamics=dynamics, steps_to_accuracy=_steps_to_accuracy(evaluations),
                 learning_rates=_learning_rates(evaluations, dynamics), lengths=_lengths(runs), skipped=skipped)


def _se(values: pd.Series) -> float:
    """The standard error of the mean over independent runs (NaN from fewer than two)."""
    values = values.dropna()
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan


def learning_speed(study: Study) -> pd.DataFrame:
    """Study B over seeds, per (variant, head dim): runs, runs that reached THRESHOLD, steps to it (mean
    and standard error over those that reached it), early and final accuracy (mean, se), and at the first
    evaluation (step 0) the mean over seeds, layers and heads of the largest weight, the saturated fraction
    and the gradient norm reaching W_q."""
    steps = study.steps_to_accuracy
    heads = study.dynamics[study.dynamics["part"] == "B"]
    start = heads[heads["step"] == heads.groupby("run_id")["step"].transform("min")]
    start = start.groupby(["variant_name", "head_dim"])[["max_weight", "saturated_fraction", "grad_norm_q"]].mean()
    rows = []
    for (name, head_dim), group in steps.groupby(["variant_name", "head_dim"], sort=True):
        reached = group["steps_to_threshold"].dropna()
        first = start.loc[(name, head_dim)] if (name, head_dim) in start.index else None
        rows.append({
            "variant_name": name, "head_dim": head_dim, "runs": len(group), "reached": len(reached),
            "steps_mean": reached.mean() if len(reached) else math.nan, "steps_se": _se(reached),
            "early_accuracy_mean": group["early_accuracy"].mean(), "early_accuracy_se": _se(group["early_accuracy"]),
            "final_accuracy_mean": group["final_accuracy"].mean(), "final_accuracy_se": _se(group["final_accuracy"]),
            **{f"start_{column}": math.nan if first is None else first[column]
               for column in ("max_weight", "saturated_fraction", "grad_norm_q")},
        })
    return pd.DataFrame(rows, columns=["variant_name", "head_dim", "runs", "reached", "steps_mean", "steps_se",
                                       "early_accuracy_mean", "early_accuracy_se", "final_accuracy_mean",
                                       "final_accuracy_se", "start_max_weight", "start_saturated_fraction",
                                       "start_grad_norm_q"])


def _over_seeds(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    """Means over seeds per group of `keys`, with the number of seeds."""
    grouped = frame.groupby(keys, sort=True)
    return grouped[columns].mean().join(grouped.size().rename("seeds")).reset_index()


# -- figures ----------------------------------------------------------------------------------------

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


def _no_legend(ax) -> None:
    if ax.get_legend() is not None:
        ax.get_legend().remove()


def _model_dtype(init: pd.DataFrame) -> str:
    return "float32" if (init["dtype"] == "float32").any() else str(init["dtype"].iloc[0])


def _init_figures(init: pd.DataFrame) -> list[Drawn]:
    table, order = _labelled_init(init)
    colours = dict(zip(order, style.palette(order).values(), strict=True))  # sorted colours, shown in order
    key_counts = sorted(table["num_keys"].unique())
    head_dims = sorted(table["head_dim"].unique())
    dtype = _model_dtype(table)
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
            style.log_axes(ax, head_dims, y=False)
            if statistic == "jacobian_norm":
                _log_y(ax)
            ax.set_xlabel("head dim d_k (log scale)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"n = {num_keys} keys")
            _no_legend(ax)
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
        ax.set_ylabel(f"fraction of p(1 - p) below {saturation.VANISHING_DERIVATIVE:g}")
        ax.set_title(f"vanishing derivatives, n = {num_keys}")
        _no_legend(ax)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, "Study A: the softmax derivatives that vanish, in float32 and float64")
    second = ("a-vanishing-derivatives", "Study A (init_stats.csv): the fraction of softmax derivatives p(1 - p) "
              f"below {saturation.VANISHING_DERIVATIVE:g} against head dim, per key count, in float32 and float64",
              fig, table)
    return [first, second]


def _per_run_means(heads: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The statistics averaged over layers and heads, per run and evaluation."""
    keys = ["run_id", "variant_name", "head_dim", "seed", "lr", "step"]
    return heads.groupby(keys, as_index=False, dropna=False)[columns].mean()


def _dynamics_figures(study: Study) -> list[Drawn]:
    evaluations = study.evaluations[study.evaluations["part"] == "B"]
    names = sorted(evaluations["variant_name"].unique())
    colours = style.palette(names)
    head_dims = sorted(evaluations["head_dim"].unique())
    total_steps = float(evaluations["total_steps"].max())
    half = total_steps / 2
    width = 4.8 * len(head_dims) + 2.6

    fig, axes = style.figure(1, len(head_dims), width=width, height=4.6)
    for ax, head_dim in zip(axes[0], head_dims, strict=True):
        sns.lineplot(data=evaluations[evaluations["head_dim"] == head_dim], x="step", y="eval_accuracy",
                     hue="variant_name", hue_order=names, palette=colours, errorbar="se", marker="o", markersize=4,
                     ax=ax)
        ax.axhline(THRESHOLD, color="black", linestyle="--", linewidth=1)
        ax.axvline(half, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("training step")
        ax.set_ylabel("eval accuracy")
        ax.set_title(f"d_k = {head_dim}")
        _no_legend(ax)
    _legend_outside(axes[0, -1])
    style.suptitle(fig, f"Study B: learning curves per head dim (dashed: accuracy {THRESHOLD:g}; dotted: the end "
                        "of the first half, over which the early accuracy is averaged)")
    curves = ("b-learning-curves", "Study B: eval accuracy against step, one panel per head dim, one line per "
              "variant, mean over seeds with a ± 1 standard error band", fig, evaluations)

    heads = study.dynamics[study.dynamics["part"] == "B"]
    if heads.empty:  # runs trained without attention statistics
        return [curves, _steps_heatmap(study, names, head_dims, total_steps)]
    means = _per_run_means(heads, ["entropy_over_log_n", "grad_norm_q", "max_weight"])
    fig, axes = style.figure(2, len(head_dims), width=width, height=8.2)
    for column, head_dim in enumerate(head_dims):
        for row, (statistic, ylabel) in enumerate((("entropy_over_log_n", "entropy / log n (mean over heads)"),
                                                   ("grad_norm_q", "gradient norm reaching W_q (log)"))):
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
    style.suptitle(fig, "Study B: attention entropy and the gradient reaching W_q during training")
    dynamics = ("b-entropy-gradients", "Study B: entropy / log n and the norm of the probe loss's gradient "
                "reaching W_q against step (mean over layers and heads, then over seeds with a ± 1 standard error "
                "band)", fig, means)
    return [curves, dynamics, _steps_heatmap(study, names, head_dims, total_steps)]


def _steps_heatmap(study: Study, names: list[str], head_dims: list[int], total_steps: float) -> Drawn:
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
        text = (f"{_pm(row.steps_mean, row.steps_se)}\n({row.reached}/{row.runs})" if row.reached
                else f"never\n(0/{row.runs})")
        ax.text(head_dims.index(row.head_dim) + 0.5, names.index(row.variant_name) + 0.5, text, ha="center",
                va="center", fontsize=8, color="black",
                bbox={"facecolor": "white", "alpha": 0.6, "linewidth": 0, "boxstyle": "round,pad=0.15"})
    ax.set_xlabel("head dim d_k")
    ax.set_ylabel("variant")
    ax.set_title(f"Study B: steps to eval accuracy {THRESHOLD:g}")
    return ("b-steps-to-accuracy", f"Study B: steps to a first eval accuracy ≥ {THRESHOLD:g}, mean ± standard "
            "error over the seeds that reached it (reached/seeds); grey: no seed reached it", fig, speed)


def _lr_palette(learning_rates: list[float]) -> dict[float, Any]:
    return dict(zip(learning_rates, sns.color_palette("viridis", len(learning_rates)), strict=True))


def _lr_figures(study: Study) -> list[Drawn]:
    table = study.learning_rates
    names = sorted(table["variant_name"].unique())
    colours = style.palette(names)
    fig, axes = style.figure(1, 3, width=17.0, height=4.6)
    for ax, (statistic, ylabel) in zip(axes[0], (("final_loss", "final eval loss (nats)"),
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
    result = [("c-learning-rates", "Study C: final eval loss, largest |logit| and smallest entropy / log n against "
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


def _fading_label(row: pd.Series) -> str:
    return "softmax" if row["normaliser"] == "softmax" else f"ssmax s = {row['length_scale']:g}"


def _length_figures(study: Study) -> list[Drawn]:
    result = []
    if study.fading is not None and len(study.fading):
        table = study.fading.assign(label=[_fading_label(row) for _, row in study.fading.iterrows()])
        labels = sorted(table["label"].unique())
        key_counts = sorted(table["num_keys"].unique())
        fig, axes = style.figure(width=8.4, height=4.6)
        ax = axes[0, 0]
        sns.lineplot(data=table, x="num_keys", y="max_weight", hue="label", hue_order=labels,
                     palette=style.palette(labels), marker="o", errorbar=None, ax=ax)
        style.log_axes(ax, key_counts[::math.ceil(len(key_counts) / 8)], y=False)
        _log_y(ax)
        ax.set_xlabel("keys n (log scale)")
        ax.set_ylabel("largest attention weight (log scale)")
        strong = ", ".join(f"{value:g}" for value in sorted(table["strong_logit"].unique()))
        ax.set_title(f"one logit {strong} among n - 1 zeros")
        _legend_outside(ax)
        result.append(("d-fading", f"Study D (fading.csv): the weight of one strong logit ({strong}) among n - 1 "
                       "zeros against n, plain softmax and ssmax (logits times s log n)", fig, table))
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
        ax.set_ylabel("eval accuracy")
        ax.set_title("passkey accuracy beyond the trained length")
        _legend_outside(ax)
        result.append(("d-lengths", "Study D: eval accuracy against evaluation length per variant (trained at the "
                       "dotted length, no position embeddings), mean over seeds with a ± 1 standard error band", fig,
                       table))
    return result


def figures(study: Study) -> list[Drawn]:
    """(name, caption, figure, data) for each part of the study that has data, in study order. Call it
    inside `analysis.figures.style()` for the report's look."""
    drawn: list[Drawn] = []
    if study.init is not None and len(study.init):
        drawn += _init_figures(study.init)
    if len(study.steps_to_accuracy):
        drawn += _dynamics_figures(study)
    if len(study.learning_rates):
        drawn += _lr_figures(study)
    drawn += _length_figures(study)
    return drawn


# -- findings ---------------------------------------------------------------------------------------


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


def _pm(mean: float, se: float) -> str:
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
    dtype = _model_dtype(init)
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
            f"{_pm(u['max_weight'], u['max_weight_se'])} on one key and {_percent(u['frac_max_above_0.99'])} of rows "
            f"above {saturation.SATURATED_WEIGHT:g}; scaled by 1/√d_k: {_pm(s['max_weight'], s['max_weight_se'])} "
            f"and {_percent(s['frac_max_above_0.99'])}. In the same cell entropy / log n is "
            f"{_pm(u['entropy_over_log_n'], u['entropy_over_log_n_se'])} unscaled against "
            f"{_pm(s['entropy_over_log_n'], s['entropy_over_log_n_se'])} scaled, and the softmax Jacobian's norm "
            f"{_pm(u['jacobian_norm'], u['jacobian_norm_se'])} against "
            f"{_pm(s['jacobian_norm'], s['jacobian_norm_se'])}."
        )
        float_rows = init[(init["normalisation"] == "unscaled") & (init["head_dim"] == largest_dim)
                          & (init["num_keys"] == largest_n)].sort_values("dtype")
        result.append(
            f"Study A (init_stats.csv, unscaled, d_k = {largest_dim}, n = {largest_n}): the fraction of softmax "
            f"derivatives p(1 - p) below {saturation.VANISHING_DERIVATIVE:g} is "
            + " and ".join(f"{_pm(row['frac_grad_below_1e-10'], row['frac_grad_below_1e-10_se'])} in {row['dtype']}"
                           for _, row in float_rows.iterrows()) + "."
        )
    exact = init[(init["normalisation"] == "unscaled") & (init["num_keys"] == init["num_keys"].max())]
    exact = exact[exact["dtype"] == ("float64" if (exact["dtype"] == "float64").any() else dtype)]
    if len(exact):
        result.append(
            f"Study A (init_stats.csv, unscaled, {exact['dtype'].iloc[0]}, n = {exact['num_keys'].iloc[0]}): the "
            "measured variance of q.k is " + "; ".join(
                f"{_pm(row['qk_variance'], row['qk_variance_se'])} at d_k = {row['head_dim']}"
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
            "largest weight is " + ", ".join(f"{_pm(row['max_weight'], row['max_weight_se'])} at τ = "
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


def _steps_text(row: pd.Series) -> str:
    reached, runs = int(row["reached"]), int(row["runs"])
    if not reached:
        return f"never (0/{runs})"
    return f"{_pm(row['steps_mean'], row['steps_se'])} ({reached}/{runs})"


def _early_text(row: pd.Series) -> str:
    return _pm(row["early_accuracy_mean"], row["early_accuracy_se"])


def _findings_b(study: Study) -> list[str]:
    runs = study.part("B", study.steps_to_accuracy)
    if study.steps_to_accuracy.empty:
        return [_missing_runs(study, "B", "training dynamics")]
    speed = learning_speed(study).set_index(["variant_name", "head_dim"])
    source = f"Study B ({_experiment(runs, 'B')})"
    head_dims = sorted(speed.index.get_level_values("head_dim").unique())
    early_until = _listing([float(study.steps_to_accuracy["early_until_step"].max())])
    per_dim = [f"d_k = {head_dim}: " + ", ".join(f"{name} {_steps_text(row)}" for (name, dim), row in speed.iterrows()
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
            details.append(f"d_k = {dim}: {_early_text(u)} against {_early_text(d)}")
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
                verdicts.append(f"{words[verdict]} {other} (early accuracy {_early_text(a)} against "
                                f"{_early_text(o)}; steps to {THRESHOLD:g}: {_steps_text(a)} against {_steps_text(o)}; "
                                f"final accuracy {_pm(a['final_accuracy_mean'], a['final_accuracy_se'])} against "
                                f"{_pm(o['final_accuracy_mean'], o['final_accuracy_se'])})")
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
    means = _over_seeds(table, ["variant_name", "lr"], ["final_loss", "max_logit_abs", "min_entropy_over_log_n",
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


def _findings_d(study: Study) -> list[str]:
    result = []
    fading = study.fading
    if fading is None or fading.empty:
        result.append(f"Study D, synthetic (fading with n): no fading.csv in {study.path}; {MAKE} writes it.")
    else:
        table = fading.assign(label=[_fading_label(row) for _, row in fading.iterrows()])
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
    means = _over_seeds(lengths, ["variant_name", "length"], ["accuracy"])
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


# -- writing and the report section ------------------------------------------------------------------


def _tables(study: Study) -> dict[str, pd.DataFrame]:
    return {"dynamics": study.dynamics, "steps_to_accuracy": study.steps_to_accuracy,
            "learning_speed": learning_speed(study), "learning_rates": study.learning_rates,
            "lengths": study.lengths}


def write(study_dir: str | Path) -> list[Path]:
    """tables/*.csv, figures/*.png and findings.md into the study folder, each file replaced atomically;
    returns the paths written."""
    study_dir = Path(study_dir)
    study = load(study_dir)
    written = []
    for name, table in _tables(study).items():
        path = study_dir / "tables" / f"{name}.csv"
        atomic_write_text(path, table.to_csv(index=False))
        written.append(path)
    with style.style():
        for name, _, fig, _ in figures(study):
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=style.DPI)
            path = study_dir / "figures" / f"{name}.png"
            atomic_write_bytes(path, buffer.getvalue())
            written.append(path)
    lines = [f"# Softmax saturation: setting {study.name}", "", *(f"- {finding}" for finding in findings(study))]
    if study.skipped:
        lines += ["", "## Skipped", "", *(f"- {entry['run']}: {entry['reason']}" for entry in study.skipped)]
    path = study_dir / "findings.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return [*written, path]


def study_folder(runs_dir: str | Path) -> Path | None:
    """RUNS_DIR/saturation/full if it has runs, else quick, else full; None when neither folder exists."""
    full, quick = Path(runs_dir) / "saturation" / "full", Path(runs_dir) / "saturation" / "quick"
    if (full / "runs").is_dir() and any((full / "runs").iterdir()):
        return full
    return next((folder for folder in (quick, full) if folder.is_dir()), None)


def _shown(frame: pd.DataFrame, formats: dict[str, Callable[[pd.Series], str]]) -> pd.DataFrame:
    return pd.DataFrame({column: frame.apply(format_row, axis=1) if len(frame) else pd.Series(dtype=object)
                         for column, format_row in formats.items()})


def blocks(runs_dir: str | Path) -> list[Block]:
    """The report's "Softmax saturation" section: findings, figures and tables of the study under
    RUNS_DIR/saturation, or one sentence saying how to make one."""
    folder = study_folder(runs_dir)
    if folder is None:
        return [Text(f"No softmax saturation study in {Path(runs_dir) / 'saturation'}: {MAKE} produces one.")]
    study = load(folder)
    result: list[Block] = [Text(
        f"The softmax saturation studies of setting {study.name}, read from {folder} (written by `make saturation "
        f"SETTING={study.name}`; its tables/, figures/ and findings.md are the same numbers). A: q.k statistics at "
        "initialisation; B: training dynamics per variant and head dim; C: entropy collapse over learning rates; "
        "D: fading with length. Every number below is computed from those files."
    )]
    result += [Text(finding) for finding in findings(study)]
    result += [Figure(f"saturation-{name}", caption, fig, data) for name, caption, fig, data in figures(study)]
    speed = learning_speed(study)
    if len(speed):
        shown = _shown(speed, {
            "variant": lambda row: row["variant_name"], "d_k": lambda row: str(row["head_dim"]),
            f"steps to {THRESHOLD:g}": _steps_text, "early accuracy": _early_text,
            "final accuracy": lambda row: _pm(row["final_accuracy_mean"], row["final_accuracy_se"]),
            "largest weight at step 0": lambda row: number(row["start_max_weight"]),
            "W_q gradient at step 0": lambda row: number(row["start_grad_norm_q"]),
        })
        result.append(Table("saturation-learning-speed", f"Study B over seeds: steps to eval accuracy {THRESHOLD:g} "
                            "(mean ± se over the seeds that reached it; reached/seeds), early accuracy (first half of "
                            "training) and final accuracy (mean ± se)", shown, data=speed))
    if len(study.learning_rates):
        result.append(Table("saturation-learning-rates", "Study C per run: final loss and accuracy, largest |logit|, "
                            "smallest entropy / log n, largest sigma, and the entropy bound's checks, largest value "
                            "and violations",
                            study.learning_rates.drop(columns="run_id")))
    if len(study.lengths):
        means = _over_seeds(study.lengths, ["variant_name", "length", "trained"], ["accuracy"])
        result.append(Table("saturation-lengths", "Study D: eval accuracy per variant and evaluation length, mean over "
                            "seeds (trained: the training length)", means, data=study.lengths))
    if study.skipped:
        result.append(Table("saturation-skipped", "Pieces of the study folder left out, and why",
                            pd.DataFrame(study.skipped, columns=["run", "reason"])))
    return result


__all__ = ["FINISHED", "THRESHOLD", "Study", "blocks", "figures", "findings", "learning_speed", "load", "number",
           "study_folder", "write"]
