"""The report's "Softmax saturation" section: findings, figures and tables of the study under
RUNS_DIR/saturation (`make saturation`), read through `analysis.saturation.study`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from analysis.aggregate import over_seeds
from analysis.report.context import Context
from analysis.report.render import Block, Figure, Table, Text
from analysis.report.sections.registry import section
from analysis.saturation.figures import figures
from analysis.saturation.findings import findings
from analysis.saturation.study import (
    MAKE,
    THRESHOLD,
    SaturationStudy,
    learning_speed,
    load,
    normaliser_dynamics,
    study_folder,
)
from analysis.saturation.text import early_text, number, plus_minus, steps_text


def _shown(frame: pd.DataFrame, formats: dict[str, Callable[[pd.Series], str]]) -> pd.DataFrame:
    """One text column per format, each computed from a row of `frame`."""
    return pd.DataFrame({column: frame.apply(format_row, axis=1) if len(frame) else pd.Series(dtype=object)
                         for column, format_row in formats.items()})


def _speed_table(study: SaturationStudy) -> list[Block]:
    speed = learning_speed(study)
    if not len(speed):
        return []
    shown = _shown(speed, {
        "variant": lambda row: row["variant_name"], "d_k": lambda row: str(row["head_dim"]),
        f"steps to {THRESHOLD:g}": steps_text, "early accuracy": early_text,
        "final accuracy": lambda row: plus_minus(row["final_accuracy_mean"], row["final_accuracy_se"]),
        "largest weight at step 0": lambda row: number(row["start_max_weight"]),
        "W_q gradient at step 0": lambda row: number(row["start_grad_norm_q"]),
    })
    return [Table("saturation-learning-speed", f"Study B over seeds: steps to test accuracy {THRESHOLD:g} "
                  "(mean ± se over the seeds that reached it; reached/seeds), early accuracy (first half of "
                  "training) and final accuracy (mean ± se)", shown, data=speed)]


def _model_variance_tables(study: SaturationStudy) -> list[Block]:
    """The variance of q and k measured on the model, and study A's rows at that variance."""
    if study.variance is None or study.variance.empty or study.init_model is None or study.init_model.empty:
        return []
    columns = ["normalisation", "head_dim", "num_keys", "dtype", "q_variance", "k_variance", "qk_variance",
               "max_weight", "frac_max_above_0.99", "entropy_over_log_n", "jacobian_norm"]
    return [Table("saturation-model-variance", "Study A's model: the per-component variance of q and k at "
                  "initialisation, per head dim and layer, measured on study B's dense model fed a training batch",
                  study.variance),
            Table("saturation-init-at-model-variance", "Study A at the model's variance: unscaled and scaled rows "
                  "drawn with the mean measured variance of q and k (not 1)", study.init_model[columns],
                  data=study.init_model)]


def blocks(runs_dir: str | Path) -> list[Block]:
    """The section's blocks: findings, figures and tables of the study under RUNS_DIR/saturation, or one
    sentence saying how to make one."""
    folder = study_folder(runs_dir)
    if folder is None:
        return [Text(f"No softmax saturation study in {Path(runs_dir) / 'saturation'}: {MAKE} produces one.")]
    study = load(folder)
    result: list[Block] = [Text(
        f"The softmax saturation studies of setting {study.name}, read from {folder} (written by `make saturation "
        f"SETTING={study.name}`; its tables/, figures/ and findings.md are the same numbers). A: q.k statistics at "
        "initialisation, of the softmax and of the other normalisers; B: training dynamics per variant and head dim "
        "(dense also with sparsemax, entmax15 and sigmoid); C: entropy collapse over learning rates; D: fading with "
        "length. Every number below is computed from those files."
    )]
    result += [Text(finding) for finding in findings(study)]
    result += [Figure(f"saturation-{name}", caption, fig, data) for name, caption, fig, data in figures(study)]
    result += _model_variance_tables(study)
    result += _speed_table(study)
    compared = normaliser_dynamics(study)
    if len(compared):
        result.append(Table("saturation-normalisers", "Study B, dense with each normaliser: the fraction of a row's "
                            "keys with weight exactly 0, the largest weight and entropy / log n (NaN: rows that do not "
                            "sum to 1) at the first (start_) and last (end_, at end_step) evaluation, mean over rows, "
                            "layers, heads and seeds", compared))
    if len(study.learning_rates):
        result.append(Table("saturation-learning-rates", "Study C per run: final loss and accuracy, largest |logit|, "
                            "smallest entropy / log n, largest sigma, and the entropy bound's checks, largest value "
                            "and violations", study.learning_rates.drop(columns="run_id")))
    if len(study.lengths):
        means = over_seeds(study.lengths, ["variant_name", "length", "trained"], ["accuracy"])
        result.append(Table("saturation-lengths", "Study D: test accuracy per variant and evaluation length, mean over "
                            "seeds (trained: the training length)", means, data=study.lengths))
    if study.skipped:
        result.append(Table("saturation-skipped", "Pieces of the study folder left out, and why",
                            pd.DataFrame(study.skipped, columns=["run", "reason"])))
    return result


@section("saturation", "Softmax saturation")
def saturation(context: Context) -> list[Block]:
    return blocks(context.runs_dir)
