"""The flags the commands of `attnlab.cli` share: which runs a command trains (`add_run_selection`, `attnlab
run`'s; a command whose options are a schema declares them as fields, `experiments.schemas`) and where
(`add_run_place`), the runs folder, --set and --quiet."""

from __future__ import annotations

import argparse
import os
import re

from experiments.schemas.shared import KERNEL_HELP, PROFILE_HELP, SETS_HELP, SETS_METAVAR

QUIET = {"action": "store_true", "default": bool(os.environ.get("CI")),
         "help": "no progress bar (the default when CI is set)"}
SETS = {"action": "append", "metavar": SETS_METAVAR, "help": SETS_HELP}
RUNS_DIR_OPTION = "--runs-dir (or RUNS_DIR)"  # how a sentence about the runs folder names where it came from


class CommandParser(argparse.ArgumentParser):
    """attnlab's parser: a value that starts with '-' and a digit (`--lr-multiples -1,3`, `--capacity-scales -2,2`)
    is read as the option's value, so that the command's own check names what it accepts, where argparse would read
    -1,3 as an unknown option and answer "expected one argument" (it reads only a bare number such as -5 or -.5 as
    a value). No option of attnlab starts with '-' and a digit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"-\.?\d")


def runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs-dir", default=os.environ.get("RUNS_DIR", "runs"),
                        help="the runs folder (default: $RUNS_DIR or runs)")


def add_run_selection(parser: argparse.ArgumentParser, *, variant: tuple[str | None, str],
                       task: tuple[str | None, str]) -> None:
    """The flags that say which runs `attnlab run` trains and where: --variant and --task (its default and help),
    --profile, --seed, --kernel, --set, and `add_run_place`'s. (A command whose options are a schema,
    `experiments.schemas`, declares its own as fields.)"""
    parser.add_argument("--variant", default=variant[0], help=variant[1])
    parser.add_argument("--task", default=task[0], help=task[1])
    parser.add_argument("--profile", default="quick", help=PROFILE_HELP)
    parser.add_argument("--seed", type=int, default=0, help="the runs' seed (default: 0)")
    parser.add_argument("--kernel", "--backend", default="auto", help=KERNEL_HELP)
    parser.add_argument("--set", **SETS)
    add_run_place(parser)


def add_run_place(parser: argparse.ArgumentParser) -> None:
    """The flags that say where a command's runs train and are kept, not what they are: --device, --config (an
    experiment file of the command's options), --runs-dir and --quiet."""
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when present")
    parser.add_argument("--config", metavar="FILE", help="an experiment file (TOML, or a run's config.json): the "
                        "command's options and [variant], [task], [model], [train]; the command line overrides it")
    runs_dir(parser)
    parser.add_argument("--quiet", **QUIET)


def add_launcher(parser: argparse.ArgumentParser) -> None:
    """--launcher and what each SLURM task asks for (`experiments.slurm`, which reads them); an experiment file's
    `[launcher]` table holds the same, `name` for --launcher."""
    from experiments import slurm  # imports no submitit: its defaults only

    parser.add_argument("--launcher", choices=["local", "slurm"], default="local",
                        help="where the workers run: local, processes here (default); slurm, one SLURM job array of "
                             "--workers tasks submitted through submitit (pip install -e '.[slurm]')")
    parser.add_argument("--partition", help="slurm: the partition (default: the cluster's default)")
    parser.add_argument("--time-limit", type=int, default=slurm.DEFAULT_TIME_LIMIT, metavar="MINUTES",
                        help="slurm: each task's time limit; a task that reaches it is requeued and resumes "
                             "(default: %(default)s)")
    parser.add_argument("--gpus-per-task", type=int, help="slurm: default 1 with cuda, else 0")
    parser.add_argument("--cpus-per-task", type=int, default=slurm.DEFAULT_CPUS_PER_TASK,
                        help="slurm: default %(default)s")
    parser.add_argument("--mem", default=slurm.DEFAULT_MEM, help="slurm: each task's memory (default: %(default)s; "
                        "none: the cluster's default)")
    parser.add_argument("--sbatch", metavar="'NAME=VALUE ...'", help="slurm: more sbatch options, e.g. "
                        "'account=lab qos=high'")
