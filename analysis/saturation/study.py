"""The softmax saturation studies, read back: a study folder -> tables, from which figures and findings
are drawn and stated, never typed in. This module reads the folder into tables; the figures are drawn in
`analysis.saturation.figures`, the findings stated in `analysis.saturation.findings`, and
`analysis.saturation.readback.write` saves all three into the folder.

    >>> from analysis.saturation import findings, readback, study as saturation_study
    >>> study = saturation_study.load("runs/saturation/quick")
    >>> study.steps_to_accuracy.groupby(["variant_name", "head_dim"])["steps_to_threshold"].mean()
    >>> print("\\n".join(findings.findings(study)))
    >>> readback.write("runs/saturation/quick")  # tables/*.csv, figures/*.png, findings.md

A study folder is what `make saturation` writes (RUNS_DIR/saturation/<setting>/, see
`experiments.saturation`): setting.json, init_stats.csv (study A), model_variance.csv (the variance of q
and k that study A's model-variance rows use), fading.csv (study D's synthetic part) and runs/<name>/,
ordinary run records tagged {"saturation": "B" | "C" | "D"}.

Tables (`SaturationStudy` fields; `write` saves the run tables under tables/):

    init               study A's softmax rows at unit variance (q, k ~ N(0, I))
    init_model         study A's softmax rows at the variance study B's model has at initialisation
    normalisers        study A's unscaled and scaled rows at unit variance of every normaliser (`normaliser`:
                       softmax, sigmoid, sparsemax, entmax15, entmax_adaptive), on the same draws
    variance           model_variance.csv: that variance of q and k, per head dim and layer, measured

    runs               load_runs' row per run, plus `part` (B, C, D), `head_dim`, `lr` and `normaliser`
    evaluations        one row per finished run x evaluation: test accuracy and loss at each step
    dynamics           one row per finished run x evaluation x layer x head: the attention statistics
                       (`experiments.run.attention_stats.STATISTICS`)
    steps_to_accuracy  B, per run: steps to a first test accuracy >= THRESHOLD (NaN: never), the final
                       accuracy, and the early accuracy (mean test accuracy over the first half of training)
    learning_rates     C, per run: final loss and accuracy, largest |logit|, smallest entropy / log n,
                       largest sigma, the bound's checks and violations
    lengths            D, per run and evaluation length: accuracy (`trained`: the training length)

`learning_speed(study)` aggregates steps_to_accuracy over seeds (with the statistics at step 0);
`normaliser_dynamics(study)` sets study B's dense runs with another normaliser beside dense with the softmax
(the fraction of exact zeros per row, the largest weight and entropy / log n at the first and last evaluation);
`figures.figures`, `findings.findings` and the report's "Softmax saturation" section
(`analysis.report.sections.saturation`) read only these tables.
A piece of the folder that cannot be read is left out with its reason in `SaturationStudy.skipped`, never a crash.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.runs import load_runs, run_metrics
from common.statistics import standard_error
from experiments.run.attention_stats import STATISTICS
from experiments.saturation import tables as saturation_tables
from experiments.saturation.settings import Setting

THRESHOLD = 0.9  # study B: steps to a first test accuracy at least this
FINISHED = ("completed", "diverged")  # runs the derived tables read; others are still to train or resume
PARTS = ("B", "C", "D")
RUN_COLUMNS = ["run_id", "part", "variant", "variant_name", "normaliser", "head_dim", "seed", "lr", "status"]
NORMALISER_STATISTICS = ("zero_fraction", "max_weight", "entropy_over_log_n")  # normaliser_dynamics' columns
MAKE = "`make saturation` (SETTING=quick: under 10 minutes on CPU; SETTING=full: the fuller grids)"


@dataclass(frozen=True)
class SaturationStudy:
    """One study folder, read (see the module docstring for the tables)."""

    path: Path
    setting: Setting | None
    init: pd.DataFrame | None
    init_model: pd.DataFrame | None
    normalisers: pd.DataFrame | None
    variance: pd.DataFrame | None
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
        part = run.tags.get("saturation") if isinstance(run.tags, dict) else None
        if part not in PARTS:
            skipped.append({"run": f"runs/{run.run_id}", "reason": "no saturation tag (B, C or D) in summary.json"})
        parts.append(part)
    runs["part"] = parts
    runs = runs[runs["part"].isin(PARTS)].copy()
    runs["head_dim"] = [_head_dim(run) for _, run in runs.iterrows()]
    runs["lr"] = runs["train.lr"].astype(float) if "train.lr" in runs else math.nan
    runs["normaliser"] = runs["variant.normaliser"] if "variant.normaliser" in runs else math.nan
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
            lines = [line for line in run_metrics(run) if line.get("kind") == "eval"]
            rows = [{**key, "step": int(line["step"]), "test_accuracy": float(line["test_accuracy"]),
                     "test_loss": float(line["test_loss"])} for line in lines]
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
    evaluation_columns = [*RUN_COLUMNS, "total_steps", "step", "test_accuracy", "test_loss"]
    return (pd.DataFrame(evaluations, columns=evaluation_columns),
            pd.DataFrame(heads, columns=[*evaluation_columns, "layer", "head", *STATISTICS]))


def _steps_to_accuracy(evaluations: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for run_id, curve in evaluations[evaluations["part"] == "B"].groupby("run_id", sort=True):
        curve = curve.sort_values("step")
        first = curve.iloc[0]
        half = float(first["total_steps"]) / 2
        reached = curve.loc[curve["test_accuracy"] >= THRESHOLD, "step"]
        rows.append({"run_id": run_id, "variant_name": first["variant_name"], "head_dim": first["head_dim"],
                     "seed": first["seed"], "status": first["status"], "threshold": THRESHOLD,
                     "steps_to_threshold": float(reached.iloc[0]) if len(reached) else math.nan,
                     "final_accuracy": curve["test_accuracy"].iloc[-1],
                     "early_accuracy": curve.loc[curve["step"] <= half, "test_accuracy"].mean(),
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
                     "status": last["status"], "final_loss": last["test_loss"], "final_accuracy": last["test_accuracy"],
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


def _split_init(init: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """init_stats.csv as init, init_model and normalisers (see the module docstring)."""
    unit = (init["q_variance"] == 1) & (init["k_variance"] == 1)
    softmax = init["normaliser"] == "softmax"
    compared = unit & init["normalisation"].isin(["unscaled", "scaled"])
    return tuple(init[rows].reset_index(drop=True) for rows in (softmax & unit, softmax & ~unit, compared))


def load(study_dir: str | Path) -> SaturationStudy:
    """Read a study folder; what is absent is None or empty, what is unreadable is in `skipped`."""
    path = Path(study_dir)
    skipped: list[dict[str, str]] = []
    setting = _read_setting(path / "setting.json", skipped)
    init = _read_csv(path / "init_stats.csv", saturation_tables.COLUMNS, skipped)
    init, init_model, normalisers = (None, None, None) if init is None else _split_init(init)
    variance = _read_csv(path / "model_variance.csv", saturation_tables.VARIANCE_COLUMNS, skipped)
    fading = _read_csv(path / "fading.csv", saturation_tables.FADING_COLUMNS, skipped)
    runs = _read_runs(path / "runs", skipped)
    evaluations, dynamics = _read_metrics(runs, skipped)
    return SaturationStudy(path=path, setting=setting, init=init, init_model=init_model, normalisers=normalisers,
                 variance=variance, fading=fading, runs=runs, evaluations=evaluations,
                 dynamics=dynamics, steps_to_accuracy=_steps_to_accuracy(evaluations),
                 learning_rates=_learning_rates(evaluations, dynamics), lengths=_lengths(runs), skipped=skipped)


def learning_speed(study: SaturationStudy) -> pd.DataFrame:
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
        early, final = group["early_accuracy"].dropna(), group["final_accuracy"].dropna()
        first = start.loc[(name, head_dim)] if (name, head_dim) in start.index else None
        rows.append({
            "variant_name": name, "head_dim": head_dim, "runs": len(group), "reached": len(reached),
            "steps_mean": reached.mean() if len(reached) else math.nan, "steps_se": standard_error(reached),
            "early_accuracy_mean": group["early_accuracy"].mean(), "early_accuracy_se": standard_error(early),
            "final_accuracy_mean": group["final_accuracy"].mean(), "final_accuracy_se": standard_error(final),
            **{f"start_{column}": math.nan if first is None else first[column]
               for column in ("max_weight", "saturated_fraction", "grad_norm_q")},
        })
    return pd.DataFrame(rows, columns=["variant_name", "head_dim", "runs", "reached", "steps_mean", "steps_se",
                                       "early_accuracy_mean", "early_accuracy_se", "final_accuracy_mean",
                                       "final_accuracy_se", "start_max_weight", "start_saturated_fraction",
                                       "start_grad_norm_q"])


def normaliser_dynamics(study: SaturationStudy) -> pd.DataFrame:
    """Study B's dense runs at each head dim where it trained dense with a normaliser other than the softmax, per
    (variant, normaliser, head dim): the runs, and at their first and last evaluation (`start_*`, `end_*`; the
    last step `end_step`) the mean over seeds, layers and heads of NORMALISER_STATISTICS (entropy NaN where
    rows are not distributions: sigmoid's)."""
    heads = study.dynamics[(study.dynamics["part"] == "B") & (study.dynamics["variant"] == "dense")]
    others = heads["normaliser"].notna() & (heads["normaliser"] != "softmax")
    heads = heads[heads["head_dim"].isin(heads.loc[others, "head_dim"].unique())]
    rows = []
    for (name, normaliser, head_dim), group in heads.groupby(["variant_name", "normaliser", "head_dim"], sort=True):
        steps = group.groupby("run_id")["step"]
        start, end = (group[group["step"] == steps.transform(pick)] for pick in ("min", "max"))
        rows.append({"variant_name": name, "normaliser": normaliser, "head_dim": head_dim,
                     "runs": group["run_id"].nunique(), "end_step": end["step"].max(),
                     **{f"{when}_{statistic}": frame[statistic].mean() for when, frame in (("start", start),
                                                                                          ("end", end))
                        for statistic in NORMALISER_STATISTICS}})
    return pd.DataFrame(rows, columns=["variant_name", "normaliser", "head_dim", "runs", "end_step",
                                       *(f"{when}_{statistic}" for when in ("start", "end")
                                         for statistic in NORMALISER_STATISTICS)])


def shown_dtype(init: pd.DataFrame) -> str:
    """The dtype of study A that the figures and findings show: float32 where there is one."""
    return "float32" if (init["dtype"] == "float32").any() else str(init["dtype"].iloc[0])


def study_folder(runs_dir: str | Path) -> Path | None:
    """RUNS_DIR/saturation/full if it has runs, else quick, else full; None when neither folder exists."""
    full, quick = Path(runs_dir) / "saturation" / "full", Path(runs_dir) / "saturation" / "quick"
    if (full / "runs").is_dir() and any((full / "runs").iterdir()):
        return full
    return next((folder for folder in (quick, full) if folder.is_dir()), None)


__all__ = ["FINISHED", "THRESHOLD", "SaturationStudy", "learning_speed", "load", "normaliser_dynamics", "shown_dtype",
           "study_folder"]
