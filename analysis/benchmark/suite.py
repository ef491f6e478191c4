"""The benchmark's suite under protocol 2, chosen by calibration: the candidate task rows, and the rule that keeps
those where dense, at the budget, leaves room above and below it.

A comparison against dense can tell variants apart only where dense is neither at the ceiling (every variant that
learns the task ties it there) nor at the floor (there is nothing to fall to). So a candidate row joins the suite
where dense's mean over its calibration seeds at the suite's budget (`BUDGET`; `make calibration VARIANT=dense
TASK=ROW ARGS="--set train.steps=400 --set train.eval_every=50"`, the record docs/calibration.csv) lies between
chance + 0.2 and 0.95 on at least one metric: test accuracy, an extra split (flip-flop's sparse reads), or an
evaluation length (induction at 2x and 4x its training length). The metrics that pass are the cell's
discriminating ones; a candidate that passes none stays out, and why is said (saturated, at the floor, or not
calibrated yet, with the command that calibrates it). The suite takes the first MAX_ROWS candidates in range, in
the order listed, what the run of record's 2.5 hours hold; one in range past them says so.

    >>> [row for row, _ in CANDIDATES][:3]
    ['induction', 'mqar:num_pairs=16', 'mqar:num_pairs=12']
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.calibration.table import profile_of, read_record
from analysis.report.render import markdown_table
from variants import presets

RECORD = Path("docs/calibration.csv")
# The budget of every run of the suite, 400 of quick's 1,000 steps with an evaluation every 50 (the curve's points
# and the resolution of the steps to 0.9 and 0.99): what fits its run of record into 2.5 hours on 2 cores
# (docs/records/benchmark-estimate-suite.csv). The calibration measures dense at this budget, and only its rows at
# these steps choose.
BUDGET_STEPS = 400
BUDGET = (f"train.steps={BUDGET_STEPS}", "train.eval_every=50")
FLOOR_MARGIN, CEILING = 0.2, 0.95  # dense must lie between chance + FLOOR_MARGIN and CEILING
PROFILE = "quick"
REFERENCE = "dense"

# The core set, BigBird with blocks of 4 (its paper's pattern of a 3-block window, 1 global and 2 random blocks): at
# the suite's 64 tokens it attends 49% of the causal pairs, a sparse contender; with its default blocks of 16 it
# attends all of them there and would be compared with nothing (`analysis.benchmark.coverage`).
BIGBIRD, SUITE_BIGBIRD = "sparse:pattern=bigbird", "sparse:pattern=bigbird:block_size=4"
VARIANTS = tuple(SUITE_BIGBIRD if row == BIGBIRD else row for row in presets.CORE)
CALIBRATE = " ".join(f"--set {assignment}" for assignment in BUDGET)

# The rows the calibration tries, in the order the suite takes them, each with why it is a candidate.
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("induction", "read at 2x and 4x its training length (64 and 128 tokens), where position schemes part"),
    ("mqar:num_pairs=16", "more key-value pairs (16) than quick's width of 64 stores in its 4 heads (Zoology's "
                          "capacity axis); dense, temperature, BigBird and RoPE read 0.08-0.11 there in protocol 1"),
    ("mqar:num_pairs=12", "between quick's 8 pairs, which dense stores, and 16, which it does not"),
    ("selective_copy", "quick's own size, where dense read 0.898 over 1,000 steps in protocol 1's calibration"),
    ("selective_copy:num_tokens=8", "twice quick's data tokens to copy past the noise; with quick's own row, the "
                                    "capacity axis of the suite (accuracy against the tokens copied)"),
    ("flipflop:split_size=8000", "the sparse split over about 10^4 reads, where attention glitches show as an error "
                                 "rate"),
    ("mqar", "quick's own size: saturated for every dot-product variant in protocol 1's record"),
    ("passkey", "quick's own size: saturated for every dot-product variant in protocol 1's record"),
)
# Confirmation seeds per row where 6, the protocol's number, fall short of its power aim: the run of record's first six
# seeds measured the spread of each row's paired differences, and its power check (docs/results.md) asked for about 12
# on induction and MQAR with 12 pairs to detect 20% of dense's steps to 0.9. Continued with them, the benchmark keeps
# its settled jobs and trains the added seeds only (`experiments.benchmark.definition.grows`). Each continuation, in
# the order it ran: the record of the estimate made before it ran (docs/records/NAME.csv) and the seeds it gave its
# rows. A row whose aim would need more than the seeds a task of record may grow to
# (`analysis.benchmark.contrast_section.MOST_SEEDS`) is not grown: it is exploratory. Selective copy of 8 tokens asked
# for about 52 (its steps to 0.9 never discriminate: dense does not reach 0.9 there); a continuation toward them was
# stopped part way when that rule was set, and is kept in docs/records/in-progress/ (docs/benchmark.md).
GROWTH: tuple[tuple[str, dict[str, int]], ...] = (
    ("benchmark-estimate-suite-seeds", {"induction": 12, "mqar:num_pairs=12": 12}),
)
ROW_SEEDS = {row: count for _, rows in GROWTH for row, count in rows.items()}

# The suite takes at most this many rows, the first candidates in range: at the budget a row of the core set costs
# about half an hour of wall time with 2 workers here, and four fit the run of record's 2.5 hours
# (docs/records/benchmark-estimate-suite.csv).
MAX_ROWS = 4


def metrics(row: pd.Series) -> dict[str, float]:
    """A calibration row's accuracies by metric: 'test accuracy', then each split and each evaluation length as the
    record writes them ('sparse', 'n=64')."""
    found = {"test accuracy": float(row["test accuracy"])}
    for part in str(row["splits and lengths"]).split(";"):
        name, _, value = part.strip().rpartition(" ")
        if name and re.fullmatch(r"[0-9.]+", value):
            found[name] = float(value)
    return found


def verdict(task: str, record: pd.DataFrame) -> tuple[list[str], str]:
    """The metrics of candidate `task` on which dense discriminates (none: it stays out), and the sentence that says
    why, from dense's rows of `record` at the quick profile."""
    rows = record[(record["task"] == task) & (record["variant"] == REFERENCE) & (profile_of(record) == PROFILE)
                  & (record["steps"] == str(BUDGET_STEPS))]
    if rows.empty:
        return [], (f"not calibrated: the record has no {REFERENCE} run of {task} at {PROFILE} over {BUDGET_STEPS} "
                    f"steps; make calibration VARIANT={REFERENCE} TASK={task} ARGS=\"{CALIBRATE}\" measures it")
    chance = float(rows["chance"].iloc[0])
    means = pd.DataFrame([metrics(row) for _, row in rows.iterrows()]).mean()
    low, high = round(chance + FLOOR_MARGIN, 3), CEILING  # at the record's 3 decimals, so an edge is on it
    passing = [name for name, mean in means.items() if low <= round(mean, 3) <= high]
    shown = ", ".join(f"{name} {mean:.3f}" for name, mean in means.items())
    seeds = f"{len(rows)} seed{'s' if len(rows) > 1 else ''}"
    if passing:
        return passing, f"in the suite: {REFERENCE} reads {shown} ({seeds}; between {low:.3f} and {high})"
    where = "at the ceiling" if means.max() > high else "at the floor"
    return [], f"left out, {where}: {REFERENCE} reads {shown} ({seeds}; none between {low:.3f} and {high})"


