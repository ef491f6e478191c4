"""`attnlab benchmark`: open (or join) the benchmark's storage, run its workers until every job has
settled, and hand the state to the report."""

from __future__ import annotations

import sys
from collections import Counter

import optuna

from experiments.benchmark.definition import Benchmark
from experiments.benchmark.ledger import Ledger
from experiments.benchmark.worker import work
from experiments.launch import StopFlag
from experiments.sweep.pool import spawn_workers, worker_count
from experiments.sweep.storage import create_or_join, open_storage


def open_study(benchmark: Benchmark) -> optuna.Study:
    """Create the benchmark's study, or join it after checking that it was created for the same benchmark."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # each job is announced by the benchmark itself
    storage = open_storage(benchmark.storage_url, benchmark.journal, benchmark.heartbeat_seconds)
    study = create_or_join(storage, benchmark.study_name, benchmark.definition(), kind="benchmark",
                           shown=benchmark.storage_shown,
                           accepted="the variants, tasks, profile, seed, seeds, lr-multiples, capacity options, "
                                    "kernel and --set it was created with, or another name (--name)")
    study.sampler = optuna.samplers.RandomSampler(seed=0)  # a job's values are queued with it; nothing is drawn
    return study


def worker_command(benchmark: Benchmark, quiet: bool) -> list[str]:
    """The command of one worker process of `benchmark`; `spawn_workers` adds --worker-index."""
    return [sys.executable, "-m", "experiments", "benchmark", *benchmark.arguments(hide_password=False),
            "--device", benchmark.device, "--runs-dir", str(benchmark.runs_dir),
            "--heartbeat-seconds", str(benchmark.heartbeat_seconds), "--workers", "1",
            *(["--quiet"] if quiet else [])]


def capacity_lines(benchmark: Benchmark) -> list[str]:
    """What the capacity stage trains, and its points that cannot be built, once per reason."""
    if not benchmark.capacity_widths and not benchmark.capacity_scales:
        return ["  capacity: off"]
    sizes = "; ".join(text for text in (
        f"model widths {', '.join(f'x{multiple:g}' for multiple in benchmark.capacity_widths)}"
        if benchmark.capacity_widths else "",
        f"each task's capacity option {', '.join(f'x{multiple:g}' for multiple in benchmark.capacity_scales)}"
        if benchmark.capacity_scales else "") if text)
    lines = [f"  capacity: the confirmed configuration at {sizes}, seed{'s' if benchmark.capacity_seeds > 1 else ''} "
             f"{', '.join(map(str, benchmark.capacity_seed_list))}, test accuracy"]
    skipped = Counter((point.axis, point.value, point.skipped) for cell in benchmark.cells
                      for point in cell.capacity if point.skipped is not None)
    lines += [f"  capacity {axis} {value} skipped in {count} cell{'s' if count > 1 else ''}: {reason}"
              for (axis, value, reason), count in skipped.items()]
    return lines


def header(benchmark: Benchmark, workers: int) -> str:
    skipped = [cell for cell in benchmark.cells if cell.skipped is not None]
    lines = [f"benchmark {benchmark.name}: {len(benchmark.variants)} variants x {len(benchmark.tasks)} tasks "
             f"({benchmark.profile}), {len(benchmark.cells) - len(skipped)} cells to run, {len(skipped)} skipped; "
             f"{workers} worker{'s' if workers > 1 else ''}, storage {benchmark.storage_shown}",
             f"  tuning: learning rates {', '.join(map(repr, benchmark.lr_multiples))} x each task's, seed "
             f"{benchmark.seed}, chosen on the validation set",
             f"  confirmation: the best learning rate with {benchmark.seeds} fresh seeds "
             f"({', '.join(map(str, benchmark.confirmation_seeds))}), test accuracy", *capacity_lines(benchmark)]
    lines += [f"  skipped {cell.variant} on {cell.task}: {cell.skipped}" for cell in skipped]
    return "\n".join(lines)


def run(benchmark: Benchmark, *, workers: int | None, worker_index: int | None,
        quiet: bool) -> tuple[int, Ledger | None]:
    """The whole benchmark from this process (`workers` processes: default one per GPU with cuda, else 1) and
    its state at the end; or, with `worker_index`, one worker of a benchmark another process started (no
    state: that process reports). 0 when every job has settled, 130 after a signal, 1 otherwise."""
    workers = worker_count(workers, benchmark.device)
    study = open_study(benchmark)
    if worker_index is not None:
        return work(benchmark, study, worker=worker_index, quiet=quiet, should_stop=StopFlag().install()), None
    print(header(benchmark, workers), flush=True)
    if workers == 1:
        exit_code = work(benchmark, study, quiet=quiet, should_stop=StopFlag().install())
    else:
        codes = spawn_workers(worker_command(benchmark, quiet), workers, device=benchmark.device,
                              label=f"benchmark {benchmark.name}")
        exit_code = 0 if all(code == 0 for code in codes) else 130 if 130 in codes else 1
    state = Ledger(benchmark, study.get_trials(deepcopy=False))
    if exit_code == 0 and not state.complete:
        exit_code = 1
    return exit_code, state
