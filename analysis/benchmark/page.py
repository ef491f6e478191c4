"""The benchmark's page, `reports/benchmark-<name>/`: the leaderboard (variant x task, mean and 95% interval
of the test accuracy over the confirmation seeds beside its test set's own interval and, for a layout variant, the
share of the pairs its layout attends, the average over tasks, the rank; a layout cell that computes dense says so
instead; the bidirectional rows in a table of their own), which differences a paired test over the seeds tells apart
per task (`analysis.benchmark.verdicts`) (under protocol 2, in their place, every variant against dense per task and
metric with tiers and no rank: `analysis.benchmark.contrast_section`), a section per stage of the benchmark
(`analysis.benchmark.stages`: tuning; accuracy against distance and length and the speed of learning; accuracy
against model width and task size),
every cell with its tuning and its cost, the cost per variant, the cells, sizes and jobs that were skipped,
diverged or failed with their reasons, and the protocol, stage by stage, with the exact command and the versions
it ran with.

Everything is read from the benchmark's storage (`experiments.benchmark.Ledger`), not from run folders, so
any machine that reaches the storage writes the same page. The page goes through `analysis.report.render`, which
escapes every string (run errors included).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.benchmark.contrast_section import contrast_section
from analysis.benchmark.coverage import DENSE_COVERAGE, DENSE_RULE, computes_dense, coverage_text, layout_coverage
from analysis.benchmark.stages import (
    chance_of,
    interval_text,
    run_setup,
    seed_scores,
    stage_sections,
    test_figures,
)
from analysis.benchmark.stale import marked, stale_lines
from analysis.benchmark.verdicts import PROTOCOL, verdict_blocks
from analysis.report.build import write_page
from analysis.report.render import Block, Section, Table, Text
from analysis.report.sections.provenance import environment
from analysis.report.sections.shared import fmt
from common import schema
from experiments import revisions, tasks
from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import COMPLETED, SETTLED, CellState, Ledger, mean_validation
from experiments.benchmark.parity import REFERENCE, TOLERANCE
from experiments.tasks import presets as task_presets

UNMATCHED = f"parameters not within {TOLERANCE:.0%} of {REFERENCE}'s"  # the cells table's column: why, or ''
PAIRS_ATTENDED = "pairs attended"  # the cells table's column: `coverage_text`, or '–' where the variant has no layout
CELL_COLUMNS = ("variant", "task", "status", "validation accuracy per learning rate", "best lr", "test accuracy",
                PAIRS_ATTENDED, "seeds", "size", "parameters", f"{REFERENCE} parameters", f"parameters / {REFERENCE}",
                UNMATCHED, "runs", "steps", "tokens", "wall seconds", "reason")


def cell_text(row: pd.Series) -> str:
    """A leaderboard cell: 'skipped'; 'computes dense: attends 100% of the causal pairs at length 64'; or its accuracy
    (`interval_text`), followed by its layout's share of the pairs where the variant has a layout."""
    if row["status"] == "skipped":
        return "skipped"
    if row["coverage"] > DENSE_COVERAGE:
        return f"{'computes dense' if row['coverage'] >= 1 else 'near dense'}: {coverage_text(row)}"
    return interval_text(row) + ("" if math.isnan(row["coverage"]) else f", {coverage_text(row)}")


def _count(value: float) -> str:
    return "–" if math.isnan(value) else f"{int(value):,}"


def _sizes(state: CellState) -> dict[str, Any]:
    """A cell's parameter columns: the size chosen for it (`Cell.size`: 'own', or the settings that size it to
    dense's parameters), its parameters and dense's on the task as counted when the benchmark was resolved (the
    model its runs build), their ratio, and why they are not within 10% of each other ('' where they are)."""
    size, skipped = state.cell.size, state.cell.skipped is not None
    return {"size": "" if skipped else size.shown, "parameters": float(size.parameters or math.nan),
            f"{REFERENCE} parameters": float(size.reference or math.nan), f"parameters / {REFERENCE}": size.ratio,
            UNMATCHED: "" if skipped else size.unmatched or ""}


