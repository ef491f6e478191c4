"""The stages of the benchmark's protocol, each one object (`Stage`): its name (the first part of its jobs' keys
in the storage: `tune/...`, `confirm/...`, `capacity/...`), when a cell is ready for it, which jobs it queues,
what its jobs change in the cell's run, the size at which the estimate times a job, how the command's header and
the page's protocol state it, and the key of the page section that shows it (the sections are the analysis
layer's, `analysis.benchmark.stages`, found there by that key; this layer does not import them).

A benchmark runs its stages (`Benchmark.stages`; by default tuning, confirmation and capacity) in order, cell by
cell: the ledger asks each stage whether the cell is ready for it, given the jobs the stages before it queued and
how they stand, and calls for its jobs when it is; the estimate counts every stage's jobs at the size each trains
at; the page shows each stage's section. A new stage is a subclass with a name, a title, a page key, `ready` and
`jobs` (and `changes` and `size` where its runs differ from the cell's own), named in `STAGES` (and in
`DEFAULT_STAGES` where every benchmark should run it).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

from experiments import tasks
from experiments.run.config import RunConfig
from experiments.tasks import presets as task_presets

# A stage reads the benchmark that holds it (`experiments.benchmark.definition.Benchmark`), its cells (`Cell`) and
# a cell's state in the ledger (`experiments.benchmark.ledger.CellState`); those modules are built on the stages,
# so the stages take them as they come (typed Any here), and no import runs back up to them.

TUNE, CONFIRM, CAPACITY = "tune", "confirm", "capacity"  # the built-in stages' names, as stored in job keys


@dataclass(frozen=True)
class Job:
    """One run of the protocol: a variant on a task at a learning rate with a seed, in a stage (its name), at the
    cell's own size or, for a capacity job, at its point's `axis` = `value`."""

    stage: str
    variant: str
    task: str
    lr: float
    seed: int
    axis: str | None = None
    value: int | None = None

    @property
    def key(self) -> str:
        """What names the job in the storage: two trials with one key are one job."""
        size = f"/{self.axis}={self.value}" if self.axis is not None else ""
        return f"{self.stage}/{self.task}/{self.variant}/lr={self.lr!r}/seed={self.seed}{size}"

    def to_attr(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_attr(cls, value: Any) -> Job | None:
        """The job a trial's `job` user attribute names, or None when it names none."""
        if not isinstance(value, dict) or set(value) != {field.name for field in dataclasses.fields(cls)}:
            return None
        return cls(**value)


class Stage:
    """One stage of the protocol. The defaults suit a stage whose runs train at the cell's own size."""

    name: str  # the first part of its jobs' keys in the storage: never renamed once a benchmark has stored jobs
    title: str  # how the page and the header name it
    page: str  # the key of the page section that shows it (`analysis.benchmark.stages.SECTIONS`)

    def ready(self, state: Any) -> bool:
        """Whether the protocol calls for this stage's jobs of the cell now (`state`: the stages before it)."""
        raise NotImplementedError

    def jobs(self, benchmark: Any, cell: Any, lr: float | None = None) -> list[Job]:
        """The jobs of the cell in this stage, at `lr`, the learning rate tuning chose (None before it has)."""
        raise NotImplementedError

    def further(self, benchmark: Any, state: Any) -> list[Job]:
        """The jobs the stage calls for beyond `jobs` now that the cell's jobs stand as `state` says (tuning's
        learning rates beyond an edge of the grid); asked again after each that it calls for, until none."""
        return []

    def planned(self, benchmark: Any, cell: Any, stand_in: float) -> list[Job]:
        """The jobs the estimate counts before the benchmark runs: `jobs` at `stand_in`, the grid's middle learning
        rate (what a job costs does not depend on its learning rate)."""
        return self.jobs(benchmark, cell, stand_in)

    def changes(self, benchmark: Any, job: Job, own: RunConfig) -> tuple[tuple[str, Any], ...]:
        """The settings a job of this stage changes in its cell's own run config `own` (('model.dim', 128), ...)."""
        return ()

    def size(self, job: Job) -> str:
        """The size a job trains at, as the estimate names it: the jobs of a cell at one size cost alike."""
        return "own"

    def skipped(self, cell: Any) -> list[tuple[str, str]]:
        """The sizes of the cell this stage cannot train, as (size, reason)."""
        return []

    def header(self, benchmark: Any) -> list[str]:
        """The lines that state the stage when the benchmark starts."""
        return [f"{self.name}: {self.title}"]

    def protocol(self, benchmark: Any) -> str:
        """The stage as the page's protocol states it."""
        return f"{self.title}."


