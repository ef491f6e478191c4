"""The calibration table (docs/calibration.md): what each task's profile reaches, written from the runs of
`make calibration` (`experiments.calibration.runs`), so the figures in the docs are the ones measured.

One row per run: the task (a preset's row where an option is set away from the profile's: `mqar:num_pairs=16`),
the variant as it describes itself, its position scheme, the test accuracy (the
test set), the validation accuracy, chance, the extra splits and evaluation lengths, the steps, wall time and
throughput, the commit it trained at, and the command that trains the same config again.

The rows of record live in a CSV beside the page (docs/calibration.csv); the page is rendered from it. Writing
merges: a completed run under the runs folder replaces the row of the same task, variant, seed and steps, and every
other row is kept as it was measured, so a calibration can be extended on another machine, or after its runs
folder is gone, without losing or hand-copying the rows measured before.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pandas as pd

from analysis.runs import load_runs, saved_config
from common.files import atomic_write_text
from common.provenance import git_commit
from experiments import revisions
from experiments.run.rerun import rerun_command
from experiments.tasks import presets as task_presets

COLUMNS = ("task", "variant", "seed", "positions", "test accuracy", "validation accuracy", "chance",
           "splits and lengths", "steps", "wall time (s)", "tokens/s", "commit")
REVISIONS = ("task revision", "variant revision")  # what the run trained on (`experiments.revisions`)
# The CSV's columns: the table's, then what the page says beside it, then the revisions that tell a stale row.
RECORD = (*COLUMNS, "device", "command", *REVISIONS)
KEY = ["task", "variant", "seed", "steps"]  # with the profile its command names (`profile_of`): a row per run config


def _accuracy(value) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.3f}"


def _extras(run: dict) -> str:
    """Extra eval splits and evaluation lengths, e.g. `sparse 0.628; n=64 0.895`."""
    parts = [f"{split} {_accuracy(accuracy)}" for split, accuracy in sorted(run["accuracy_by_split"].items())]
    parts += [f"n={entry['length']} {_accuracy(entry.get('accuracy'))}" for entry in run["accuracy_by_length"]]
    return "; ".join(parts) or "–"


def _device(run: dict) -> str:
    """Where a run trained, e.g. `cpu, torch 2.13.0+cpu` (a CPU's name is often empty, so the device type)."""
    name = run.get("device_name")
    where = str(name) if isinstance(name, str) and name else str(run.get("device") or "?")
    return f"{where}, torch {run.get('torch_version') or '?'}"


def rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The records of the completed runs, by task, then variant, then seed: every column a string."""
    completed = runs[runs["status"] == "completed"]
    frame = pd.DataFrame([
        {"task": task_row(run), "variant": run["variant_name"], "seed": str(run["seed"]),
         "positions": str(run.get("model.positions")),
         "test accuracy": _accuracy(run["test_accuracy"]), "validation accuracy": _accuracy(run["val_accuracy"]),
         "chance": _accuracy(run["chance_accuracy"]), "splits and lengths": _extras(run),
         "steps": str(int(run["steps"])), "wall time (s)": f"{run['wall_seconds']:.0f}",
         "tokens/s": f"{run['tokens_per_second']:,.0f}", "commit": (run.get("git_commit") or "unknown")[:12],
         "device": _device(run), "command": rerun_command(saved_config(run)),
         **{column: str((run.get("revisions") or {}).get(kind) or 1)
            for column, kind in zip(REVISIONS, (revisions.TASK, revisions.VARIANT), strict=True)}}
        for run in completed.to_dict("records")], columns=list(RECORD))
    return _sorted(frame)


def task_row(run: dict) -> str:
    """The task as the run trained it: its name, then each option set away from its profile's
    (`experiments.tasks.presets.row_of`), so that a preset's row is not merged with the profile's own."""
    config = saved_config(run)
    return task_presets.row_of(config["task"], config["profile"], config["task_options"])


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    order = frame.assign(seed_number=pd.to_numeric(frame["seed"]))
    return frame.loc[order.sort_values(["task", "variant", "seed_number"], kind="stable").index].reset_index(drop=True)


def read_record(path: Path) -> pd.DataFrame:
    """The rows a CSV of record holds (none where it does not exist yet); an unreadable file, or a CSV without the
    record's columns, is a ValueError naming what is wrong."""
    if not path.exists():
        return pd.DataFrame(columns=list(RECORD))
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, UnicodeDecodeError) as error:  # pandas' parser and empty-file errors are ValueErrors
        raise ValueError(f"Calibration record {str(path)!r} is not a readable CSV ({str(error).splitlines()[0]}); "
                         f"accepted: a CSV with the columns {', '.join(RECORD)}.") from None
    # A record written before rows kept their revisions: its rows trained on revision 1 of everything.
    frame = frame.assign(**{column: "1" for column in REVISIONS if column not in frame})
    missing = [column for column in RECORD if column not in frame]
    if missing:
        raise ValueError(f"Calibration record {str(path)!r} lacks the columns {missing}; accepted: a CSV with the "
                         f"columns {', '.join(RECORD)}.")
    for _, row in frame.iterrows():
        for column in REVISIONS:
            if not row[column].isdigit() or int(row[column]) < 1:
                raise ValueError(f"Calibration record {str(path)!r}: row {row['task']} / {row['variant']} / seed "
                                 f"{row['seed']} has {column} {row[column]!r}; accepted: an integer >= 1.")
    return frame[list(RECORD)]


