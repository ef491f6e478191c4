"""The report's first section: test accuracy per task and variant over seeds, the variant x task table,
what each variant present approximates (its own `approximation` sentence), the runs that did not complete,
the records skipped, and the best setting of each sweep study."""

from __future__ import annotations

import math

import pandas as pd

import variants
from analysis.report.context import Context
from analysis.report.render import Block, Table, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section
from experiments.run.records import STATUSES

STATUS_COLUMNS = ("completed", *(status for status in STATUSES if status != "completed"))  # completed first
PARAMETER_TOLERANCE = 1.10  # the Long Range Arena's rule: models compared in one table within 10% in size


def _distinct(group: pd.DataFrame, column: str, lower: bool = False) -> str:
    """The distinct values of a config column among a group's runs, sorted and comma-joined (lower-cased with
    `lower`, as booleans read on the command line), '–' where no record has one."""
    if column not in group:
        return "–"
    values = sorted({str(value).lower() if lower else str(value) for value in group[column].dropna()})
    return ",".join(values) or "–"


def result_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, variant, setting) of ordinary runs: seeds averaged (completed runs with an eval
    accuracy), mean and sample standard deviation of the test accuracy, chance level, the normaliser (`load_runs`'
    column), the position scheme (`model.positions`), the causality (`model.causal`), and the number of runs in
    each status (`other`: a status this version does not know)."""
    rows = []
    for (task, name, setting, label), group in runs.groupby(["task", "variant_name", "setting", "label"],
                                                            sort=True):
        done = group[(group["status"] == "completed") & group["test_accuracy"].notna()]
        accuracy = done["test_accuracy"].astype(float)
        chance = group["chance_accuracy"].dropna()
        parameters = group["parameters"].dropna() if "parameters" in group else pd.Series(dtype=float)
        row = {"task": task, "variant": name, "setting": setting, "label": label,
               "normaliser": _distinct(group, "normaliser"), "model.positions": _distinct(group, "model.positions"),
               "model.causal": _distinct(group, "model.causal", lower=True), "seeds": len(done),
               "accuracy_mean": accuracy.mean() if len(done) else math.nan,
               "accuracy_std": accuracy.std(ddof=1) if len(done) > 1 else math.nan,
               "chance": float(chance.iloc[0]) if len(chance) else math.nan, "runs": len(group),
               "parameters": float(parameters.median()) if len(parameters) else math.nan}
        counts = group["status"].value_counts()
        row.update({status: int(counts.get(status, 0)) for status in STATUS_COLUMNS})
        row["other"] = int(sum(number for status, number in counts.items() if status not in STATUS_COLUMNS))
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


def size_warnings(cells: pd.DataFrame) -> list[str]:
    """One sentence per task whose rows' models differ in parameter count by more than the LRA's 10%."""
    warnings = []
    for task, rows in cells.dropna(subset=["parameters"]).groupby("task", sort=True):
        smallest, largest = rows.loc[rows["parameters"].idxmin()], rows.loc[rows["parameters"].idxmax()]
        if largest["parameters"] > PARAMETER_TOLERANCE * smallest["parameters"]:
            ratio = largest["parameters"] / smallest["parameters"]
            warnings.append(f"{task}: {largest['label']} has {int(largest['parameters']):,} parameters, "
                            f"{ratio:.2f}x the {int(smallest['parameters']):,} of {smallest['label']}")
    return warnings


def causality_note(cells: pd.DataFrame) -> str | None:
    """One sentence naming the tasks whose rows differ in model.causal, or None when none do."""
    differing = sorted(task for task, rows in cells.groupby("task") if rows["model.causal"].nunique() > 1)
    if not differing:
        return None
    return (f"Rows of {', '.join(differing)} differ in causality (model.causal): a row with model.causal false "
            "lets each position attend to later ones (variants bidirectional in their papers have no causal form), "
            "which a causal row cannot.")


def approximations(runs: pd.DataFrame) -> list[str]:
    """One line per variant among `runs` that states an approximation (its class's `approximation`): what it
    approximates or where it departs from its paper. Variants this version does not register are left out."""
    lines = []
    for name in sorted(runs["variant"].dropna().astype(str).unique()):
        try:
            sentence = getattr(variants.variant_class(name), "approximation", None)
        except ValueError:
            continue
        if sentence:
            lines.append(f"Approximation of {name}: {sentence}")
    return lines


def _count(value: float) -> str:
    return "–" if math.isnan(value) else f"{int(value):,}"


def _cell_text(row: pd.Series) -> str:
    if row["seeds"] == 0:
        return "–"
    return shared.mean_std_text(row["accuracy_mean"], row["accuracy_std"], row["seeds"])


def shared_normaliser(cells: pd.DataFrame) -> str | None:
    """The normaliser every row uses, named once in the tables' captions; None where rows use several, and
    each row then shows its own in a `normaliser` column beside the variant: comparing normalisers is what
    such a table is for, and a variant's name does not always say which it used (the kernelised family's
    `sum` is no option). One column repeating one value on every row would only crowd the table, so it is
    shown, as `model.causal` is, only where rows differ."""
    used = sorted(set(cells["normaliser"]))
    return used[0] if len(used) == 1 else None


def _by_task_table(cells: pd.DataFrame, normaliser: str | None) -> Table:
    """The variant x task table: text cells (mean ± std, n) over the numbers of `by_task`, with each row's
    normaliser beside its variant unless every row uses one (`normaliser`, named in the caption)."""
    table = by_task(cells)
    task_names = [column for column in table.columns if column not in ("variant", "average", "tasks_averaged")]
    if normaliser is None:
        by_label = cells.groupby("label")["normaliser"].agg(lambda values: ",".join(sorted(set(values))))
        table.insert(1, "normaliser", table["variant"].map(by_label).fillna("–"))  # the chance row has none
    text = table.copy()
    labelled = cells.set_index(["label", "task"])
    for task in task_names:
        text[task] = [
            (shared.fmt(row[task]) if row["variant"] == "chance"
             else _cell_text(labelled.loc[(row["variant"], task)]) if (row["variant"], task) in labelled.index
             else "–")
            for _, row in table.iterrows()
        ]
    text["average"] = table["average"].map(shared.fmt)
    text["tasks_averaged"] = table["tasks_averaged"].astype(int)
    return Table("results-by-task", "Variant x task test accuracy"
                 + (f" (normaliser of every row: {normaliser})" if normaliser else "")
                 + "; the average is computed from the row's cell means (over the tasks the row has: "
                 "tasks_averaged), never typed in", text, data=table)


def _results_tables(ordinary: pd.DataFrame) -> list[Block]:
    """The per-cell table and the variant x task table."""
    cells = result_cells(ordinary)
    shown = cells.assign(**{"test accuracy": cells.apply(_cell_text, axis=1)})
    status_columns = [status for status in (*STATUS_COLUMNS, "other") if shown[status].any()]
    causality, normaliser = causality_note(cells), shared_normaliser(cells)
    columns = ["task", "variant", *([] if normaliser else ["normaliser"]),
               *(["setting"] if shown["setting"].any() else []), "model.positions",
               *(["model.causal"] if causality else []), "parameters", "test accuracy", "seeds", "chance", "runs",
               *status_columns]
    blocks: list[Block] = [Table("results", "Test accuracy per task and variant, over seeds (runs counted by status; "
                                 + (f"normaliser of every row: {normaliser}; " if normaliser else
                                    "normaliser: how the runs' attention turns logits into weights; ")
                                 + "model.positions: the position scheme of the runs"
                                 + ("; model.causal: whether their attention is causal)" if causality else ")"),
                                 shown[columns].assign(chance=shown["chance"].map(shared.fmt),
                                                       parameters=shown["parameters"].map(_count)), data=cells)]
    if causality:
        blocks.append(Text(causality))
    warnings = size_warnings(cells)
    if warnings:
        blocks.append(Text("Models of different sizes in one table (more than 10% apart, the Long Range Arena's "
                           "rule for a fair comparison): " + "; ".join(warnings) + "."))
    blocks.append(_by_task_table(cells, normaliser))
    blocks += [Text(line) for line in approximations(ordinary)]
    return blocks


@section("results", "Results")
def results(context: Context) -> list[Block]:
    runs, ordinary = context.runs, context.ordinary
    trials = runs[runs["study"].notna()]
    blocks: list[Block] = [Text(
        f"{shared.count(len(runs), 'run')} read from {context.runs_dir} "
        f"({shared.count(len(ordinary), 'ordinary run')}, {shared.count(len(trials), 'sweep trial')} in "
        f"{shared.count(trials['study'].nunique(), 'study', 'studies')}); "
        f"{shared.count(len(context.skipped), 'unreadable record')} skipped"
        f"{' (listed below)' if context.skipped else ''}. "
        "Test accuracy is the accuracy at the scored positions of each task's fixed held-out set, averaged over "
        "seeds of completed runs (mean ± sample standard deviation, n = seeds); runs in other states are "
        "counted, never averaged."
    )]
    if runs.empty:
        blocks.append(Text(f"No runs in {context.runs_dir}" + (" match the filters" if context.filters else "")
                           + ": `make experiment` writes runs there, `make report RUNS_DIR=...` reads another "
                           "folder."))
    if len(ordinary):
        blocks += _results_tables(ordinary)
    unfinished = ordinary[ordinary["status"] != "completed"]
    if len(unfinished):
        blocks.append(Table(
            "unfinished-runs", "Runs that did not complete (counted above, not averaged)",
            unfinished[["run_id", "task", "variant_name", "seed", "status", "steps", "total_steps", "error"]]))
    blocks += shared.problems_table("skipped-records", "Records skipped: they could not be read", context.skipped)
    if context.studies:
        shown, data = shared.best_trials(context)
        blocks.append(Table("best-sweep-settings", "Best sweep settings: the complete trial of highest selection "
                            "value (the sweep's objective) in each study, beside the test accuracy of its run "
                            "(that run's test accuracy) and of the study's confirmation runs", shown, data=data))
    return blocks
