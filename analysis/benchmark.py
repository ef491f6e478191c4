"""The benchmark's page, `reports/benchmark-<name>/`: the leaderboard (variant x task, mean and 95% interval
of the test accuracy over the confirmation seeds, the average over tasks, the rank), which differences the
spread over seeds can tell apart, a section per stage of the benchmark (`analysis.benchmark_stages`: tuning;
accuracy against distance and length and the speed of learning; accuracy against model width and task size),
every cell with its tuning and its cost, the cost per variant, the cells, sizes and jobs that were skipped,
diverged or failed with their reasons, and the protocol, stage by stage, with the exact command and the versions
it ran with.

Everything is read from the benchmark's storage (`experiments.benchmark.Ledger`), not from run folders, so
any machine that reaches the storage writes the same page. The page goes through `analysis.render`, which
escapes every string (run errors included).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import pandas as pd

from analysis.benchmark_stages import chance_of, interval_text, stage_sections, test_figures
from analysis.render import Block, Section, Table, Text
from analysis.report import write_page
from analysis.sections.provenance import environment
from analysis.sections.results import PARAMETER_TOLERANCE
from analysis.sections.shared import fmt
from experiments.benchmark import CellState, Ledger
from experiments.benchmark.ledger import COMPLETED, SETTLED

REFERENCE = "dense"  # the row every other row's size is compared with (the Long Range Arena's rule)


CELL_COLUMNS = ("variant", "task", "status", "validation accuracy per learning rate", "best lr", "test accuracy",
                "seeds", "parameters", "parameters / dense", "over 10% larger than dense", "runs", "steps", "tokens",
                "wall seconds", "reason")


def _count(value: float) -> str:
    return "–" if math.isnan(value) else f"{int(value):,}"


def _protocol_results(state: CellState) -> list[dict]:
    """The figures of a cell's tuning and confirmation runs, at the cell's own size (not capacity's)."""
    return [job.result for job in (*state.tuning, *state.confirmation) if job is not None and job.result]


def _parameters(state: CellState) -> float:
    counts = [result["parameters"] for result in _protocol_results(state) if result.get("parameters")]
    return float(statistics.median(counts)) if counts else math.nan


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
    """'0.0003: 0.250; 0.001: 0.312; 0.003: diverged' (validation accuracy per learning rate)."""
    parts = []
    for lr, job in zip(state.learning_rates, state.tuning, strict=True):
        outcome = ("not queued" if job is None else fmt(job.result["val_accuracy"]) if job.state == COMPLETED
                   else job.state)
        parts.append(f"{lr:g}: {outcome}")
    return "; ".join(parts)


def cell_rows(ledger: Ledger) -> pd.DataFrame:
    """One row per cell: status, tuning, the chosen learning rate, the test accuracy over seeds with its 95%
    interval (Student's t), parameters against the reference's on the same task, and the cost of its runs."""
    reference = {state.cell.task: _parameters(state) for state in ledger.cells if state.cell.variant == REFERENCE}
    rows = []
    for state in ledger.cells:
        status, reason = _status(state)
        results = [job.result for job in state.jobs if job.result]
        best = next((job for job in state.tuning if job is not None and job.job.lr == state.best_lr), None)
        parameters, dense = _parameters(state), reference.get(state.cell.task, math.nan)
        chance = chance_of(state)
        rows.append({
            "variant": state.cell.variant, "task": state.cell.task, "status": status, "reason": reason,
            "validation accuracy per learning rate": _tuning_text(state) if state.tuning else "",
            "best lr": state.best_lr if state.best_lr is not None else math.nan,
            "best validation accuracy": best.result["val_accuracy"] if best is not None else math.nan,
            **test_figures(state.confirmation, chance), "chance": chance,
            "parameters": parameters, "parameters / dense": parameters / dense,
            "over 10% larger than dense": bool(parameters > PARAMETER_TOLERANCE * dense),
            "runs": len(results), "steps": sum(result["steps"] for result in results),
            "tokens": sum(result["tokens"] for result in results),
            "wall seconds": sum(result["wall_seconds"] or 0.0 for result in results),
        })
    return pd.DataFrame(rows)


def not_ranked(cells: pd.DataFrame, tasks: tuple[str, ...]) -> dict[str, str]:
    """Why each row that is listed but not ranked is not: a task it skipped or has no result on (ranks compare
    rows over the same tasks), a seed that diverged or failed (its cell scores it at chance, which a rank would
    hide), a model over 10% larger than dense's on a task, or a single seed per task (no interval to rank by)."""
    reasons = {}
    for variant, rows in cells.groupby("variant", sort=False):
        ran = rows[rows["status"] != "skipped"]
        why = [f"{what} {', '.join(names)}" for what, names in (
            ("skipped on", rows[rows["status"] == "skipped"]["task"].tolist()),
            ("no result on", [task for task in tasks if task not in set(ran.dropna(subset=["test mean"])["task"])
                              and task not in set(rows[rows["status"] == "skipped"]["task"])]),
            ("over 10% larger than dense on",
             ran[ran["over 10% larger than dense"].astype(bool)]["task"].tolist()
             if "over 10% larger than dense" in ran else [])) if names]
        failed = int(ran["seeds failed"].sum())
        if failed:
            why.append(f"{failed} of {int(ran['seeds scored'].sum())} seeds diverged or failed")
        if (ran.dropna(subset=["test mean"])["seeds scored"] < 2).any():
            why.append("one seed on a task, so no interval to rank by (SEEDS=2 or more)")
        if why:
            reasons[variant] = "; ".join(why)
    return reasons


def leaderboard(cells: pd.DataFrame, ledger: Ledger) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Variant x task test accuracy (shown: mean ± 95% half-width (n); data: the means), the average over the
    tasks each row has, how many, and the rank by average among the rows that `not_ranked` leaves (every task,
    every seed settled normally, a comparable size, two seeds or more), with why each other row is not ranked."""
    means = cells.pivot(index="variant", columns="task", values="test mean").reindex(
        index=list(ledger.benchmark.variants), columns=list(ledger.benchmark.tasks))
    data = means.copy()
    data["average"] = means.mean(axis=1, skipna=True)
    data["tasks averaged"] = means.notna().sum(axis=1)
    reasons = not_ranked(cells, tuple(ledger.benchmark.tasks))
    ranked = [variant not in reasons and count > 0 for variant, count in data["tasks averaged"].items()]
    data["rank"] = data["average"].where(ranked).rank(ascending=False, method="min")
    data["not ranked because"] = [reasons.get(variant, "") for variant in data.index]
    data = data.rename_axis("variant").reset_index()
    shown = data.copy()
    indexed = cells.set_index(["variant", "task"])
    for task in ledger.benchmark.tasks:
        shown[task] = [interval_text(indexed.loc[(variant, task)]) if indexed.loc[(variant, task), "status"] !=
                       "skipped" else "skipped" for variant in data["variant"]]
    shown["average"] = data["average"].map(fmt)
    shown["rank"] = data["rank"].map(lambda rank: "–" if pd.isna(rank) else str(int(rank)))
    order = data["rank"].fillna(math.inf).sort_values(kind="stable").index
    return shown.loc[order].reset_index(drop=True), data.loc[order].reset_index(drop=True)


def unranked_text(board: pd.DataFrame) -> list[str]:
    """A sentence when the leaderboard ranks no row, with the reasons (SEEDS=1 gives every row one)."""
    if board.empty or board["rank"].notna().any():
        return []
    reasons = sorted({reason for reason in board["not ranked because"] if reason})
    return [f"No row is ranked: {' | '.join(reasons) or 'no row has a result yet'}."]


def separation(cells: pd.DataFrame) -> list[str]:
    """Per task: which rows' 95% intervals lie wholly below the best row's (told apart by the seeds), and which
    overlap it (not told apart at this profile)."""
    lines = []
    for task, rows in cells[cells["seeds scored"] > 1].groupby("task", sort=False):
        best = rows.loc[rows["test mean"].idxmax()]
        below = rows[rows["interval high"] < best["interval low"]]["variant"].tolist()
        overlapping = [variant for variant in rows["variant"] if variant not in below and variant != best["variant"]]
        if not below:
            lines.append(f"{task}: the spread over seeds tells no two variants apart at this profile "
                         f"({len(rows)} rows with 2 seeds or more; {best['variant']} has the highest mean).")
            continue
        lines.append(f"{task}: {best['variant']} is highest; the 95% intervals of {', '.join(below)} lie wholly "
                     f"below its own" + (f"; those of {', '.join(overlapping)} overlap it, so they are not told "
                                         "apart" if overlapping else "") + ".")
    return lines


def cost(cells: pd.DataFrame) -> pd.DataFrame:
    """Per variant: its parameters over the tasks, the tasks where it is over 10% larger than dense, and the
    runs, steps, tokens and wall time of all its jobs, of every stage."""
    rows = []
    for variant, group in cells.groupby("variant", sort=False):
        parameters = group["parameters"].dropna()
        rows.append({"variant": variant,
                     "parameters (min..max over tasks)": (f"{int(parameters.min()):,}..{int(parameters.max()):,}"
                                                          if len(parameters) else "–"),
                     "over 10% larger than dense on": ", ".join(group[group["over 10% larger than dense"]]["task"]),
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


def protocol(ledger: Ledger) -> list[Block]:
    benchmark = ledger.benchmark
    grid = pd.DataFrame([{"task": task, "learning rates": ", ".join(
        f"{lr:g}" for lr in next((benchmark.learning_rates(cell) for cell in benchmark.cells
                                  if cell.task == task and cell.skipped is None), []))} for task in benchmark.tasks])
    devices = sorted({str(job.result.get("device_name") or job.result.get("device")) for state in ledger.cells
                      for job in state.jobs if job.result})
    return [
        Text(f"Command: {benchmark.command()}"),
        Text(f"Cells: {len(benchmark.variants)} variants x {len(benchmark.tasks)} tasks at the {benchmark.profile} "
             "profile; a variant that cannot run a task by construction is listed as skipped with its reason."),
        *(Text(stage.protocol(benchmark)) for stage in benchmark.stages),
        Text(f"Accounting: parameters per cell against {REFERENCE}'s on the same task, flagged above "
             f"{PARAMETER_TOLERANCE:.2f}x (the Long Range Arena's rule); steps, tokens (steps x batch x length) and "
             "wall time of every run, evaluations included. Devices: " + (", ".join(devices) or "none yet") + "."),
        Table("learning-rates", "The learning-rate grid of each task", grid),
        Table("environment", "The environment this page was built in", environment()),
    ]


def write(ledger: Ledger, out_dir: Path) -> tuple[Path, pd.DataFrame]:
    """Write reports/benchmark-<name>/ under `out_dir`; its index.html and the leaderboard as shown."""
    cells = cell_rows(ledger)
    shown, board = leaderboard(cells, ledger)
    costs = cost(cells).set_index("variant")
    for column in ("parameters (min..max over tasks)", "over 10% larger than dense on"):
        shown[column] = shown["variant"].map(costs[column])
    counts = ", ".join(f"{number} {stage} jobs {state}" for (stage, state), number in sorted(ledger.counts().items()))
    shown_cells = cells.assign(**{
        "test accuracy": cells.apply(interval_text, axis=1), "parameters": cells["parameters"].map(_count),
        "parameters / dense": cells["parameters / dense"].map(lambda ratio: fmt(ratio, 2)),
        "over 10% larger than dense": cells["over 10% larger than dense"].map({True: "yes", False: ""}),
        "wall seconds": cells["wall seconds"].map(lambda seconds: fmt(seconds, 1))})[list(CELL_COLUMNS)]
    sections = [
        Section("leaderboard", "Leaderboard", [
            Text("Test accuracy of each variant on each task at its chosen learning rate: mean ± half-width of the "
                 "95% interval over the confirmation seeds (n); a seed whose run diverged or failed counts, scored at "
                 "the task's chance accuracy, and is named. The average is over the tasks a row has; rows are "
                 "ranked by it only among rows over the same tasks with every seed settled normally, a model "
                 "within 10% of dense's size and two seeds or more; every other row is listed with why it is not "
                 "ranked."),
            Table("leaderboard", "Leaderboard: test accuracy per task, average and rank; each row's parameters "
                  "over the tasks and the tasks where its model is more than 10% larger than dense's (the Long Range "
                  "Arena's rule for a fair comparison)", shown, data=board),
            *(Text(line) for line in [*unranked_text(board), *separation(cells)])]),
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
