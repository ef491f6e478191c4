"""What a claim is: a published number or ordering, the setting it was measured in, attnlab's own setting at CPU
scale with each difference stated, the runs that measure it, and the rule, written before the runs, that reads a
verdict from their intervals (`make reproduce`, docs/reproductions.md).

A claim is one file in `analysis/claims/`: a `Claim` subclass with `@register_claim("name")`. Its `runs` are
benchmarks on the benchmark's machinery (`Runs`: cells of variants x tasks, `experiments.benchmark`), so workers,
resuming and `STORAGE` are the benchmark's. By default a claim trains every cell at one learning rate, the task
profile's (`make reproduce` without `--lr-multiples`): tuning then selects nothing, so its run (seed 0) is a seed
like the confirmation's and a cell's figures are read over both (`Results`), 3 seeds for the cost of 3 runs. With a
grid (`--lr-multiples 0.3,1,3`), tuning chooses on the validation set and only the fresh confirmation seeds are read,
as on the leaderboard. A
claim that needs no training (a property of the formula at initialisation) has no runs and measures in
`verdict` itself. `verdict(results)` returns one of three outcomes:

- "reproduced": the measured intervals say what the paper says, by the claim's rule;
- "not reproduced": they say otherwise, by the same rule; a result, not a bug: the page says what differs;
- "inconclusive": the rule cannot decide (an interval too wide, a run missing, a cell at chance).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from analysis.benchmark_stages import chance_of, seed_scores
from analysis.verdicts import paired_test
from common.statistics import MeanInterval, mean_interval
from experiments.benchmark import Ledger
from experiments.benchmark.ledger import COMPLETED, SETTLED

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"


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
class Verdict:
    outcome: str  # REPRODUCED, NOT_REPRODUCED or INCONCLUSIVE
    ours: str  # what attnlab measured, as the page shows it: means and intervals over seeds
    why: str  # the rule as it applied to these figures, one or two sentences


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds and the half-width of its 95% interval (Student's t; NaN below two seeds)."""

    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def half(self) -> float:
        return self._interval.half_width if self._interval else math.nan

    @property
    def low(self) -> float:
        return self._interval.low if self._interval else math.nan

    @property
    def high(self) -> float:
        return self._interval.high if self._interval else math.nan

    @functools.cached_property
    def _interval(self) -> MeanInterval | None:
        return mean_interval(self.values) if len(self.values) > 1 else None

    def __str__(self) -> str:
        if not self.values:
            return "not measured"
        if len(self.values) < 2:
            return f"{self.mean:.3f} (n=1)"
        return f"{self.mean:.3f} ± {self.half:.3f} (n={len(self.values)})"


def read_runs(state) -> list:
    """The runs of a cell whose figures a claim reads: its confirmation runs, and its tuning run where tuning had one
    learning rate to try (it selected nothing, so that run is one more seed at the same learning rate); None where
    a job is not queued yet, as in the cell's own lists."""
    return [*(state.tuning if len(state.tuning) == 1 else []), *state.confirmation]


