"""What a benchmark is, as `attnlab benchmark` is told it: its cells, seeds, learning-rate grid, capacity stage and
protocol, and where its jobs live. `BenchmarkOptions` is the one declaration (`common.schema`) of the command's own
flags, the keys of its experiment files, the definition its study stores and the command that continues it; the
benchmark (`experiments.benchmark.definition.Benchmark`) is these options with its cells resolved on a machine.

Each value the user gives as text is parsed here, a bad one refused in one sentence that names it and what is
accepted; what the values say together (the protocol's rules, the range of the seed values) is checked when the
benchmark is built (`experiments.benchmark.settings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from common.options import OptionError, format_value, parse_value
from common.schema import CHANGED, NEVER, setting
from experiments import revisions
from experiments import tasks as task_registry
from experiments.run import config as configs
from experiments.schemas.shared import kernel_setting, profile_setting, sets_setting, storage_setting
from variants import presets

MIN_LEARNING_RATES = 3  # the grid MAD's protocol sweeps has 3 values or more
GRID_ACCEPTED = (f"accepted: at least {MIN_LEARNING_RATES} distinct finite numbers > 0, comma-separated, e.g. 0.3,1,3 "
                 "(tuned on the validation set), or one (every cell at that multiple of its task's learning rate, "
                 "untuned)")
EXTEND_ACCEPTED = "accepted: an integer >= 0, the most learning rates tuned beyond an edge of the grid (0: none)"
FRACTION_ACCEPTED = "accepted: a number in (0, 1], the fraction of each profile's steps a tuning run trains"
# What every job's train config takes from the benchmark, the same for every job, and what a user gives instead of
# `--set train.X` for it.
JOB_RULES = {"target_accuracy": "--target-accuracy X (or none)",
             "interim_test": "nothing: the test set is read once, at each job's end",
             "interim_validation": "--interim-validation N (or all)"}


def parse_target(text: str) -> float | None:
    """'0.99' -> 0.99, 'none' -> None; anything else is a one-sentence error (a value out of (0, 1] is refused by
    the training config, naming it)."""
    value = parse_value(text)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise OptionError(f"Benchmark target-accuracy got {text!r}; accepted: a number in (0, 1], or none.")
    return None if value is None else float(value)


def parse_interim(text: str) -> int | None:
    """'608' -> 608, 'all' -> None; anything else is a one-sentence error."""
    value = None if text.strip().lower() == "all" else parse_value(text)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise OptionError(f"Benchmark interim-validation got {text!r}; accepted: an integer >= 1 (validation "
                          "examples read at each evaluation before a job's last), or all.")
    return value


def parse_fraction(text: str) -> float:
    """'0.25' -> 0.25; anything else is a one-sentence error (`settings.check_protocol` refuses one outside (0, 1])."""
    try:
        return float(text)
    except ValueError:
        raise OptionError(f"Benchmark screen-fraction got {text!r}; {FRACTION_ACCEPTED}.") from None


def parse_multiples(text: str) -> tuple[float, ...]:
    """'0.3,1,3' -> (0.3, 1.0, 3.0); anything else is a one-sentence error."""
    try:
        return tuple(float(item) for item in text.split(","))
    except ValueError:
        raise OptionError(f"Benchmark lr-multiples got {text!r}; {GRID_ACCEPTED}.") from None


def parse_extensions(text: str) -> int:
    """'2' -> 2: the most learning rates tuned beyond an edge of the grid; anything but an integer is a
    one-sentence error (`settings.check_numbers` refuses one below 0)."""
    try:
        return int(text)
    except ValueError:
        raise OptionError(f"Benchmark extend-grid got {text!r}; {EXTEND_ACCEPTED}.") from None


TASK_SEEDS_ACCEPTED = ("accepted: ROW=N pairs, comma-separated, each ROW a task row of the benchmark named once and N "
                       "an integer >= 1 (e.g. induction=12,mqar:num_pairs=12=12), or none")


def parse_task_seeds(text: str) -> tuple[tuple[str, int], ...]:
    """'induction=12,mqar:num_pairs=12=12' -> (('induction', 12), ('mqar:num_pairs=12', 12)): each row's count after
    its last '='; 'none' (or nothing) -> (). Anything else is a one-sentence error (a row the benchmark does not list
    is refused when it is built)."""
    if text.strip().lower() in ("", "none"):
        return ()
    pairs = []
    for item in text.split(","):
        row, _, count = item.strip().rpartition("=")
        if not row or not count.strip().isdigit() or int(count) < 1:
            raise OptionError(f"Benchmark task-seeds got {text!r}; {TASK_SEEDS_ACCEPTED}.")
        pairs.append((row, int(count)))
    return tuple(pairs)


def show_task_seeds(pairs: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{row}={count}" for row, count in pairs) or "none"


def parse_capacity(text: str, what: str, of: str) -> tuple[float, ...]:
    """'0.5,2' -> (0.5, 2.0); 'none' (or nothing) -> (): that capacity axis off. Anything else, a multiple <= 0 or of
    1 (the confirmation runs are 1x), or one listed twice, is a one-sentence error."""
    if text.strip().lower() in ("", "none"):
        return ()
    accepted = (f"accepted: comma-separated multiples of {of}, each > 0 and finite, other than 1 (the confirmation "
                f"runs are 1x) and listed once, e.g. 0.5,2, or none")
    try:
        multiples = tuple(float(item) for item in text.split(","))
    except ValueError:
        raise OptionError(f"Benchmark {what} got {text!r}; {accepted}.") from None
    if not all(0 < multiple < math.inf for multiple in multiples) or 1.0 in multiples \
            or len(set(multiples)) < len(multiples):
        raise OptionError(f"Benchmark {what} got {text!r}; {accepted}.")
    return multiples


def parse_tasks(text: str) -> tuple[str, ...]:
    """'mqar,passkey' -> ('mqar', 'passkey'), each set of tasks expanded; nothing -> the default suite. A name listed
    twice is a one-sentence error."""
    names = task_registry.expand_tasks(text) or list(task_registry.DEFAULT_SUITE)
    for name in names:
        if names.count(name) > 1:
            raise OptionError(f"Benchmark task {name!r} is listed twice; accepted: each name once.")
    return tuple(names)


def capacity_options() -> str:
    """'mqar.num_pairs, ...': each task's capacity option, for the help."""
    return ", ".join(f"{name}.{task_registry.task_class(name).capacity_option}" for name in task_registry.list_tasks()
                     if task_registry.task_class(name).capacity_option is not None)