def _status(state: CellState) -> tuple[str, str]:
    """A cell's status and, where it has no result, why."""
    if state.cell.skipped is not None:
        return "skipped", state.cell.skipped
    if not state.tuned:
        return "pending", "tuning has not settled"
    if state.best_lr is None:
        return "no result", "no learning rate of the grid trained to the end (see the problems below)"
    if not all(job is not None and job.state in SETTLED for job in state.confirmation):
        return "pending", "confirmation has not settled"
    return "done", ""


def _tuning_text(state: CellState) -> str:
    """'0.0003: 0.250; 0.001: 0.312; 0.003: diverged' (validation accuracy per learning rate, the mean over the
    tuning seeds)."""
    parts = []
    for lr, jobs in state.tuning_by_rate.items():
        outcome = "not queued" if None in jobs else next((job.state for job in jobs if job.state != COMPLETED),
                                                          None) or fmt(mean_validation(jobs))
        parts.append(f"{lr:g}: {outcome}")
    return "; ".join(parts)


def cell_rows(ledger: Ledger) -> pd.DataFrame:
    """One row per cell: status, tuning, the chosen learning rate, the test accuracy over seeds with its 95%
    interval (Student's t), its size and parameters against dense's on the same task, and the cost of its runs."""
    rows = []
    for state in ledger.cells:
        status, reason = _status(state)
        results = [job.result for job in state.jobs if job.result]
        best = mean_validation(state.tuning_by_rate[state.best_lr]) if state.best_lr is not None else None
        chance = chance_of(state)
        rows.append({
            "variant": state.cell.variant, "task": state.cell.task, "status": status, "reason": reason,
            "validation accuracy per learning rate": _tuning_text(state) if state.tuning else "",
            "best lr": state.best_lr if state.best_lr is not None else math.nan,
            "best validation accuracy": best if best is not None else math.nan,
            **test_figures(state.confirmation, chance), "chance": chance, **run_setup(ledger, state),
            **layout_coverage(ledger, state),
            **_sizes(state),
            "runs": len(results), "steps": sum(result["steps"] for result in results),
            "tokens": sum(result["tokens"] for result in results),
            "wall seconds": sum(result["wall_seconds"] or 0.0 for result in results),
        })
    return pd.DataFrame(rows)


def not_ranked(cells: pd.DataFrame, tasks: tuple[str, ...]) -> dict[str, str]:
    """Why each row that is listed but not ranked is not: a task it skipped or has no result on (ranks compare
    rows over the same tasks), a task where its layout computes dense (`computes_dense`), a seed that diverged or
    failed (its cell scores it at chance, which a rank would hide), a model not within 10% of dense's parameters on
    a task (with why no size is: `Cell.size`), or a single seed per task (no interval to rank by)."""
    reasons = {}
    for variant, rows in cells.groupby("variant", sort=False):
        ran = rows[rows["status"] != "skipped"]
        why = [f"{what} {', '.join(names)}" for what, names in (
            ("skipped on", rows[rows["status"] == "skipped"]["task"].tolist()),
            ("no result on", [task for task in tasks if task not in set(ran.dropna(subset=["test mean"])["task"])
                              and task not in set(rows[rows["status"] == "skipped"]["task"])]),
            (f"not within {TOLERANCE:.0%} of {REFERENCE}'s parameters on",
             [f"{task} ({why})" for task, why in zip(ran["task"], ran[UNMATCHED], strict=True) if why]
             if UNMATCHED in ran else [])) if names]
        dense = ran[computes_dense(ran)]["task"].tolist()
        if dense:
            why.append(f"dense or near dense on {', '.join(dense)} (its layout attends more than "
                       f"{DENSE_COVERAGE:.0%} of the pairs there)")
        failed = int(ran["seeds failed"].sum())
        if failed:
            why.append(f"{failed} of {int(ran['seeds scored'].sum())} seeds diverged or failed")
        if (ran.dropna(subset=["test mean"])["seeds scored"] < 2).any():
            why.append("one seed on a task, so no interval to rank by (SEEDS=2 or more)")
        if why:
            reasons[variant] = "; ".join(why)
    return reasons


