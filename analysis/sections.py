"""The report's sections, in order: each is one function `Context -> list[Block]`, registered with `@section`.

A new section is one decorated function here (or in any module imported before the report is built):

    @section("saturation", "Softmax saturation")
    def saturation(context: Context) -> list[Block]:
        ...
        return [Text("..."), Table(...), Figure(...)]

Builders read runs only through the context, draw with `analysis.figures` (the shared palette and
style) and return plain text and DataFrames: the renderer escapes everything.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
import platform
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

import variants
from analysis import figures, saturation_study
from analysis.context import Context
from analysis.render import Block, Figure, Table, Text
from common.provenance import git_commit
from experiments import config as configs
from experiments import tasks
from experiments.model import Transformer
from experiments.records import RecordError, RunRecord

STATUS_ORDER = ("completed", "running", "interrupted", "pruned", "diverged", "failed")
MAX_ATTENTION_RUNS = 6  # checkpoints loaded for attention pictures: one per task and variant, at most this many
MAX_FULL_ATTENTION = 96  # longer sequences show only the scored query rows
MAX_ATTENTION_LENGTH = 4096  # the weights are materialised (batch 1, heads, T, T) per layer
MAX_SCORED_ROWS = 16
MAX_LAYOUTS = 8
MAX_LAYOUT_DRAWN = 128  # positions of a layout drawn (the top-left corner of longer ones)
MAX_REACH_LENGTH = 4096  # receptive fields are computed on layouts up to this length
PACKAGES = ("torch", "numpy", "pandas", "seaborn", "matplotlib", "optuna", "scikit-learn", "einops")


@dataclass(frozen=True)
class SectionBuilder:
    key: str
    title: str
    build: Callable[[Context], list[Block]]


SECTIONS: list[SectionBuilder] = []


def section(key: str, title: str) -> Callable[[Callable[[Context], list[Block]]], Callable[[Context], list[Block]]]:
    """Register a section builder; sections appear in the order they are registered. A key registered
    twice is an error."""
    def register(build: Callable[[Context], list[Block]]) -> Callable[[Context], list[Block]]:
        if any(existing.key == key for existing in SECTIONS):
            raise ValueError(f"Report section {key!r} is already registered; accepted: a new key.")
        SECTIONS.append(SectionBuilder(key, title, build))
        return build
    return register


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _count(number: int, noun: str, plural: str | None = None) -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _slug(text: str) -> str:
    """A file-name-safe form of a name from a run; callers prefix an index, so slugs need not be unique."""
    cleaned = "".join(character if character.isascii() and (character.isalnum() or character in "-_.") else "-"
                      for character in str(text))
    return cleaned.strip("-.")[:40] or "x"


def _problems_table(name: str, caption: str, problems: list[dict[str, str]]) -> list[Block]:
    if not problems:
        return []
    return [Table(name, caption, pd.DataFrame(problems, columns=["run", "reason"]))]


# -- 1. Results -------------------------------------------------------------------------------------


def result_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, variant, setting) of ordinary runs: seeds averaged (completed runs with an eval
    accuracy), mean and sample standard deviation of the eval accuracy, chance level, and the number of
    runs in each status (`other`: a status this version does not know)."""
    rows = []
    for (task, name, setting, label), group in runs.groupby(["task", "variant_name", "setting", "label"],
                                                            sort=True):
        done = group[(group["status"] == "completed") & group["eval_accuracy"].notna()]
        accuracy = done["eval_accuracy"].astype(float)
        chance = group["chance_accuracy"].dropna()
        row = {"task": task, "variant": name, "setting": setting, "label": label, "seeds": len(done),
               "accuracy_mean": accuracy.mean() if len(done) else math.nan,
               "accuracy_std": accuracy.std(ddof=1) if len(done) > 1 else math.nan,
               "chance": float(chance.iloc[0]) if len(chance) else math.nan, "runs": len(group)}
        counts = group["status"].value_counts()
        row.update({status: int(counts.get(status, 0)) for status in STATUS_ORDER})
        row["other"] = int(sum(count for status, count in counts.items() if status not in STATUS_ORDER))
        rows.append(row)
    return pd.DataFrame(rows)


def by_task(cells: pd.DataFrame) -> pd.DataFrame:
    """Variant x task means (numbers), each row's average recomputed from its cells and the number of
    tasks it averages, and a last row of chance levels averaged the same way."""
    means = cells.pivot_table(index="label", columns="task", values="accuracy_mean", aggfunc="first", dropna=False)
    means = means.reindex(sorted(cells["label"].unique()))
    table = means.copy()
    table["average"] = means.mean(axis=1, skipna=True)
    table["tasks_averaged"] = means.notna().sum(axis=1)
    chance = cells.groupby("task")["chance"].first().reindex(means.columns)
    table.loc["chance"] = [*chance, chance.mean(), int(chance.notna().sum())]
    return table.rename_axis("variant").reset_index()


