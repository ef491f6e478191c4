"""The calibration record's sections of docs/results.md (`analysis.results_doc`): `docs/calibration.csv`'s rows
grouped by what they are (the calibration's default variants, the kernelised and low-rank families, the other
attention variants, the baselines, and other normalisers beside the softmax), each table with where its rows come
from. A calibration cell is one run at one learning rate, so these sections state no finding.
"""

from __future__ import annotations

import pandas as pd

import variants
from analysis.benchmark.page import REFERENCE
from analysis.calibration.table import profile_of, setting, stale, stale_lines
from analysis.report.render import markdown_table
from experiments import tasks
from experiments.calibration import DEFAULT_VARIANTS

ONE_RUN = ("One run per cell (seed 0; where a cell holds more, each seed's accuracy in the order of its seeds) at the "
           "profile's default learning rate: the spread over seeds and learning rates is not measured, so no "
           "difference between two cells is a finding here; `make benchmark` (tuned learning rate, several seeds, 95% "
           "intervals) is what tells variants apart. A cell marked (stale) trained on an earlier revision of its task "
           "or variant (`experiments/revisions.py`): it no longer measures today's code until its command trains it "
           "again.")


def is_bidirectional(name: str) -> bool:
    """Whether a registered attention variant has no causal form (a baseline, or a name no longer registered: no)."""
    return name in variants.list_variants() and not variants.variant_class(name).supports_causal


def _family(name: str) -> str:
    """Which table a variant's softmax rows go to, from the registry and the kernels it runs on (a name no longer
    registered: the other variants)."""
    if variants.is_baseline(name):
        return "baselines"
    if name in DEFAULT_VARIANTS:
        return "default"
    if name not in variants.list_variants():
        return "other"
    kernels = variants.create(name, num_heads=1, head_dim=8, max_len=16).kernels
    return "kernelised" if {"linear", "lowrank"} & set(kernels) else "other"


def annotated(record: pd.DataFrame) -> pd.DataFrame:
    """The record with what each row's command says: `name` (registered variant), `profile`, `normaliser`
    (set on the command line, else empty) and `family`."""
    frame = record.copy()
    frame["name"] = [setting(command, "VARIANT") for command in frame["command"]]
    frame["profile"] = profile_of(record)
    frame["normaliser"] = [setting(command, "variant.normaliser") for command in frame["command"]]
    families = {name: _family(name) for name in sorted(set(frame["name"]))}
    frame["family"] = frame["name"].map(families)
    frame["stale"] = stale(record)
    return frame


def groups(record: pd.DataFrame) -> list[tuple[str, pd.DataFrame, bool]]:
    """(title, rows, with the reference's rows beside them) per table, per profile: every row of the record is in
    at least one; rows of another normaliser are shown with the softmax rows of the same variants and tasks."""
    frame, found = annotated(record), []
    for profile, rows in frame.groupby("profile", sort=True):
        other = rows[rows["normaliser"] != ""]
        softmax = rows[rows["normaliser"] == ""]
        compared = softmax[softmax["name"].isin(set(other["name"])) & softmax["task"].isin(set(other["task"]))]
        rest = softmax.drop(index=compared.index)  # softmax rows not shown beside another normaliser's
        for family, title, beside in (
                ("default", "the calibration's default variants", False),
                ("kernelised", "the kernelised and low-rank families", True),
                ("other", "the other attention variants", True),
                ("baselines", "the baselines: is attention needed at all?", True)):
            chosen = rest[rest["family"] == family] if family != "default" else softmax[softmax["family"] == family]
            if len(chosen):
                found.append((f"{title} ({profile} profile)", chosen, beside))
        if len(other):
            found.append((f"other normalisers beside the softmax ({profile} profile)",
                          pd.concat([compared, other]), False))
    return found


def _task_order(names) -> list[str]:
    return [task for task in tasks.DEFAULT_SUITE if task in set(names)] + sorted(set(names) - set(tasks.DEFAULT_SUITE))


def _accuracy(row: pd.Series) -> str:
    """A row's test accuracy with its extra splits and lengths, and whether it is stale."""
    extras = row["splits and lengths"]
    return (row["test accuracy"] + (f" ({extras})" if extras not in ("", "–") else "")
            + (" (stale)" if row["stale"] else ""))