def leaderboard(cells: pd.DataFrame, ledger: Ledger) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Variant x task test accuracy (shown: `cell_text`; data: the means), the average over the tasks each row
    has, how many, the row's table (`attention`), and the rank by average within its table among the rows that
    `not_ranked` leaves (every task, no cell that computes dense, every seed settled normally, a comparable size,
    two seeds or more), with why each other row is not ranked; causal rows first. A cell that computes dense shows
    so (`cell_text`) and is left out of its row's average."""
    means = cells[~computes_dense(cells)].pivot(index="variant", columns="task", values="test mean").reindex(
        index=list(ledger.benchmark.variants), columns=list(ledger.benchmark.tasks))
    data = means.copy()
    data["average"] = means.mean(axis=1, skipna=True)
    data["tasks averaged"] = means.notna().sum(axis=1)
    reasons = not_ranked(cells, tuple(ledger.benchmark.tasks))
    ranked = [variant not in reasons and count > 0 for variant, count in data["tasks averaged"].items()]
    tables = attention(cells)
    data["attention"] = [tables.get(variant, "causal") for variant in data.index]
    data["rank"] = data["average"].where(ranked).groupby(data["attention"]).rank(ascending=False, method="min")
    data["not ranked because"] = [reasons.get(variant, "") for variant in data.index]
    data = data.rename_axis("variant").reset_index()
    shown = data.copy()
    indexed = cells.set_index(["variant", "task"])
    for task in ledger.benchmark.tasks:
        shown[task] = [cell_text(indexed.loc[(variant, task)]) for variant in data["variant"]]
    shown["average"] = data["average"].map(fmt)
    shown["rank"] = data["rank"].map(lambda rank: "–" if pd.isna(rank) else str(int(rank)))
    order = data.assign(after=data["attention"] != "causal", at=data["rank"].fillna(math.inf)).sort_values(
        ["after", "at"], kind="stable").index
    return shown.loc[order].reset_index(drop=True), data.loc[order].reset_index(drop=True)


def unranked_text(board: pd.DataFrame) -> list[str]:
    """A sentence when the leaderboard ranks no row, with the reasons (SEEDS=1 gives every row one)."""
    if board.empty or board["rank"].notna().any():
        return []
    reasons = sorted({reason for reason in board["not ranked because"] if reason})
    return [f"No row is ranked: {' | '.join(reasons) or 'no row has a result yet'}."]


def attention(cells: pd.DataFrame) -> dict[str, str]:
    """Per variant, the leaderboard table its row belongs in: 'bidirectional' where a cell of it runs with
    model.causal false (each position sees the whole sequence), else 'causal'."""
    return {variant: "bidirectional" if rows["causal"].eq(False).any() else "causal"
            for variant, rows in cells.groupby("variant", sort=False)}


LEADERBOARD = ("Test accuracy of each variant on each task at its chosen learning rate: mean ± half-width of the 95% "
               "interval over the confirmation seeds (n), and the Wilson 95% interval of the mean over the task's "
               "fixed test set (test set low–high), its own sampling error; a seed whose run diverged or failed "
               "counts, scored at the task's chance accuracy, and is named. The average is over the tasks a row has; "
               "rows are ranked by it only among rows over the same tasks with every seed settled normally, a model "
               "within 10% of dense's size and two seeds or more; every other row is listed with why it is not "
               "ranked. " + DENSE_RULE)
BIDIRECTIONAL = ("The rows below run bidirectional attention (model.causal false): each position sees the whole "
                 "sequence, later inputs included, so they are not comparable with the causal rows above; they are "
                 "ranked among themselves, and their verdicts compare them only with each other.")
VERDICTS = ("Verdicts, per task: each row with 2 seeds or more against the row of highest mean in its own table, by "
            "a paired test over the confirmation seeds both scored that adds the test set's sampling error, "
            "Holm-corrected over the task's comparisons (see the protocol). The mean difference and its 95% interval "
            "say how large a difference is; 'told apart' says whether it is beyond what the seeds and the test set's "
            "sampling leave to chance.")


