"""The bar of a benchmark's whole job list, above each run's own bar: jobs settled, running and left, and the
time left by the estimate where one was made (`attnlab benchmark --estimate` wrote RUNS_DIR/benchmark/NAME/
estimate.csv), else by the rate so far. Quiet mode (CI) shows no bar: a line per job says the same."""

from __future__ import annotations

from collections import Counter

import pandas as pd
from tqdm import tqdm

from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import RUNNING, SETTLED, Ledger


def estimated_seconds(benchmark: Benchmark) -> dict[tuple[str, str, str], float]:
    """Seconds of one job per (variant, task, size) from the benchmark's estimate.csv; empty without one."""
    path = benchmark.folder / "estimate.csv"
    if not path.exists():
        return {}
    sizes = pd.read_csv(path).dropna(subset=["job seconds"])
    return {(variant, task, size): float(seconds) for variant, task, size, seconds in
            zip(sizes["variant"], sizes["task"], sizes["size"], sizes["job seconds"], strict=True)}


def tally(ledger: Ledger) -> tuple[int, int, int]:
    """Jobs settled, running, and called for so far (those trials hold and those to queue next)."""
    states = [state for cell in ledger.cells for state in cell.jobs]
    settled = sum(state.state in SETTLED for state in states)
    running = sum(state.state == RUNNING for state in states)
    return settled, running, len(ledger.missing()) + len(states)


def status(ledger: Ledger) -> str:
    """`attnlab benchmark --status`: the jobs settled (by stage and state), running and left, and what comes next."""
    settled, running, called = tally(ledger)
    total = max(len(ledger.benchmark.planned_jobs()), called)
    states = ", ".join(f"{stage} {state} {count}" for (stage, state), count in sorted(ledger.counts().items()))
    benchmark = ledger.benchmark
    after = ("every job has settled: the command that started it writes the page" if ledger.complete else
             "the command that started it submits or starts workers for what is left")
    return (f"benchmark {benchmark.name}: {settled} of {total} jobs settled, {running} running, {total - settled} left "
            f"({states or 'no job yet'}); storage {benchmark.storage_shown}; {after}")


class JobBar:
    """tqdm over the jobs the protocol calls for; `update(ledger)` after each look at the storage."""

    def __init__(self, benchmark: Benchmark, *, quiet: bool) -> None:
        self.benchmark = benchmark
        self.seconds = estimated_seconds(benchmark)
        self.planned = Counter(self._size(job) for job in benchmark.planned_jobs())
        self.bar = tqdm(total=sum(self.planned.values()), desc=f"benchmark {benchmark.name}", unit="job",
                        disable=quiet, dynamic_ncols=True, position=0)

    def update(self, ledger: Ledger) -> None:
        settled, running, called = tally(ledger)
        self.bar.total = max(self.bar.total, called, settled)
        self.bar.update(settled - self.bar.n)
        figures = {"running": running, "left": self.bar.total - settled}
        if self.seconds:  # the planned jobs of each size that have not settled, at the estimate's seconds per job
            left = self.planned - Counter(self._size(state.job) for cell in ledger.cells for state in cell.jobs
                                          if state.state in SETTLED)
            hours = sum(self.seconds.get(size, 0.0) * count for size, count in left.items()) / 3600
            figures["estimate left"] = f"{hours:.1f} h of runs"
        self.bar.set_postfix(figures)

    def _size(self, job) -> tuple[str, str, str]:
        return job.variant, job.task, self.benchmark.stage(job.stage).size(job)

    def close(self) -> None:
        self.bar.close()
