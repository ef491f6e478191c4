"""The parts of the chosen claims trained (`attnlab reproduce`), each a benchmark under the benchmark's machinery:
`WORKERS`, resuming (the same command continues) and `STORAGE` (every machine on one storage). When every job of a part
has settled, its storage is kept as the part's record (docs/records/claims/benchmark-claim-...journal), from which the
verdicts are read (`analysis.claims.reproductions`). With several workers on this machine the parts share one pool
(`experiments.claims.lanes`): a worker that finds nothing left to take in one part goes on to the next, so no worker
waits at the end of each part. `--estimate` times every part first and trains nothing, as the
benchmark's estimate does, and writes each part's table of sizes (estimate.csv) beside its journal.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from experiments import benchmark
from experiments.benchmark import estimate, record
from experiments.benchmark.command import header, worker_settings
from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import Ledger
from experiments.claims.lanes import Lanes
from experiments.slurm import Slurm
from experiments.sweep.pool import spawn_workers


def estimate_all(parts: list[Benchmark], workers: int, quiet: bool) -> str:
    """What every part left to run costs here, as `attnlab benchmark --estimate` measures a benchmark, summed; each
    part's table of sizes is written to its estimate.csv, as the benchmark's estimate writes it."""
    lines, total = [], 0.0
    for part in parts:
        sizes = estimate.estimate(part, workers=workers, quiet=quiet)
        estimate.write(part, sizes, workers)
        seconds = float(sizes["seconds"].sum())
        total += seconds
        lines.append(f"{part.name}: {estimate.duration(seconds)} of runs")
    return "\n".join([*lines, f"total: {estimate.duration(total)} of runs; with {workers} workers, about "
                      f"{estimate.duration(total / workers)} of wall time (every run its whole budget; more for the "
                      "starts and checkpoints the timing leaves out)"])


def train(parts: list[Benchmark], *, workers: int, storage: str | None, runs_dir: Path, quiet: bool, records: Path,
          slurm: Slurm | None = None) -> tuple[int, bool]:
    """Train every part that has not settled and keep each settled part as a record under `records`: the exit code (the
    highest of the parts' benchmarks; 130 at once after a signal) and whether the workers of some part were submitted
    to SLURM instead (the same command writes the page once they are done)."""
    if slurm is None and workers > 1 and len(parts) > 1:
        return pooled(parts, workers=workers, storage=storage, runs_dir=runs_dir, quiet=quiet, records=records), False
    exit_code, submitted = 0, False
    for part in parts:
        code, ledger = benchmark.run(part, workers=workers, quiet=quiet, slurm=slurm)
        if ledger is None:  # its workers submitted to SLURM: the same command writes the page once they are done
            submitted = True
            continue
        if code == 130:
            return 130, submitted
        exit_code = max(exit_code, code)
        if ledger.complete and storage is None:
            record.keep(part.name, runs_dir, records)
    return exit_code, submitted


def pooled(parts: list[Benchmark], *, workers: int, storage: str | None, runs_dir: Path, quiet: bool,
           records: Path) -> int:
    """Every part by one pool of `workers` processes (`Lanes`), each part's storage created first as `attnlab
    benchmark` creates it; each settled part kept as a record under `records`. The costliest parts (`cost`) go
    first, so that what the pool's last wave holds is short. 0 when every part has settled, 130 after a signal, 1
    otherwise."""
    parts = sorted(parts, key=cost, reverse=True)
    for part in parts:
        benchmark.open_study(part)
        print(header(part, workers), flush=True)
    lanes = Lanes(tuple(worker_settings(part, quiet) for part in parts), parts[0].device)
    codes = spawn_workers(lanes, workers, label="attnlab reproduce")
    exit_code = 130 if 130 in codes else 0 if all(code == 0 for code in codes) else 1
    for part in parts:
        if Ledger(part, benchmark.open_study(part).get_trials(deepcopy=False)).complete:
            if storage is None:
                record.keep(part.name, runs_dir, records)
        elif exit_code == 0:
            exit_code = 1
    return exit_code


def cost(part: Benchmark) -> tuple[float, int]:
    """What orders the pool's parts: the seconds of runs its estimate gave (`--estimate` writes estimate.csv in the
    part's folder; 0 where there is none), then the training steps of every job it plans (its tuning's at the
    fraction it trains), a stand-in that needs no timing."""
    path = part.folder / "estimate.csv"
    seconds = float(pd.read_csv(path)["seconds"].sum()) if path.is_file() else 0.0
    return seconds, sum(part.config(job).train.steps for job in part.planned_jobs())