def _listed(values: Any, shown: Any = str) -> str:
    return ", ".join(map(shown, values))


class Tuning(Stage):
    """Each cell once per learning rate of the grid and tuning seed (`Benchmark.tuning_seeds`: one under protocol 1,
    a screen of two or more over a fraction of the budget under protocol 2, none at a fixed rate); where the best
    lies at an edge of the grid, the next multiple beyond that edge, while the best stays at the edge, up to
    `extend_grid` of them; the learning rate whose runs reach the highest mean validation accuracy is chosen
    (`CellState.best_lr`). Under a target, a run that can no longer be chosen because a sibling reached the target
    sooner stops there (`ledger.outdone`). Under protocol 2 no run stops early: a screening run's last accuracy can
    still rise."""

    name, title, page = TUNE, "Tuning", "tuning"

    def ready(self, state: Any) -> bool:
        return True

    def jobs(self, benchmark: Any, cell: Any, lr: float | None = None) -> list[Job]:
        return self._screened(benchmark, cell, benchmark.learning_rates(cell))

    def _screened(self, benchmark: Any, cell: Any, rates: list[float]) -> list[Job]:
        """A job per learning rate of `rates` and tuning seed."""
        return [Job(self.name, cell.variant, cell.task, rate, seed) for rate in rates
                for seed in benchmark.tuning_seeds]

    def changes(self, benchmark: Any, job: Job, own: RunConfig) -> tuple[tuple[str, Any], ...]:
        """A screening run trains its share of the profile's steps (its schedule compressed to them)."""
        steps = benchmark.screen_steps(own.train.steps)
        return (("train.steps", steps),) if steps != own.train.steps else ()

    def further(self, benchmark: Any, state: Any) -> list[Job]:
        """Once tuning has settled with its best at the top (bottom) edge of what it tuned: the next multiple
        beyond that edge (`Benchmark.beyond`), unless `extend_grid` multiples were added already."""
        tuned, best, grid = state.learning_rates, state.best_lr, benchmark.learning_rates(state.cell)
        if best is None or len(tuned) - len(grid) >= benchmark.extend_grid or best not in (min(tuned), max(tuned)):
            return []
        top = best == max(tuned)
        beyond = sum(rate > max(grid) if top else rate < min(grid) for rate in tuned)
        return self._screened(benchmark, state.cell,
                              benchmark.learning_rates(state.cell, (benchmark.beyond(top, beyond + 1),)))

    def header(self, benchmark: Any) -> list[str]:
        if benchmark.fixed_rate:
            return [f"tuning: none; one fixed learning rate, {benchmark.lr_multiples[0]!r} x each task's: nothing to "
                    "choose, every seed a confirmation seed"]
        if len(benchmark.lr_multiples) == 1:
            return [f"tuning: one learning rate, {benchmark.lr_multiples[0]!r} x each task's, seed {benchmark.seed}: "
                    "nothing to choose"]
        if benchmark.protocol >= 2:
            return [f"tuning: learning rates {_listed(benchmark.lr_multiples, repr)} x each task's, screened with "
                    f"seeds {_listed(benchmark.tuning_seeds)} over {benchmark.screen_fraction:g} of each profile's "
                    f"steps, the best mean validation accuracy chosen; {_extension(benchmark)}"]
        return [f"tuning: learning rates {_listed(benchmark.lr_multiples, repr)} x each task's, seed "
                f"{benchmark.seed}, chosen on the validation set; {_extension(benchmark)}"]

    def protocol(self, benchmark: Any) -> str:
        if benchmark.fixed_rate:
            return (f"Tuning: none. Every cell trains at one fixed learning rate, {benchmark.lr_multiples[0]!r} "
                    "times the task profile's, the same for every variant: nothing is chosen, so no seed decides "
                    "anything and every seed is a confirmation seed; a run at a learning rate tuned for another model "
                    "may fall short of what the variant can do.")
        if len(benchmark.lr_multiples) == 1:
            return (f"Tuning: one learning rate, {benchmark.lr_multiples[0]!r} times the task profile's, for every "
                    f"variant, with seed {benchmark.seed}: nothing is chosen, so the confirmation runs train at it "
                    "too; a run at a learning rate tuned for another model may fall short of what the variant can "
                    "do.")
        if benchmark.protocol >= 2:
            return (f"Tuning: each cell screens every learning rate of the grid, the multiples "
                    f"{_listed(benchmark.lr_multiples, repr)} of the task profile's learning rate (the same for every "
                    f"variant), with each of the seeds {_listed(benchmark.tuning_seeds)}, over "
                    f"{benchmark.screen_fraction:g} of the profile's steps (the schedule compressed to them); the "
                    "learning rate of highest mean validation accuracy over those seeds is chosen (among equal means "
                    "the larger mean area under the learning curve, then the first of the grid), so that no one seed "
                    "decides it; a learning rate at which a screening run diverges or fails is not chosen; "
                    f"{_extension(benchmark)}. The test set plays no part in the choice.")
        return (f"Tuning: each cell trains once per learning rate of the grid, the multiples "
                f"{_listed(benchmark.lr_multiples, repr)} of the task profile's learning rate (the same for "
                f"every variant), with seed {benchmark.seed}; the learning rate of highest validation accuracy is "
                f"chosen (the first of the grid among equals); {_extension(benchmark)}. The test set plays no part in "
                "the choice.")