def leaderboard_blocks(ledger: Ledger, cells: pd.DataFrame, shown: pd.DataFrame, board: pd.DataFrame) -> list[Block]:
    """The leaderboard section: the causal rows' table, the bidirectional rows' table apart, then each table's
    verdicts per task (`analysis.benchmark.verdicts`); a stale cell is marked, and why is said
    (`analysis.benchmark.stale`)."""
    shown = marked(shown, ledger)
    scores = {(state.cell.variant, state.cell.task): seed_scores(state.confirmation, chance_of(state))
              for state in ledger.cells}
    boards: list[Block] = [Text(LEADERBOARD)]
    verdicts: list[Block] = [Text(VERDICTS)]
    for kind in ("causal", "bidirectional"):
        rows = (board["attention"] == kind).to_numpy()
        if not rows.any():
            continue
        caption = ("Leaderboard" + ("" if kind == "causal" else ", bidirectional rows") + ": test accuracy per task, "
                   "average and rank; each row's parameters over the tasks and the tasks where its model is not "
                   "within 10% of dense's (each cell is sized to be: the protocol)")
        boards += [*([] if kind == "causal" else [Text(BIDIRECTIONAL)]),
                   Table("leaderboard" + ("" if kind == "causal" else f"-{kind}"), caption,
                         shown[rows].drop(columns="attention"), data=board[rows])]
        verdicts += verdict_blocks(cells[cells["variant"].isin(board.loc[rows, "variant"]) & ~computes_dense(cells)],
                                   scores,
                                   tuple(ledger.benchmark.tasks), "" if kind == "causal" else kind)
    shortcuts = [line for task in dict.fromkeys(map(task_presets.base, ledger.benchmark.tasks))
                 for line in tasks.caveats(task, ledger.benchmark.profile)]
    return [*boards, *(Text(line) for line in [*shortcuts, *unranked_text(board), *stale_lines(ledger)]),
            *(verdicts if len(verdicts) > 1 else [])]


def cost(cells: pd.DataFrame) -> pd.DataFrame:
    """Per variant: its parameters over the tasks, the tasks where they are not within 10% of dense's, and the
    runs, steps, tokens and wall time of all its jobs, of every stage."""
    rows = []
    for variant, group in cells.groupby("variant", sort=False):
        parameters = group["parameters"].dropna()
        rows.append({"variant": variant,
                     "parameters (min..max over tasks)": (f"{int(parameters.min()):,}..{int(parameters.max()):,}"
                                                          if len(parameters) else "–"),
                     f"{UNMATCHED} on": ", ".join(group[group[UNMATCHED].astype(bool)]["task"]),
                     "runs": int(group["runs"].sum()), "steps": int(group["steps"].sum()),
                     "tokens": int(group["tokens"].sum()),
                     "wall seconds": round(float(group["wall seconds"].sum()), 1)})
    return pd.DataFrame(rows)


def problems(ledger: Ledger) -> pd.DataFrame:
    """Every skipped cell and size a stage cannot train (`Stage.skipped`: capacity points), and every job that
    diverged, failed or has not settled, with its reason; `size` names a capacity job's or point's axis and value."""
    rows = [{"variant": state.cell.variant, "task": state.cell.task, "stage": "cell", "size": "", "lr": "",
             "seed": "", "state": "skipped", "reason": state.cell.skipped, "attempts": 0}
            for state in ledger.cells if state.cell.skipped is not None]
    rows += [{"variant": state.cell.variant, "task": state.cell.task, "stage": stage.name, "size": size, "lr": "",
              "seed": "", "state": "skipped", "reason": reason, "attempts": 0}
             for stage in ledger.benchmark.stages for state in ledger.cells
             for size, reason in stage.skipped(state.cell)]
    for state in ledger.cells:
        for job in state.jobs:
            if job.state == COMPLETED:
                continue
            rows.append({"variant": job.job.variant, "task": job.job.task, "stage": job.job.stage,
                         "size": f"{job.job.axis}={job.job.value}" if job.job.axis is not None else "",
                         "lr": f"{job.job.lr:g}", "seed": str(job.job.seed), "state": job.state,
                         "reason": job.reason or "not settled yet", "attempts": job.attempts})
    return pd.DataFrame(rows, columns=["variant", "task", "stage", "size", "lr", "seed", "state", "reason",
                                       "attempts"])


