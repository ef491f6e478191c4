"""What a published claim trains (`make reproduce`): its parts, each a benchmark on the benchmark's machinery.

Every part is a benchmark (`Runs` -> `experiments.benchmark.definition.build`), named claim-<claim>-<part>, at the
quick profile: stopping at validation accuracy 0.99, the test set read once per run. Every cell trains at one
learning rate, the task profile's, with 3 seeds (`analysis.claims.base` says why those are read as one cell's
seeds); `--lr-multiples 1,3,9` tunes the benchmark's grid on the validation set first, at twice the cost. A part that
sweeps its paper's own grid (`SweptRuns`, the mad claim's) tunes that grid whatever `--lr-multiples` says. The grid
is not extended and cells keep their own sizes, as the papers compare them (a claim that needs parity says so in its
setting). A part on a task that declares itself not discriminative at the quick profile (`Task.not_discriminative`)
is not trained: its claim is inconclusive there, for the task's reason (`untrained`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.schema import resolved
from experiments import tasks
from experiments.benchmark import record
from experiments.benchmark.definition import Benchmark, build
from experiments.schemas.benchmark import BenchmarkOptions, parse_multiples

RECORDS = record.RECORDS / "claims"
LR_MULTIPLES = "1"  # one learning rate per cell, the task profile's: the module docstring
PROFILE = "quick"
CLAIMS_PROTOCOL = 1  # the benchmark's protocol 1: one learning rate, every run stopping at the target


@dataclass(frozen=True)
class Runs:
    """One benchmark a claim trains, named claim-<claim>-<part>: every variant on every task at the quick profile,
    with `sets` for every cell (`--set`), `seeds` confirmation seeds (with the tuning seed, 3 seeds read at one
    learning rate), and capacity points where a claim reads accuracy against width or count (none by default)."""

    part: str
    variants: tuple[str, ...]
    tasks: tuple[str, ...]
    sets: tuple[str, ...] = ()
    seeds: int = 2
    capacity_widths: tuple[float, ...] = ()
    capacity_scales: tuple[float, ...] = ()


@dataclass(frozen=True)
class SweptRuns(Runs):
    """`Runs` whose cells tune `lr_multiples`, multiples of each task's learning rate at the claims' profile."""

    lr_multiples: tuple[float, ...] = ()


def own_grid(runs: Runs) -> tuple[float, ...] | None:
    """The learning-rate multiples a part sweeps whatever the command says; None: the command's."""
    return runs.lr_multiples if isinstance(runs, SweptRuns) else None


def claims_options(**given: Any) -> BenchmarkOptions:
    """The options of a claim's benchmark (the module docstring says how it is set): protocol 1's (its target and its
    interim validation) at the quick profile, from seed 0, one capacity seed, the grid not extended, cells at their own
    sizes; then `given`."""
    return resolved(BenchmarkOptions, {"protocol": CLAIMS_PROTOCOL, "profile": PROFILE, "seed": 0, "capacity_seeds": 1,
                                       "extend_grid": 0, "size_to_dense": False, **given})


def benchmark_of(claim: str, runs: Runs, *, device: str, storage: str | None, runs_dir: Path,
                 lr_multiples: str) -> Benchmark:
    """The benchmark that trains one part of claim `claim` (`claims_options`): at `lr_multiples` unless the part
    sweeps its own grid (`SweptRuns`)."""
    return build(claims_options(name=f"claim-{claim}-{runs.part}", variants=runs.variants, tasks=runs.tasks,
                                seeds=runs.seeds, lr_multiples=own_grid(runs) or parse_multiples(lr_multiples),
                                capacity_widths=runs.capacity_widths, capacity_scales=runs.capacity_scales,
                                sets=runs.sets, storage_url=storage), device=device, runs_dir=runs_dir)


def untrained(runs: Runs) -> str | None:
    """Why a part is not trained: a task of it not discriminative at the claims' profile (its reason); else None."""
    return next((f"task {task} is not discriminative at the {PROFILE} profile: "
                 f"{tasks.task_class(task).not_discriminative[PROFILE]}" for task in runs.tasks
                 if PROFILE in tasks.task_class(task).not_discriminative), None)
