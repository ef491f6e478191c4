"""The fields (`common.schema.setting`) that several commands' options declare alike: the profile, the kernel, the
user's --set and the storage URL; and the help texts that `attnlab run`'s flags (`attnlab.arguments`) share."""

from __future__ import annotations

from typing import Any

from common.options import shown
from common.schema import CHANGED, setting
from experiments import tasks

PROFILE_HELP = (f"one of {', '.join(tasks.PROFILES)} (default: quick); lra for the tasks that read LRA's files, "
                f"{tasks.MAD_PROFILE} for MAD's tasks")
KERNEL_HELP = "attention kernel (default: auto)"
SETS_HELP = "override any config field: variant.*, task.*, model.*, train.* (repeatable)"
SETS_METAVAR = "SECTION.FIELD=VALUE"


def profile_setting() -> Any:
    return setting("quick", PROFILE_HELP)


def kernel_setting() -> Any:
    return setting("auto", KERNEL_HELP, flag=("--kernel", "--backend"), rerun=CHANGED)


def sets_setting() -> Any:
    """--set, repeated: the assignments as given, in order."""
    return setting((), SETS_HELP, flag="--set", metavar=SETS_METAVAR, action="append", parse=tuple)


def storage_setting(help: str) -> Any:
    """--storage URL: where a study lives across machines, not what it is (never stored); a command that reruns it
    names it with its password hidden."""
    return setting(None, help, flag="--storage", metavar="URL", show=shown, stored=False, rerun=CHANGED)