def default_name(profile: str, protocol: int) -> str:
    """A benchmark's name where none is given: its profile under protocol 1 (`quick`, the name of protocol 1's record),
    the profile and the protocol after it (`quick-protocol2`), so that a later protocol never continues, nor is kept
    over, an earlier one's benchmark of the same profile."""
    return profile if protocol == 1 else f"{profile}-protocol{protocol}"


def by_protocol(defaults: dict[int, Any]) -> Any:
    """A value left out as the benchmark's protocol has it (an unknown protocol: today's, which the build refuses)."""
    return lambda values: defaults.get(values["protocol"], defaults[revisions.PROTOCOL])


def under_protocol_1(options: BenchmarkOptions) -> bool:
    return options.protocol == 1


def after_protocol_1(options: BenchmarkOptions) -> bool:
    return options.protocol != 1


def multiples_or_none(multiples: tuple[float, ...]) -> str:
    return format_value(multiples) if multiples else "none"


# What a flag left out means under each protocol (`experiments.revisions.PROTOCOLS`, `by_protocol`): protocol 1 stops at
# 0.99 (as Zoology does), reads a quarter of the quick profile's validation set (half-width at most 0.04) at each
# evaluation before the last, tunes on one seed over the whole budget, and trains a capacity stage at half the width
# and twice the task's capacity option on one seed (x2 the width would cost more than the rest of the quick benchmark
# together). Protocol 2 trains every run its whole budget, reads the whole validation set at each evaluation (its
# events are decided there), screens each learning rate on two seeds over a quarter of the budget, and has no
# capacity stage by default: one seed per point tells no variants apart, so its capacity axis is a task's rows at
# several values of the option (selective_copy, selective_copy:num_tokens=8), each on every paired seed
# (`analysis.benchmark.axes`).
@dataclass(frozen=True)
class BenchmarkOptions:
    """The options of `attnlab benchmark` that say what the benchmark is and where its jobs live, in the order of
    the command that continues it (`common.schema.command`); each stored one (all but the name, the storage and the
    heartbeat) is part of the definition its study keeps, `before` what a definition stored before it ran."""

    COMMAND: ClassVar[tuple[str, ...]] = ("attnlab", "benchmark")  # what `common.schema.command` writes first

    # Left out, the core set and the default suite, unless the command line chooses others first (protocol 2's
    # calibrated suite at quick, `analysis.benchmark.suite.selection`).
    variants: tuple[str, ...] = setting(presets.CORE, "variants, presets and sets, comma-separated (default: core)",
                                        flag="--variant", parse=lambda text: presets.expand(text, presets.CORE),
                                        left_out=lambda values: presets.CORE)
    tasks: tuple[str, ...] = setting(tuple(task_registry.DEFAULT_SUITE), "tasks and presets (mqar:num_pairs=16), "
                                     "comma-separated (default: protocol 2's calibrated suite at quick, "
                                     "docs/benchmark.md; else the default suite)", flag="--task", parse=parse_tasks,
                                     left_out=lambda values: tuple(task_registry.DEFAULT_SUITE))
    profile: str = profile_setting()
    seed: int = setting(0, "the tuning runs' seed (default: 0)")  # tuning takes `screen_seeds` from it, then the rest
    # paired confirmation seeds: with 3, the smallest two-sided rank-test p is 0.10
    seeds: int = setting(6, "fresh seeds of the confirmation, paired across variants (default: %(default)s)")
    # Where a row's power check (`analysis.benchmark.contrast_section`) asks for more pairs than `seeds` gives: its
    # confirmation takes the first N seeds from the same start, so a benchmark continued with more keeps every job.
    task_seeds: tuple[tuple[str, int], ...] = setting(
        (), "confirmation seeds of these task rows instead of --seeds, ROW=N comma-separated (e.g. induction=12); "
            "more than a study was created with adds the jobs of the seeds added and keeps the rest (default: none; "
            "protocol 2's suite at quick: docs/benchmark.md)", metavar="ROW=N,...", parse=parse_task_seeds,
        show=show_task_seeds, store=dict, load=lambda stored: tuple(stored.items()), rerun=CHANGED, before={},
        left_out=lambda values: ())
    # Centred where the leaderboard of record's tuning chose (docs/results.md's tuning table): on 0.3, 1, 3 most cells
    # chose x3 or the x9 beyond it; an optimum below x1 is still reached by the extension below the grid's edge.
    lr_multiples: tuple[float, ...] = setting((1.0, 3.0, 9.0), "the grid: multiples of each task's lr (%(default)s)",
                                              parse=parse_multiples)
    capacity_widths: tuple[float, ...] = setting(
        (), "capacity: train each confirmed cell again at these multiples of its model width (model.dim); none: no "
            "width axis (default: 0.5 under protocol 1, none under 2)", metavar="MULTIPLES",
        parse=lambda text: parse_capacity(text, "capacity-widths", "each cell's model width"), show=multiples_or_none,
        left_out=by_protocol({1: (0.5,), 2: ()}))
    capacity_scales: tuple[float, ...] = setting(
        (), f"capacity: and at these multiples of its task's capacity option ({capacity_options()}); none: no such "
            "axis (default: 2 under protocol 1, none under protocol 2, whose capacity axis is a task's rows, e.g. "
            "selective_copy,selective_copy:num_tokens=8)", metavar="MULTIPLES",
        parse=lambda text: parse_capacity(text, "capacity-scales", "each task's capacity option"),
        show=multiples_or_none, left_out=by_protocol({1: (2.0,), 2: ()}))
    capacity_seeds: int = setting(1, "capacity: the first N confirmation seeds train each point (default: "
                                     "%(default)s)", metavar="N")
    extend_grid: int = setting(
        2, "where a cell's best learning rate lies at an edge of the grid, tune the next multiple beyond it (the "
           "grid's ratio: x27 after 1,3,9's x9, x0.333 before its x1) while the best stays at the edge, at most N per "
           "cell, before confirmation; 0: never (default: %(default)s)", metavar="N", parse=parse_extensions, before=0)
    name: str = setting("", "the benchmark's name (default: the profile, then the protocol after 1: quick-protocol2)",
                        stored=False, left_out=lambda values: default_name(values["profile"], values["protocol"]))
    size_to_dense: bool = setting(
        True, "size each cell's model to within 10%% of dense's parameters on its task (the variant's size option, "
              "else the width); --no-size-to-dense: each at its own size, and one outside 10%% is not ranked "
              "(default: on)", rerun=CHANGED, before=False)
    protocol: int = setting(
        revisions.PROTOCOL, "the protocol a new benchmark runs (docs/benchmark.md): 1, tuned on one seed with every "
                            "run stopping at --target-accuracy; 2, a screen on --screen-seeds seeds and every run "
                            "trained its whole budget (default: %(default)s)", metavar="N", rerun=CHANGED, before=1)
    target_accuracy: float | None = setting(
        None, "protocol 1: every job stops at the first evaluation whose validation accuracy reaches X, recording the "
              "step (as Zoology stops at 0.99); none: every job trains every step (default: 0.99; protocol 2 "
              "records the steps to 0.9 and 0.99 instead, and takes none only)", metavar="X", parse=parse_target,
        left_out=by_protocol({1: 0.99, 2: None}), rerun=under_protocol_1, before=None)
    interim_validation: int | None = setting(
        None, "protocol 1: every evaluation before a job's last reads N validation examples, evenly spaced through "
              "the set (what the target reads); the last reads every held-out set in full, and the test set only "
              "then; all: the whole validation set each time (default: 608; protocol 2 reads the whole set, and "
              "takes all only)", metavar="N", parse=parse_interim, show=lambda count: format_value(count or "all"),
        left_out=by_protocol({1: 608, 2: None}), rerun=under_protocol_1, before=None)
    # Tuning's screen: each learning rate trains with this many seeds, for this fraction of its profile's steps (the
    # schedule compressed to them).
    screen_seeds: int = setting(
        2, "protocol 2: each learning rate of the grid is screened with N seeds, the rate of best mean validation "
           "accuracy chosen (default: 2; protocol 1 tunes on one)", metavar="N",
        left_out=by_protocol({1: 1, 2: 2}), rerun=after_protocol_1, before=1)
    screen_fraction: float = setting(
        0.25, "protocol 2: a screening run trains this fraction of its profile's steps (default: 0.25; protocol 1 "
              "tunes over the whole budget)", metavar="F", parse=parse_fraction,
        left_out=by_protocol({1: 1.0, 2: 0.25}), rerun=after_protocol_1, before=1.0)
    kernel: str = kernel_setting()
    sets: tuple[str, ...] = sets_setting()  # the user's --set, fixed in every run
    storage_url: str | None = storage_setting("an Optuna RDB storage URL (postgresql://...) shared by machines "
                                              "(default: the journal RUNS_DIR/benchmark/NAME/jobs.journal)")
    heartbeat_seconds: int = setting(60, "a job silent twice as long is retried", stored=False, rerun=NEVER)
    # Every job's train.interim_test: its test set read at its end only (True: at every evaluation, as the jobs of a
    # definition stored before the field read it).
    interim_test: bool = setting(False, before=True)

    @property
    def target(self) -> float | None:
        """The validation accuracy at which every job stops (protocol 1's --target-accuracy); None: none stops early,
        every job trains its whole budget."""
        return self.target_accuracy

    @property
    def fixed_rate(self) -> bool:
        """Whether every cell trains at its one learning rate with no tuning at all: protocol 2 with a grid of one
        multiple, where there is nothing to choose, so nothing is screened and every seed is a confirmation seed.
        Protocol 1 with one multiple still trains it once in tuning, at `seed`, a run its claims read as one more
        seed (`analysis.claims.base.read_runs`)."""
        return self.protocol >= 2 and len(self.lr_multiples) == 1

    def job_rules(self) -> dict[str, Any]:
        """What every job's train config takes from the benchmark (`JOB_RULES`), checked as the train config checks
        it: a target out of (0, 1] is refused there, in one sentence naming it."""
        train = configs.TrainConfig(**{key: getattr(self, key) for key in JOB_RULES})
        return {key: getattr(train, key) for key in JOB_RULES}

