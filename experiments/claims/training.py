"""The parts of the chosen claims trained (`attnlab reproduce`), each a benchmark under the benchmark's machinery:
`WORKERS`, resuming (the same command continues) and `STORAGE` (every machine on one storage). When every job of a part
has settled, its storage is kept as the part's record (docs/records/claims/benchmark-claim-...journal), from which the
verdicts are read (`analysis.claims.reproductions`). `--estimate` times every part first and trains nothing, as the
benchmark's estimate does, and writes each part's table of sizes (estimate.csv) beside its journal.
"""

from __future__ import annotations

from pathlib import Path

from experiments import benchmark
from experiments.benchmark import estimate, record
from experiments.benchmark.definition import Benchmark
from experiments.slurm import Slurm


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
