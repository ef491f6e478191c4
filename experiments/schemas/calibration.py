"""Which runs the calibration table measures, as `attnlab calibration` is told it: the reference variants on the
suite at a profile. `CalibrationOptions` is the one declaration (`common.schema`) of the command's own flags and
the keys of its experiment files; `experiments.calibration` trains the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.schema import setting
from experiments import tasks as task_registry
from experiments.schemas.shared import profile_setting, sets_setting
from variants import presets


def parse_tasks(text: str) -> tuple[str, ...]:
    """'passkey,mqar' -> ('passkey', 'mqar'), each set of tasks expanded; nothing -> the default suite."""
    return tuple(task_registry.expand_tasks(text)) or tuple(task_registry.DEFAULT_SUITE)


@dataclass(frozen=True)
class CalibrationOptions:
    """The options of `attnlab calibration`: every (variant, task) trains once at the profile's defaults."""

    variants: tuple[str, ...] = setting(("dense", "local"), "comma-separated (default: dense,local)",
                                        flag="--variant", parse=presets.expand)
    tasks: tuple[str, ...] = setting(tuple(task_registry.DEFAULT_SUITE), "comma-separated (default: the default "
                                     "suite)", flag="--task", parse=parse_tasks)
    profile: str = profile_setting()
    seed: int = setting(0, "the runs' seed (default: 0)")
    sets: tuple[str, ...] = sets_setting()
