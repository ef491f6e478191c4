"""`make calibration`: what each task's profile reaches with the reference variants, measured, not assumed.

    attnlab calibration                                   # dense and local on the default suite, quick profile
    attnlab calibration --variant dense,local,relative --task induction --profile standard
    attnlab calibration --variant dense,local,sparse --set variant.normaliser=entmax15   # another normaliser

Each (variant, task) is one planned run (`experiments.run.planned`) under RUNS_DIR/calibration/<profile>/, named
after what it is, so the command trains only what has not completed and resumes what was interrupted; the
command line then writes the table (`analysis.calibration.table`) to docs/calibration.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.run import config as configs
from experiments.run.planned import PlannedRun, completed, train_all
from experiments.schemas.calibration import CalibrationOptions
from experiments.slurm import Slurm, announce, submit
from experiments.tasks import presets as task_presets


def plan(variant_names: list[str], task_names: list[str], *, profile: str, seed: int, device: str,
         sets: list[str] = ()) -> list[PlannedRun]:
    """One run per (task, variant) at the profile's defaults and the `--set` overrides, every config resolved
    before anything trains; a variant that cannot run a task by construction (a bidirectional one on a task
    that needs causality) is skipped with its reason."""
    overrides = configs.parse_sets(list(sets))
    runs = []
    for task in task_names:
        for variant in variant_names:
            listed = configs.for_task(configs.for_variant(overrides, variant, variant_names), task, task_names)
            try:
                config = configs.resolve(variant=variant, task=task, profile=profile, seed=seed, device=device,
                                         overrides=listed)
            except configs.Incompatible as reason:
                print(f"skipped {variant} on {task}: {reason}", file=sys.stderr)
                continue
            name = f"{task_presets.folder_name(task)}-{configs.described_variant(config)}-s{seed}"
            runs.append(PlannedRun(name, config, {"calibration": profile}))
    return runs


def runs_folder(runs_dir: Path, profile: str) -> Path:
    return runs_dir / "calibration" / profile


def run(options: CalibrationOptions, *, device: str, runs_dir: Path, quiet: bool,
        slurm: Slurm | None = None) -> list[str] | None:
    """Train what the calibration `options` call for and it lacks, one run at a time on every core (its wall times are
    the table's); returns the runs that did not complete (run: status). With `slurm`, where some run has not
    completed, one SLURM task trains them instead (`CalibrationTask`): None once submitted."""
    profile = options.profile
    runs = plan(list(options.variants), list(options.tasks), profile=profile, seed=options.seed, device=device,
                sets=list(options.sets))
    folder = runs_folder(runs_dir, profile)
    if slurm is not None and not all(completed(folder, planned) for planned in runs):
        job_id = submit(slurm, CalibrationTask(runs, folder), 1, folder / "slurm", name=f"calibration-{profile}")
        print(announce(slurm, job_id, 1, folder / "slurm", label=f"calibration {profile}", each="every run in turn",
                       status=f"squeue -j {job_id}; the runs' folders under {folder}"), flush=True)
        return None
    return train_all(runs, folder, workers=1, quiet=quiet, threads=None, desc="calibration runs")


class CalibrationTask:
    """The SLURM task of a calibration: its runs trained in turn, as the command trains them here. When SLURM warns
    of the task's end, submitit submits it again; the run it cut short resumes from its checkpoint."""

    def __init__(self, runs: list[PlannedRun], folder: Path) -> None:
        self.runs = runs
        self.folder = folder

    def __call__(self, index: int) -> list[str]:
        return train_all(self.runs, self.folder, workers=1, quiet=True, threads=None, desc="calibration runs")

    def checkpoint(self, index: int):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, index)
