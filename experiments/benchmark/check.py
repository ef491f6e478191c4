"""How close the estimate came (`attnlab benchmark --estimate-check`): a benchmark whose every job has settled,
against the estimate that stood when it started.

`attnlab benchmark` copies the benchmark's estimate.csv (`--estimate`, made before it ran) to
estimate-before-run.csv when it starts a benchmark whose storage holds no job yet, so the check reads the estimate
that was made, not one made later. For every job of the storage it then compares three things, each as seconds of
runs:

- estimated: what the estimate predicted for the jobs of that variant (its steps: the profile's, or those it
  predicted from earlier runs);
- at the steps each run took: the estimate's own timings (a step, an interim evaluation, the last one, measured
  per size before the run) at the steps each job's run really took (where it stopped at the target, or the
  profile's), which separates the timing from the prediction of steps;
- measured: the wall seconds each job's run recorded;

per variant, per stage (the learning rates tuned beyond the grid's edge count as tuning) and in all; and the
benchmark's wall time: the estimate's runs over its workers, against the seconds during which at least one job
ran (`Ledger.busy_seconds`: a pause between a stop and its resume is left out). The rows are written as a record
(estimate-check.csv, with the commit, the device and the command) for docs/records/ (`analysis.results_doc` draws
them with their ratio).
"""

from __future__ import annotations

import math
import os

import pandas as pd
import torch

from common import schema
from common.files import atomic_write_text
from common.options import OptionError
from common.provenance import git_commit
from experiments.benchmark.definition import Benchmark
from experiments.benchmark.estimate import Timing, size_of, stored, threads_per_worker
from experiments.benchmark.ledger import SETTLED, Ledger
from experiments.sweep.pool import worker_count

BEFORE = "estimate-before-run.csv"


def keep_estimate(benchmark: Benchmark) -> None:
    """Before a benchmark starts with no job in its storage, keep its estimate.csv as the estimate before the run."""
    made, kept, ledger = benchmark.folder / "estimate.csv", benchmark.folder / BEFORE, stored(benchmark)
    if made.exists() and (ledger is None or not ledger.states):
        atomic_write_text(kept, made.read_text(encoding="utf-8"))


def job_rows(benchmark: Benchmark, ledger: Ledger, sizes: pd.DataFrame) -> pd.DataFrame:
    """One row per settled job: its variant, its seconds at the steps it took by the estimate's timings of its
    size, and the seconds its run recorded."""
    timings = {(row["variant"], row["task"], row["size"]): Timing(row["step seconds"], row["eval seconds"],
                                                                   row["last eval seconds"])
               for _, row in sizes.iterrows()}
    rows = []
    for state in ledger.states.values():
        if state.state not in SETTLED or not state.result:
            continue
        timing = timings.get(size_of(benchmark, state.job))
        steps = state.result.get("steps") or 0
        at_steps = timing.job_seconds(benchmark.config(state.job).train, steps) if timing and steps else math.nan
        rows.append({"variant": state.job.variant, "stage": state.job.stage, "at steps": at_steps,
                     "measured": state.result.get("wall_seconds")})
    return pd.DataFrame(rows, columns=["variant", "stage", "at steps", "measured"])


def compare(benchmark: Benchmark, ledger: Ledger, sizes: pd.DataFrame, workers: int) -> pd.DataFrame:
    """The record's rows (the module docstring): what, estimated, at the steps each run took, measured, runs."""
    jobs = job_rows(benchmark, ledger, sizes)

    def row(what: str, estimated: float, group: pd.DataFrame) -> dict:
        return {"what": what, "estimated (s)": estimated, "at the steps each run took (s)": group["at steps"].sum(),
                "measured (s)": group["measured"].sum(), "runs measured": len(group)}

    by_variant = sizes.groupby("variant", sort=False)["seconds"].sum()
    rows = [row(f"variant {variant}", by_variant.get(variant, math.nan), group)
            for variant, group in jobs.groupby("variant", sort=False)]
    rows += [row(f"stage {stage}", sizes[f"{stage} seconds"].sum() if f"{stage} seconds" in sizes else math.nan,
                 group) for stage, group in jobs.groupby("stage", sort=False)]
    rows.append(row("every job", sizes["seconds"].sum(), jobs))
    rows.append({"what": f"wall time with {workers} workers", "estimated (s)": sizes["seconds"].sum() / workers,
                 "at the steps each run took (s)": jobs["at steps"].sum() / workers,
                 "measured (s)": ledger.busy_seconds(), "runs measured": len(jobs)})
    frame = pd.DataFrame(rows)
    numbers = ["estimated (s)", "at the steps each run took (s)", "measured (s)"]
    frame[numbers] = frame[numbers].round(0)
    device = benchmark.device if benchmark.device != "cpu" else \
        f"cpu ({os.cpu_count()} cores, {threads_per_worker(workers, 'cpu')} thread(s) per worker), torch " \
        f"{torch.__version__}"
    return frame.assign(profile=benchmark.profile, commit=git_commit() or "not recorded", device=device,
                        command=f"{schema.command(benchmark)} --estimate-check --workers {workers}",
                        source=f"written by the command from {BEFORE} and the benchmark's storage")


def run(benchmark: Benchmark, *, workers: int | None) -> int:
    """`attnlab benchmark --estimate-check`: print the comparison and write estimate-check.csv beside the journal;
    refused in one sentence where no estimate was kept before the run or a job has not settled."""
    before = benchmark.folder / BEFORE
    if not before.exists():
        raise OptionError(f"Benchmark {benchmark.name!r} has no estimate from before it ran ({before}); accepted: a "
                          "benchmark whose `--estimate` was made before its first job (`make benchmark-estimate`, "
                          "then `make benchmark`, with the same variables).")
    ledger = stored(benchmark)
    if ledger is None or not ledger.complete:
        raise OptionError(f"Benchmark {benchmark.name!r} has jobs that have not settled; accepted: a benchmark whose "
                          "every job has (run `make benchmark` with the same variables to finish it).")
    workers = worker_count(workers, benchmark.device, per_core=True)
    frame = compare(benchmark, ledger, pd.read_csv(before), workers)
    path = benchmark.folder / "estimate-check.csv"
    atomic_write_text(path, frame.to_csv(index=False))
    print(frame.drop(columns=["profile", "commit", "device", "command", "source"]).to_string(index=False),
          f"wrote {path}", sep="\n")
    return 0