def _cell_text(row: pd.Series) -> str:
    if row["seeds"] == 0:
        return "–"
    spread = f" ± {row['accuracy_std']:.3f}" if row["seeds"] > 1 else ""
    return f"{row['accuracy_mean']:.3f}{spread} (n={row['seeds']})"


@section("results", "Results")
def results(context: Context) -> list[Block]:
    runs, ordinary = context.runs, context.ordinary
    trials = runs[runs["study"].notna()]
    blocks: list[Block] = [Text(
        f"{_count(len(runs), 'run')} read from {context.runs_dir} ({_count(len(ordinary), 'ordinary run')}, "
        f"{_count(len(trials), 'sweep trial')} in {_count(trials['study'].nunique(), 'study', 'studies')}); "
        f"{_count(len(context.skipped), 'unreadable record')} skipped{' (listed below)' if context.skipped else ''}. "
        "Eval accuracy is the accuracy at the scored positions of each task's fixed held-out set, averaged over "
        "seeds of completed runs (mean ± sample standard deviation, n = seeds); runs in other states are "
        "counted, never averaged."
    )]
    if runs.empty:
        blocks.append(Text(f"No runs in {context.runs_dir}" + (" match the filters" if context.filters else "")
                           + ": `make experiment` writes runs there, `make report RUNS_DIR=...` reads another "
                           "folder."))
    if len(ordinary):
        cells = result_cells(ordinary)
        shown = cells.assign(**{"eval accuracy": cells.apply(_cell_text, axis=1)})
        status_columns = [status for status in (*STATUS_ORDER, "other") if shown[status].any()]
        columns = ["task", "variant", *(["setting"] if shown["setting"].any() else []), "eval accuracy",
                   "seeds", "chance", "runs", *status_columns]
        blocks.append(Table("results", "Eval accuracy per task and variant, over seeds (runs counted by status)",
                            shown[columns].assign(chance=shown["chance"].map(_fmt)),
                            data=cells))
        table = by_task(cells)
        task_names = [column for column in table.columns if column not in ("variant", "average", "tasks_averaged")]
        text = table.copy()
        labelled = cells.set_index(["label", "task"])
        for task in task_names:
            text[task] = [
                (_fmt(row[task]) if row["variant"] == "chance"
                 else _cell_text(labelled.loc[(row["variant"], task)]) if (row["variant"], task) in labelled.index
                 else "–")
                for _, row in table.iterrows()
            ]
        text["average"] = table["average"].map(_fmt)
        text["tasks_averaged"] = table["tasks_averaged"].astype(int)
        blocks.append(Table(
            "results-by-task", "Variant x task eval accuracy; the average is computed from the row's cell means "
            "(over the tasks the row has: tasks_averaged), never typed in", text, data=table))
    unfinished = ordinary[ordinary["status"] != "completed"]
    if len(unfinished):
        blocks.append(Table(
            "unfinished-runs", "Runs that did not complete (counted above, not averaged)",
            unfinished[["run_id", "task", "variant_name", "seed", "status", "steps", "total_steps", "error"]]))
    blocks += _problems_table("skipped-records", "Records skipped: they could not be read", context.skipped)
    if context.studies:
        rows = []
        for study in context.studies:
            best = study.best()
            counts = study.counts()
            rows.append({
                "study": study.name, "variant": study.definition.get("variant"), "task": study.definition.get("task"),
                **{f"{state} trials": count for state, count in counts.items()},
                "best trial": best.number if best else None, "best eval accuracy": best.value if best else None,
                "run": best.user_attrs.get("run_id") if best else None,
                "best settings": " ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                                          for name, value in (best.params.items() if best else [])),
            })
        blocks.append(Table("best-sweep-settings", "Best sweep settings: the complete trial of highest eval "
                                                   "accuracy in each study", pd.DataFrame(rows)))
    return blocks


# -- 2. Accuracy against dependency distance and evaluation length ----------------------------------


@functools.cache
def _reach(variant: str, options_json: str, heads: int, head_dim: int, depth: int, seq_len: int,
           causal: bool) -> int | None:
    """How far back (in tokens) the last position sees every position, after `depth` layers of the
    variant's layout; None for a variant without a layout (it sees everything) or one that cannot be built."""
    try:
        attention = variants.create(variant, num_heads=heads, head_dim=head_dim, **json.loads(options_json))
    except ValueError:
        return None
    if attention.block_layout is None:
        return None
    allowed = attention.layout(seq_len, seq_len, causal=causal)  # (query, key)
    reached = torch.zeros(seq_len, dtype=torch.bool)
    reached[-1] = True
    for _ in range(depth):
        reached |= allowed[reached].any(dim=0)
    by_distance = reached.flip(0)  # index d: the position d tokens before the last
    gaps = (~by_distance).nonzero().flatten()
    return int(gaps[0]) - 1 if len(gaps) else seq_len - 1