def _cell(rows: list[pd.Series], name: str, task: str) -> str:
    """The rows' test accuracies (one per seed, in seed order); why a cell the record lacks is empty."""
    if not rows:
        needs_causal = task in tasks.list_tasks() and tasks.task_class(task).needs_causal
        return "skipped: needs causality" if needs_causal and is_bidirectional(name) else "–"
    seeds = f" (seeds {', '.join(row['seed'] for row in rows)})" if len(rows) > 1 else ""
    return " / ".join(map(_accuracy, rows)) + seeds


def accuracy_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Task x variant (as it describes itself) test accuracy, chance beside it; the reference variant first, then
    by registered name, normaliser and described name."""
    ordered = rows.assign(later=rows["name"] != REFERENCE).sort_values(["later", "name", "normaliser", "variant"])
    columns = list(dict.fromkeys(zip(ordered["variant"], ordered["name"], strict=True)))
    by_key: dict[tuple[str, str], list[pd.Series]] = {}
    for _, row in rows.sort_values("seed", key=lambda seeds: seeds.astype(int)).iterrows():
        by_key.setdefault((row["task"], row["variant"]), []).append(row)
    table = []
    for task in _task_order(rows["task"]):
        chances = sorted(set(rows.loc[rows["task"] == task, "chance"]))
        line = {"task": task, "chance": " / ".join(chances)}
        line.update({variant: _cell(by_key.get((task, variant), []), name, task) for variant, name in columns})
        table.append(line)
    return pd.DataFrame(table)


def provenance_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per variant: the commits its rows trained at, the devices, and the command that trains a row again (with
    `TASK=<task>` where the rows' commands differ in their task alone)."""
    table = []
    for variant, own in rows.groupby("variant", sort=False):
        commands = sorted({command.replace(f"TASK={task} ", "TASK=<task> ")
                           for command, task in zip(own["command"], own["task"], strict=True)})
        table.append({"variant": variant, "seeds": ", ".join(sorted(set(own["seed"]))),
                      "trained at commit": ", ".join(sorted(set(own["commit"]))),
                      "device": "; ".join(sorted(set(own["device"]))), "command": " / ".join(commands)})
    return pd.DataFrame(table)


def _causality_note(rows: pd.DataFrame) -> list[str]:
    bidirectional = sorted(name for name in set(rows["name"]) if is_bidirectional(name))
    if not bidirectional:
        return []
    return [f"{', '.join(f'`{name}`' for name in bidirectional)} have no causal form and train bidirectional "
            "(`model.causal=false`); every other column is causal, so their cells are not comparable with the rest.",
            ""]


def calibration_sections(record: pd.DataFrame) -> list[str]:
    """One section per table of the calibration record at each profile's own budget: what it measures, the table,
    where its rows come from. A row whose run set its budget away from the profile's (`--set train.steps=N`: the
    benchmark suite's calibration, `analysis.benchmark.suite`) is left to the section of what it calibrates."""
    record = record[[setting(command, "train.steps") == "" for command in record["command"]]]
    reference = annotated(record)
    reference = reference[(reference["name"] == REFERENCE) & (reference["normaliser"] == "")]
    lines = ["## Calibration: each task's profile, one run per cell", "",
             "Test accuracy on each task's test set (which nothing selects on), chance beside it; in brackets the "
             "extra splits and evaluation lengths. Every row, with its validation accuracy, steps, wall time and "
             "throughput, is in [calibration.md](calibration.md); the record is "
             "[calibration.csv](calibration.csv), written by `make calibration`.", "", ONE_RUN, "",
             *(line for task in _task_order(record["task"]) if task in tasks.list_tasks()
               for caveat in tasks.caveats(task) for line in (caveat, ""))]
    for title, rows, beside in groups(record):
        shown = rows
        if beside:
            extra = reference[(reference["profile"] == rows["profile"].iloc[0]) & reference["task"].isin(rows["task"])]
            shown = pd.concat([extra, rows])
        lines += [f"### {title[0].upper()}{title[1:]}", "", *markdown_table(accuracy_table(shown)), "",
                  *_causality_note(shown), *stale_lines(shown), "Where the rows come from:", "",
                  *markdown_table(provenance_table(shown)), ""]
    return lines
