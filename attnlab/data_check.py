"""`attnlab data-check DIR`: which of the Long Range Arena's data sets a data folder holds, without training.

Every file-reading task (`experiments.tasks.list_data_tasks()`, at its lra profile's sizes) is built from DIR: a
data set found is encoded into its cache (once; later runs start at once) and listed per split with its examples,
its labels' spread and its documents' lengths in tokens (how many are longer than the lra profile keeps, and are
cut); a data set not there is listed with the sentence saying where it was looked for and where it comes from; a
malformed file with the sentence naming the file and line. Exit status 0 when at least one data set was found and
no file is malformed, else 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments import tasks
from experiments.tasks.lra_base import SPLITS, DataTask


def _split_rows(task: DataTask) -> list[dict[str, Any]]:
    rows = []
    for split in SPLITS:
        data = task.splits[split]
        lengths = np.diff(np.asarray(data.offsets))  # (documents,) stored tokens per document
        labels = np.bincount(np.asarray(data.labels), minlength=task.num_classes)
        rows.append({"task": task.name, "found": "yes", "split": split, "examples": str(len(data)),
                     "largest class": f"{labels.max() / max(1, len(data)):.3f}", "tokens min": str(lengths.min()),
                     "median": str(int(np.median(lengths))), "max": str(lengths.max()),
                     "cut": f"{(lengths > task.width).sum()} longer than {task.width}"})
    return rows


def check(folder: Path, cache_dir: str = "") -> tuple[list[dict[str, Any]], list[str], bool]:
    """One row per split of each data set found, the sentences of those not found or malformed, and whether a
    file is malformed."""
    rows, notes, malformed = [], [], False
    for name in dict.fromkeys([*tasks.TASK_SETS["lra"], *tasks.list_data_tasks()]):  # LRA's Table 1 order first
        try:
            task = tasks.create_task(name, profile="lra", data_dir=str(folder), cache_dir=cache_dir)
        except tasks.MissingData as error:
            rows.append({"task": name, "found": "no"})
            notes.append(f"{name}: {error}")
            continue
        except ValueError as error:  # a malformed file: DataError, or an option the folder cannot serve
            rows.append({"task": name, "found": "malformed"})
            notes.append(f"{name}: {error}")
            malformed = True
            continue
        rows += _split_rows(task)
    return rows, notes, malformed


def run(folder: Path, *, cache_dir: str = "") -> int:
    """`attnlab data-check`: print the table and the sentences; 0 when a data set was found and none is malformed."""
    if not folder.is_dir():
        raise ValueError(f"data-check got {folder}, which is no folder; accepted: the data folder holding "
                         "lra_release/, aclImdb/ or cifar-10-batches-py/ (docs/lra.md).")
    rows, notes, malformed = check(folder, cache_dir)
    print(pd.DataFrame(rows).fillna("").to_string(index=False))
    for note in notes:
        print(note, file=sys.stderr)
    found = any(row["found"] == "yes" for row in rows)
    return 0 if found and not malformed else 1
