"""A benchmark's definition, validated and resolved before anything runs: its cells (variant x task, each
resolved, or skipped with the reason it cannot run by construction), its learning-rate grid, its seeds, the
capacity points of each cell (`experiments.benchmark.capacity`), and its stages, which make its jobs
(`experiments.benchmark.stages`). The process that starts a benchmark builds it from its options (`build`, from
`experiments.schemas.benchmark.BenchmarkOptions`); the definition (the stored options, `common.schema.stored`) is
stored with its study, and a worker process builds it from there (`rebuild`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import schema
from common.options import OptionError
from common.schema import setting
from experiments import revisions, tasks
from experiments.benchmark import capacity, parity
from experiments.benchmark.capacity import Point
from experiments.benchmark.parity import Size
from experiments.benchmark.settings import check_numbers, check_protocol
from experiments.benchmark.stages import DEFAULT_STAGES, STAGES, UNNAMED_STAGES, Job, Stage
from experiments.run import config as configs
from experiments.schemas.benchmark import JOB_RULES, TASK_SEEDS_ACCEPTED, BenchmarkOptions
from experiments.sweep.definition import check_study_name
from experiments.sweep.storage import field_of, shown
from experiments.tasks import presets as task_presets
from variants import presets

STUDY_PREFIX = "benchmark-"  # the study of benchmark NAME is benchmark-NAME


@dataclass(frozen=True)
class Cell:
    """A variant on a task: `skipped` says why it cannot run by construction; `base_lr` is the task profile's
    learning rate, which the grid's multiples scale; `size` its model's size against dense's parameters on the
    task (`experiments.benchmark.parity`), which every job of the cell trains at; `capacity` its capacity points,
    scaled from that size; `overrides` the user's --set as it reaches this cell (section -> field -> value)."""

    variant: str
    task: str
    skipped: str | None = None
    base_lr: float | None = None
    size: Size = Size()
    capacity: tuple[Point, ...] = ()
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, kw_only=True)
class Benchmark(BenchmarkOptions):
    """A benchmark: its options (`BenchmarkOptions`: variants, tasks, seeds, grid, capacity, protocol, ...) and what
    they resolve to on this machine: its cells on `device`, its runs under `runs_dir`, and its stages, in order,
    each making its jobs of a cell when the cell is ready (stored by name with its definition)."""

    device: str
    runs_dir: Path
    cells: tuple[Cell, ...]
    stages: tuple[Stage, ...] = setting(DEFAULT_STAGES, store=lambda stages: [stage.name for stage in stages],
                                        before=list(UNNAMED_STAGES))

    @property
    def folder(self) -> Path:
        """Where this machine keeps the benchmark's runs (and, without a storage URL, its jobs)."""
        return folder_of(self.runs_dir, self.name)

    @property
    def journal(self) -> Path:
        return self.folder / "jobs.journal"

    @property
    def storage_shown(self) -> str:
        return shown(self.storage_url) if self.storage_url else str(self.journal)

    @property
    def study_name(self) -> str:
        return f"{STUDY_PREFIX}{self.name}"

    @property
    def tuning_seeds(self) -> list[int]:
        """The seeds every learning rate of tuning trains with: `screen_seeds` from `seed` on; none at a fixed rate
        (`fixed_rate`), which is not tuned."""
        return [] if self.fixed_rate else [self.seed + offset for offset in range(self.screen_seeds)]

    def seeds_of(self, task: str) -> int:
        """How many confirmation seeds task row `task` trains: its own count where `task_seeds` names it, else
        `seeds`."""
        return dict(self.task_seeds).get(task, self.seeds)

    def confirmation_seeds(self, task: str | None = None) -> list[int]:
        """The fresh seeds of confirmation (of task row `task`, `seeds_of`; None: `seeds`): the seeds after the
        tuning seeds, none of which tuned (at a fixed rate, from `seed` on). A row with more seeds takes the same ones
        first."""
        count = self.seeds if task is None else self.seeds_of(task)
        return [self.seed + len(self.tuning_seeds) + offset for offset in range(count)]

    def screen_steps(self, steps: int) -> int:
        """The steps a tuning run of a profile of `steps` steps trains: `screen_fraction` of them, at least one."""
        return max(1, round(steps * self.screen_fraction))

    @property
    def capacity_seed_list(self) -> list[int]:
        """The seeds of every capacity point: the first confirmation seeds, whose runs are the cell's own point."""
        return self.confirmation_seeds()[:self.capacity_seeds]

    def learning_rates(self, cell: Cell, multiples: tuple[float, ...] | None = None) -> list[float]:
        """The cell's grid (or `multiples`): each multiple of the task's profile learning rate, to 4 significant
        digits."""
        assert cell.base_lr is not None, cell
        return [float(f"{multiple * cell.base_lr:.4g}") for multiple in
                (self.lr_multiples if multiples is None else multiples)]

    def beyond(self, top: bool, count: int) -> float:
        """The multiple `count` steps beyond the grid's top (or bottom) edge, a step the grid's finest ratio
        between neighbours: beyond 3 of 0.3, 1, 3 come 9, 27, ...; below 0.3 come 0.1, 0.0333, ..."""
        ordered = sorted(self.lr_multiples)
        step = min(high / low for low, high in zip(ordered, ordered[1:], strict=False))
        return float(f"{ordered[-1] * step ** count:.4g}") if top else float(f"{ordered[0] / step ** count:.4g}")

    def extension_multiples(self) -> list[float]:
        """Every multiple tuning may add beyond the grid's edges (`Tuning.further`): above it, then below it."""
        return [self.beyond(top, count) for top in (True, False) for count in range(1, self.extend_grid + 1)]

    def stage(self, name: str) -> Stage:
        """The stage named `name` (a job's `stage`)."""
        return {stage.name: stage for stage in self.stages}[name]

    def cell(self, variant: str, task: str) -> Cell:
        return next(cell for cell in self.cells if (cell.variant, cell.task) == (variant, task))

    def planned_jobs(self) -> list[Job]:
        """Every job the protocol will call for, stage by stage: the learning rate of the stages after tuning is
        not known before tuning has settled, and the grid's middle one stands in for it (`Stage.planned`). The
        learning rates tuning may add beyond the grid's edges (`extend_grid`) are called for only where the best lies
        at an edge, and are not counted."""
        jobs = []
        for cell in self.cells:
            if cell.skipped is None:
                rates = self.learning_rates(cell)
                jobs += [job for stage in self.stages for job in stage.planned(self, cell, rates[len(rates) // 2])]
        return jobs

    def config(self, job: Job) -> configs.RunConfig:
        """The run config of a job: the profile, the user's --set as it reaches the job's cell, the cell's size
        (`Cell.size`), the job's learning rate and seed, and what its stage changes (a capacity job's size)."""
        cell = self.cell(job.variant, job.task)
        overrides = capacity.changed({**cell.overrides, "train": {**cell.overrides["train"], "lr": job.lr}},
                                     cell.size.changes)

        def resolved(changes: tuple[tuple[str, Any], ...]) -> configs.RunConfig:
            return configs.resolve(variant=job.variant, task=job.task, profile=self.profile, seed=job.seed,
                                   device=self.device, kernel=self.kernel,
                                   overrides=capacity.changed(overrides, changes))

        own = resolved(())
        changes = self.stage(job.stage).changes(self, job, own)
        return resolved(changes) if changes else own


def folder_of(runs_dir: Path, name: str) -> Path:
    """Where this machine keeps the runs of benchmark `name` (and, without a storage URL, its jobs)."""
    return runs_dir / "benchmark" / name


def rebuild(stored: dict[str, Any], *, study_name: str, device: str, storage_url: str | None, runs_dir: Path,
         heartbeat_seconds: int) -> Benchmark:
    """The benchmark whose study `study_name` holds the definition `stored` (`common.schema.stored` of it, or what
    an older version stored: `upgraded`), validated, its cells resolved again on this machine's `device`: what a
    worker process runs, started with only where the storage is and what is local to it."""
    today = upgraded(stored)
    where = f"benchmark study {study_name!r}"

    def read(key: str) -> Any:
        return field_of(today, key, where=where)

    unknown = [name for name in read("stages") if name not in STAGES]
    if unknown:
        raise OptionError(f"The {where} runs stage {unknown[0]!r}, which this version does not have; accepted: "
                          f"{', '.join(STAGES)}.")
    if read("protocol") not in dict(revisions.PROTOCOLS):
        raise OptionError(f"The {where} runs protocol {read('protocol')!r}, which this version does not have; "
                          f"accepted: {', '.join(str(version) for version, _ in revisions.PROTOCOLS)}.")
    options = schema.from_stored(BenchmarkOptions, read, name=study_name.removeprefix(STUDY_PREFIX),
                                 storage_url=storage_url, heartbeat_seconds=heartbeat_seconds)
    return build(options, device=device, runs_dir=runs_dir, stages=tuple(STAGES[name] for name in read("stages")))


def upgraded(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored definition in today's form, each field it lacks as the version that stored it ran (the field's
    `before`): one stored before definitions named their stages runs the stages every benchmark then ran; one stored
    before the grid was extended extends none, and one stored before cells were sized to dense's parameters keeps its
    cells' own sizes (the page still flags those outside 10%); one stored before runs stopped at a target trains every
    step, and one stored before interim evaluations reads every held-out set at each evaluation; one stored before
    benchmarks kept their protocol's version ran version 1, which tunes on one seed over the whole budget."""
    return schema.upgraded(Benchmark, stored)


GROWING = ("seeds", "task_seeds")  # what a benchmark may raise when it is continued: its jobs so far stay its jobs


def grows(stored: dict[str, Any], today: dict[str, Any]) -> bool:
    """Whether the definition `today` is the `stored` one with more confirmation seeds on some task rows and fewer
    on none (`GROWING`), every other field the same: the first seeds of a row are the same whatever its count
    (`Benchmark.confirmation_seeds`), so every job already settled is one of today's."""
    if any(stored.get(key) != today.get(key) for key in {*stored, *today} - set(GROWING)):
        return False

    def counts(definition: dict[str, Any]) -> dict[str, int]:
        return {task: definition["task_seeds"].get(task, definition["seeds"]) for task in definition["tasks"]}

    before = counts(stored)
    return all(count >= before[task] for task, count in counts(today).items())


def overrides_for(overrides: dict[str, dict[str, Any]], variant: str, task: str, names: tuple[str, ...],
                  task_names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """The user's --set for one cell: `variant.X` to the listed variants that have option X, `task.X` to the
    listed tasks that have it (one-sentence errors where none has it)."""
    return configs.for_task(configs.for_variant(overrides, variant, list(names)), task, list(task_names))


def resolve_cell(variant: str, task: str, *, profile: str, seed: int, device: str, kernel: str,
                 overrides: dict[str, dict[str, Any]], widths: tuple[float, ...] = (),
                 scales: tuple[float, ...] = (), reference: tuple[int | None, str | None],
                 size_to_dense: bool = True) -> Cell:
    """The cell resolved at the tuning seed with its own overrides: its base learning rate, its size against
    dense's parameters on the task (`reference`: dense's count, or why there is none; `parity.sized`) and its
    capacity points at the multiples `widths` and `scales` of that size, or the reason it cannot run."""
    def resolved(changes: tuple[tuple[str, Any], ...]) -> configs.RunConfig:
        config = configs.resolve(variant=variant, task=task, profile=profile, seed=seed, device=device,
                                 kernel=kernel, overrides=capacity.changed(overrides, changes))
        # A task size of the capacity stage must be drawable too, or every run there fails drawing its test set.
        if any(key.startswith("task.") for key, _ in changes):
            tasks.check_drawable(config.task, profile=config.profile, **dataclasses.asdict(config.task_options))
        return config

    try:
        config = resolved(())
    except configs.Incompatible as reason:
        return Cell(variant, task, skipped=str(reason), overrides=overrides)
    size = parity.sized(resolved, *reference, adjust=size_to_dense)
    return Cell(variant, task, base_lr=config.train.lr, size=size, overrides=overrides,
                capacity=capacity.points(resolved(size.changes), widths, scales,
                                         lambda changes: resolved((*size.changes, *changes))))


def build(options: BenchmarkOptions, *, device: str, runs_dir: Path,
          stages: tuple[Stage, ...] = DEFAULT_STAGES) -> Benchmark:
    """Validate a benchmark's options and resolve every cell, its size and its capacity points on `device`, touching
    nothing: a bad value is a one-sentence error, a cell or a point that cannot run is kept as skipped with its
    reason."""
    check_protocol(options)
    check_numbers(options)
    names = [stage.name for stage in stages]
    if len(set(names)) < len(names):
        raise OptionError(f"Benchmark stages {', '.join(names)} name one stage twice; accepted: each name once (a "
                          "job's key begins with its stage's name).")
    variant_names = presets.expand(",".join(options.variants))  # each checked and written as pages show it
    task_names = tuple(task_presets.canonical(task) for task in options.tasks)  # each checked, as pages show it
    for task in task_names:
        if task_names.count(task) > 1:
            raise OptionError(f"Benchmark task {task!r} is listed twice; accepted: each row once.")
    overrides = configs.parse_sets(list(options.sets))
    if "lr" in overrides["train"]:
        raise OptionError("--set train.lr names what the benchmark tunes; accepted: the grid's multiples of each "
                          "task's learning rate, --lr-multiples A,B,C.")
    for key, accepted in JOB_RULES.items():
        if key in overrides["train"]:
            raise OptionError(f"--set train.{key} names a rule of the benchmark, the same for every job; accepted: "
                              f"{accepted}.")
    overrides["train"].update(options.job_rules())
    profile, seed, kernel = options.profile, options.seed, options.kernel
    listed = variant_names if parity.REFERENCE in variant_names else (*variant_names, parity.REFERENCE)
    references = {task: parity.reference(lambda task=task: configs.resolve(
        variant=parity.REFERENCE, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
        overrides=overrides_for(overrides, parity.REFERENCE, task, listed, task_names)), task) for task in task_names}
    cells = tuple(resolve_cell(variant, task, profile=profile, seed=seed, device=device, kernel=kernel,
                               overrides=overrides_for(overrides, variant, task, variant_names, task_names),
                               widths=options.capacity_widths, scales=options.capacity_scales,
                               reference=references[task], size_to_dense=options.size_to_dense)
                  for task in task_names for variant in variant_names)
    given = {field.name: getattr(options, field.name) for field in dataclasses.fields(BenchmarkOptions)}
    return Benchmark(**{**given, "name": check_study_name(options.name), "variants": variant_names,
                        "tasks": task_names, "task_seeds": task_seeds_of(options, task_names)},
                     device=device, runs_dir=runs_dir, cells=cells, stages=stages)


def task_seeds_of(options: BenchmarkOptions, task_names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """The options' `task_seeds`, each row written as pages show it and in the benchmark's order of rows; a row the
    benchmark does not list, or one named twice, is a one-sentence error."""
    counts: dict[str, int] = {}
    for row, count in options.task_seeds:
        try:
            canonical = task_presets.canonical(row)
        except OptionError:
            canonical = None
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise OptionError(f"Benchmark task-seeds gives {row!r} {count!r} seeds; {TASK_SEEDS_ACCEPTED}.")
        if canonical not in task_names or canonical in counts:
            what = "named twice" if canonical in counts else "not a task row of the benchmark"
            raise OptionError(f"Benchmark task-seeds names {row!r}, {what}; {TASK_SEEDS_ACCEPTED} (its rows: "
                              f"{', '.join(task_names)}).")
        counts[canonical] = count
    return tuple((task, counts[task]) for task in task_names if task in counts)
