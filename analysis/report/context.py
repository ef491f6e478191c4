"""What every report section reads: the selected runs, the studies, the speed table, the palette.

A section builder is a function `Context -> list[Block]`; it reads runs only through this object (so
through `load_runs`), and sees the same colours, labels and skipped records as every other section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.report import figures
from analysis.runs import run_metrics
from analysis.sweeps import SweepStudy
from experiments.run.records import RecordError

SPEED_KEY = ("variant", "kernel", "seq_len", "causal", "device", "batch", "heads", "head_dim", "dtype")
SPEED_COLUMNS = (*SPEED_KEY, "status", "ms", "peak_mib")


def _config_columns(runs: pd.DataFrame) -> list[str]:
    return ["profile", *(column for column in runs.columns if column.partition(".")[0] in ("task", "model", "train"))]


def settings(runs: pd.DataFrame) -> pd.Series:
    """Per run, the config fields that tell it apart from other runs of its task beyond the variant and
    the seed, as 'field=value ...' ('' when all runs of the task agree): within a task, the profile and
    task, model and train fields that vary, and the variant options that vary between runs whose variants
    describe themselves alike (an option the name does not show)."""
    result = pd.Series("", index=runs.index, dtype=object)
    for _, task_runs in runs.groupby("task", sort=False):
        varying = [column for column in _config_columns(task_runs)
                   if task_runs[column].notna().any() and task_runs[column].nunique(dropna=False) > 1]
        option_columns = [column for column in task_runs.columns if column.startswith("variant.")]
        for _, same_name in task_runs.groupby("variant_name", sort=False):
            shown = varying + [column for column in option_columns if same_name[column].nunique(dropna=False) > 1]
            for index, row in same_name[shown].iterrows():
                result[index] = " ".join(f"{column}={_text(row[column])}" for column in shown)
    return result


def _text(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(_text, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def read_speed(speed_dir: Path) -> tuple[pd.DataFrame | None, list[Path], list[dict[str, str]]]:
    """Every `variants-*.csv` of `make speed` in `speed_dir`, newest measurement per
    (variant, kernel, length, causality, device, sizes); the files read; the files skipped, with why."""
    files = sorted(speed_dir.glob("variants-*.csv")) if speed_dir.is_dir() else []
    tables, read, skipped = [], [], []
    for path in files:
        try:
            table = pd.read_csv(path)
        except (OSError, ValueError) as error:
            skipped.append({"run": f"speed/{path.name}", "reason": f"not a readable CSV ({error})"})
            continue
        missing = [column for column in SPEED_COLUMNS if column not in table]
        if missing:
            skipped.append({"run": f"speed/{path.name}", "reason": f"lacks the columns {', '.join(missing)}"})
            continue
        tables.append(table.assign(file=path.name))
        read.append(path)
    if not tables:
        return None, read, skipped
    merged = pd.concat(tables, ignore_index=True).sort_values("file", kind="stable")
    return merged.drop_duplicates(list(SPEED_KEY), keep="last").reset_index(drop=True), read, skipped


@dataclass
class Context:
    runs_dir: Path
    runs: pd.DataFrame  # the selected runs, every status, with `setting` and `label` added
    skipped: list[dict[str, str]]  # records that could not be read: {"run", "reason"}
    studies: list[SweepStudy]
    speed: pd.DataFrame | None
    speed_files: list[Path]
    filters: dict[str, list[str]]
    palette: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.runs = self.runs.copy()
        # Ordinary runs and sweep trials are told apart among their own kind (trials vary by design).
        trial = self.runs["study"].notna()
        self.runs["setting"] = pd.concat([settings(self.runs[~trial]), settings(self.runs[trial])]) \
            if len(self.runs) else pd.Series(dtype=object)
        self.runs["label"] = [name if not setting else f"{name} [{setting}]"
                              for name, setting in zip(self.runs["variant_name"], self.runs["setting"], strict=True)]
        names = list(self.runs["variant_name"])
        if self.speed is not None:
            names += list(self.speed["variant"].astype(str))
        self.palette = figures.palette(names)

    @cached_property
    def ordinary(self) -> pd.DataFrame:
        """Runs that are not sweep trials (trials vary their settings; they belong to the sweeps section)."""
        return self.runs[self.runs["study"].isna()]

    @cached_property
    def completed(self) -> pd.DataFrame:
        """Ordinary runs that completed with an test accuracy: the runs averaged over seeds."""
        ordinary = self.ordinary
        return ordinary[(ordinary["status"] == "completed") & ordinary["test_accuracy"].notna()]

    def colour(self, variant_name: str) -> Any:
        return self.palette[variant_name]

    def linestyles(self, frame: pd.DataFrame) -> dict[str, str]:
        """Setting -> line style, so runs of one variant in different settings share a colour but not a line."""
        styles = ["-", "--", ":", "-."]
        return {setting: styles[index % len(styles)] for index, setting in enumerate(sorted(set(frame["setting"])))}

    def metrics(self, runs: pd.DataFrame) -> tuple[pd.DataFrame, list[dict[str, str]]]:
        """The metrics streams of `runs` in long format (one row per logged line, with the run's task,
        variant_name, setting and label), and the runs whose metrics.jsonl could not be read."""
        lines, unreadable = [], []
        for run in runs.itertuples(index=False):
            try:
                history = run_metrics(run)
            except (OSError, RecordError) as error:  # unreadable, or not UTF-8 JSON lines
                unreadable.append({"run": run.run_id, "reason": f"metrics.jsonl is not readable JSON lines ({error})"})
                continue
            for line in history:
                if not isinstance(line, dict) or line.get("kind") not in ("train", "eval"):
                    unreadable.append({"run": run.run_id, "reason": "metrics.jsonl holds a line that is not a "
                                                                    "train or eval record"})
                    break
                lines.append({"run_id": run.run_id, "task": run.task, "variant_name": run.variant_name,
                              "setting": run.setting, "label": run.label, "seed": run.seed,
                              "kind": line["kind"], "step": line.get("step"), "wall_seconds": line.get("wall_seconds"),
                              "loss": line.get("loss"), "accuracy": line.get("accuracy"),
                              "test_accuracy": line.get("test_accuracy"), "test_loss": line.get("test_loss")})
        columns = ["run_id", "task", "variant_name", "setting", "label", "seed", "kind", "step", "wall_seconds",
                   "loss", "accuracy", "test_accuracy", "test_loss"]
        return pd.DataFrame(lines, columns=columns), unreadable

