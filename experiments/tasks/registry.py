"""The task registry: one decorator adds a task, `create_task` builds one by name and profile."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from common.options import OptionError, build_options, closest, describe_options
from common.registry import Registry
from experiments.tasks.base import PROFILES, Task

_REQUIRED_OPTIONS = ("seq_len", "test_size")


def _check_task(name: str, cls: type[Task]) -> None:
    if set(cls.profiles) != set(PROFILES):
        raise ValueError(f"Task {name!r} defines profiles {sorted(cls.profiles)}; required: {list(PROFILES)}.")
    fields = [field.name for field in dataclasses.fields(cls.Options)]
    missing = [option for option in _REQUIRED_OPTIONS if option not in fields]
    if missing:
        raise ValueError(f"Task {name!r} lacks the options {missing}; every task has {list(_REQUIRED_OPTIONS)}.")
    if cls.capacity_option is not None and cls.capacity_option not in fields:
        raise ValueError(f"Task {name!r} declares capacity option {cls.capacity_option!r}, which is not one of its "
                         f"options; accepted: one of {fields}, or None.")


TASKS = Registry("task", _check_task)
register_task = TASKS.register
list_tasks = TASKS.names
task_class = TASKS.get


def create_task(name: str, *, profile: str = "quick", options: Any = None, **values: Any) -> Task:
    """Build task `name` at `profile`'s sizes; explicit `values` override the profile's (or `options`, the
    task's typed `Options` as a run's config holds them, give every option).

        >>> create_task("passkey", profile="standard").seq_len
        1024
        >>> create_task("passkey", profile="standard", seq_len=512).seq_len
        512
    """
    cls = task_class(name)
    if profile not in PROFILES:
        raise ValueError(f"Unknown profile {profile!r}{closest(str(profile), PROFILES)}; "
                         f"available: {', '.join(PROFILES)}.")
    owner = f"Task {name!r} (profile {profile!r})"
    if not isinstance(options, cls.Options):
        options = build_options(cls.Options, owner, {**cls.profiles[profile].options, **(options or {}), **values})
    task = cls(options, profile)
    lengths = task.eval_lengths
    if len(set(lengths)) != len(lengths):
        raise OptionError(f"{owner} option 'eval_lengths' got {lengths!r}; accepted: distinct lengths.")
    for length in lengths:
        try:
            task.at_length(length)
        except OptionError as error:
            raise OptionError(f"{owner} option 'eval_lengths' got {length!r}, at which the task cannot be drawn "
                              f"({str(error).rstrip('.')}).") from None
    return task


def check_drawable(name: str, *, profile: str = "quick", **options: Any) -> None:
    """Build task `name` and draw its held-out sets, as every run does first: a ValueError says why the task
    cannot be drawn with these options, which its checks accept but its sampler cannot fill (Pathfinder's paths in
    too small an image). Remembered per task, profile and options: the same size is drawn once."""
    reason = _drawing_fails(name, profile, tuple(sorted(options.items())))
    if reason is not None:
        raise ValueError(reason)


@functools.cache
def _drawing_fails(name: str, profile: str, options: tuple[tuple[str, Any], ...]) -> str | None:
    try:
        task = create_task(name, profile=profile, **dict(options))
        for draw in (task.test_set, task.validation_set, task.extra_test_sets):
            draw("cpu")
    except ValueError as error:
        return str(error)
    return None


def describe_tasks() -> str:
    """Every task with its one-line description, profiles and options (for `attnlab list`)."""
    lines = []
    for name in list_tasks():
        cls = task_class(name)
        lines.append(f"{name}: {TASKS.summary(name)}")
        for profile in PROFILES:
            overrides = ", ".join(f"{option}={value!r}" for option, value in cls.profiles[profile].options.items())
            lines.append(f"    profile {profile}: {overrides or 'the defaults below'}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
        if cls.known_shortcut is not None:
            lines.append(f"    known shortcut, so not in the default suite: {cls.known_shortcut}")
    return "\n".join(lines)
