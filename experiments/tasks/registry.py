"""The task registry: one decorator adds a task, `create_task` builds one by name and profile."""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
from collections.abc import Callable
from typing import Any

from experiments.tasks.base import PROFILES, Task
from variants.options import build_options, closest, describe_options

_REGISTRY: dict[str, type[Task]] = {}
_REQUIRED_OPTIONS = ("seq_len", "eval_size")


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: `@register_task("passkey")`. A name can be registered once."""

    def add(cls: type[Task]) -> type[Task]:
        if name in _REGISTRY:
            raise ValueError(f"Task {name!r} is already registered (by {_REGISTRY[name].__qualname__}).")
        if set(cls.profiles) != set(PROFILES):
            raise ValueError(f"Task {name!r} defines profiles {sorted(cls.profiles)}; required: {list(PROFILES)}.")
        fields = [field.name for field in dataclasses.fields(cls.Options)]
        missing = [option for option in _REQUIRED_OPTIONS if option not in fields]
        if missing:
            raise ValueError(f"Task {name!r} lacks the options {missing}; every task has {list(_REQUIRED_OPTIONS)}.")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return add


def list_tasks(pattern: str = "*") -> list[str]:
    """Registered task names matching a shell-style pattern, sorted."""
    return sorted(name for name in _REGISTRY if fnmatch.fnmatchcase(name, pattern))


def task_class(name: str) -> type[Task]:
    """The class registered as `name`, or a ValueError naming the closest match and the full list."""
    if name not in _REGISTRY:
        raise ValueError(f"Unknown task {name!r}{closest(str(name), _REGISTRY)}; available: {', '.join(list_tasks())}.")
    return _REGISTRY[name]


def create_task(name: str, *, profile: str = "quick", **options: Any) -> Task:
    """Build task `name` at `profile`'s sizes; explicit options override the profile's.

        >>> create_task("passkey", profile="standard").seq_len
        1024
        >>> create_task("passkey", profile="standard", seq_len=512).seq_len
        512
    """
    cls = task_class(name)
    if profile not in PROFILES:
        raise ValueError(f"Unknown profile {profile!r}{closest(str(profile), PROFILES)}; "
                         f"available: {', '.join(PROFILES)}.")
    values = {**cls.profiles[profile].options, **options}
    resolved = build_options(cls.Options, f"Task {name!r} (profile {profile!r})", values)
    return cls(resolved, profile)


def summary(name: str) -> str:
    """The first line of the task's docstring."""
    return inspect.getdoc(task_class(name)).splitlines()[0]


def describe_tasks() -> str:
    """Every task with its one-line description, profiles and options (for `attnlab list`)."""
    lines = []
    for name in list_tasks():
        cls = _REGISTRY[name]
        lines.append(f"{name}: {summary(name)}")
        for profile in PROFILES:
            overrides = ", ".join(f"{option}={value!r}" for option, value in cls.profiles[profile].options.items())
            lines.append(f"    profile {profile}: {overrides or 'the defaults below'}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
    return "\n".join(lines)
