"""What a claim is: a published number or ordering, the setting it was measured in, attnlab's own setting at CPU
scale with each difference stated, the runs that measure it, and the rule, written before the runs, that reads a
verdict from their intervals (`make reproduce`, docs/reproductions.md).

A claim is one file in `analysis/claims/`: a `Claim` subclass with `@register_claim("name")`. Its `runs` are
benchmarks on the benchmark's machinery (`Runs`: cells of variants x tasks, `experiments.claims.parts`), so workers,
resuming and `STORAGE` are the benchmark's, under its protocol 2: every run trains the budget its part states, and
the variants of a part are paired by seed. By default a claim trains every cell at one fixed learning rate, the task
profile's (`make reproduce` without `--lr-multiples`): nothing is screened and every seed is read (`Results`). With a
grid (`--lr-multiples 0.3,1,3`, or a part's own, `SweptRuns`), a screen chooses on the validation set and only the
fresh confirmation seeds are read, as on the leaderboard. Protocol 1's records (one tuning run read as a seed beside
the confirmation's) still read (`read_runs`). A claim that needs no training (a property of the formula at
initialisation) has no runs and measures in `verdict` itself. `verdict(results)` returns one of three outcomes:

- "reproduced": the measured intervals say what the paper says, by the claim's rule;
- "not reproduced": they say otherwise, by the same rule; a result, not a bug: the page says what differs;
- "inconclusive": the rule cannot decide (an interval too wide, a run missing, a cell at chance).

A rule is made of checks, each "yes", "no" or "undecided"; a check whose cells all sit at chance or all at the
ceiling reads "inconclusive (floor)" or "inconclusive (ceiling)" instead (`at_edge`: the benchmark's rule, a mean at
most EDGE above chance or within EDGE of 1, `analysis.benchmark.contrasts.accuracy_edge`). A check that a paper's
"equal", "closes the gap", "holds" or "at least as" rests on is decided by two one-sided tests against a margin the
claim states before its runs (`within_margin`): "yes" only where the test shows the difference inside the margin, never
because a difference was not significant. Each claim declares the effect its paper reports (`effect`, in accuracy
at attnlab's setting, `effect_why` saying why), and its verdict states its power (`Power`): how many paired seeds
its decisive comparison needs to detect that effect, from the seed variance its records measured.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from analysis.benchmark.contrasts import EDGE, POWER, accuracy_edge
from analysis.benchmark.stages import chance_of, seed_scores
from analysis.benchmark.verdicts import ALPHA, Comparison, paired_test
from common.statistics import MOST_PAIRS, MeanInterval, margin_test, mean_interval, pairs_to_detect, t_half_width
from experiments.benchmark.ledger import COMPLETED, SETTLED, Ledger
from experiments.claims.parts import Runs

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
Check = bool | str | None  # a check of a rule: True (yes), False (no), None (undecided), or the edge a cell sits at
EDGES = (f"a check whose cells all lie at most {EDGE:g} above chance (or below it) reads inconclusive (floor), one "
         f"whose cells all lie within {EDGE:g} of 1 inconclusive (ceiling)")


@dataclass(frozen=True)
class Verdict:
    outcome: str  # REPRODUCED, NOT_REPRODUCED or INCONCLUSIVE
    ours: str  # what attnlab measured, as the page shows it: means and intervals over seeds
    why: str  # the rule as it applied to these figures, one or two sentences
    power: str = ""  # the seeds its decisive comparison needs to detect the paper's effect (`Power`)
    stale: bool = False  # read from records kept under another definition than the claim's today


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

    def scored(self, part: str, variant: str, task: str,
               read: Callable[[dict[str, Any]], float | None] | None = None) -> tuple[dict[int, float], float]:
        """A cell as `above` and `at_edge` read it: its test accuracy by seed (`figure` with `read`), and its chance."""
        figures = self.test(part, variant, task) if read is None else self.figure(part, variant, task, read)
        return figures, self.chance(part, variant, task)

    def chance(self, part: str, variant: str, task: str, point: tuple[str, int] | None = None) -> float:
        """The task's chance accuracy in a cell's runs, or at one of its capacity points `point` (axis, value), where
        a count option may change it (MQAR's 1 / num_pairs)."""
        state = self._cell(part, variant, task)
        if state is None:
            return math.nan
        if point is None:
            return chance_of(state)
        return next((job.result["chance_accuracy"] for job in state.capacity if job is not None and job.result
                     and (job.job.axis, job.job.value) == point and job.result.get("chance_accuracy") is not None),
                    math.nan)

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


def _compared(a: dict[int, float], b: dict[int, float], test_size: float) -> Comparison | None:
    """a - b over the seeds both scored by the benchmark's paired test (`analysis.benchmark.verdicts.paired_test`, the
    test set's binomial error included; math.inf leaves it out); None below two shared seeds."""
    seeds = sorted(set(a) & set(b))
    if len(seeds) < 2:
        return None
    return paired_test([a[seed] for seed in seeds], [b[seed] for seed in seeds], test_size)


def paired(a: dict[int, float], b: dict[int, float], test_size: float) -> tuple[float, float, float] | None:
    """a - b over the seeds both scored: (mean difference, low, high) of its 95% interval (`_compared`); None below
    two shared seeds."""
    comparison = _compared(a, b, test_size)
    return None if comparison is None else (comparison.difference, comparison.low, comparison.high)


@dataclass(frozen=True)
class Margin:
    """a - b against a margin (`within_margin`): the check it gives, and the mean difference with its (1 - 2 ALPHA)
    interval, the interval whose lying inside the margin is the two one-sided tests' "yes" (NaN: not measured)."""

    holds: Check
    difference: float = math.nan
    low: float = math.nan
    high: float = math.nan

    def __str__(self) -> str:
        if math.isnan(self.difference):
            return "not measured"
        return f"{self.difference:+.3f} [{1 - 2 * ALPHA:.0%}: {self.low:+.3f}, {self.high:+.3f}]"


def within_margin(a: tuple[dict[int, float], float], b: tuple[dict[int, float], float], test_size: float,
                  margin: float, *, one_sided: bool = False) -> Margin:
    """Whether a - b lies within `margin` of 0 (equivalence: two one-sided tests at level ALPHA) or, `one_sided`,
    above -margin (non-inferiority: a at least as high as b, less the margin), for two cells (`Results.scored`) over
    the seeds both scored, by the paired test of `paired` (`common.statistics.margin_test`): True where the tests
    show it, False where the opposite one-sided test shows a - b beyond the margin, None otherwise or below two
    shared seeds; the edge where both cells sit at the floor or the ceiling (`at_edge`)."""
    comparison, edge = _compared(a[0], b[0], test_size), at_edge(a, b)
    if comparison is None:
        return Margin(edge)
    estimate, error = comparison.difference, comparison.standard_error
    test = margin_test(estimate, error, comparison.degrees_of_freedom, -margin, math.inf if one_sided else margin)
    beyond = 1 - test.p_above < ALPHA or 1 - test.p_below < ALPHA
    half = t_half_width(error, comparison.degrees_of_freedom, 1 - 2 * ALPHA)
    return Margin(edge or (True if test.p < ALPHA else False if beyond else None), estimate, estimate - half,
                  estimate + half)


def at_least(margin: float) -> str:
    """How a rule says "at least as" with `margin` (`within_margin`, one-sided), in its words."""
    return (f"less a margin of {margin:g}, by a one-sided non-inferiority test at level {ALPHA:g} (the "
            f"{1 - 2 * ALPHA:.0%} interval of the difference above -{margin:g})")


@dataclass(frozen=True)
class Power:
    """How many paired seeds a decisive comparison needs to detect `effect` with probability POWER at level ALPHA
    (`common.statistics.pairs_to_detect`; a one-sided test for non-inferiority, where the effect is the margin),
    from the standard deviation of its differences measured over `measured` seeds."""

    effect: float
    std: float
    measured: int
    one_sided: bool = False

    @property
    def seeds(self) -> int | None:
        if self.measured < 2 or math.isnan(self.std):
            return None
        return pairs_to_detect(self.effect, self.std, ALPHA, POWER, "larger" if self.one_sided else "two-sided")

    def __str__(self) -> str:
        if self.measured < 2 or math.isnan(self.std):
            return f"power: not measured (its differences over {self.measured} seeds)"
        count = f"{self.seeds} seeds" if self.seeds else f"more than {MOST_PAIRS} seeds"
        return (f"power: {count} would detect {self.effect:g} at {POWER:.0%} (the differences' standard deviation "
                f"{self.std:.3f} over {self.measured} seeds)")


def paired_power(a: dict[int, float], b: dict[int, float], effect: float, *, one_sided: bool = False) -> Power:
    """The `Power` of the comparison a - b, from its differences over the seeds both scored."""
    seeds = sorted(set(a) & set(b))
    differences = [a[seed] - b[seed] for seed in seeds]
    spread = statistics.stdev(differences) if len(differences) > 1 else math.nan
    return Power(effect, spread, len(differences), one_sided)


def at_edge(*cells: tuple[dict[int, float], float]) -> str | None:
    """AT_FLOOR ("floor") or AT_CEILING ("ceiling") where every cell, (its figures by seed, its task's chance), has
    its mean there (`analysis.benchmark.contrasts.accuracy_edge`: at most EDGE above chance, or within EDGE of 1): a
    check that reads only such cells cannot discriminate; None where one can, or one is not measured."""
    if not cells or not all(values for values, _ in cells):
        return None
    edges = {accuracy_edge(statistics.fmean(values.values()), chance) for values, chance in cells}
    return edges.pop() if len(edges) == 1 and "" not in edges else None


def sign(difference: tuple[float, float, float] | None) -> int | None:
    """+1 where a paired difference's interval lies above 0, -1 below, 0 where it holds 0; None unmeasured."""
    if difference is None:
        return None
    _, low, high = difference
    return 1 if low > 0 else -1 if high < 0 else 0


def above(difference: tuple[float, float, float] | None, *cells: tuple[dict[int, float], float]) -> Check:
    """The check "a above b" of a paired difference a - b (`paired`): True where its interval lies above 0, False
    where below, None where it holds 0 or is not measured; the edge instead where `cells`, the two cells it reads
    (`Results.scored`), both sit at the floor or at the ceiling (`at_edge`)."""
    direction = sign(difference)
    return at_edge(*cells) or (None if direction in (None, 0) else direction > 0)


def decided(checks: dict[str, Check]) -> str:
    """The outcome of a rule made of checks, each True (holds), False (fails), None (cannot be decided) or an edge
    (its cells at the floor or the ceiling: cannot be decided either): not reproduced where one fails, inconclusive
    where none fails but one cannot be decided, else reproduced."""
    if any(check is False for check in checks.values()):
        return NOT_REPRODUCED
    return REPRODUCED if all(check is True for check in checks.values()) else INCONCLUSIVE


def _check_text(check: Check) -> str:
    if isinstance(check, str):
        return f"inconclusive ({check})"
    return "yes" if check else "no" if check is False else "undecided"


def checks_text(checks: dict[str, Check]) -> str:
    return "; ".join(f"{what}: {_check_text(check)}" for what, check in checks.items())


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
    effect: ClassVar[float] = math.nan  # a claim with runs: the effect its paper reports, in accuracy at our setting
    effect_why: ClassVar[str] = ""  # why that effect, in a sentence
    budget_why: ClassVar[str] = ""  # a claim with runs: why its parts train the steps and seeds they do, in a sentence

    def verdict(self, results: Results) -> Verdict:
        raise NotImplementedError

    def power(self, a: dict[int, float], b: dict[int, float], *, one_sided: bool = False) -> Power:
        """The `Power` of its decisive comparison a - b at the claim's `effect`."""
        return paired_power(a, b, self.effect, one_sided=one_sided)

    def ruled(self, checks: dict[str, Check], ours: str, power: Power) -> Verdict:
        """The verdict of a rule made of checks (`decided`), its power stated, and named in the why of an
        inconclusive one: the seeds at which its decisive comparison would decide."""
        outcome = decided(checks)
        why = checks_text(checks) + (f"; {power}" if outcome == INCONCLUSIVE else "")
        return Verdict(outcome, ours, why, str(power))
