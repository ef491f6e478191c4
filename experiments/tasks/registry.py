"""The task registry: one decorator adds a task, `create_task` builds one by name and profile."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from common.options import OptionError, build_options, closest, describe_options
from common.registry import Registry
from experiments.tasks.base import DATA_PROFILES, MAD_PROFILE, PROFILES, Task

_REQUIRED_OPTIONS = ("seq_len", "test_size")
# The profile sets a task may define: a generated task PROFILES (and MAD's profile where MAD's suite has the task
# too), or quick and MAD's profile for a task sized after MAD alone; a task that reads files DATA_PROFILES.
_GENERATED_PROFILES = (PROFILES, (*PROFILES, MAD_PROFILE), ("quick", MAD_PROFILE))


def _check_task(name: str, cls: type[Task]) -> None:
    accepted = _GENERATED_PROFILES if cls.data_source is None else (DATA_PROFILES,)
    if not any(set(cls.profiles) == set(profiles) for profiles in accepted):
        raise ValueError(f"Task {name!r} defines profiles {sorted(cls.profiles)}; accepted: "
                         f"{' or '.join(str(list(profiles)) for profiles in accepted)}.")
    if bool(cls.mad_ladder) != (MAD_PROFILE in cls.profiles):
        raise ValueError(f"Task {name!r} has {'no ' if not cls.mad_ladder else ''}MAD ladder but "
                         f"{'no ' if MAD_PROFILE not in cls.profiles else ''}profile {MAD_PROFILE!r}; accepted: both "
                         f"or neither.")
    if cls.towers not in (1, 2):
        raise ValueError(f"Task {name!r} declares {cls.towers!r} towers; accepted: 1, or 2 for a pair.")
    fields = [field.name for field in dataclasses.fields(cls.Options)]
    missing = [option for option in _REQUIRED_OPTIONS if option not in fields]
    if missing:
        raise ValueError(f"Task {name!r} lacks the options {missing}; every task has {list(_REQUIRED_OPTIONS)}.")
    unknown = [option for option in cls.mad_ladder if option not in fields]
    if unknown:
        raise ValueError(f"Task {name!r} declares a MAD ladder over {unknown}, which are not its options; accepted: "
                         f"options among {fields}.")
    if cls.capacity_option is not None and cls.capacity_option not in fields:
        raise ValueError(f"Task {name!r} declares capacity option {cls.capacity_option!r}, which is not one of its "
                         f"options; accepted: one of {fields}, or None.")


TASKS = Registry("task", _check_task)
register_task = TASKS.register
task_class = TASKS.get


def list_tasks(pattern: str = "*") -> list[str]:
    """The registered tasks that generate their data, matching a shell-style pattern, sorted: what the registry-wide
    tests, the default suite and the benchmark's defaults iterate."""
    return [name for name in TASKS.names(pattern) if TASKS.classes[name].data_source is None]


def list_data_tasks(pattern: str = "*") -> list[str]:
    """The registered tasks that read their examples from files (`Task.data_source`), sorted."""
    return [name for name in TASKS.names(pattern) if TASKS.classes[name].data_source is not None]


# Sets of tasks that `--task` takes beside names: LRA's five real-data tasks, in its Table 1's order (Path-X,
# `lra_pathx`, which every model of the table failed, runs when named); RULER's needle and variable-tracking tasks;
# MAD's six synthetic tasks, in the order of its Figure 2 (each at its baseline with --profile mad; `mad_ladder` gives
# its levels of difficulty).
TASK_SETS = {"lra": ("lra_listops", "lra_text", "lra_retrieval", "lra_image", "lra_pathfinder"),
             "ruler": ("niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking"),
             "mad": ("in_context_recall", "fuzzy_in_context_recall", "noisy_in_context_recall", "selective_copy",
                     "compression", "memorization")}


def expand_tasks(names: str) -> list[str]:
    """A comma-separated list of task names and sets (`TASK_SETS`) -> the task names, each set expanded in place."""
    return [task for name in names.split(",") if name for task in TASK_SETS.get(name, (name,))]


def create_task(name: str, *, profile: str = "quick", options: Any = None, **values: Any) -> Task:
    """Build task `name` at `profile`'s sizes; explicit `values` override the profile's (or `options`, the
    task's typed `Options` as a run's config holds them, give every option).

        >>> create_task("passkey", profile="standard").seq_len
        1024
        >>> create_task("passkey", profile="standard", seq_len=512).seq_len
        512
    """
    cls = task_class(name)
    if profile not in cls.profiles:
        raise ValueError(f"Unknown profile {profile!r}{closest(str(profile), cls.profiles)} for task {name!r}; "
                         f"available: {', '.join(cls.profiles)}.")
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


SUITE_NOTE = ", so not in the default suite"


def caveats(name: str, profile: str | None = None) -> list[str]:
    """Why the results of task `name` (at `profile`; None: at any) measure less than the dependency, one sentence
    each: a known shortcut, a profile where it is not discriminative."""
    cls = task_class(name)
    shortcut = [f"Task {name} has a known shortcut at {at}, so its results there measure that as much as the "
                f"dependency: {reason}." for at, reason in cls.known_shortcut.items() if profile in (None, at)]
    return shortcut + [f"Task {name} is not discriminative at {at}, so its results there tell no variants apart: "
                       f"{reason}." for at, reason in cls.not_discriminative.items() if profile in (None, at)]


def describe_tasks() -> str:
    """Every task with its one-line description, profiles and options (for `attnlab list`)."""
    lines = []
    for name in TASKS.names():
        cls = task_class(name)
        lines.append(f"{name}: {TASKS.summary(name)}")
        if cls.paper is not None:
            lines.append(f"    paper: {cls.paper}")
        lines.extend(f"    deviation: {deviation}" for deviation in cls.deviations)
        if cls.data_source is not None:
            lines.append(f"    reads files (--set task.data_dir=DIR or ATTNLAB_DATA): {cls.data_source}")
        for profile in cls.profiles:
            overrides = ", ".join(f"{option}={value!r}" for option, value in cls.profiles[profile].options.items())
            lines.append(f"    profile {profile}: {overrides or 'the defaults below'}")
        lines.extend(f"    {line}" for line in describe_options(cls.Options))
        if cls.mad_ladder:
            levels = "; ".join(f"{option}={','.join(map(str, values))}" for option, values in cls.mad_ladder.items())
            lines.append(f"    MAD's ladder of difficulty (each alone over profile mad): {levels}")
        lines.extend(f"    known shortcut at {profile}{SUITE_NOTE if profile == 'quick' else ''}: {reason}"
                     for profile, reason in cls.known_shortcut.items())
        lines.extend(f"    not discriminative at {profile}{SUITE_NOTE if profile == 'quick' else ''}: {reason}"
                     for profile, reason in cls.not_discriminative.items())
    return "\n".join(lines)