def choose(record: pd.DataFrame) -> pd.DataFrame:
    """Every candidate with its discriminating metrics, whether it is in the suite (the first MAX_ROWS in range, in
    the order listed), why it is a candidate and the verdict."""
    chosen, taken = [], 0
    for task, why in CANDIDATES:
        passing, sentence = verdict(task, record)
        joins = bool(passing) and taken < MAX_ROWS
        taken += joins
        if passing and not joins:
            sentence = sentence.replace("in the suite:", f"in range, but past the suite's {MAX_ROWS} rows:", 1)
        chosen.append({"task": task, "in suite": joins, "metrics": ", ".join(passing), "candidate because": why,
                       "verdict": sentence})
    return pd.DataFrame(chosen)


def suite(path: Path = RECORD) -> tuple[str, ...]:
    """The task rows of protocol 2's default suite, as the calibration record at `path` chooses them; a ValueError
    where it chooses none."""
    chosen = choose(read_record(path))
    rows = tuple(chosen.loc[chosen["in suite"], "task"])
    if not rows:
        raise ValueError(f"The calibration record {str(path)!r} puts no candidate row in the benchmark's suite; "
                         f"accepted: a record with {REFERENCE}'s runs of the candidates ({', '.join(chosen['task'])}) "
                         f"over {BUDGET_STEPS} steps, written by make calibration VARIANT={REFERENCE} TASK=ROW "
                         f"ARGS=\"{CALIBRATE}\", or --task ROWS.")
    return rows


def selection(task_names: str | None, variant_names: str | None, sets: list[str], task_seeds: str | None, *,
              protocol: int, profile: str) -> dict[str, Any]:
    """The --task, --variant, --set and --task-seeds of `attnlab benchmark`, by their flags' destinations: where no
    task is named under protocol 2 at the quick profile, the suite the calibration chooses (`suite`) at its budget
    (`BUDGET`, under the user's own --set) with its rows' seeds (`ROW_SEEDS`, unless --task-seeds is given), and where
    no variant is named either, the core set with BigBird's blocks sized to the suite (`VARIANTS`); otherwise as
    given (no task: the default suite of the task registry, `tasks.DEFAULT_SUITE`; no variant: the core set)."""
    if task_names or protocol < 2 or profile != PROFILE:
        return {"task": task_names, "variant": variant_names, "set": sets, "task_seeds": task_seeds}
    rows = suite()
    seeds = ",".join(f"{row}={count}" for row, count in ROW_SEEDS.items() if row in rows)
    return {"task": ",".join(rows), "variant": variant_names or ",".join(VARIANTS), "set": [*BUDGET, *sets],
            "task_seeds": task_seeds or seeds or None}


def section(record: pd.DataFrame) -> list[str]:
    """docs/results.md's section on the suite: each candidate, whether it is in, on which metrics, and why."""
    chosen = choose(record)
    shown = chosen.assign(**{"in suite": chosen["in suite"].map({True: "yes", False: "no"})})
    return ["## The benchmark's suite under protocol 2", "",
            f"Chosen from {REFERENCE}'s calibration rows over {BUDGET_STEPS} steps "
            f"(docs/calibration.csv): a candidate joins where {REFERENCE}'s mean over its seeds lies between chance + "
            f"{FLOOR_MARGIN} and {CEILING} on some metric, the first {MAX_ROWS} in range in the order listed (what "
            f"the run of record's 2.5 hours hold); `make benchmark` without TASK= runs them at that budget (`--set "
            f"{' --set '.join(BUDGET)}`), the core set with BigBird's blocks of 4 "
            f"(`{SUITE_BIGBIRD}`, 49% of the causal pairs at 64 tokens).", "",
            *markdown_table(shown[["task", "in suite", "metrics", "verdict", "candidate because"]]), ""]