def _layout_variants(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per variant_name among `runs` (first run of each) with what drawing its layout needs."""
    entries = []
    for name, group in runs.groupby("variant_name", sort=True):
        run = group.iloc[0]
        try:
            config = RunRecord(Path(run["path"])).read_config()
            model = configs.ModelConfig(**config["model"])
            entries.append({"variant_name": name, "variant": config["variant"],
                            "options": json.dumps(config.get("variant_options", {}), sort_keys=True),
                            "heads": model.heads, "head_dim": model.attention_head_dim,
                            "depth": int(config["model"]["depth"]), "causal": bool(config["model"]["causal"]),
                            "seq_len": int(config["task_options"]["seq_len"])})
        except (RecordError, KeyError, TypeError, ValueError):
            continue
    return entries


def _draw_lines(context: Context, ax, frame: pd.DataFrame, x: str, y: str, spread: str | None = None,
                marker: str | None = "o", bounded: bool = False) -> None:
    """One line per label: colour by variant, line style by setting, a band of +- `spread` where known
    (clipped to [0, 1] when `bounded`, as accuracies are)."""
    styles = context.linestyles(frame)
    for (name, setting, label), group in frame.groupby(["variant_name", "setting", "label"], sort=True):
        group = group.sort_values(x)
        colour = context.colour(name)
        ax.plot(group[x], group[y], color=colour, linestyle=styles[setting], marker=marker, markersize=4,
                label=label)
        if spread is not None and group[spread].notna().any():
            low, high = group[y] - group[spread].fillna(0), group[y] + group[spread].fillna(0)
            if bounded:
                low, high = low.clip(0, 1), high.clip(0, 1)
            ax.fill_between(group[x], low, high, color=colour, alpha=0.15, linewidth=0)


def _accuracy_axis(ax) -> None:
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("eval accuracy (fraction correct)")


@section("distance", "Accuracy against dependency distance")
def distance(context: Context) -> list[Block]:
    completed = context.completed
    rows = [{"task": run.task, "variant_name": run.variant_name, "setting": run.setting, "label": run.label,
             "run_id": run.run_id, "seed": run.seed, "lo": bucket.get("lo"), "hi": bucket.get("hi"),
             "accuracy": bucket.get("accuracy"), "count": bucket.get("count")}
            for run in completed.itertuples(index=False) for bucket in run.accuracy_by_distance
            if bucket.get("accuracy") is not None]
    blocks: list[Block] = [Text(
        "Eval accuracy per dependency-distance bucket (how many positions back the evidence lies), mean over "
        "seeds with a ± 1 standard deviation band, one line per variant. Dotted vertical lines mark the reach "
        "of local and sparse variants: the farthest distance up to which the last position sees every earlier "
        "position after all layers (computed from the variant's layout, not typed in)."
    )]
    if not rows:
        blocks.append(Text("No completed run reports accuracy by dependency distance."))
    frame = pd.DataFrame(rows)
    for index, (task, task_frame) in enumerate(frame.groupby("task", sort=True) if rows else []):
        aggregated = _over_seeds(task_frame, ["variant_name", "setting", "label", "lo", "hi"])
        aggregated["distance"] = (aggregated["lo"] + aggregated["hi"]) / 2
        fig, axes = figures.figure()
        ax = axes[0, 0]
        _draw_lines(context, ax, aggregated, "distance", "accuracy_mean", "accuracy_std", bounded=True)
        chance = completed.loc[completed["task"] == task, "chance_accuracy"].dropna()
        if len(chance):
            ax.axhline(float(chance.iloc[0]), color="grey", linestyle="--", linewidth=1,
                       label=f"chance {float(chance.iloc[0]):.3g}")
        reaches = []
        for entry in _layout_variants(completed[completed["task"] == task]):
            if entry["seq_len"] > MAX_REACH_LENGTH:
                continue
            reach = _reach(entry["variant"], entry["options"], entry["heads"], entry["head_dim"], entry["depth"],
                           entry["seq_len"], entry["causal"])
            if reach is not None:
                reaches.append({"task": task, "variant_name": entry["variant_name"], "depth": entry["depth"],
                                "seq_len": entry["seq_len"], "reach": reach})
                ax.axvline(reach, color=context.colour(entry["variant_name"]), linestyle=":", linewidth=2,
                           label=f"{entry['variant_name']} reach {reach}")
        buckets = aggregated.drop_duplicates(["lo", "hi"]).sort_values("lo")
        if len(buckets) <= 12:
            ax.set_xticks(buckets["distance"], [f"{lo}-{hi}" for lo, hi in zip(buckets["lo"], buckets["hi"],
                                                                              strict=True)], rotation=30)
        ax.set_xlabel("dependency distance (tokens back; bucket range)")
        _accuracy_axis(ax)
        ax.set_title(f"{task}: eval accuracy by dependency distance")
        ax.legend(loc="best")
        blocks.append(Figure(f"distance-{index:02d}-{_slug(task)}", f"{task}: eval accuracy against dependency "
                             "distance, mean ± sd over seeds", fig, aggregated))
        if reaches:
            blocks.append(Table(f"reach-{index:02d}-{_slug(task)}", f"{task}: reach of local and sparse variants "
                                "(tokens the last position sees without a gap, after all layers)",
                                pd.DataFrame(reaches)))
    blocks += _lengths(context, completed)
    blocks += _splits(completed)
    return blocks


def _over_seeds(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Accuracy per group of `keys`: mean, sample standard deviation and count over the runs (seeds)."""
    return (frame.groupby(keys, as_index=False)
            .agg(accuracy_mean=("accuracy", "mean"), accuracy_std=("accuracy", "std"), seeds=("accuracy", "size")))


def _lengths(context: Context, completed: pd.DataFrame) -> list[Block]:
    rows = [{"task": run.task, "variant_name": run.variant_name, "setting": run.setting, "label": run.label,
             "run_id": run.run_id, "length": entry.get("length"), "accuracy": entry.get("accuracy")}
            for run in completed.itertuples(index=False)
            for entry in run.accuracy_by_length if entry.get("accuracy") is not None]
    if not rows:
        return []
    blocks: list[Block] = []
    frame = pd.DataFrame(rows)
    for index, (task, task_frame) in enumerate(frame.groupby("task", sort=True)):
        aggregated = _over_seeds(task_frame, ["variant_name", "setting", "label", "length"])
        fig, axes = figures.figure()
        ax = axes[0, 0]
        _draw_lines(context, ax, aggregated, "length", "accuracy_mean", "accuracy_std", bounded=True)
        for length in sorted(set(completed.loc[completed["task"] == task, "task.seq_len"].dropna())):
            ax.axvline(length, color="black", linestyle=":", linewidth=1, label=f"trained length {int(length)}")
        figures.log_axes(ax, aggregated["length"], y=False)
        ax.set_xlabel("evaluation sequence length (tokens, log scale)")
        _accuracy_axis(ax)
        ax.set_title(f"{task}: eval accuracy by evaluation length")
        ax.legend(loc="best")
        blocks.append(Figure(f"length-{index:02d}-{_slug(task)}", f"{task}: eval accuracy against evaluation "
                             "length (length generalisation), mean ± sd over seeds", fig, aggregated))
    return blocks


def _splits(completed: pd.DataFrame) -> list[Block]:
    rows = [{"task": run.task, "variant": run.label, "split": split, "accuracy": accuracy}
            for run in completed.itertuples(index=False) for split, accuracy in run.accuracy_by_split.items()
            if accuracy is not None]
    if not rows:
        return []
    table = _over_seeds(pd.DataFrame(rows), ["task", "variant", "split"])
    return [Table("splits", "Eval accuracy on each task's extra held-out splits, over seeds", table)]


# -- 3. Learning curves -----------------------------------------------------------------------------


@section("curves", "Learning curves")
def curves(context: Context) -> list[Block]:
    metrics, unreadable = context.metrics(context.ordinary)
    blocks: list[Block] = [Text(
        "Training loss (mean over each logging interval) and eval accuracy against optimiser steps and against "
        "wall time, averaged over seeds (band: ± 1 standard deviation; wall time: the mean over seeds at each step)."
    )]
    if metrics.empty:
        blocks.append(Text("No run has a metrics stream (metrics.jsonl) yet."))
    for index, (task, frame) in enumerate(metrics.groupby("task", sort=True)):
        keys = ["variant_name", "setting", "label", "step"]
        train = (frame[frame["kind"] == "train"].groupby(keys, as_index=False)
                 .agg(loss_mean=("loss", "mean"), loss_std=("loss", "std"), wall_seconds=("wall_seconds", "mean"),
                      seeds=("run_id", "nunique")).assign(kind="train"))
        evaluated = (frame[frame["kind"] == "eval"].groupby(keys, as_index=False)
                     .agg(eval_accuracy_mean=("eval_accuracy", "mean"), eval_accuracy_std=("eval_accuracy", "std"),
                          wall_seconds=("wall_seconds", "mean"), seeds=("run_id", "nunique")).assign(kind="eval"))
        fig, axes = figures.figure(2, 2)
        for column, x, xlabel in ((0, "step", "training step"), (1, "wall_seconds", "wall time (s)")):
            _draw_lines(context, axes[column, 0], train, x, "loss_mean", "loss_std", marker=None)
            axes[column, 0].set_ylabel("training loss (cross-entropy, nats)")
            axes[column, 0].set_title(f"{task}: training loss by {xlabel.split(' (')[0]}")
            _draw_lines(context, axes[column, 1], evaluated, x, "eval_accuracy_mean", "eval_accuracy_std",
                        bounded=True)
            _accuracy_axis(axes[column, 1])
            axes[column, 1].set_title(f"{task}: eval accuracy by {xlabel.split(' (')[0]}")
            for ax in axes[column]:
                ax.set_xlabel(xlabel)
        axes[0, 1].legend(loc="best")
        data = pd.concat([train, evaluated], ignore_index=True)
        blocks.append(Figure(f"curves-{index:02d}-{_slug(task)}", f"{task}: learning curves, mean over seeds",
                             fig, data))
    blocks += _problems_table("unreadable-metrics", "Runs whose metrics could not be read", unreadable)
    return blocks


# -- 4. Attention pictures --------------------------------------------------------------------------


def _attention_runs(context: Context) -> pd.DataFrame:
    """A handful of completed runs with a checkpoint: the lowest seed of each (task, variant, setting)."""
    candidates = context.completed.sort_values(["task", "label", "seed", "run_id"])
    candidates = candidates[[Path(path, "checkpoint.pt").is_file() for path in candidates["path"]]]
    return candidates.drop_duplicates(["task", "label"]).head(MAX_ATTENTION_RUNS)


def _attention_picture(run: pd.Series, index: int) -> Figure:
    """The trained model's attention weights on the eval example with the farthest dependency, one heat map
    per layer and head; raises ValueError (RecordError, OptionError) or RuntimeError for unusable records."""
    record = RunRecord(Path(run["path"]))
    config = configs.from_dict(record.read_config())
    task = tasks.create_task(config.task, profile=config.profile, **config.task_options)
    if task.seq_len > MAX_ATTENTION_LENGTH:
        raise RecordError(f"sequences of {task.seq_len} tokens: the dense weights of every head would not fit; "
                          f"pictures are drawn up to {MAX_ATTENTION_LENGTH} tokens")
    model = Transformer(config.model, vocab_size=task.vocab_size, num_classes=task.num_classes,
                        max_len=task.max_len, variant=config.variant, variant_options=config.variant_options)
    state = record.load_checkpoint()
    if state is None:
        raise RecordError("no checkpoint.pt")
    model.load_state_dict(state["model"])
    model.eval()
    eval_set = task.eval_set("cpu")
    scored = eval_set.targets != tasks.IGNORE
    farthest = torch.where(scored, eval_set.distance, -1).max(dim=1).values
    example = int(farthest.argmax())
    inputs = eval_set.inputs[example : example + 1]
    with torch.no_grad():
        _, weights = model(inputs, return_weights=True)  # per layer (1, H, T, T)
    tokens = task.decode(inputs[0])
    length = len(tokens)
    rows = list(range(length)) if length <= MAX_FULL_ATTENTION else scored[example].nonzero().flatten().tolist()
    rows = rows[-MAX_SCORED_ROWS:] if length > MAX_FULL_ATTENTION else rows
    names = [f"{position} {token}" for position, token in enumerate(tokens)]
    depth, heads = len(weights), weights[0].shape[1]
    full = length <= MAX_FULL_ATTENTION
    panel = (4.2, 4.0) if full else (6.4, 1.0 + 0.22 * len(rows))
    fig, axes = figures.figure(depth, heads, width=panel[0] * heads, height=panel[1] * depth + 0.6)
    step = max(1, math.ceil(length / 32))
    data = []
    for layer, layer_weights in enumerate(weights):
        for head in range(heads):
            matrix = layer_weights[0, head, rows].numpy()  # (rows, keys)
            ax = axes[layer, head]
            figures.heatmap(ax, matrix, [names[row] for row in rows], names, every=step,
                            cmap="Blues", vmin=0.0, square=full, cbar_kws={"shrink": 0.6, "label": "weight"})
            ax.set_title(f"layer {layer}, head {head}", fontsize=10)
            ax.set_xlabel("key (position token)")
            ax.set_ylabel("query (position token)")
            ax.tick_params(labelsize=8 if length / step <= 16 else 6)
            data += [{"layer": layer, "head": head, "query": row, "query_token": tokens[row], "key": key,
                      "key_token": tokens[key], "weight": round(float(matrix[position, key]), 5)}
                     for position, row in enumerate(rows) for key in range(length)]
    figures.suptitle(fig, f"{run['label']} on {run['task']} (seed {run['seed']}): attention on eval example "
                          f"{example}, answer {task.label_text(eval_set, example)}, farthest dependency "
                          f"{int(farthest[example])}")
    shown = "every query row" if full else f"the scored query rows (sequence of {length} tokens)"
    caption = (f"{run['label']} on {run['task']}, run {run['run_id']}: attention weights of the trained model for "
               f"eval example {example} (the one whose dependency lies farthest back), per layer and head; "
               f"{shown}, keys as columns")
    return Figure(f"attention-{index:02d}-{_slug(run['task'])}-{_slug(run['variant_name'])}", caption, fig,
                  pd.DataFrame(data))


def _layout_figure(context: Context, entries: list[dict[str, Any]]) -> Figure:
    columns = min(4, len(entries))
    rows = math.ceil(len(entries) / columns)
    fig, axes = figures.figure(rows, columns, width=max(6.4, 3.8 * columns), height=4.2 * rows)
    data = []
    for ax in axes.flat[len(entries):]:
        ax.set_axis_off()
    for ax, entry in zip(axes.flat, entries, strict=False):
        attention = variants.create(entry["variant"], num_heads=entry["heads"],
                                    head_dim=entry["head_dim"], **json.loads(entry["options"]))
        drawn = min(entry["seq_len"], MAX_LAYOUT_DRAWN)
        allowed = attention.layout(entry["seq_len"], entry["seq_len"], causal=entry["causal"])[:drawn, :drawn]
        step = max(1, math.ceil(drawn / 16))
        positions = [str(position) for position in range(drawn)]
        figures.heatmap(ax, allowed.int().numpy(), positions, positions, every=step, vmin=0, vmax=1, cbar=False,
                        cmap=ListedColormap(["white", context.colour(entry["variant_name"])]), square=True,
                        linewidths=0.2 if drawn <= 32 else 0, linecolor="#eee")
        corner = "" if drawn == entry["seq_len"] else f", first {drawn} of {entry['seq_len']}"
        ax.set_title(f"{entry['variant_name']} ({'causal' if entry['causal'] else 'bidirectional'}{corner})",
                     fontsize=10)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.tick_params(labelsize=8)
        pairs = allowed.nonzero().tolist()
        data += [{"variant_name": entry["variant_name"], "seq_len": entry["seq_len"], "causal": entry["causal"],
                  "query": query, "key": key} for query, key in pairs]
    figures.suptitle(fig, "Layouts: the (query, key) pairs each local and sparse variant attends")
    return Figure("layouts", "Layouts of the local and sparse variants as the models used them: a coloured cell "
                             "is a (query, key) pair attended", fig, pd.DataFrame(data))


@section("attention", "Attention pictures")
def attention(context: Context) -> list[Block]:
    blocks: list[Block] = [Text(
        f"Heat maps of trained models' attention (rows: queries, columns: keys, labelled 'position token'), for "
        f"the lowest seed of each task and variant, at most {MAX_ATTENTION_RUNS} checkpoints."
    )]
    chosen = _attention_runs(context)
    problems = []
    for index, (_, run) in enumerate(chosen.iterrows()):
        try:
            blocks.append(_attention_picture(run, index))
        except (ValueError, RuntimeError, KeyError) as error:
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            problems.append({"run": run["run_id"], "reason": f"attention not drawn ({reason})"})
    if chosen.empty:
        blocks.append(Text("No completed run with a checkpoint to draw attention from."))
    layouts = []
    for entry in _layout_variants(context.ordinary):
        try:
            has_pattern = variants.create(entry["variant"], num_heads=entry["heads"],
                                          head_dim=entry["head_dim"],
                                          **json.loads(entry["options"])).block_layout is not None
        except ValueError as error:
            problems.append({"run": entry["variant_name"], "reason": f"layout not drawn ({error})"})
            continue
        if has_pattern:
            layouts.append(entry)
    if layouts:
        blocks.append(_layout_figure(context, layouts[:MAX_LAYOUTS]))
    else:
        blocks.append(Text("No local or sparse variant among the runs: no layout to draw."))
    blocks += _problems_table("attention-problems", "Runs whose pictures could not be drawn", problems)
    return blocks


# -- 5. Cost ----------------------------------------------------------------------------------------


@section("cost", "Cost: time and memory against sequence length")
def cost(context: Context) -> list[Block]:
    bench = context.bench
    blocks: list[Block] = [Text(
        "Forward+backward time and peak memory per variant and kernel from `make bench-variants`, log-log; the "
        "exponent k of a least-squares fit time ∝ n^k (and memory ∝ n^k) over each line's measured lengths is "
        "printed on the line. Files read: " + (", ".join(path.name for path in context.bench_files) or "none") + "."
    )]
    if bench is None:
        blocks.append(Text(f"No benchmark table in {context.runs_dir / 'bench'}: `make bench-variants` writes one."))
        return blocks
    measured = bench[bench["status"] == "ok"].copy()
    exponents = []
    kernels = sorted(measured["kernel"].astype(str).unique())
    markers = dict(zip(kernels, "osD^v<>ph*Xd" * 3, strict=False))
    for index, ((causal, device), frame) in enumerate(measured.groupby(["causal", "device"], sort=True)):
        fig, axes = figures.figure(1, 2, width=14.0, height=5.5)
        for (variant, kernel), line in frame.groupby(["variant", "kernel"], sort=True):
            line = line.sort_values("seq_len")
            colour = context.colour(str(variant))
            time_exponent = figures.fit_exponent(line["seq_len"], line["ms"])
            memory_exponent = figures.fit_exponent(line["seq_len"], line["peak_mib"])
            exponents.append({"variant": variant, "kernel": kernel, "causal": causal, "device": device,
                              "lengths": f"{line['seq_len'].min()}-{line['seq_len'].max()}",
                              "time_exponent": time_exponent, "memory_exponent": memory_exponent,
                              "ms_at_longest": line["ms"].iloc[-1], "peak_mib_at_longest": line["peak_mib"].iloc[-1]})
            for ax, column, exponent in ((axes[0, 0], "ms", time_exponent), (axes[0, 1], "peak_mib", memory_exponent)):
                shown = f"n^{exponent:.2f}" if exponent is not None else "one length"
                ax.plot(line["seq_len"], line[column], color=colour, marker=markers[str(kernel)], markersize=5,
                        label=f"{variant} / {kernel} ({shown})")
                ax.annotate(shown, (line["seq_len"].iloc[-1], line[column].iloc[-1]), textcoords="offset points",
                            xytext=(4, 0), fontsize=8, color=colour, va="center")
        mode = "causal" if causal else "bidirectional"
        for ax, ylabel, what in ((axes[0, 0], "time per forward+backward (ms, log scale)", "time"),
                                 (axes[0, 1], "peak memory (MiB, log scale)", "peak memory")):
            figures.log_axes(ax, frame["seq_len"])
            ax.set_xlabel("sequence length n (tokens, log scale)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{what} against length ({mode}, {device})")
        for ax in axes[0]:
            ax.margins(x=0.15)  # room for the exponent printed after each line's last point
        axes[0, 1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
        blocks.append(Figure(f"cost-{index:02d}-{'causal' if causal else 'bidirectional'}-{_slug(device)}",
                             f"Time and peak memory against sequence length ({mode}, {device}); the fitted exponent "
                             "is printed on each line", fig, frame))
    if exponents:
        blocks.append(Table("cost-exponents", "Fitted exponents (time ∝ n^k, memory ∝ n^k) per variant and kernel",
                            pd.DataFrame(exponents)))
    skipped = bench[bench["status"] != "ok"]
    if len(skipped):
        blocks.append(Table("cost-skipped", "Measurements the benchmark skipped, and why",
                            skipped[["variant", "kernel", "seq_len", "causal", "device", "status"]]))
    return blocks


# -- 6. Softmax saturation -------------------------------------------------------------------------


@section("saturation", "Softmax saturation")
def saturation(context: Context) -> list[Block]:
    return saturation_study.blocks(context.runs_dir)


# -- 7. Sweeps --------------------------------------------------------------------------------------


@section("sweeps", "Sweeps")
def sweeps(context: Context) -> list[Block]:
    blocks: list[Block] = [Text(
        "Each Optuna study under sweeps/: its trials, the optimisation history (eval accuracy per trial and the "
        "best so far; pruned trials at their last reported value), the eval accuracy each trial reported at each "
        "evaluation, and each parameter's importance for the eval accuracy by Optuna's fANOVA evaluator."
    )]
    if not context.studies:
        blocks.append(Text(f"No sweep studies in {context.runs_dir / 'sweeps'}: `make sweep` writes them."))
    statuses = dict(zip(context.runs["run_id"], context.runs["status"], strict=True))
    for index, study in enumerate(context.studies):
        definition = study.definition
        counts = study.counts()
        blocks.append(Text(
            f"Study {study.name}: {definition.get('variant', '?')} on {definition.get('task', '?')} "
            f"(profile {definition.get('profile', '?')}, seed {definition.get('seed', '?')}); "
            + ", ".join(f"{count} {state}" for state, count in counts.items()) + "."
        ))
        trials = study.trials_frame()
        trials["run status"] = trials["run_id"].map(statuses)
        blocks.append(Table(f"sweep-{index:02d}-{_slug(study.name)}-trials", f"Study {study.name}: trials", trials))
        slug = f"{index:02d}-{_slug(study.name)}"
        fig, axes = figures.figure(1, 2, width=13.0)
        ax = axes[0, 0]
        complete = trials[trials["state"] == "complete"]
        pruned = trials[trials["state"] == "pruned"]
        ax.scatter(complete["trial"], complete["value"], color="C0", label="complete trial", zorder=3)
        ax.scatter(pruned["trial"], pruned["last_reported"], color="grey", marker="x",
                   label="pruned (last reported)", zorder=3)
        if len(complete):
            best = complete.sort_values("trial")["value"].cummax()
            ax.step(complete.sort_values("trial")["trial"], best, where="post", color="black", label="best so far")
        ax.set_xlabel("trial number")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _accuracy_axis(ax)
        ax.set_title("optimisation history")
        ax.legend(loc="lower right")
        intermediate = study.intermediate_frame()
        ax = axes[0, 1]
        for _, line in intermediate.groupby("trial", sort=True):
            state = line["state"].iloc[0]
            ax.plot(line["step"], line["eval_accuracy"], color="C0" if state == "complete" else "grey",
                    linestyle="-" if state == "complete" else "--", alpha=0.7, marker="o", markersize=3)
        ax.set_xlabel("training step")
        _accuracy_axis(ax)
        ax.set_title("eval accuracy reported per trial")
        figures.suptitle(fig, f"Study {study.name}")
        ax.legend(handles=[Line2D([], [], color="C0", marker="o", label="complete trial"),
                           Line2D([], [], color="grey", linestyle="--", marker="o", label="pruned or failed trial")],
                  loc="lower right")
        blocks.append(Figure(f"sweep-{slug}-history", f"Study {study.name}: optimisation history and the eval "
                             "accuracy each trial reported", fig, intermediate))
        importance, reason = study.importances()
        if importance is None:
            blocks.append(Text(f"Study {study.name}: no parameter importance ({reason})."))
            continue
        fig, axes = figures.figure(height=1.2 + 0.45 * len(importance))
        ax = axes[0, 0]
        ordered = importance.sort_values("importance")
        ax.barh(ordered["param"], ordered["importance"], color="C0")
        ax.set_xlabel("fANOVA importance (fraction of the objective's variance)")
        ax.set_ylabel("parameter")
        ax.set_title("parameter importance for eval accuracy")
        figures.suptitle(fig, f"Study {study.name}")
        blocks.append(Figure(f"sweep-{slug}-importance", f"Study {study.name}: parameter importance "
                             "(Optuna FanovaImportanceEvaluator, seed 0)", fig, importance))
    return blocks


# -- 8. Provenance ----------------------------------------------------------------------------------


@functools.cache
def _defaults(variant: str, task: str, profile: str, device: str, kernel: str) -> dict[str, Any] | None:
    try:  # as config.json holds it: tuples as lists
        return json.loads(configs.to_json(configs.resolve(variant=variant, task=task, profile=profile, seed=0,
                                                          device=device, kernel=kernel)))
    except ValueError:
        return None


def rerun_command(config: dict[str, Any]) -> str:
    """The `make experiment` command that trains this config again: --set for each field that differs from
    the profile's defaults (every field, when the defaults cannot be resolved)."""
    fields = ("variant", "task", "profile", "seed", "device")
    head = {name: config.get(name) for name in fields}
    kernel = config.get("kernel", "auto")
    defaults = _defaults(*(str(head[name]) for name in ("variant", "task", "profile", "device")), str(kernel)) or {}
    assignments = []
    for section, prefix in (("variant_options", "variant"), ("task_options", "task"), ("model", "model"),
                            ("train", "train")):
        default = defaults.get(section, {})
        for name, value in (config.get(section) or {}).items():
            if name not in default or default[name] != value:
                assignments.append(shlex.quote(f"{prefix}.{name}={configs.format_value(value)}"))
    args = " ".join([*(["--kernel", shlex.quote(str(kernel))] if kernel != "auto" else []),
                     *(f"--set {assignment}" for assignment in assignments)])
    command = " ".join(f"{name.upper()}={shlex.quote(str(head[name]))}" for name in fields)
    return f"make experiment {command}" + (f' ARGS="{args}"' if args else "")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@section("provenance", "Provenance")
def provenance(context: Context) -> list[Block]:
    environment = [("built", time.strftime("%Y-%m-%d %H:%M:%S %z")), ("attnlab git commit", git_commit() or "unknown"),
                   ("python", platform.python_version()), ("platform", platform.platform()),
                   *((package, _version(package)) for package in PACKAGES)]
    blocks: list[Block] = [Table("environment", "The environment this report was built in",
                                 pd.DataFrame(environment, columns=["item", "value"]))]
    rows = []
    for run in context.runs.sort_values(["task", "variant_name", "seed", "run_id"]).itertuples(index=False):
        try:
            command = rerun_command(RunRecord(Path(run.path)).read_config())
        except RecordError as error:
            command = f"unavailable ({error})"
        rows.append({"run": run.run_id, "status": run.status, "task": run.task, "variant": run.variant_name,
                     "seed": run.seed, "profile": run.profile, "device": run.device, "device name": run.device_name,
                     "kernel": run.kernel, "torch": run.torch_version, "git commit": run.git_commit,
                     "study": run.study, "trial": run.trial, "command": command})
    if rows:
        table = pd.DataFrame(rows)
        shown = table.assign(**{"git commit": table["git commit"].map(lambda commit: str(commit)[:12]
                                                                      if isinstance(commit, str) else commit)})
        blocks.append(Table("provenance", "Each run: where and with what it ran (git commits shortened; the CSV "
                                          "has them whole), and the command that reproduces it", shown, data=table))
    else:
        blocks.append(Text("No runs: nothing to trace."))
    return blocks

