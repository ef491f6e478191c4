"""The options of `attnlab benchmark` that say what the benchmark is (its cells, seeds, learning-rate grid and
capacity stage) and where its jobs live and run (its name, storage and workers).

They live apart from `attnlab.cli`, which adds the options every command shares, so that the command
line stays short to read and building it imports neither optuna nor the benchmark (`experiments.benchmark`,
imported by the command alone, validates the values).
"""

from __future__ import annotations

import argparse

from attnlab.arguments import add_launcher
from experiments import revisions, tasks
from experiments.revisions import DEFAULT_INTERIM_VALIDATION, DEFAULT_TARGET_ACCURACY

# Centred where the leaderboard of record's tuning chose (docs/results.md's tuning table): on 0.3, 1, 3 most cells
# chose x3 or the x9 beyond it; an optimum below x1 is still reached by the extension below the grid's edge.
DEFAULT_LR_MULTIPLES = "1,3,9"
DEFAULT_CAPACITY_SEEDS = 1
DEFAULT_EXTEND_GRID = "2"
DEFAULT_SEEDS = 6  # paired confirmation seeds: with 3, the smallest two-sided rank-test p is 0.10


def capacity_options() -> str:
    """'mqar.num_pairs, ...': each task's capacity option, for the help."""
    return ", ".join(f"{name}.{tasks.task_class(name).capacity_option}" for name in tasks.list_tasks()
                     if tasks.task_class(name).capacity_option is not None)


def add_arguments(bench: argparse.ArgumentParser) -> None:
    """The benchmark's own options; `attnlab.cli` adds the shared ones (profile, --set, device, ...)."""
    bench.add_argument("--protocol", type=int, default=revisions.PROTOCOL, metavar="N",
                       help="the protocol a new benchmark runs (docs/benchmark.md): 1, tuned on one seed with every "
                            "run stopping at --target-accuracy; 2, a screen on --screen-seeds seeds and every run "
                            "trained its whole budget (default: %(default)s)")
    bench.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                       help="fresh seeds of the confirmation, paired across variants (default: %(default)s)")
    bench.add_argument("--screen-seeds", type=int, metavar="N",
                       help="protocol 2: each learning rate of the grid is screened with N seeds, the rate of best "
                            "mean validation accuracy chosen (default: 2; protocol 1 tunes on one)")
    bench.add_argument("--screen-fraction", metavar="F",
                       help="protocol 2: a screening run trains this fraction of its profile's steps (default: 0.25; "
                            "protocol 1 tunes over the whole budget)")
    bench.add_argument("--lr-multiples", default=DEFAULT_LR_MULTIPLES,
                       help="the grid: multiples of each task's lr (%(default)s)")
    bench.add_argument("--extend-grid", default=DEFAULT_EXTEND_GRID, metavar="N",
                       help="where a cell's best learning rate lies at an edge of the grid, tune the next multiple "
                            "beyond it (the grid's ratio: x27 after 1,3,9's x9, x0.333 before its x1) while the "
                            "best stays at the edge, at most N per cell, before confirmation; 0: never "
                            "(default: %(default)s)")
    bench.add_argument("--target-accuracy", metavar="X",
                       help="protocol 1: every job stops at the first evaluation whose validation accuracy reaches X, "
                            "recording the step (as Zoology stops at 0.99); none: every job trains every step "
                            f"(default: {DEFAULT_TARGET_ACCURACY}; protocol 2 records the steps to 0.9 and 0.99 "
                            "instead, and takes none only)")
    bench.add_argument("--interim-validation", metavar="N",
                       help="protocol 1: every evaluation before a job's last reads N validation examples, evenly "
                            "spaced through the set (what the target reads); the last reads every held-out set in "
                            "full, and the test set only then; all: the whole validation set each time (default: "
                            f"{DEFAULT_INTERIM_VALIDATION}; protocol 2 reads the whole set, and takes all only)")
    bench.add_argument("--size-to-dense", action=argparse.BooleanOptionalAction, default=True,
                       help="size each cell's model to within 10%% of dense's parameters on its task (the variant's "
                            "size option, else the width); --no-size-to-dense: each at its own size, and one outside "
                            "10%% is not ranked (default: on)")
    bench.add_argument("--capacity-widths", metavar="MULTIPLES",
                       help="capacity: train each confirmed cell again at these multiples of its model width "
                            "(model.dim); none: no width axis (default: 0.5 under protocol 1, none under 2)")
    bench.add_argument("--capacity-scales", metavar="MULTIPLES",
                       help=f"capacity: and at these multiples of its task's capacity option ({capacity_options()}); "
                            "none: no such axis (default: 2 under protocol 1, none under protocol 2, whose capacity "
                            "axis is a task's rows, e.g. selective_copy,selective_copy:num_tokens=8)")
    bench.add_argument("--capacity-seeds", type=int, default=DEFAULT_CAPACITY_SEEDS, metavar="N",
                       help="capacity: the first N confirmation seeds train each point (default: %(default)s)")
    bench.add_argument("--name", help="the benchmark's name (default: the profile, then the protocol after 1: "
                                      "quick-protocol2)")
    bench.add_argument("--storage", metavar="URL", help="an Optuna RDB storage URL (postgresql://...) shared by "
                       "machines (default: the journal RUNS_DIR/benchmark/NAME/jobs.journal)")
    bench.add_argument("--workers", type=int, help="worker processes here (default: one per GPU with cuda, else one "
                       "per CPU core, each with one thread)")
    bench.add_argument("--heartbeat-seconds", type=int, default=60, help="a job silent twice as long is retried")
    bench.add_argument("--estimate-check", action="store_true", help="train nothing: compare a benchmark whose every "
                       "job has settled with the estimate made before it ran (estimate-check.csv, a record)")
    bench.add_argument("--status", action="store_true", help="train nothing: what the storage holds of benchmark "
                       "--name (default: as the benchmark's), with --storage and --runs-dir: jobs settled, running and "
                       "left")
    add_launcher(bench)
    bench.add_argument("--estimate", action="store_true", help="train nothing: time a few steps and one evaluation "
                       "of every size the benchmark trains at, and print how long what remains of it will take "
                       "with --workers (the table: RUNS_DIR/benchmark/NAME/estimate.csv)")


OWN = ("protocol", "seeds", "screen_seeds", "screen_fraction", "lr_multiples", "extend_grid", "size_to_dense",
       "target_accuracy", "interim_validation", "capacity_widths", "capacity_scales", "capacity_seeds", "name",
       "storage", "heartbeat_seconds")


def values(args: argparse.Namespace) -> dict:
    """The values of the options `add_arguments` adds that define the benchmark, by `benchmark.prepare`'s names."""
    return {name: getattr(args, name) for name in OWN}
