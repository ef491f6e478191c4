"""The options of `attnlab sweep`: what it studies and where the study lives and runs (`add_study`), and how it
searches, prunes and confirms (`add_search`). Apart from `attnlab.cli`, as `attnlab.benchmark_options` is,
so that the command line stays short to read."""

from __future__ import annotations

import argparse

from attnlab.arguments import add_launcher, add_run_selection
from experiments import tasks


def add_study(sweep: argparse.ArgumentParser) -> None:
    """What the sweep studies, and where the study lives and runs."""
    add_run_selection(sweep, variant=("dense", "the variant to tune (default: dense)"),
                       task=(tasks.DEFAULT_SUITE[0], f"default: {tasks.DEFAULT_SUITE[0]}"),
                       seed="the runs' seed, and the sampler's (default: 0)")
    sweep.add_argument("--trials", type=int, default=20,
                       help="complete trials the study should hold in total (default: 20); pruned and failed "
                            "trials do not count")
    sweep.add_argument("--study", help="the study's name (default: VARIANT-TASK-PROFILE-sSEED)")
    sweep.add_argument("--storage", metavar="URL",
                       help="an Optuna RDB storage URL, e.g. postgresql://user@host/db, for workers on several "
                            "machines (default: the embedded journal runs/sweeps/STUDY.journal)")
    sweep.add_argument("--workers", type=int,
                       help="worker processes on this machine, one study (default: one per GPU with cuda, else 1)")
    add_launcher(sweep)


def add_search(sweep: argparse.ArgumentParser) -> None:
    """How the sweep searches, prunes and confirms; and how each trial runs."""
    sweep.add_argument("--space", action="append", metavar="SECTION.NAME=VALUE|LOW:HIGH|A,B",
                       help="narrow or fix a searched name, e.g. variant.window=16:64, train.lr=1e-3 (repeatable)")
    sweep.add_argument("--space-file", metavar="TOML",
                       help="the same from a TOML file: [variant] window = [16, 64], [train] lr = 1e-3")
    sweep.add_argument("--pruner", default="median", help="median (default) or none")
    sweep.add_argument("--prune-after", type=int, default=5,
                       help="complete trials before the pruner may stop a trial (default: 5)")
    sweep.add_argument("--confirm-seeds", type=int, default=0, metavar="N",
                       help="once the study is complete, train the best configuration again with N fresh seeds "
                            "(the N seeds after --seed) and print the mean and spread of their test accuracy; "
                            "finished runs are kept when run again (default: 0, none)")
    sweep.add_argument("--heartbeat-seconds", type=int, default=60,
                       help="heartbeat interval of a running trial; one silent for twice as long is failed and "
                            "retried (default: 60)")
