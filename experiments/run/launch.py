"""Start or resume runs from their configs and train them: `attnlab run`, `attnlab resume`, and the runs of
sweeps (their trials, and the confirmation of the best configuration with fresh seeds).

A run is a folder under the runs folder (`experiments.run.records`): `start_record` creates it for a resolved
config, `train()` fills it, and SIGINT or SIGTERM stop it at a checkpoint so that `resume` continues it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pandas as pd
import torch

from experiments import tasks
from experiments.run import config as configs
from experiments.run.build import Parts, build
from experiments.run.records import RecordError, RunRecord, Summary, new_run_id
from variants import presets


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def checked_device(device: str | None) -> str:
    """The device asked for, or the default one; a CUDA device this machine lacks is an error."""
    device = device or default_device()
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("Device 'cuda' was asked for but this machine has no CUDA device; accepted: cpu.")
    return device


# What a command stopped by a second interrupt says of its work (`attnlab.cli.main`).
KEPT_AND_CONTINUED = ("every finished result and checkpoint is kept, and the same command (a single run: `attnlab "
                      "resume RUN_ID`) continues from them.")


class StopFlag:
    """SIGINT/SIGTERM ask the running training loop to checkpoint and stop, marking the run interrupted; a second
    one stops it at once (KeyboardInterrupt), leaving the run as its last checkpoint has it."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, step: int) -> bool:
        return self.signal is not None

    def install(self) -> StopFlag:
        def handler(signum, frame):
            if self.signal is not None:  # a second signal: stop now
                raise KeyboardInterrupt("stopped by a second signal before its checkpoint was written")
            self.signal = signum

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        return self


def start_record(runs_dir: Path, config: configs.RunConfig) -> RunRecord:
    """A new run folder for `config`, named after the variant as it describes itself, the task and the
    seed, holding the resolved config (config.json: where the config becomes JSON)."""
    record = RunRecord.create(runs_dir, new_run_id(configs.described_variant(config), config.task, config.seed))
    record.write_config(config.to_dict())
    return record


def results_table(summaries: list[Summary]) -> str:
    """One table per task: a row per run, accuracy per distance bucket as columns."""
    blocks = []
    for task in dict.fromkeys(summary.task for summary in summaries):
        rows = []
        for summary in (s for s in summaries if s.task == task):
            row = {"variant": summary.variant_name, "status": summary.status,
                   "test_acc": summary.test_accuracy, "chance": summary.chance_accuracy}
            for bucket in summary.accuracy_by_distance:
                row[f"d{bucket['lo']}-{bucket['hi']}"] = bucket["accuracy"]
            row.update(summary.accuracy_by_split)
            row.update({f"n={entry['length']}": entry["accuracy"] for entry in summary.accuracy_by_length})
            tokens_per_second = summary.tokens_per_second
            row.update({"steps": summary.steps, "wall_s": round(summary.wall_seconds, 1),
                        "tokens/s": round(tokens_per_second) if tokens_per_second else None,
                        "run": summary.run_id})
            rows.append(row)
        table = pd.DataFrame(rows).to_string(index=False, float_format=lambda value: f"{value:.3f}", na_rep="-")
        blocks.append(f"task {task} (accuracy at scored positions; dN-M = dependency distance N..M; "
                      f"n=L = at eval length L; other columns: extra test splits)\n{table}")
    return "\n\n".join(blocks)


def train_runs(pending: list[tuple[Parts, RunRecord]], runs_dir: Path, quiet: bool) -> int:
    """Train each run in turn and print the results table: 0 when all completed, 130 when a signal stopped
    one (the rest are left untrained; a second signal stops it at once, with one sentence), 1 when one diverged
    or failed."""
    from experiments.run.train import train

    stop = StopFlag().install()
    summaries, exit_code = [], 0
    for parts, record in pending:
        try:
            summary = train(parts, record, quiet=quiet, should_stop=stop)
        except KeyboardInterrupt:  # the second signal (`StopFlag`)
            print(f"run {record.run_id} interrupted again before its checkpoint was written; its folder "
                  f"{record.path} keeps the last checkpoint; continue it with: attnlab resume {record.run_id} "
                  f"--runs-dir {runs_dir}", file=sys.stderr)
            return 130
        except RecordError:  # the record itself: another process trains it, or its checkpoint does not match
            raise
        except ValueError as error:  # inputs were validated before training: this is a bug, show its trace
            raise RuntimeError(f"run {record.run_id} failed") from error
        summaries.append(summary)
        if summary.status == "interrupted":
            print(f"run {record.run_id} interrupted at step {summary.steps}; continue it with: "
                  f"attnlab resume {record.run_id} --runs-dir {runs_dir}", file=sys.stderr)
            exit_code = 130
            break
        if summary.status != "completed":
            exit_code = 1
            print(f"run {record.run_id} {summary.status}: {summary.error}", file=sys.stderr)
    print(results_table(summaries))
    print(f"runs saved under {runs_dir}/")
    return exit_code


def run(*, variant_names: str, task_names: str | None, profile: str, seed: int, device: str | None, kernel: str,
        sets: list[str], runs_dir: Path, quiet: bool) -> int:
    """`attnlab run`: every variant of the comma-separated list (names, presets and sets: `variants.presets`) on
    every task (default: the default suite)."""
    device = checked_device(device)
    overrides = configs.parse_sets(sets)
    names = list(presets.expand(variant_names))
    task_list = tasks.expand_tasks(task_names) if task_names else tasks.DEFAULT_SUITE
    # Build every run's parts before training anything, so a typo in the last one costs nothing. In a list of
    # several runs, a variant and task that cannot run together (a bidirectional variant on a task that needs
    # causality), or a task whose data files are not there, are skipped with the reason; alone, they are refused.
    resolved = []
    for name in names:
        for task in task_list:
            try:
                resolved.append(build(configs.resolve(
                    variant=name, task=task, profile=profile, seed=seed, device=device, kernel=kernel,
                    overrides=configs.for_variant(overrides, name, names))))
            except (configs.Incompatible, tasks.MissingData) as reason:
                if len(names) * len(task_list) == 1:
                    raise
                print(f"skipped {name} on {task}: {reason}", file=sys.stderr)
    if not resolved:
        raise configs.Incompatible(f"no run of {', '.join(names)} on {', '.join(task_list)} can run; see the "
                                   "reasons above.")
    for parts in resolved:
        if parts.attends_every_pair:  # allowed (a window grown to dense is a point of a curve), but said
            print(f"note: {parts.described} attends every pair of the {parts.task.max_len} positions of task "
                  f"{parts.config.task!r}, so it computes dense attention.", file=sys.stderr)
    pending = [(parts, start_record(runs_dir, parts.config)) for parts in resolved]
    return train_runs(pending, runs_dir, quiet)


def resume(run_id: str, runs_dir: Path, quiet: bool) -> int:
    """`attnlab resume`: continue a run that did not complete from its last checkpoint."""
    record = RunRecord.open(runs_dir, run_id)
    config = configs.from_dict(record.read_config())
    checked_device(config.device)
    if (record.path / "summary.json").exists() and record.read_summary().status == "completed":
        raise RecordError(f"Run {run_id!r} is already completed; accepted: a run that is interrupted, "
                          "failed or was killed.")
    # `train` refuses a run another process trains and a checkpoint that does not match the run, before it
    # writes anything.
    return train_runs([(build(config), record)], runs_dir, quiet)
