"""What the harness holds, as a user browses it: `attnlab list` (variants, kernels, tasks, profiles) and
`attnlab sample` (a task's examples, as text, JSON or images)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import variants
from common.memory import check_fits
from common.options import OptionError
from experiments import tasks
from experiments.run import config as configs
from experiments.run.build import build_task
from variants import presets
from variants.kernels import KERNELS


def print_catalogue() -> None:
    """`attnlab list`."""
    print("Variants (--variant NAME, options with --set variant.OPTION=VALUE):")
    print(variants.describe_variants())
    print(f"\n{presets.describe_sets()}")
    print("\nKernels (--kernel NAME; auto takes the first a variant lists that runs on the device):")
    for kernel in KERNELS.values():
        print(f"{kernel.name}: {kernel.summary}")
    print("\nTasks (--task NAME, options with --set task.OPTION=VALUE; default suite: "
          f"{','.join(tasks.DEFAULT_SUITE)}):")
    print(tasks.describe_tasks())
    print(f"\nProfiles (--profile NAME): {', '.join(tasks.PROFILES)}; quick for CPU minutes, standard for "
          "one GPU, long for LRA-scale lengths. The tasks that read LRA's files have quick and lra, LRA's published "
          "sizes and budgets (docs/lra.md); --task lra names the five of LRA's Table 1. MAD's tasks have mad, MAD's "
          "baseline sizes, model and budget (docs/mad.md), and quick; --task mad names its six.")


def print_samples(task_name: str, *, profile: str, sets: list[str], count: int, seed: int, format: str,
                  images: Path | None) -> None:
    """`attnlab sample`: `count` examples of a task drawn with `seed`, one per line; with `images`, also
    saved there as PNG files (tasks with images only). The seed and --set are resolved as `attnlab run` resolves
    them (for its default variant, dense), so that what one refuses the other refuses too."""
    config = configs.resolve(variant="dense", task=task_name, profile=profile, seed=seed, device="cpu",
                             overrides=configs.parse_sets(sets))
    task = build_task(config)
    if count < 1:
        raise OptionError(f"--count got {count}; accepted: an integer >= 1, the examples to print.")
    one = task.batch(1, tasks.train_generator(seed), "cpu")
    check_fits(f"--count {count} of task {task_name!r}, at {one.nbytes:,} bytes an example,", count * one.nbytes,
               "cpu", "fewer examples")
    batch = task.batch(count, tasks.train_generator(seed), "cpu")
    written = task.save_images(batch, images, count) if images else []
    for index in range(count):
        print(json.dumps(task.example(batch, index)) if format == "json" else task.text(batch, index))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
