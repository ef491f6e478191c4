"""Run folders -> one pandas row per run: the only way the report reads runs, and public for notebooks.

    >>> from analysis import load_runs
    >>> runs = load_runs("runs")
    >>> runs.groupby(["task", "variant_name"])["test_accuracy"].agg(["mean", "std", "count"])
    >>> runs.attrs["skipped"]          # [{"run": "<folder>", "reason": "..."}] for unreadable records

Columns: `run_id` and `path`; the config flattened (`variant`, `task`, `profile`, `seed`, `device`, then every
option as `variant.<option>`, `task.<option>`, `model.<field>`, `train.<field>`), `kernel_requested` (`auto`
or the kernel the config forced) and, derived from the config, `normaliser` (how the run's attention turns a row
of logits into weights: `softmax`, `sparsemax`, `entmax15`, ..., the kernelised family's `sum` or `none`;
`baseline` for a baseline, `unknown` where this version cannot tell; see `normaliser_of`);
every field of the run's `Summary` (`experiments.run.records`) under its own name but those the config gives:
`status`, `error`, `variant_name` (the variant as it describes itself, e.g. `local_w16`), `kernel` (the kernel
it ran on), `test_accuracy`, `test_loss`, `val_accuracy`, `chance_accuracy`, the per-evaluation lists
`accuracy_by_distance`, `accuracy_by_length` and the dict `accuracy_by_split`, `tags`, `steps`, wall time,
throughput, memory, provenance, ...; and from its tags, the sweep's `study` and `trial` (None outside sweeps)
and `confirm` (True for a study's confirmation runs); `has_checkpoint`, whether it kept a checkpoint.pt. List-valued
options are tuples, so every config column can
be grouped on.

A section that needs more of a run than its row goes through the handles below, given the row: its config
(`saved_config`, `run_config`), its metrics stream (`run_metrics`) or its trained model (`trained_parts`).

A run folder is any folder directly inside the runs folder holding one of the files a run writes.
A record that cannot be read (invalid JSON, a missing config or summary, fields of the wrong kind) is
not a row: it is listed in `attrs["skipped"]` with its reason, and the report shows that list.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd

import variants
from common.options import build_options, closest
from experiments.run import config as configs
from experiments.run.build import Parts, build
from experiments.run.checkpoints import weights_mismatch
from experiments.run.config import RunConfig, parse_value
from experiments.run.records import RecordError, RunRecord, Summary

RUN_FILES = ("config.json", "summary.json", "metrics.jsonl", "checkpoint.pt")
CONFIG_SECTIONS = {"variant_options": "variant", "task_options": "task", "model": "model", "train": "train"}
CONFIG_FIELDS = ("variant", "task", "profile", "seed", "device")
# Every field of `Summary` is a column under its own name, but those config.json gives (what was asked for).
SUMMARY_FIELDS = tuple(field.name for field in dataclasses.fields(Summary)
                       if field.name not in ("run_id", *CONFIG_FIELDS, *CONFIG_SECTIONS))
LIST_FIELDS = ("accuracy_by_distance", "accuracy_by_length")
BASE_COLUMNS = ("run_id", "path", *CONFIG_FIELDS, *SUMMARY_FIELDS, "kernel_requested", "normaliser", "study", "trial",
                "confirm", "has_checkpoint")
# The `normaliser` of a baseline's run (a token mixer: no attention weights), and of a run whose variant this
# version neither registers nor finds a normaliser option for. Single words, so that a filter names them
# (normaliser=baseline); neither is a normaliser's name, so neither is mistaken for linear attention's `none`.
BASELINE_NORMALISER = "baseline"
UNKNOWN_NORMALISER = "unknown"


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    return value


def _check(condition: bool, reason: str) -> None:
    if not condition:
        raise RecordError(reason)


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def normaliser_of(config: dict[str, Any]) -> str:
    """How a run's attention turns a row of logits into weights: the config's `variant.normaliser` where the
    variant has that option (softmax, sigmoid, sparsemax, entmax15, entmax_adaptive); else what the variant's
    class gives for the run's options (`Attention.normaliser_for`: the kernelised family's `sum`, linear
    attention's `none` with identity features, `softmax` for the rest); BASELINE_NORMALISER for a baseline;
    UNKNOWN_NORMALISER for a variant this version does not register (or no longer builds) and whose config
    names no normaliser."""
    options = config.get("variant_options")
    if variants.is_baseline(config["variant"]):
        return BASELINE_NORMALISER
    if isinstance(options, dict) and isinstance(options.get("normaliser"), str):
        return options["normaliser"]
    try:
        cls = variants.variant_class(config["variant"])
        options = build_options(cls.Options, f"Variant {config['variant']!r}", dict(options or {}))
    except (KeyError, TypeError, ValueError):  # a variant no longer registered, options it no longer takes
        return UNKNOWN_NORMALISER
    return cls.class_for(options).normaliser_for(options)  # the first block's (Based's window blocks: softmax)


def _row(record: RunRecord) -> dict[str, Any]:
    """One run's row; RecordError names what makes the record unusable."""
    _check((record.path / "config.json").is_file(), "no config.json: the run folder was never completed")
    _check((record.path / "summary.json").is_file(), "no summary.json: the run never started")
    config, summary = record.read_config(), record.read_summary()
    _check(isinstance(config, dict), "config.json does not hold a JSON object")
    for name in ("variant", "task", "profile"):
        _check(isinstance(config.get(name), str), f"config.json field {name!r} is not a string")
    _check(isinstance(config.get("seed"), int), "config.json field 'seed' is not an integer")
    _check(isinstance(summary.status, str), "summary.json field 'status' is not a string")
    for name in ("test_accuracy", "chance_accuracy", "wall_seconds", "steps", "peak_memory_bytes"):
        _check(_number_or_none(getattr(summary, name)), f"summary.json field {name!r} is not a number")
    for name in LIST_FIELDS:
        entries = getattr(summary, name)
        _check(isinstance(entries, list) and all(isinstance(entry, dict) for entry in entries),
               f"summary.json field {name!r} is not a list of objects")
    _check(isinstance(summary.accuracy_by_split, dict), "summary.json field 'accuracy_by_split' is not an object")
    tags = summary.tags or {}
    _check(isinstance(tags, dict), "summary.json field 'tags' is not an object")

    row: dict[str, Any] = {"run_id": record.run_id, "path": str(record.path)}
    row.update({name: _hashable(config.get(name)) for name in CONFIG_FIELDS})
    for section, prefix in CONFIG_SECTIONS.items():
        values = config.get(section, {})
        _check(isinstance(values, dict), f"config.json field {section!r} is not an object")
        row.update({f"{prefix}.{name}": _hashable(value) for name, value in values.items()})
    row.update({name: getattr(summary, name) for name in SUMMARY_FIELDS})  # `kernel`: the one that ran
    row["variant_name"] = str(summary.variant_name or config["variant"])
    row["kernel_requested"] = config.get("kernel", "auto")
    row["normaliser"] = normaliser_of(config)
    row["study"], row["trial"] = tags.get("study"), tags.get("trial")
    row["confirm"] = tags.get("confirm") is True
    row["has_checkpoint"] = record.checkpoint_path.is_file()
    return row


