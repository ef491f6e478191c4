"""What a published claim trains (`make reproduce`): its parts, each a benchmark on the benchmark's machinery.

Every part is a benchmark (`Runs` -> `experiments.benchmark.definition.build`), named claim-<claim>-<part>, under the
benchmark's protocol 2 at the quick profile (docs/benchmark.md): every run trains its whole budget, no run stops at
a target, the events and the curve are read on the whole validation set, and a seed fixes the data order and the
initialisation for every variant, so that the variants of a part are paired by seed. Every cell trains at one fixed
learning rate, the task profile's: nothing is screened and every seed is a confirmation seed (`Runs.seeds` of them,
from seed 0); `--lr-multiples 1,3,9` screens the benchmark's grid on the validation set first, as the benchmark does.
A part that sweeps its paper's own grid (`SweptRuns`, the mad claim's and zoology's) screens that grid whatever
`--lr-multiples` says. A part's budget is its `steps` (the profile's where none), stated with the claim's reason
(`Claim.budget_why`) beside the paper's. The grid is not extended and cells keep their own sizes, as the papers
compare them (a claim that needs parity says so in its setting). A part on a task that declares itself not
discriminative at the quick profile (`Task.not_discriminative`) is not trained: its claim is inconclusive there, for
the task's reason (`untrained`).
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
LR_MULTIPLES = "1"  # one fixed learning rate per cell, the task profile's: the module docstring
PROFILE = "quick"
CLAIMS_PROTOCOL = 2  # the benchmark's protocol 2: every run its whole budget, paired seeds
SEEDS = 3  # a part's paired seeds unless its claim raises them (to its power number, where the budget allows)
# The test examples at each length of a part whose evaluations at long lengths are most of its cost: a quarter of the
# quick profiles', a 95% binomial error of at most ±0.04 on an accuracy (added to each paired test's interval),
# against effects of 0.16 and more in those claims.
LONG_TEST_SIZE = 608
LONG_TEST = f"task.test_size={LONG_TEST_SIZE}"
LONG_TEST_WHY = f"each length's test set is {LONG_TEST_SIZE:,} examples, a quarter of the profile's"  # budgets say
# A part with a budget of its own evaluates its held-out sets this many times, evenly, the last at its end: the rules
# read the end alone (every metric at the same step), so the interim evaluations of the profile would only cost.
EVALUATIONS = 2


@dataclass(frozen=True)
class Runs:
    """One benchmark a claim trains, named claim-<claim>-<part>: every variant on every task at the quick profile,
    with `sets` for every cell (`--set`), `seeds` paired seeds, a budget of `steps` training steps per run (None: the
    task profile's), and capacity points where a claim reads accuracy against width or count (none by default)."""

    part: str
    variants: tuple[str, ...]
    tasks: tuple[str, ...]
    sets: tuple[str, ...] = ()
    seeds: int = SEEDS
    steps: int | None = None
    capacity_widths: tuple[float, ...] = ()
    capacity_scales: tuple[float, ...] = ()

    @property
    def assignments(self) -> tuple[str, ...]:
        """Its `sets` with its budget first (`train.steps`, evaluated EVALUATIONS times), as every cell of its
        benchmark trains."""
        budget = () if self.steps is None else (f"train.steps={self.steps}",
                                                f"train.eval_every={max(1, self.steps // EVALUATIONS)}")
        return budget + self.sets


@dataclass(frozen=True)
class SweptRuns(Runs):
    """`Runs` whose cells tune `lr_multiples`, multiples of each task's learning rate at the claims' profile."""

    lr_multiples: tuple[float, ...] = ()


def own_grid(runs: Runs) -> tuple[float, ...] | None:
    """The learning-rate multiples a part sweeps whatever the command says; None: the command's."""
    return runs.lr_multiples if isinstance(runs, SweptRuns) else None


def claims_options(**given: Any) -> BenchmarkOptions:
    """The options of a claim's benchmark (the module docstring says how it is set): protocol 2 at the quick profile,
    from seed 0, one capacity seed, the grid not extended, cells at their own sizes; then `given`."""
    return resolved(BenchmarkOptions, {"protocol": CLAIMS_PROTOCOL, "profile": PROFILE, "seed": 0, "capacity_seeds": 1,
                                       "extend_grid": 0, "size_to_dense": False, **given})


def benchmark_of(claim: str, runs: Runs, *, device: str, storage: str | None, runs_dir: Path,
                 lr_multiples: str) -> Benchmark:
    """The benchmark that trains one part of claim `claim` (`claims_options`): at `lr_multiples` unless the part
    sweeps its own grid (`SweptRuns`), at the part's budget."""
    return build(claims_options(name=f"claim-{claim}-{runs.part}", variants=runs.variants, tasks=runs.tasks,
                                seeds=runs.seeds, lr_multiples=own_grid(runs) or parse_multiples(lr_multiples),
                                capacity_widths=runs.capacity_widths, capacity_scales=runs.capacity_scales,
                                sets=runs.assignments, storage_url=storage), device=device, runs_dir=runs_dir)


def untrained(runs: Runs) -> str | None:
    """Why a part is not trained: a task of it not discriminative at the claims' profile (its reason); else None."""
    return next((f"task {task} is not discriminative at the {PROFILE} profile: "
                 f"{tasks.task_class(task).not_discriminative[PROFILE]}" for task in runs.tasks
                 if PROFILE in tasks.task_class(task).not_discriminative), None)