def _extension(benchmark: Any) -> str:
    """How tuning extends the grid, as the header and the protocol state it."""
    if not benchmark.extend_grid:
        return "the grid is not extended (--extend-grid 0)"
    return (f"where the best lies at an edge of the grid, the next multiple beyond it (x{benchmark.beyond(True, 1):g} "
            f"above, x{benchmark.beyond(False, 1):g} below: the grid's own ratio) is tuned too, while the best stays "
            f"at the edge, up to {benchmark.extend_grid} per cell, before confirmation starts")


class Confirmation(Stage):
    """The chosen learning rate with the fresh seeds, once tuning has chosen one: the leaderboard's runs."""

    name, title, page = CONFIRM, "Confirmation", "confirmation"

    def ready(self, state: Any) -> bool:
        return state.best_lr is not None

    def jobs(self, benchmark: Any, cell: Any, lr: float | None = None) -> list[Job]:
        return [Job(self.name, cell.variant, cell.task, lr, seed) for seed in benchmark.confirmation_seeds(cell.task)]

    def header(self, benchmark: Any) -> list[str]:
        budget = ", each its whole budget, with the steps to 0.9 and 0.99" if benchmark.protocol >= 2 else ""
        return [f"confirmation: the best learning rate with {_seeds(benchmark)}{budget}, test accuracy"]

    def protocol(self, benchmark: Any) -> str:
        if benchmark.protocol >= 2:
            return (f"Confirmation: the chosen learning rate trains again with {_seeds(benchmark)}, the same for "
                    "every variant, each run its whole budget: every metric is read at its last step, and the first "
                    "evaluation of the whole validation set at 0.9 and at 0.99 is kept as an event (none where it is "
                    "never reached), with the normalised area under the validation learning curve.")
        return (f"Confirmation: the chosen learning rate trains again with {_seeds(benchmark)}; the leaderboard "
                "shows the mean test accuracy "
                "and the half-width of its 95% interval (Student's t, n - 1 degrees of freedom), n the seeds that "
                "completed.")


def _seeds(benchmark: Any) -> str:
    """'6 fresh seeds (2, ..., 7)', and each row that trains more: '; 12 on induction (2, ..., 13)'."""
    rows = "".join(f"; {count} on {task} ({_listed(benchmark.confirmation_seeds(task))})"
                   for task, count in benchmark.task_seeds)
    return f"{benchmark.seeds} fresh seeds ({_listed(benchmark.confirmation_seeds())}){rows}"


