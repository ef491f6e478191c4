"""A list of named runs trained once: the commands that run a fixed plan (`make saturation`, `make
calibration`) train each run that has not completed, resume one that was interrupted, and skip one that
completed, so running the command again continues where it stopped.

A planned run's folder is named after what it is (`D-ssmax-s0`, `calibration-local_w32-passkey-quick-s0`),
not after the time it started, so the next call finds it. A folder holding another config under the same
name is an error: its runs would not be what the plan says.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from experiments.run import config as configs
from experiments.run.records import RecordError, RunRecord, Summary


@dataclass(frozen=True)
class PlannedRun:
    name: str  # the run folder's name: what the run is
    config: configs.RunConfig
    tags: dict[str, Any] = field(default_factory=dict)  # written into the summary, e.g. {"saturation": "B"}


def _same_settings(stored: dict[str, Any], config: configs.RunConfig) -> bool:
    """Whether a run folder's config is `config`, read as today's version resolves it: an option added since the
    folder was written counts at its default (the normaliser, say), so an upgrade does not orphan finished runs."""
    try:
        return configs.to_json(configs.from_dict(stored)) == configs.to_json(config)
    except ValueError:  # a field or value this version no longer accepts: other settings
        return False


def completed(runs_dir: Path, planned: PlannedRun) -> bool:
    """Whether the run has completed (`open_record` would reopen none), read without creating anything."""
    summary = runs_dir / planned.name / "summary.json"
    return summary.exists() and RunRecord.open(runs_dir, planned.name).read_summary().status == "completed"


def open_record(runs_dir: Path, planned: PlannedRun) -> RunRecord | None:
    """The run's record, created or reopened; None when it already completed."""
    path = runs_dir / planned.name
    if not path.exists():
        record = RunRecord.create(runs_dir, planned.name)
        record.write_config(planned.config.to_dict())
        return record
    record = RunRecord.open(runs_dir, planned.name)
    if not _same_settings(record.read_config(), planned.config):
        raise RecordError(f"Run {planned.name!r} in {runs_dir} was made with other settings; accepted: the folder "
                          "as this version of attnlab writes it for this plan (remove the run to redo it).")
    return None if completed(runs_dir, planned) else record


def train_one(runs_dir: str, planned: PlannedRun, threads: int | None) -> Summary:
    """One run, in this process or a worker's; `threads` sets torch's thread count (None: leave it)."""
    from experiments.run.train import train  # the training loop's imports are only paid for when a run trains

    if threads is not None:
        torch.set_num_threads(threads)
    record = RunRecord.open(Path(runs_dir), planned.name)
    return train(planned.config, record, quiet=True, tags=planned.tags)


def train_all(runs: list[PlannedRun], runs_dir: Path, *, workers: int, quiet: bool, threads: int | None = 1,
              desc: str = "runs") -> list[str]:
    """Train the runs not yet completed, `workers` at a time (one thread each when several); returns the
    problems (run: status)."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    pending = [planned for planned in runs if open_record(runs_dir, planned) is not None]
    problems = []
    bar = tqdm(total=len(runs), initial=len(runs) - len(pending), desc=desc, unit="run", disable=quiet,
               dynamic_ncols=True)

    def finished(planned: PlannedRun, summary: Summary) -> None:
        if summary.status != "completed":
            problems.append(f"{planned.name}: {summary.status} ({summary.error})")
        bar.set_postfix_str(planned.name)
        bar.update()

    if workers == 1:
        for planned in pending:
            finished(planned, train_one(str(runs_dir), planned, threads))
    else:
        context = multiprocessing.get_context("spawn")  # fresh interpreters: no inherited thread pools
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(train_one, str(runs_dir), planned, 1): planned for planned in pending}
            for future in concurrent.futures.as_completed(futures):
                finished(futures[future], future.result())
    bar.close()
    return problems
