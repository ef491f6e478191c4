"""The Long Range Arena beside its paper: every result row of a task that reads LRA's data (`lra_*`) with the figure
Tay et al. 2021 publish in their Table 1 for the same model (where the variant is one of theirs) and for the
Transformer, marked as published: a number LRA's own code measured in its own setup, never one of these runs.

Table 1 is LRA's leaderboard as its repository's README gives it (accuracy in %, here as a fraction; Path-X: every
model failed, `fail`). A row gets a published figure where its task and options are those of a Table 1 column
(Pathfinder: 32x32, curv_contour_length_14; Path-X: 128x128, the same difficulty) and its variant names one of
LRA's models (`LRA_MODELS`); its profile is shown, as only the lra profile trains at LRA's sizes.
"""

from __future__ import annotations

import pandas as pd

from analysis.report.context import Context
from analysis.report.render import Block, Table, Text
from analysis.report.sections import shared
from analysis.report.sections.registry import section
from analysis.report.sections.results import result_cells

PUBLISHED = "published (Tay et al. 2021, Table 1)"
COLUMNS = ("ListOps", "Text", "Retrieval", "Image", "Pathfinder", "Path-X")
# Tay et al. 2021, "Long Range Arena: A Benchmark for Efficient Transformers" (ICLR), Table 1, accuracy in %, in
# COLUMNS' order; None where the model failed (Path-X: no model beat chance).
TABLE_1 = {
    "Transformer": (36.37, 64.27, 57.46, 42.44, 71.40, None),
    "Local Attention": (15.82, 52.98, 53.39, 41.46, 66.63, None),
    "Sparse Trans.": (17.07, 63.58, 59.59, 44.24, 71.71, None),
    "Longformer": (35.63, 62.85, 56.89, 42.22, 69.71, None),
    "Linformer": (35.70, 53.94, 52.27, 38.56, 76.34, None),
    "Reformer": (37.27, 56.10, 53.40, 38.07, 68.50, None),
    "Sinkhorn Trans.": (33.67, 61.20, 53.83, 41.23, 67.45, None),
    "Synthesizer": (36.99, 61.68, 54.67, 41.61, 69.45, None),
    "BigBird": (36.05, 64.02, 59.29, 40.83, 74.87, None),
    "Linear Trans.": (16.13, 65.90, 53.09, 42.34, 75.30, None),
    "Performer": (18.01, 65.40, 53.82, 42.77, 77.05, None),
}
# The LRA model each variant is (the sparse variant's by its pattern).
LRA_MODELS = {"dense": "Transformer", "local": "Local Attention", "linformer": "Linformer", "reformer": "Reformer",
              "sinkhorn": "Sinkhorn Trans.", "synthesizer": "Synthesizer", "linear": "Linear Trans.",
              "performer": "Performer", "sparse:strided": "Sparse Trans.", "sparse:fixed": "Sparse Trans.",
              "sparse:longformer": "Longformer", "sparse:bigbird": "BigBird"}
# Each LRA task's Table 1 column, with the task options that column was measured at.
TASK_COLUMNS = {"lra_listops": ("ListOps", {}), "lra_text": ("Text", {}), "lra_retrieval": ("Retrieval", {}),
                "lra_image": ("Image", {}),
                "lra_pathfinder": ("Pathfinder", {"task.image_size": 32, "task.difficulty": "hard"}),
                "lra_pathx": ("Path-X", {"task.image_size": 128, "task.difficulty": "hard"})}


def lra_model(run: pd.Series) -> str | None:
    """The LRA model a run's variant is, or None."""
    key = f"sparse:{run.get('variant.pattern')}" if run["variant"] == "sparse" else run["variant"]
    return LRA_MODELS.get(key)


def table_column(run: pd.Series) -> str | None:
    """The Table 1 column a run's task and options measure, or None."""
    column, options = TASK_COLUMNS.get(run["task"], (None, {}))
    return column if all(run.get(name) == value for name, value in options.items()) else None


def published(model: str | None, column: str | None) -> str:
    """A Table 1 figure as a fraction, 'fail' where the model failed, '–' where the table has none."""
    if model is None or column is None:
        return "–"
    figure = TABLE_1[model][COLUMNS.index(column)]
    return "fail" if figure is None else f"{figure / 100:.4f}"


def beside_published(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per result cell of the LRA tasks: the measured accuracy beside Table 1's for the variant's LRA model
    and for the Transformer."""
    cells = result_cells(runs)
    rows = []
    for _, cell in cells.iterrows():
        run = runs[(runs["task"] == cell["task"]) & (runs["label"] == cell["label"])].iloc[0]
        model, column = lra_model(run), table_column(run)
        measured = "–" if cell["seeds"] == 0 else shared.mean_std_text(cell["accuracy_mean"], cell["accuracy_std"],
                                                                         cell["seeds"])
        rows.append({"task": cell["task"], "Table 1 column": column or "–", "variant": cell["label"],
                     "profile": run.get("profile", "–"), "test accuracy (measured)": measured,
                     "LRA model": model or "–", PUBLISHED: published(model, column),
                     f"Transformer, {PUBLISHED}": published("Transformer", column),
                     "accuracy_mean": cell["accuracy_mean"]})
    return pd.DataFrame(rows)


@section("lra", "Long Range Arena: measured beside published")
def lra(context: Context) -> list[Block]:
    runs = context.ordinary
    mine = runs[runs["task"].isin(TASK_COLUMNS)] if len(runs) else runs
    if mine.empty:
        return [Text("No runs of the tasks that read LRA's data (lra_listops, lra_text, lra_retrieval, lra_image, "
                     "lra_pathfinder, lra_pathx): `make lra DATA=DIR` trains them (docs/lra.md).")]
    table = beside_published(mine)
    shown = table.drop(columns=["accuracy_mean"])
    blocks: list[Block] = [Table(
        "lra-published", f"Each LRA task's rows: measured test accuracy (mean ± std over seeds, fractions) beside "
        f"the figure {PUBLISHED} gives for the variant's LRA model and for the Transformer. Published figures are "
        "LRA's own runs in its own setup, not measured here; they compare with rows of profile lra, whose sizes and "
        "budgets are LRA's, and docs/lra.md lists what still differs.", shown, data=table)]
    lacking = sorted({row["variant"] for _, row in table.iterrows() if row["LRA model"] == "–"})
    if lacking:
        blocks.append(Text(f"Not one of LRA's models, so beside the Transformer's figure only: {', '.join(lacking)}."))
    return blocks
