"""Experiment files: what a command line says, kept in a file (`--config FILE`, `make experiment CONFIG=FILE`).

A TOML file has the command's options at its top level, by their long names with underscores (`variants` and
`tasks` for --variant and --task, each a string or a list; `profile`, `seed`, `seeds`, `lr_multiples`, `trials`,
...), and the config sections of `--set` as tables (`[variant]`, `[task]`, `[model]`, `[train]`):

    variants = ["dense", "relative:kind=alibi"]
    tasks = "mqar"
    seed = 1
    [model]
    dim = 128
    [train]
    steps = 2000
    [launcher]               # where the workers of a sweep or a benchmark run: experiments.slurm
    name = "slurm"
    partition = "gpu"

A run's own `config.json` is an experiment file too (its variant, task, profile, seed, device and kernel, its
options and sections), so `attnlab run --config runs/ID/config.json` trains that run again, bit for bit on CPU.
The command line overrides the file: an option given there wins, and `--set` is applied after the file's
sections. A key the command does not have, a value of the wrong type or out of range is one sentence naming the
file, the key and what is accepted, before anything runs. Examples: docs/experiments/.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path
from typing import Any

from common.options import OptionError, build_options, closest, format_value
from experiments import tasks
from experiments.run import config as configs
from experiments.tasks import presets as task_presets
from variants import presets, variant_class

NOT_IN_FILES = {"config", "set", "func", "command", "quiet", "runs_dir"}  # where a run goes, not what it is
RENAMED = {"variants": "variant", "tasks": "task"}  # the file's key -> the option's destination


def read(path: Path) -> dict[str, Any]:
    """The file as data: TOML, or JSON for a .json file (a run's config.json: `from_run_config`)."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise OptionError(f"Experiment file {path} cannot be read ({error}); accepted: a TOML file (or a run's "
                          "config.json) with the command's options and [variant], [task], [model], [train].") from None
    if not isinstance(data, dict):
        raise OptionError(f"Experiment file {path} holds no table; accepted: keys and [sections].")
    return from_run_config(data) if "variant_options" in data else data


def from_run_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run's config.json as an experiment file: its variant and task, its options as [variant] and [task]."""
    top = {"variants": data.get("variant"), "tasks": data.get("task"),
           **{key: data[key] for key in ("profile", "seed", "device", "kernel") if key in data}}
    return {**top, "variant": data.get("variant_options", {}), "task": data.get("task_options", {}),
            "model": data.get("model", {}), "train": data.get("train", {})}


def _option(path: Path, key: str, value: Any, action: argparse.Action) -> Any:
    """A top-level value as the option's destination holds it: where the option reads text, a list joined by
    commas (`variants = ["dense", "local"]`, `lr_multiples = [0.3, 1, 3]`), a table as its KEY=VALUE pairs
    (`[task_seeds]` with `induction = 12`: induction=12) and a number as written; the rest checked against the
    option's type and choices."""
    kind = action.type or (bool if action.nargs == 0 else str)  # a flag (store_true, --x/--no-x) takes no value
    if kind is str and isinstance(value, dict):
        value = ",".join(f"{name}={format_value(item)}" for name, item in value.items())
    if kind is str and isinstance(value, list | int | float) and not isinstance(value, bool):
        value = format_value(value) if not isinstance(value, list) else ",".join(map(format_value, value))
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok or (action.choices is not None and value not in action.choices):
        accepted = f"one of {', '.join(map(repr, action.choices))}" if action.choices else \
            {int: "an integer", bool: "true or false", float: "a number"}.get(kind, "a string")
        raise OptionError(f"Experiment file {path}: {key} = {value!r} is not accepted; accepted: {accepted}.")
    return value


def _check_sections(path: Path, sections: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    """Each section's keys and values, as the --set assignments they become give them (a value takes what the
    command line takes: `tracker = "wandb,tensorboard"` is a list), against what they configure, naming the file:
    the model and training configs, each listed variant's options (a key any of them has), each listed task's
    options."""
    for name, cls in (("model", configs.ModelConfig), ("train", configs.TrainConfig)):
        build_options(cls, f"Experiment file {path} [{name}]", sections.get(name, {}))
    rows = presets.expand(args.variant or "core")  # only the benchmark has no default: its default set
    names = list(dict.fromkeys(presets.base(row) for row in rows))
    task_names = list(dict.fromkeys(task_presets.base(task) for task in tasks.expand_tasks(args.task or "")
                                    if task)) or list(tasks.DEFAULT_SUITE)  # a row's task: mqar:num_pairs=12, mqar
    for section, owners in (("variant", {name: variant_class(name).Options for name in names}),
                            ("task", {name: tasks.task_class(name).Options for name in task_names})):
        known = {field for cls in owners.values() for field in cls.__dataclass_fields__}
        for key in sections.get(section, {}):
            if key not in known:
                raise OptionError(f"Experiment file {path} [{section}] has {key!r}{closest(key, known)}, an option "
                                  f"of none of {', '.join(owners)}; accepted: {', '.join(sorted(known))}.")
        for owner, cls in owners.items():
            values = {key: value for key, value in sections.get(section, {}).items()
                      if key in cls.__dataclass_fields__}
            try:
                if section == "task":
                    tasks.create_task(owner, profile=args.profile, **values)
                else:
                    build_options(cls, f"Variant {owner!r}", values)
            except OptionError as error:
                raise OptionError(f"Experiment file {path} [{section}]: {error}") from None


def apply(parser: argparse.ArgumentParser, argv: list[str] | None, args: argparse.Namespace) -> argparse.Namespace:
    """The arguments of `argv` with the experiment file `args.config` beneath them: its top-level keys as the
    defaults of the command's options, its sections as --set assignments before the command line's own."""
    path = Path(args.config)
    (commands,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    command = commands.choices[args.command]
    data = read(path)
    # An action that stores nothing (default SUPPRESS: -h/--help) is no option a file can hold.
    actions = {action.dest: action for action in command._actions
               if action.dest not in NOT_IN_FILES and action.default != argparse.SUPPRESS}
    sections = {name: data.pop(name) for name in configs.SECTIONS if isinstance(data.get(name), dict)}
    if isinstance(data.get("launcher"), dict):  # [launcher]: `name` is --launcher, its other keys the options' own
        data |= {("launcher" if key == "name" else key): value for key, value in data.pop("launcher").items()}
    defaults = {}
    for key, value in data.items():
        dest = RENAMED.get(key, key)
        if dest not in actions:
            accepted = sorted({*(key for key, dest in RENAMED.items() if dest in actions),
                               *(dest for dest in actions if dest not in RENAMED.values())})
            raise OptionError(f"Experiment file {path} has {key!r}{closest(key, accepted)}, which attnlab "
                              f"{args.command} does not take; accepted: {', '.join(accepted)}, and the tables "
                              f"{', '.join(f'[{name}]' for name in configs.SECTIONS)}.")
        defaults[dest] = _option(path, key, value, actions[dest])
    command.set_defaults(**defaults)
    merged = parser.parse_args(argv)  # the command line over the file's values
    assignments = [f"{section}.{key}={format_value(value)}" for section, table in sections.items()
                   for key, value in table.items()]
    _check_sections(path, configs.parse_sets(assignments), merged)
    merged.set = [*assignments, *(merged.set or [])]
    return merged