def setting(command: str, name: str, default: str = "") -> str:
    """The value a `make experiment` command gives `NAME=` (or `--set variant.NAME=`), e.g. VARIANT=local."""
    found = re.search(rf"(?:^|\s|\"){re.escape(name)}=([^\s\"]+)", command)
    return found.group(1) if found else default


def stale(record: pd.DataFrame) -> pd.Series:
    """Per row of a record, why its task or variant has been revised since it trained (`experiments.revisions`;
    the variant as its command names it, a task revision only where it changed the row's profile), or '' where
    it still measures today's code."""
    return pd.Series([revisions.stale_because(task_presets.base(row["task"]), setting(row["command"], "VARIANT"), {
        revisions.TASK: int(row["task revision"]), revisions.VARIANT: int(row["variant revision"])}, profile)
        for (_, row), profile in zip(record.iterrows(), profile_of(record), strict=True)],
        index=record.index, dtype=object)


def stale_lines(record: pd.DataFrame) -> list[str]:
    """The stale rows of a record (`stale`), each with why and the command that trains it again."""
    reasons = stale(record)
    found = record[reasons != ""]
    if found.empty:
        return []
    return ["Stale rows (trained before their task or variant was revised; the command trains them again):", "",
            *(f"- {row['task']} / {row['variant']}: {reasons[index]}; `{row['command']}`"
              for index, row in found.iterrows()), ""]


def profile_of(record: pd.DataFrame) -> pd.Series:
    """Per row, the profile its command trains (a command without PROFILE= trains the quick one)."""
    return pd.Series([setting(command, "PROFILE", "quick") for command in record["command"]], index=record.index,
                     dtype=object)


def _keys(record: pd.DataFrame) -> list[tuple]:
    return list(zip(*(record[column] for column in KEY), profile_of(record), strict=True))


def merged(fresh: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """The fresh rows, and every kept row whose task, variant, seed, steps and profile no fresh row has (a budget set
    away from the profile's, `--set train.steps=N`, is a row of its own)."""
    fresh_keys = set(_keys(fresh))
    still = kept[[key not in fresh_keys for key in _keys(kept)]]
    return _sorted(pd.concat([still, fresh], ignore_index=True))


def markdown(table: pd.DataFrame, runs: pd.DataFrame, runs_dir: Path) -> str:
    """The whole page: how it was made, a table per profile, the commands, and the runs under `runs_dir` that did
    not complete."""
    devices = "; ".join(sorted(set(table["device"]))) or "none yet"
    lines = ["# Task calibration", "",
             f"Generated by `make calibration` on {time.strftime('%Y-%m-%d')} from the runs under `{runs_dir}` and "
             f"the rows measured before them, kept in `calibration.csv` beside this page (a run replaces the row of "
             f"its task, variant, seed, steps and profile); written at commit {(git_commit() or 'unknown')[:12]} on a "
             f"machine of {os.cpu_count()} cores. Each row names the commit its run trained at; the rows trained on: "
             f"{devices}. Test accuracy is on each task's test set, which nothing selects on; chance is the "
             "task's `chance_accuracy`; wall time includes the evaluations.", ""]
    for profile, rows in table.groupby(profile_of(table), sort=True):
        lines += [f"## The {profile} profile", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(value.replace("|", "\\|") for value in row) + " |"
                  for row in rows[list(COLUMNS)].itertuples(index=False)]
        lines.append("")
    lines += [*stale_lines(table), "Each row's run, and the command that trains it again:", ""]
    lines += [f"- {row.task} / {row.variant} / seed {row.seed}: `{row.command}`" for row in table.itertuples()]
    unfinished = runs[runs["status"] != "completed"]
    if len(unfinished) or runs.attrs["skipped"]:
        lines += ["", "Not in the table: " + "; ".join(
            [f"{run.run_id} ({run.status})" for run in unfinished.itertuples(index=False)]
            + [f"{entry['run']} ({entry['reason']})" for entry in runs.attrs["skipped"]]) + "."]
    return "\n".join(lines) + "\n"


def write(runs_dir: Path, out: Path) -> Path:
    """Merge the runs under `runs_dir` into the record beside `out` (`out` with the suffix .csv), then write both."""
    runs = load_runs(runs_dir)
    record = out.with_suffix(".csv")
    table = merged(rows(runs), read_record(record))
    atomic_write_text(record, table.to_csv(index=False))
    atomic_write_text(out, markdown(table, runs, runs_dir))
    return out