class Results:
    """The settled jobs of a claim's runs, by part: per-seed figures of a cell's runs (`read_runs`; a seed whose
    run diverged or failed scored at chance, as on the benchmark's leaderboard) and of its capacity points."""

    def __init__(self, ledgers: dict[str, Ledger]) -> None:
        self.ledgers = ledgers

    def _cell(self, part: str, variant: str, task: str):
        ledger = self.ledgers.get(part)
        return next((state for state in ledger.cells if (state.cell.variant, state.cell.task) == (variant, task)),
                    None) if ledger is not None else None

    def test(self, part: str, variant: str, task: str) -> dict[int, float]:
        """Test accuracy by seed (`read_runs`)."""
        state = self._cell(part, variant, task)
        return seed_scores(read_runs(state), chance_of(state)) if state is not None else {}

    def figure(self, part: str, variant: str, task: str, read: Callable[[dict[str, Any]], float | None]) -> dict[
            int, float]:
        """Any figure of a run's result (`read_runs`: an accuracy at a length, on a split) by seed: `read` takes
        the result and gives the figure (None where the run did not measure it: left out); a seed whose run did
        not complete scores the task's chance."""
        state = self._cell(part, variant, task)
        if state is None:
            return {}
        chance, figures = chance_of(state), {}
        for job in read_runs(state):
            if job is not None and job.state in SETTLED:
                figures[job.job.seed] = read(job.result or {}) if job.state == COMPLETED else chance
        return {seed: value for seed, value in figures.items() if value is not None}  # None: not measured

    def capacity(self, part: str, variant: str, task: str, axis: str, value: int) -> dict[int, float]:
        """Test accuracy by capacity seed at one capacity point (`axis` "width" or the task's count option)."""
        state = self._cell(part, variant, task)
        if state is None:
            return {}
        jobs = [job for job in state.capacity if job is not None and (job.job.axis, job.job.value) == (axis, value)]
        return seed_scores(jobs, chance_of(state))

    def chance(self, part: str, variant: str, task: str) -> float:
        state = self._cell(part, variant, task)
        return chance_of(state) if state is not None else math.nan

    def test_size(self, part: str, task: str) -> float:
        """The examples of the task's test set in that part's runs: the binomial term of a paired test."""
        ledger = self.ledgers.get(part)
        cell = next((cell for cell in ledger.benchmark.cells if cell.task == task), None) if ledger else None
        if cell is None:
            return math.nan
        jobs = [job for state in ledger.cells if state.cell is cell for job in state.called]
        return float(ledger.benchmark.config(jobs[0]).task_options.test_size) if jobs else math.nan


def estimate(by_seed: dict[int, float]) -> Estimate:
    return Estimate(tuple(by_seed[seed] for seed in sorted(by_seed)))


def paired(a: dict[int, float], b: dict[int, float], test_size: float) -> tuple[float, float, float] | None:
    """a - b over the seeds both scored: (mean difference, low, high) of its 95% interval by the benchmark's paired
    test (`analysis.verdicts.paired_test`, the test set's binomial error included; math.inf leaves it out); None
    below two shared seeds."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return None
    comparison = paired_test([a[seed] for seed in seeds], [b[seed] for seed in seeds], test_size)
    return comparison.difference, comparison.low, comparison.high


def sign(difference: tuple[float, float, float] | None) -> int | None:
    """+1 where a paired difference's interval lies above 0, -1 below, 0 where it holds 0; None unmeasured."""
    if difference is None:
        return None
    _, low, high = difference
    return 1 if low > 0 else -1 if high < 0 else 0


def decided(checks: dict[str, bool | None]) -> str:
    """The outcome of a rule made of checks, each True (holds), False (fails) or None (cannot be decided):
    not reproduced where one fails, inconclusive where none fails but one cannot be decided, else reproduced."""
    if any(check is False for check in checks.values()):
        return NOT_REPRODUCED
    return INCONCLUSIVE if any(check is None for check in checks.values()) else REPRODUCED


def checks_text(checks: dict[str, bool | None]) -> str:
    return "; ".join(f"{what}: {'yes' if ok else 'no' if ok is False else 'undecided'}" for what, ok in checks.items())


def shown(difference: tuple[float, float, float] | None) -> str:
    if difference is None:
        return "not measured"
    mean, low, high = difference
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


class Claim:
    """A published claim and the rule that decides whether attnlab's measurement reproduces it."""

    name: ClassVar[str]  # set by @register_claim
    source: ClassVar[str]  # authors, year, title; table or figure
    claimed: ClassVar[str]  # their number or ordering, as published
    read: ClassVar[str]  # where the number was read: "Table 1", or a plot and how precisely
    their_setting: ClassVar[str]  # the setting the paper measured in
    our_setting: ClassVar[str]  # attnlab's, at CPU scale, each difference stated
    rule: ClassVar[str]  # the verdict rule in words, fixed before the run
    runs: ClassVar[tuple[Runs, ...]] = ()

    def verdict(self, results: Results) -> Verdict:
        raise NotImplementedError
