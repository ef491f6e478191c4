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

from common.files import atomic_write_text
from experiments import benchmark
from experiments.benchmark import estimate, record
from experiments.benchmark.command import header, worker_settings
from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import Ledger
from experiments.claims.lanes import Lanes
from experiments.slurm import Slurm
from experiments.sweep.pool import spawn_workers

ESTIMATE_RECORD = "claims-estimate-record.csv"  # beside the parts' folders; docs/records/claims/estimate.csv kept


def estimate_all(parts: list[Benchmark], workers: int, quiet: bool) -> str:
    """What every part left to run costs here, as `attnlab benchmark --estimate` measures a benchmark, summed; each
    part's table of sizes is written to its estimate.csv, as the benchmark's estimate writes it, and the whole as one
    record (`combined`) to ESTIMATE_RECORD in the runs folder's benchmark folder, for docs/records/claims/."""
    lines, total, rows = [], 0.0, []
    for part in parts:
        sizes = estimate.estimate(part, workers=workers, quiet=quiet)
        estimate.write(part, sizes, workers)
        rows.append(estimate.record_rows(sizes, part, workers))
        seconds = float(sizes["seconds"].sum())
        total += seconds
        lines.append(f"{part.name}: {estimate.duration(seconds)} of runs")
    if parts:
        path = parts[0].folder.parent / ESTIMATE_RECORD
        atomic_write_text(path, combined([part.name for part in parts], rows, workers).to_csv(index=False))
        lines.append(f"wrote {path}")
    return "\n".join([*lines, f"total: {estimate.duration(total)} of runs; with {workers} workers, about "
                      f"{estimate.duration(total / workers)} of wall time (every run its whole budget; more for the "
                      "starts and checkpoints the timing leaves out)"])


def combined(names: list[str], records: list[pd.DataFrame], workers: int) -> pd.DataFrame:
    """The parts' estimate records (`estimate.record_rows`, in the order of `names`) as one: each part's jobs and
    hours of runs ("part NAME"), then every job and the wall time with `workers`, with the first part's provenance
    and the command that made it."""
    every = [frame.set_index("what").loc["every job"] for frame in records]
    rows = [(f"part {name}", int(row["jobs"]), float(row["hours"])) for name, row in zip(names, every, strict=True)]
    hours = sum(float(row["hours"]) for row in every)
    rows += [("every job", sum(int(row["jobs"]) for row in every), hours),
             (f"wall time with {workers} workers", "", hours / workers)]
    first = records[0].iloc[0]
    return pd.DataFrame([{"what": what, "jobs": jobs, "hours": f"{hours:.2f}", "profile": first["profile"],
                          "commit": first["commit"], "device": first["device"],
                          "command": f"attnlab reproduce --estimate --workers {workers}",
                          "source": f"written by the command ({ESTIMATE_RECORD})"} for what, jobs, hours in rows])


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