# -- handles: what a report section reads of one run beyond its row ---------------------------------------

def _record(run: Any) -> RunRecord:
    """The record of a row of `load_runs` (a Series, a dict or an itertuples row)."""
    return RunRecord(Path(run["path"] if isinstance(run, (dict, pd.Series)) else run.path))


def saved_config(run: Any) -> dict[str, Any]:
    """The run's config.json as saved (an earlier version's names read as today's)."""
    return _record(run).read_config()


def run_config(run: Any) -> RunConfig:
    """The run's config, typed and re-validated; a ValueError says why it no longer resolves. It is read, not
    trained here, so its trackers need not be able to start here."""
    return configs.from_dict(saved_config(run), trains_here=False)


def run_metrics(run: Any) -> list[dict[str, Any]]:
    """The run's metrics.jsonl lines (empty when it wrote none)."""
    return _record(run).read_metrics()


def run_parts(run: Any) -> Parts:
    """The run's task and its model as `experiments.run.build` makes them, initialised (not trained)."""
    return build(run_config(run))


def trained_parts(run: Any) -> Parts:
    """The run's task and its model with the checkpoint's weights, in eval mode; a RecordError when it has
    no checkpoint."""
    record = _record(run)
    parts, state = run_parts(run), record.load_checkpoint()
    if state is None:
        raise RecordError("no checkpoint.pt")
    wrong = weights_mismatch(state, parts.model)
    if wrong:
        raise record.mismatched_checkpoint(wrong)
    parts.model.load_state_dict(state["model"])
    parts.model.eval()
    return parts


