"""A benchmark's definition, validated and resolved before anything runs: its cells (variant x task, each
resolved, or skipped with the reason it cannot run by construction), its learning-rate grid, its seeds, the
capacity points of each cell (`experiments.benchmark.capacity`), and the jobs the protocol makes of them."""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import variants
from common.options import OptionError
from experiments import config as configs
from experiments import tasks
from experiments.benchmark import capacity
from experiments.benchmark.capacity import Point
from experiments.sweep.definition import check_study_name
from experiments.sweep.storage import shown

TUNE, CONFIRM, CAPACITY = "tune", "confirm", "capacity"  # the stages of the protocol
MIN_LEARNING_RATES = 3  # the grid MAD's protocol sweeps has 3 values or more


def default_variants() -> list[str]:
    """Every registered attention variant, then every baseline."""
    return [*variants.list_variants(), *variants.list_baselines()]


@dataclass(frozen=True)
class Job:
    """One run of the protocol: a variant on a task at a learning rate with a seed, in a stage (tuning
    on the validation set, confirmation with a fresh seed, or capacity: the cell at another size, its
    point's `axis` = `value`)."""

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


@dataclass(frozen=True)
class Cell:
    """A variant on a task: `skipped` says why it cannot run by construction; `base_lr` is the task profile's
    learning rate, which the grid's multiples scale; `capacity` its capacity points."""

    variant: str
    task: str
    skipped: str | None = None
    base_lr: float | None = None
    capacity: tuple[Point, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    name: str
    variants: tuple[str, ...]
    tasks: tuple[str, ...]
    profile: str
    seed: int  # the tuning runs' seed; confirmation takes the `seeds` seeds after it
    seeds: int
    lr_multiples: tuple[float, ...]
    capacity_widths: tuple[float, ...]  # multiples of each cell's model width
    capacity_scales: tuple[float, ...]  # multiples of each cell's task capacity option
    capacity_seeds: int  # the first this many confirmation seeds train each capacity point
    device: str
    kernel: str
    sets: tuple[str, ...]  # the user's --set, fixed in every run
    storage_url: str | None
    runs_dir: Path
    heartbeat_seconds: int
    cells: tuple[Cell, ...]

    @property
    def folder(self) -> Path:
        """Where this machine keeps the benchmark's runs (and, without a storage URL, its jobs)."""
        return self.runs_dir / "benchmark" / self.name

    @property
    def journal(self) -> Path:
        return self.folder / "jobs.journal"

    @property
    def storage_shown(self) -> str:
        return shown(self.storage_url) if self.storage_url else str(self.journal)

    @property
    def study_name(self) -> str:
        return f"benchmark-{self.name}"

    @property
    def confirmation_seeds(self) -> list[int]:
        """The fresh seeds of confirmation: the `seeds` seeds after the tuning seed, none of which tuned."""
        return [self.seed + offset for offset in range(1, self.seeds + 1)]

    @property
    def capacity_seed_list(self) -> list[int]:
        """The seeds of every capacity point: the first confirmation seeds, whose runs are the cell's own point."""
        return self.confirmation_seeds[:self.capacity_seeds]

    def definition(self) -> dict[str, Any]:
        """What makes the results of workers comparable; a worker joining the benchmark must agree on it."""
        return json.loads(json.dumps({
            "variants": self.variants, "tasks": self.tasks, "profile": self.profile, "seed": self.seed,
            "seeds": self.seeds, "lr_multiples": self.lr_multiples, "kernel": self.kernel, "sets": self.sets,
            "capacity_widths": self.capacity_widths, "capacity_scales": self.capacity_scales,
            "capacity_seeds": self.capacity_seeds,
        }))

    def learning_rates(self, cell: Cell) -> list[float]:
        """The cell's grid: each multiple of the task's profile learning rate, to 4 significant digits."""
        assert cell.base_lr is not None, cell
        return [float(f"{multiple * cell.base_lr:.4g}") for multiple in self.lr_multiples]

    def tuning_jobs(self, cell: Cell) -> list[Job]:
        return [Job(TUNE, cell.variant, cell.task, lr, self.seed) for lr in self.learning_rates(cell)]

    def confirmation_jobs(self, cell: Cell, lr: float) -> list[Job]:
        return [Job(CONFIRM, cell.variant, cell.task, lr, seed) for seed in self.confirmation_seeds]

    def capacity_jobs(self, cell: Cell, lr: float) -> list[Job]:
        """Each capacity point of the cell that can run, other than its own, with each capacity seed."""
        return [Job(CAPACITY, cell.variant, cell.task, lr, seed, point.axis, point.value)
                for point in cell.capacity if not point.own and point.skipped is None
                for seed in self.capacity_seed_list]

    def planned_jobs(self) -> list[Job]:
        """Every job the protocol will call for: confirmation's and capacity's learning rate is not known before
        tuning has settled, and the grid's middle one stands in for it (what a job costs does not depend on it)."""
        jobs = []
        for cell in self.cells:
            if cell.skipped is None:
                rates = self.learning_rates(cell)
                stand_in = rates[len(rates) // 2]
                jobs += [*self.tuning_jobs(cell), *self.confirmation_jobs(cell, stand_in),
                         *self.capacity_jobs(cell, stand_in)]
        return jobs

    def point(self, job: Job) -> Point | None:
        """The capacity point a job trains, or None for the cell's own size."""
        return next((point for cell in self.cells if (cell.variant, cell.task) == (job.variant, job.task)
                     for point in cell.capacity if (point.axis, point.value) == (job.axis, job.value)
                     and not point.own), None)

    def config(self, job: Job) -> configs.RunConfig:
        """The run config of a job: the profile, the user's --set, the job's learning rate, seed and size."""
        overrides = overrides_for(configs.parse_sets(list(self.sets)), job.variant, job.task, self.variants,
                                  self.tasks)
        overrides["train"] = {**overrides["train"], "lr": job.lr}
        point = self.point(job)
        return configs.resolve(variant=job.variant, task=job.task, profile=self.profile, seed=job.seed,
                               device=self.device, kernel=self.kernel,
                               overrides=capacity.changed(overrides, point.changes if point else ()))

    def arguments(self, *, hide_password: bool = True) -> list[str]:
        """The benchmark's own arguments of `attnlab benchmark`: what every process that joins it must give."""
        words = ["--variant", ",".join(self.variants), "--task", ",".join(self.tasks), "--profile", self.profile,
                 "--seed", str(self.seed), "--seeds", str(self.seeds),
                 "--lr-multiples", ",".join(map(repr, self.lr_multiples)),
                 "--capacity-widths", ",".join(map(repr, self.capacity_widths)) or "none",
                 "--capacity-scales", ",".join(map(repr, self.capacity_scales)) or "none",
                 "--capacity-seeds", str(self.capacity_seeds), "--name", self.name]
        words += ["--kernel", self.kernel] if self.kernel != "auto" else []
        words += [word for assignment in self.sets for word in ("--set", assignment)]
        if self.storage_url:
            words += ["--storage", self.storage_shown if hide_password else self.storage_url]
        return words

    def command(self) -> str:
        """The command that runs (or joins, or continues) this benchmark, as a user types it (a storage
        password hidden)."""
        return shlex.join(["attnlab", "benchmark", *self.arguments()])


def parse_multiples(text: str) -> tuple[float, ...]:
    """'0.3,1,3' -> (0.3, 1.0, 3.0); anything else is a one-sentence error."""
    try:
        return tuple(float(item) for item in text.split(","))
    except ValueError:
        raise OptionError(f"Benchmark lr-multiples got {text!r}; accepted: comma-separated numbers > 0, at least "
                          f"{MIN_LEARNING_RATES}, e.g. 0.3,1,3.") from None


def _names(text: str | None, what: str, default: list[str]) -> tuple[str, ...]:
    names = [name for name in (text or "").split(",") if name] or default
    for name in names:
        if names.count(name) > 1:
            raise OptionError(f"Benchmark {what} {name!r} is listed twice; accepted: each name once.")
    return tuple(names)


def overrides_for(overrides: dict[str, dict[str, Any]], variant: str, task: str, names: tuple[str, ...],
                  task_names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The user's --set for one cell: `variant.X` to the listed variants that have option X, `task.X` to the
    listed tasks that have it (one-sentence errors where none has it)."""
    return configs.for_task(configs.for_variant(overrides, variant, list(names)), task, list(task_names))


def resolve_cell(variant: str, task: str, *, profile: str, seed: int, device: str, kernel: str,
                 overrides: dict[str, dict[str, Any]], widths: tuple[float, ...] = (),
                 scales: tuple[float, ...] = ()) -> Cell:
    """The cell resolved at the tuning seed with its own overrides: its base learning rate and its capacity
    points at the multiples `widths` and `scales`, or the reason it cannot run."""
    def resolved(changes: tuple[tuple[str, Any], ...]) -> configs.RunConfig:
        config = configs.resolve(variant=variant, task=task, profile=profile, seed=seed, device=device,
                                 kernel=kernel, overrides=capacity.changed(overrides, changes))
        # A task size of the capacity stage must be drawable too, or every run there fails drawing its test set.
        if any(key.startswith("task.") for key, _ in changes):
            tasks.check_drawable(config.task, profile=config.profile, **config.task_options)
        return config

    try:
        config = resolved(())
    except configs.Incompatible as reason:
        return Cell(variant, task, skipped=str(reason))
    return Cell(variant, task, base_lr=config.train.lr, capacity=capacity.points(config, widths, scales, resolved))


def _check_numbers(seed: int, seeds: int, lr_multiples: tuple[float, ...], capacity_seeds: int,
                   heartbeat_seconds: int) -> None:
    if seeds < 1:
        raise OptionError(f"Benchmark seeds got {seeds}; accepted: an integer >= 1 (2 or more for an interval).")
    if not 1 <= capacity_seeds <= seeds:
        raise OptionError(f"Benchmark capacity-seeds got {capacity_seeds}; accepted: an integer from 1 to seeds = "
                          f"{seeds} (the first confirmation seeds train each capacity point).")
    if seed < 0 or seed + seeds >= tasks.MAX_TRAIN_SEED:
        raise OptionError(f"Benchmark seed {seed} with {seeds} seeds passes the largest seed; accepted: seed + seeds "
                          f"below {tasks.MAX_TRAIN_SEED}.")
    if len(lr_multiples) < MIN_LEARNING_RATES or len(set(lr_multiples)) < len(lr_multiples) \
            or min(lr_multiples) <= 0:
        raise OptionError(f"Benchmark lr-multiples got {','.join(map(str, lr_multiples))}; accepted: at least "
                          f"{MIN_LEARNING_RATES} distinct numbers > 0, e.g. 0.3,1,3.")
    if heartbeat_seconds < 1:
        raise OptionError(f"Benchmark heartbeat seconds got {heartbeat_seconds}; accepted: an integer >= 1.")


def prepare(*, variant_names: str | None, task_names: str | None, profile: str, seed: int, seeds: int,
            lr_multiples: str, capacity_widths: str, capacity_scales: str, capacity_seeds: int, device: str,
            kernel: str, sets: list[str], name: str | None, storage: str | None, runs_dir: Path,
            heartbeat_seconds: int) -> Benchmark:
    """Validate everything a benchmark needs and resolve every cell and its capacity points, touching nothing:
    a bad value is a one-sentence error, a cell or a point that cannot run is kept as skipped with its reason."""
    multiples = parse_multiples(lr_multiples)
    _check_numbers(seed, seeds, multiples, capacity_seeds, heartbeat_seconds)
    widths = capacity.parse_multiples(capacity_widths, "capacity-widths", "each cell's model width")
    scales = capacity.parse_multiples(capacity_scales, "capacity-scales", "each task's capacity option")
    names = _names(variant_names, "variant", default_variants())
    for variant in names:
        variants.variant_class(variant)
    task_list = _names(task_names, "task", tasks.DEFAULT_SUITE)
    for task in task_list:
        tasks.task_class(task)
    overrides = configs.parse_sets(sets)
    if "lr" in overrides["train"]:
        raise OptionError("--set train.lr names what the benchmark tunes; accepted: the grid's multiples of each "
                          "task's learning rate, --lr-multiples A,B,C.")
    cells = tuple(resolve_cell(variant, task, profile=profile, seed=seed, device=device, kernel=kernel,
                               overrides=overrides_for(overrides, variant, task, names, task_list), widths=widths,
                               scales=scales)
                  for task in task_list for variant in names)
    return Benchmark(name=check_study_name(name or profile), variants=names, tasks=task_list, profile=profile,
                     seed=seed, seeds=seeds, lr_multiples=multiples, capacity_widths=widths, capacity_scales=scales,
                     capacity_seeds=capacity_seeds, device=device, kernel=kernel,
                     sets=tuple(sets), storage_url=storage, runs_dir=runs_dir, heartbeat_seconds=heartbeat_seconds,
                     cells=cells)
