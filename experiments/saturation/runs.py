"""`make saturation`: the softmax saturation studies, from the harness's own code, and how the other
normalisers (sigmoid, sparsemax, entmax) fare in the same measurements.

    attnlab saturation --setting quick     # under 10 minutes on a 2-core CPU
    attnlab saturation --setting full      # the fuller grids: more dimensions, seeds, steps, learning rates

Each study is a list of configs built with plain loops below; its runs are ordinary runs (with
`train.attention_stats`) under `RUNS_DIR/saturation/<setting>/runs/`, named after what they are, so running
the command again skips what finished and resumes what was interrupted. `run` computes and trains; the
command line then writes the read-back beside them (`analysis.saturation.readback.write`: tables, figures,
findings), and `make report` shows them in its "Softmax saturation" section.

A. At initialisation: q.k statistics over head dims and key counts, unscaled, scaled and at temperatures
   (experiments.saturation.tables.init_table) -> init_stats.csv; and unscaled and scaled at the variance of
   q and k that study B's model really has at initialisation, measured per layer and head dim
   (experiments.saturation.tables.model_variance) -> model_variance.csv. Those rows are the softmax's; the
   setting's other normalisers (sigmoid, sparsemax, entmax15, entmax_adaptive at the alphas its heads start
   at) add unscaled and scaled rows on the same draws (`normaliser` names a row's): largest weight, entropy,
   the fraction of exact zeros per row, their Jacobian (experiments.saturation.normaliser_weights).
B. Training dynamics: one small model on one task (passkey, 32 tokens) with dense, unscaled, learned
   temperature, qknorm, softcap and additive attention at head dims 16, 64 and 256 (model width fixed;
   the q/k/v width follows the head dim), and dense with normaliser sparsemax, entmax15 and sigmoid at the
   setting's normaliser head dims (quick: 64 only, to keep its budget; full: all three), over seeds; attention
   statistics at every evaluation (entropy, largest weight, fraction of exact zeros per row, ...).
C. Entropy collapse and the learning-rate proxy: dense and qknorm over learning rates spanning orders of
   magnitude; sigma, the entropy and its lower bound per head at every evaluation.
D. Fading with length: one strong logit among n (experiments.saturation.tables.fading_table) -> fading.csv,
   softmax and ssmax exactly, and the kernelised variants (linear attention; Performer at its default number
   of features and at more) on drawn q and keys, averaged over draws; and dense, ssmax, learned temperature
   and ALiBi trained on passkey at one length and evaluated at longer ones (no position embedding, so that
   only attention decides what happens at unseen lengths).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

import variants
from common.files import atomic_write_text
from experiments.run import config as configs
from experiments.run.planned import PlannedRun, train_all
from experiments.saturation import tables
from experiments.saturation.settings import Setting

TASK = "passkey"


# B: (variant, options) at each head dim; the additive tanh layer's width is the setting's.
DYNAMICS_VARIANTS = (("dense", {}), ("unscaled", {}), ("temperature", {"learnable": True}), ("qknorm", {}),
                     ("softcap", {"cap": 5.0}), ("additive", {}))
# B: dense with the sparse normalisers and sigmoid, at the setting's normaliser head dims.
NORMALISER_VARIANTS = (("dense", {"normaliser": "sparsemax"}), ("dense", {"normaliser": "entmax15"}),
                       ("dense", {"normaliser": "sigmoid"}))
LR_VARIANTS = (("dense", {}), ("qknorm", {}))
LR_HEAD_DIM = 64
LENGTH_VARIANTS = (("dense", {}), ("ssmax", {}), ("temperature", {"learnable": True}), ("relative", {"kind": "alibi"}))


def _config(variant: str, options: dict, seed: int, *, task: dict, model: dict, train: dict) -> configs.RunConfig:
    return configs.resolve(variant=variant, task=TASK, profile="quick", seed=seed, device="cpu",
                           overrides={"variant": dict(options), "task": task, "model": model,
                                      "train": {"attention_stats": True, **train}})


def _dynamics_variants(setting: Setting, head_dim: int) -> list[tuple[str, dict[str, Any]]]:
    """Study B's (variant, options) at one head dim."""
    return [*(DYNAMICS_VARIANTS if head_dim in setting.dynamics_head_dims else ()),
            *(NORMALISER_VARIANTS if head_dim in setting.normaliser_head_dims else ())]


