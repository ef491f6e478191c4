"""A benchmark's numbers checked together before anything is built (each parsed alone by its options,
`experiments.schemas.benchmark`): the learning-rate grid and its extension, the seeds, the stop and the interim
validation of protocol 1, the screen of protocol 2 (`experiments.revisions.PROTOCOLS`). Each refusal is one sentence
naming the value and what is accepted.
"""

from __future__ import annotations

import math

from common.options import OptionError
from experiments import revisions, tasks
from experiments.schemas.benchmark import (
    EXTEND_ACCEPTED,
    FRACTION_ACCEPTED,
    GRID_ACCEPTED,
    MIN_LEARNING_RATES,
    BenchmarkOptions,
)

MIN_SCREEN_SEEDS = 2  # protocol 2: no one seed decides a cell's learning rate


def check_numbers(options: BenchmarkOptions) -> None:
    seed, seeds, lr_multiples, extend_grid = options.seed, options.seeds, options.lr_multiples, options.extend_grid
    capacity_seeds, screen_seeds = options.capacity_seeds, options.screen_seeds
    if not isinstance(extend_grid, int) or isinstance(extend_grid, bool) or extend_grid < 0:
        raise OptionError(f"Benchmark extend-grid got {extend_grid!r}; {EXTEND_ACCEPTED}.")
    if seeds < 1:
        raise OptionError(f"Benchmark seeds got {seeds}; accepted: an integer >= 1 (2 or more for an interval).")
    if not 1 <= capacity_seeds <= seeds:
        raise OptionError(f"Benchmark capacity-seeds got {capacity_seeds}; accepted: an integer from 1 to seeds = "
                          f"{seeds} (the first confirmation seeds train each capacity point).")
    most = max([seeds, *(count for _, count in options.task_seeds)])  # each row's count, checked when parsed
    tuning = 0 if options.fixed_rate else screen_seeds
    if seed < 0 or seed + tuning + most > tasks.MAX_TRAIN_SEED:
        raise OptionError(f"Benchmark seed {seed} with {tuning} tuning and {most} confirmation seeds passes the "
                          f"largest seed; accepted: seed + tuning seeds + seeds at most {tasks.MAX_TRAIN_SEED}.")
    if len(lr_multiples) in range(2, MIN_LEARNING_RATES) or len(set(lr_multiples)) < len(lr_multiples) \
            or not all(0 < multiple < math.inf for multiple in lr_multiples):
        raise OptionError(f"Benchmark lr-multiples got {','.join(map(str, lr_multiples))}; {GRID_ACCEPTED}.")
    if len(lr_multiples) == 1 and extend_grid:
        raise OptionError(f"Benchmark extend-grid got {extend_grid} with the one learning rate "
                          f"{lr_multiples[0]:g}; accepted: 0 (one learning rate has no grid to extend), or a grid of "
                          f"at least {MIN_LEARNING_RATES}.")
    if options.heartbeat_seconds < 1:
        raise OptionError(f"Benchmark heartbeat seconds got {options.heartbeat_seconds}; accepted: an integer >= 1.")


def check_protocol(options: BenchmarkOptions) -> None:
    """What protocol `protocol` (`experiments.revisions.PROTOCOLS`) allows: protocol 1 tunes one seed over the whole
    budget and may stop at a target; protocol 2 screens a grid (at least 3 learning rates, `check_numbers`) on at
    least 2 seeds over a fraction of the budget, or trains one fixed learning rate with no screen (`fixed_rate`),
    trains every run its whole budget and reads the whole validation set at each
    evaluation, where its events are decided."""
    protocol, interim_validation = options.protocol, options.interim_validation
    screen_seeds, screen_fraction = options.screen_seeds, options.screen_fraction
    versions = ", ".join(str(version) for version, _ in revisions.PROTOCOLS)
    if isinstance(protocol, bool) or protocol not in dict(revisions.PROTOCOLS):
        raise OptionError(f"Benchmark protocol got {protocol!r}; accepted: {versions} (docs/benchmark.md).")
    if protocol == 1:
        if (screen_seeds, screen_fraction) != (1, 1.0):
            raise OptionError(f"Benchmark screen-seeds {screen_seeds} and screen-fraction {screen_fraction:g} belong "
                              "to protocol 2's screen; accepted under --protocol 1: 1 and 1 (one tuning seed, the "
                              "whole budget).")
        return
    if options.target is not None:
        raise OptionError(f"Benchmark target-accuracy {options.target:g} is protocol 1's stop, and protocol "
                          f"{protocol} trains every run its whole budget, recording the steps to 0.9 and 0.99 as "
                          "events; accepted: none, or --protocol 1.")
    if interim_validation is not None:
        raise OptionError(f"Benchmark interim-validation {interim_validation} reads part of the validation set, and "
                          f"protocol {protocol} decides its events on the whole set at every evaluation; accepted: "
                          "all, or --protocol 1.")
    if isinstance(screen_seeds, bool) or not isinstance(screen_seeds, int) or screen_seeds < MIN_SCREEN_SEEDS:
        raise OptionError(f"Benchmark screen-seeds got {screen_seeds!r}; accepted: an integer >= {MIN_SCREEN_SEEDS} "
                          "(no one seed chooses a learning rate under protocol 2).")
    if not 0 < screen_fraction <= 1:
        raise OptionError(f"Benchmark screen-fraction got {screen_fraction:g}; {FRACTION_ACCEPTED}.")
