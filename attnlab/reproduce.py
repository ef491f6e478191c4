"""`make reproduce` (`attnlab reproduce`): each published claim (`analysis.claims`) beside attnlab's own measurement.
The parts of the chosen claims are trained as benchmarks (`experiments.claims`), each settled one kept as a record;
then the verdicts are read from the records into the page and docs/reproductions.md
(`analysis.claims.reproductions`).
"""

from __future__ import annotations

from pathlib import Path

from analysis.claims.reproductions import DOC, chosen, write
from experiments.claims import training
from experiments.claims.parts import LR_MULTIPLES, RECORDS, benchmark_of, untrained
from experiments.slurm import Slurm
from experiments.sweep.pool import worker_count


def run(names: str | None, *, workers: int | None, device: str, storage: str | None, runs_dir: Path, out: Path,
        quiet: bool, estimate_only: bool = False, records: Path = RECORDS, doc: Path = DOC,
        lr_multiples: str | None = None, slurm: Slurm | None = None) -> int:
    """`attnlab reproduce`: train every part of the chosen claims that has not settled (a part on a task not
    discriminative at the profile: none, `untrained`), keep each settled claim's parts as records, then write the page
    and docs/reproductions.md. 0 when every chosen claim has a verdict from settled runs, 130 after a signal, 1
    otherwise."""
    parts = [benchmark_of(claim.name, runs, device=device, storage=storage, runs_dir=runs_dir,
                          lr_multiples=lr_multiples or LR_MULTIPLES)
             for claim in chosen(names) for runs in claim.runs if untrained(runs) is None]
    count = worker_count(workers, device, per_core=slurm is None)
    if estimate_only:
        print(training.estimate_all(parts, count, quiet))
        return 0
    exit_code, submitted = training.train(parts, workers=count, storage=storage, runs_dir=runs_dir, quiet=quiet,
                                          records=records, slurm=slurm)
    if submitted or exit_code == 130:  # submitted: the same command writes the page once every part has settled
        return exit_code
    print(f"wrote {write(out, records, doc)} and {doc}")
    return exit_code
