"""`make calibration`: what each task's profile reaches with the reference variants, measured, not assumed.

    attnlab calibration                                   # dense and local on the default suite, quick profile
    attnlab calibration --variant dense,local,relative --task induction --profile standard
    attnlab calibration --variant dense,local,sparse --set variant.normaliser=entmax15   # another normaliser

Each (variant, task) is one planned run (`experiments.planned`) under RUNS_DIR/calibration/<profile>/, named
after what it is, so the command trains only what has not completed and resumes what was interrupted; the
command line then writes the table (`analysis.calibration`) to docs/calibration.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments import config as configs
from experiments import tasks
from experiments.planned import PlannedRun, train_all
from experiments.tasks import presets as task_presets

DEFAULT_VARIANTS = ("dense", "local")


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


def run(variant_names: list[str], task_names: list[str] | None, *, profile: str, seed: int, device: str,
        runs_dir: Path, quiet: bool, sets: list[str] = ()) -> list[str]:
    """Train what the calibration lacks, one run at a time on every core (its wall times are the table's);
    returns the runs that did not complete (run: status)."""
    runs = plan(variant_names, task_names or tasks.DEFAULT_SUITE, profile=profile, seed=seed, device=device, sets=sets)
    return train_all(runs, runs_folder(runs_dir, profile), workers=1, quiet=quiet, threads=None,
                     desc="calibration runs")
