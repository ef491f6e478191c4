"""Task rows: what a benchmark's `--task` names. A row is a registered task by name, or a preset: the task with
some of its options fixed, written `name:option=value[:option=value]` (`mqar:num_pairs=16`), as a variant's
preset is (`variants.presets`). A preset is a row of its own: its runs are the task's at the profile's sizes with
those options, its config holds the task's name and every option, and pages show it under the text it was written
as (`canonical`: option values as `--set` writes them).

    >>> parse("mqar:num_pairs=16")
    ('mqar', {'num_pairs': 16})
    >>> canonical("mqar:gap_power=1")
    'mqar:gap_power=1.0'
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from common.options import checked_values, format_value, merged_preset, parse_preset
from experiments.tasks.registry import create_task, task_class


def parse(row: str) -> tuple[str, dict[str, Any]]:
    """'mqar:num_pairs=16' -> ('mqar', {'num_pairs': 16}): an unknown task or option is a one-sentence error (a
    value is checked where the task is built at a profile, beside the profile's other sizes)."""
    name, options = parse_preset(row, what="Task", example="mqar:num_pairs=16")
    return name, checked_values(task_class(name).Options, f"Task preset {row!r}", options)


def canonical(row: str) -> str:
    """The row as pages show it: the name, then its options as `--set` writes their values."""
    name, options = parse(row)
    return ":".join([name, *(f"{key}={format_value(value)}" for key, value in options.items())])


def base(row: str) -> str:
    """The registered task a row runs: 'mqar:num_pairs=16' -> 'mqar'."""
    return row.split(":", 1)[0]


def with_preset(row: str, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the task's name, its options): the preset's options, then the user's --set for the task, which may not give
    one of the preset's options another value."""
    name, fixed = parse(row)
    return name, merged_preset(row, name, fixed, overrides, section="task")


def row_of(name: str, profile: str, options: dict[str, Any]) -> str:
    """The row a run of task `name` at `profile` with every option `options` (a config's) trained: the name, then
    each option whose value differs from the profile's (`mqar:num_pairs=16`; the profile's own sizes: `mqar`)."""
    own = dataclasses.asdict(create_task(name, profile=profile).options)
    changed = {key: value for key, value in options.items() if key in own and _same(value) != _same(own[key])}
    return ":".join([name, *(f"{key}={format_value(value)}" for key, value in changed.items())])


def _same(value: Any) -> Any:
    """A value as JSON reads it back: a tuple as a list."""
    return list(value) if isinstance(value, tuple) else value


def folder_name(row: str) -> str:
    """The row as a run folder's name may hold it: 'mqar:num_pairs=16' -> 'mqar-num_pairs-16'."""
    return re.sub(r"[:=,]", "-", row)
