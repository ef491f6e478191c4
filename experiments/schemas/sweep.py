"""What a sweep studies and how, as `attnlab sweep` is told it: one variant on one task, the trials its study should
hold, where the study lives, how it searches, prunes and confirms. `SweepOptions` is the one declaration
(`common.schema`) of the command's own flags and the keys of its experiment files; the sweep
(`experiments.sweep.definition.Sweep`) is what they resolve to, whose definition its study stores.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.schema import setting
from experiments import tasks
from experiments.schemas.shared import kernel_setting, profile_setting, sets_setting, storage_setting


@dataclass(frozen=True)
class SweepOptions:
    """The options of `attnlab sweep`: what it studies and where the study lives, then how it searches."""

    variant: str = setting("dense", "the variant to tune (default: dense)")
    task: str = setting(tasks.DEFAULT_SUITE[0], f"default: {tasks.DEFAULT_SUITE[0]}")
    profile: str = profile_setting()
    seed: int = setting(0, "the runs' seed, and the sampler's (default: 0)")
    kernel: str = kernel_setting()
    sets: tuple[str, ...] = sets_setting()  # the user's --set, fixed in every trial
    trials: int = setting(20, "complete trials the study should hold in total (default: %(default)s); pruned and "
                              "failed trials do not count")
    study: str | None = setting(None, "the study's name (default: VARIANT-TASK-PROFILE-sSEED)")
    storage_url: str | None = storage_setting("an Optuna RDB storage URL, e.g. postgresql://user@host/db, for workers "
                                              "on several machines (default: the embedded journal "
                                              "runs/sweeps/STUDY.journal)")
    space: tuple[str, ...] = setting((), "narrow or fix a searched name, e.g. variant.window=16:64, train.lr=1e-3 "
                                         "(repeatable)", metavar="SECTION.NAME=VALUE|LOW:HIGH|A,B", action="append",
                                     parse=tuple)
    space_file: str | None = setting(None, "the same from a TOML file: [variant] window = [16, 64], [train] lr = 1e-3",
                                     metavar="TOML")
    pruner: str = setting("median", "median (default) or none")
    prune_after: int = setting(5, "complete trials before the pruner may stop a trial (default: %(default)s)")
    confirm_seeds: int = setting(0, "once the study is complete, train the best configuration again with N fresh "
                                    "seeds (the N seeds after --seed) and print the mean and spread of their test "
                                    "accuracy; finished runs are kept when run again (default: 0, none)", metavar="N")
    heartbeat_seconds: int = setting(60, "heartbeat interval of a running trial; one silent for twice as long is "
                                         "failed and retried (default: %(default)s)")