def plan(setting: Setting) -> list[PlannedRun]:
    """Every training run of studies D, B and C, in the order they start: the longest first, so that the
    workers finish together."""
    task = {"seq_len": setting.seq_len, "num_buckets": 4, "test_size": 128}
    train = {"steps": setting.steps, "batch_size": setting.batch_size, "eval_every": setting.eval_every,
             "checkpoint_every": 50, "warmup_steps": 20, "lr": 1e-3}
    runs = []
    length_task = {"seq_len": setting.train_length, "num_buckets": 4, "test_size": 128,
                   "eval_lengths": setting.eval_lengths}
    for variant, options in LENGTH_VARIANTS:
        for seed in setting.length_seeds:
            # Evaluating every length is the cost here: twice (halfway and at the end), no statistics.
            config = _config(variant, options, seed, task=length_task, model={**setting.model, "positions": "none"},
                             train={**train, "steps": setting.length_steps, "eval_every": setting.length_steps // 2,
                                    "attention_stats": False})
            runs.append(PlannedRun(f"D-{configs.described_variant(config)}-s{seed}", config, {"saturation": "D"}))
    for head_dim in sorted({*setting.dynamics_head_dims, *setting.normaliser_head_dims}, reverse=True):
        for variant, options in _dynamics_variants(setting, head_dim):
            if variant == "additive":
                options = {"hidden_dim": setting.additive_hidden_dim or head_dim}
            for seed in setting.seeds:
                config = _config(variant, options, seed, task=task, model={**setting.model, "head_dim": head_dim},
                                 train=train)
                runs.append(PlannedRun(f"B-{configs.described_variant(config)}-d{head_dim}-s{seed}", config,
                                           {"saturation": "B"}))
    for lr in setting.learning_rates:
        for variant, options in LR_VARIANTS:
            for seed in setting.lr_seeds:
                config = _config(variant, options, seed, task=task,
                                 model={**setting.model, "head_dim": LR_HEAD_DIM}, train={**train, "lr": lr})
                name = f"C-{configs.described_variant(config)}-lr{configs.format_value(lr)}-s{seed}"
                runs.append(PlannedRun(name, config, {"saturation": "C"}))
    return runs


def measured_variance(setting: Setting, runs: list[PlannedRun]) -> pd.DataFrame:
    """The per-component variance of q and k at each layer of study B's model (dense with the softmax, its first
    seed) at initialisation, at each of B's head dims (`tables.model_variance`)."""
    first = min(setting.seeds)
    configs_measured = [planned.config for planned in runs if planned.tags["saturation"] == "B"
                        and planned.config.variant == "dense" and planned.config.seed == first
                        and getattr(planned.config.variant_options, "normaliser", "softmax") == "softmax"]
    return pd.concat([tables.model_variance(config, batch_size=setting.batch_size)
                      for config in sorted(configs_measured, key=lambda config: config.model.attention_head_dim)],
                     ignore_index=True)


def fading_variants(setting: Setting) -> list[tuple[str, dict[str, Any]]]:
    """The setting's drawn fading variants that this version registers (Performer only once it is added)."""
    return [(name, dict(options)) for name, options in setting.fading_kernelised if name in variants.list_variants()]


def _write_tables(setting: Setting, out_dir: Path, runs: list[PlannedRun], *, quiet: bool) -> None:
    """Study A (init_stats.csv, model_variance.csv) and D's fading.csv; A is computed again only when the
    setting, the measured variance or the table's columns changed."""
    described = json.dumps(dataclasses.asdict(setting), indent=2) + "\n"
    variance = measured_variance(setting, runs)
    measured = variance.to_csv(index=False)
    saved, init_path, variance_path = (out_dir / name for name in ("setting.json", "init_stats.csv",
                                                                   "model_variance.csv"))
    current = (init_path.exists() and saved.exists() and saved.read_text() == described and variance_path.exists()
               and variance_path.read_text() == measured
               and init_path.read_text().partition("\n")[0] == ",".join(tables.COLUMNS))
    if not current:
        table = tables.init_table(
            setting.head_dims, setting.key_counts, setting.temperatures, samples=setting.samples,
            seed=setting.init_seed, variances=[(variance["q_variance"].mean(), variance["k_variance"].mean())],
            normalisers=setting.init_normalisers, quiet=quiet)
        atomic_write_text(init_path, table.to_csv(index=False))
        atomic_write_text(variance_path, measured)
        atomic_write_text(saved, described)  # after the tables it describes
    fading = tables.fading_table(setting.fading_key_counts, strong_logit=setting.strong_logit,
                                            length_scales=setting.length_scales, kernelised=fading_variants(setting),
                                            head_dim=setting.fading_head_dim, draws=setting.fading_draws,
                                            seed=setting.init_seed)
    atomic_write_text(out_dir / "fading.csv", fading.to_csv(index=False))


def run(setting: Setting, out_dir: Path, *, workers: int, quiet: bool) -> list[str]:
    """All four studies of a setting into `out_dir` (RUNS_DIR/saturation/<setting name>): A's and D's
    tables, then the training runs; returns the runs that did not complete (run: status)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = plan(setting)  # resolved before anything trains: a bad config costs nothing
    _write_tables(setting, out_dir, runs, quiet=quiet)
    return train_all(runs, out_dir / "runs", workers=workers, quiet=quiet, desc="saturation runs")


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))