def _multiples(multiples: tuple[float, ...]) -> str:
    return ", ".join(f"x{multiple:g}" for multiple in multiples)


class Capacity(Stage):
    """The confirmed configuration at each capacity point of the cell other than its own size, with the capacity
    seeds, once confirmation has settled (`experiments.benchmark.capacity`)."""

    name, title, page = CAPACITY, "Capacity", "capacity"

    def ready(self, state: Any) -> bool:
        return state.settled(CONFIRM)

    def jobs(self, benchmark: Any, cell: Any, lr: float | None = None) -> list[Job]:
        return [Job(self.name, cell.variant, cell.task, lr, seed, point.axis, point.value)
                for point in cell.capacity if not point.own and point.skipped is None
                for seed in benchmark.capacity_seed_list]

    def changes(self, benchmark: Any, job: Job, own: RunConfig) -> tuple[tuple[str, Any], ...]:
        cell = benchmark.cell(job.variant, job.task)
        return next((point.changes for point in cell.capacity if (point.axis, point.value) == (job.axis, job.value)
                     and not point.own), ())

    def size(self, job: Job) -> str:
        return f"{job.axis} {job.value}"

    def skipped(self, cell: Any) -> list[tuple[str, str]]:
        return [(f"{point.axis}={point.value}", point.skipped) for point in cell.capacity if point.skipped is not None]

    def header(self, benchmark: Any) -> list[str]:
        """What the stage trains, and its points that cannot be built, once per reason."""
        if not benchmark.capacity_widths and not benchmark.capacity_scales:
            return ["capacity: off"]
        sizes = "; ".join(text for text in (
            f"model widths {_multiples(benchmark.capacity_widths)}" if benchmark.capacity_widths else "",
            f"each task's capacity option {_multiples(benchmark.capacity_scales)}" if benchmark.capacity_scales
            else "") if text)
        lines = [f"capacity: the confirmed configuration at {sizes}, seed{'s' if benchmark.capacity_seeds > 1 else ''} "
                 f"{_listed(benchmark.capacity_seed_list)}, test accuracy"]
        skipped = Counter((point.axis, point.value, point.skipped) for cell in benchmark.cells
                          for point in cell.capacity if point.skipped is not None)
        return lines + [f"capacity {axis} {value} skipped in {count} cell{'s' if count > 1 else ''}: {reason}"
                        for (axis, value, reason), count in skipped.items()]

    def protocol(self, benchmark: Any) -> str:
        if not benchmark.capacity_widths and not benchmark.capacity_scales:
            return "Capacity: off (--capacity-widths none and --capacity-scales none)."
        options = ", ".join(f"{task}: {option}" for task in benchmark.tasks
                            if (option := tasks.task_class(task_presets.base(task)).capacity_option) is not None)
        sizes = [f"the model width (model.dim; the heads keep their number and widen with it) at "
                 f"{_multiples(benchmark.capacity_widths)} the cell's"] if benchmark.capacity_widths else []
        sizes += [f"the task's capacity option ({options or 'none of these tasks declares one'}) at "
                  f"{_multiples(benchmark.capacity_scales)} the cell's, rounded"] if benchmark.capacity_scales else []
        return (f"Capacity: once a cell's confirmation has settled, its chosen learning rate trains again with seed"
                f"{'s' if benchmark.capacity_seeds > 1 else ''} {_listed(benchmark.capacity_seed_list)} "
                f"at {'; and '.join(sizes)}. The learning rate is not tuned again at other sizes. The cell's own size "
                "is its confirmation runs with the same seeds. A size that cannot be built is listed as skipped with "
                "the reason.")


STAGES: dict[str, Stage] = {stage.name: stage for stage in (Tuning(), Confirmation(), Capacity())}  # by name
DEFAULT_STAGES: tuple[Stage, ...] = tuple(STAGES.values())  # what `attnlab benchmark` runs, in order
# The stages of a benchmark whose stored definition names none: it was created before definitions named them.
UNNAMED_STAGES = (TUNE, CONFIRM, CAPACITY)