def parity_text(benchmark: Benchmark) -> str:
    """The parameter rule as the protocol states it (`experiments.benchmark.parity`)."""
    rule = (f"Parameters: before anything runs, {REFERENCE}'s model is built on each task (whether or not {REFERENCE} "
            f"is among the variants) and its parameters counted; each cell's model must lie within {TOLERANCE:.0%} of "
            f"that count, both ways (the Long Range Arena compares models of about one size). ")
    if not benchmark.size_to_dense:
        return rule + ("This benchmark does not size its cells (--no-size-to-dense, or stored before cells were "
                       "sized): each trains at its own size, and one outside the rule is listed but not ranked.")
    return rule + ("A cell whose own model is within it keeps it; any other is sized by the least change that brings "
                   "it within: the variant's own size option where it declares one (Linformer's rank), else the "
                   "model width (model.dim, the heads keeping their number). Every job of the cell trains at that "
                   "size, and the capacity stage scales from it. A cell that no size brings within, or every cell of "
                   f"a task where {REFERENCE}'s model cannot be built, trains at its own size and is listed but not "
                   "ranked, with the reason.")


def stopping_text(benchmark: Benchmark) -> str:
    """The stopping rule and what each evaluation reads, as the protocol states them (`--target-accuracy`,
    `--interim-validation`: every job's train config takes them, `BenchmarkOptions.job_rules`)."""
    reads = ("Evaluations: every evaluation reads the test set and the whole validation set." if benchmark.interim_test
             else "Evaluations: the test set is read once, at each run's last evaluation, with every other held-out "
                  "set in full; the evaluations before it read " + (
                      "the whole validation set" if benchmark.interim_validation is None else
                      f"{benchmark.interim_validation} validation examples evenly spaced through the set") + ".")
    if benchmark.target is None:
        return f"Stopping: none; every run trains every step of its profile. {reads}"
    return (f"Stopping: every run of every stage stops at the first evaluation whose validation accuracy reaches "
            f"{benchmark.target:g} (as Zoology stops at 0.99), and records that step and its wall time; the "
            "test and validation accuracy are the ones measured there, on the whole sets. Tuning scores such a run at "
            "the target and prefers, among learning rates that reach it, the fewest steps; so once one of a cell's "
            "tuning runs has stopped at the target with its whole validation set there, its siblings still short of "
            "the target at that step can no longer be chosen, and each stops at its next evaluation (outdone; its "
            "figures are those of that evaluation). The speed of learning reads the steps to the target. "
            f"{reads}")


def sizes(ledger: Ledger) -> pd.DataFrame:
    """Per cell that runs: the size chosen, its parameters and dense's, their ratio and why they do not match."""
    frame = pd.DataFrame([{"variant": state.cell.variant, "task": state.cell.task, **_sizes(state)}
                          for state in ledger.cells if state.cell.skipped is None])
    return frame.assign(**{column: frame[column].map(_count) for column in ("parameters", f"{REFERENCE} parameters")},
                        **{f"parameters / {REFERENCE}": frame[f"parameters / {REFERENCE}"].map(
                            lambda ratio: fmt(ratio, 2))}) if len(frame) else frame