def run_folders(runs_dir: Path) -> list[Path]:
    """The folders directly inside `runs_dir` that hold a file a run writes, sorted by name."""
    return sorted(path for path in runs_dir.iterdir()
                  if path.is_dir() and any((path / name).exists() for name in RUN_FILES))


def load_runs(runs_dir: str | Path) -> pd.DataFrame:
    """One row per readable run under `runs_dir` (see the module docstring); unreadable records are
    listed in `attrs["skipped"]`. A runs folder that does not exist is a ValueError."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        what = "is a file" if runs_dir.exists() else "does not exist"
        raise ValueError(f"Runs folder {str(runs_dir)!r} {what}; accepted: a folder that `attnlab run` wrote runs "
                         "into (RUNS_DIR=, default runs).")
    rows, skipped = [], []
    for path in run_folders(runs_dir):
        try:
            rows.append(_row(RunRecord(path)))
        except RecordError as error:
            skipped.append({"run": path.name, "reason": str(error)})
    frame = pd.DataFrame(rows)
    for column in BASE_COLUMNS:  # an empty folder still has the columns, so filters and groupings work
        if column not in frame:
            frame[column] = pd.Series(dtype=object)
    frame.attrs["runs_dir"] = str(runs_dir)
    frame.attrs["skipped"] = skipped
    return frame


def parse_filters(text: str | None, columns: list[str]) -> dict[str, list[str]]:
    """"task=passkey,variant=local" -> {"task": ["passkey"], "variant": ["local"]}; a column named twice
    accepts either value. A column that runs do not have is a ValueError naming the known ones."""
    filters: dict[str, list[str]] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        column, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not column:
            raise ValueError(f"Filter {pair.strip()!r} is not column=value; accepted: comma-separated pairs such as "
                             "task=passkey,variant=local.")
        if column not in columns:
            known = ", ".join(name for name in columns if name not in ("path", *LIST_FIELDS, "accuracy_by_split"))
            raise ValueError(f"Filter column {column!r} is not a run column{closest(column, columns)}; accepted: "
                             f"{known}.")
        filters.setdefault(column, []).append(value)
    return filters


def matches(cell: Any, texts: list[str]) -> bool:
    """Whether a cell equals one of the filter's values, read as the command line reads values
    (so seed=0, train.lr=1e-3 and model.causal=true match numbers and booleans)."""
    for text in texts:
        wanted = parse_value(text)
        if isinstance(wanted, list):
            wanted = tuple(wanted)
        if cell == wanted or str(cell) == text:
            return True
    return False


def select(runs: pd.DataFrame, filters: dict[str, list[str]]) -> pd.DataFrame:
    """The runs whose every filtered column matches one of its values."""
    keep = pd.Series(True, index=runs.index)
    for column, texts in filters.items():
        keep &= runs[column].map(lambda cell, texts=texts: matches(cell, texts)).astype(bool)
    return runs[keep]


SHOWN_VALUES = 20  # the most values of a column an error lists


def check_selects(runs: pd.DataFrame, filters: dict[str, list[str]]) -> None:
    """Refuse filters that select no run, in one sentence: the first filter that matches none, with the values
    its column has; or, where each matches some runs alone, that together they match none."""
    if not filters or len(select(runs, filters)):
        return
    for column, texts in filters.items():
        if not len(select(runs, {column: texts})):
            values = sorted({str(cell) for cell in runs[column].dropna()})
            more = f" and {len(values) - SHOWN_VALUES} more" if len(values) > SHOWN_VALUES else ""
            has = f": {', '.join(values[:SHOWN_VALUES])}{more}" if values else ", of which there are none"
            raise ValueError(f"Filter {column}={' or '.join(texts)} matches none of the {len(runs)} runs; accepted: "
                             f"one of the values column {column} has{has}.")
    shown = ", ".join(f"{column}={' or '.join(texts)}" for column, texts in filters.items())
    raise ValueError(f"Filters {shown} each match some runs but no run matches them all; accepted: filters that "
                     "one run meets together.")