def protocol(ledger: Ledger) -> list[Block]:
    benchmark = ledger.benchmark
    grid = pd.DataFrame([{"task": task, "learning rates": ", ".join(
        f"{lr:g}" for lr in next((benchmark.learning_rates(cell) for cell in benchmark.cells
                                  if cell.task == task and cell.skipped is None), []))} for task in benchmark.tasks])
    devices = sorted({str(job.result.get("device_name") or job.result.get("device")) for state in ledger.cells
                      for job in state.jobs if job.result})
    return [
        Text(f"Command: {schema.command(benchmark)}"),
        Text(f"Protocol version {benchmark.protocol}: {revisions.protocol(benchmark.protocol)}."),
        Text(f"Cells: {len(benchmark.variants)} variants x {len(benchmark.tasks)} tasks at the {benchmark.profile} "
             "profile; a variant that cannot run a task by construction is listed as skipped with its reason."),
        *(Text(stage.protocol(benchmark)) for stage in benchmark.stages),
        *([Text(PROTOCOL)] if benchmark.protocol < 2 else []),  # protocol 2's contrasts state their own rule
        Text(parity_text(benchmark)),
        Text(stopping_text(benchmark)),
        Text("Accounting: steps, tokens (steps x batch x length) and wall time of every run, evaluations included. "
             "Devices: " + (", ".join(devices) or "none yet") + "."),
        Table("learning-rates", "The learning-rate grid of each task", grid),
        Table("sizes", f"The size chosen for each cell that runs, its parameters and {REFERENCE}'s on the task",
              sizes(ledger)),
        Table("environment", "The environment this page was built in", environment()),
    ]


def boards(ledger: Ledger) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(every cell's row, the leaderboard as shown, its data): the shown board with each row's parameters, the
    tasks where they are not within 10% of dense's, and the wall time of all its jobs."""
    cells = cell_rows(ledger)
    shown, board = leaderboard(cells, ledger)
    costs = cost(cells).set_index("variant")
    for column in ("parameters (min..max over tasks)", f"{UNMATCHED} on", "wall seconds"):
        shown[column] = shown["variant"].map(costs[column])
    return cells, shown.rename(columns={"wall seconds": "wall seconds (every job)"}), board


def write(ledger: Ledger, out_dir: Path) -> tuple[Path, pd.DataFrame]:
    """Write reports/benchmark-<name>/ under `out_dir`; its index.html and the leaderboard as shown."""
    cells, shown, board = boards(ledger)
    costs = cost(cells).set_index("variant")
    counts = ", ".join(f"{number} {stage} jobs {state}" for (stage, state), number in sorted(ledger.counts().items()))
    shown_cells = cells.assign(**{
        "test accuracy": cells.apply(interval_text, axis=1),
        PAIRS_ATTENDED: cells.apply(lambda row: "–" if math.isnan(row["coverage"]) else coverage_text(row), axis=1),
        "parameters": cells["parameters"].map(_count),
        f"{REFERENCE} parameters": cells[f"{REFERENCE} parameters"].map(_count),
        f"parameters / {REFERENCE}": cells[f"parameters / {REFERENCE}"].map(lambda ratio: fmt(ratio, 2)),
        "wall seconds": cells["wall seconds"].map(lambda seconds: fmt(seconds, 1))})[list(CELL_COLUMNS)]
    lead, shown = (contrast_section(ledger, cells) if ledger.benchmark.protocol >= 2 else
                   (Section("leaderboard", "Leaderboard", leaderboard_blocks(ledger, cells, shown, board)), shown))
    sections = [
        lead,
        *stage_sections(ledger, cells),
        Section("cells", "Cells", [Table("cells", "Every cell: tuning (validation accuracy per learning rate), the "
                                         "chosen learning rate, test accuracy over seeds, size and cost",
                                         shown_cells, data=cells)]),
        Section("cost", "Cost per variant", [Table(
            "cost", "Cost per variant, the jobs of every stage together", costs.reset_index())]),
        Section("problems", "Skipped, diverged and failed", [
            Table("problems", "Cells and sizes (capacity points) skipped, and jobs that diverged, failed or have "
                  "not settled, with the reason", problems(ledger))]),
        Section("protocol", "Protocol", protocol(ledger)),
    ]
    meta = [f"Built {time.strftime('%Y-%m-%d %H:%M:%S')} from {ledger.benchmark.storage_shown}: {counts or 'no jobs'}"
            f"; {'every job has settled' if ledger.complete else 'not every job has settled yet'}."]
    name = f"benchmark-{ledger.benchmark.name}"
    return write_page(out_dir, name, f"attnlab {name}", meta, sections), shown
