"""A command's options, declared once: a frozen dataclass whose fields are declared with `setting`, each saying in
its metadata how it is given on the command line and how it is kept. From that one declaration come

- the command's flags (`add_flags`); an experiment file's top-level keys are their names;
- the typed options from what the flags hold (`from_flags`), or from values given in code (`resolved`), a value
  left out taking its default or what `left_out` makes of the other values;
- the definition a study stores (`stored`), and the options again from one (`from_stored`), one an older version
  stored read with what each field it lacked meant then (`upgraded`, from each field's `before`);
- the command line that runs the same options again, as a user types it (`command`).

    @dataclass(frozen=True)
    class Options:
        seeds: int = setting(6, "fresh seeds (default: %(default)s)", metavar="N")
        grid: tuple[float, ...] = setting((1.0, 3.0), "multiples, comma-separated", parse=parse_grid)
        name: str = setting("", "its name (default: seedsN)", stored=False,
                            left_out=lambda values: f'seeds{values["seeds"]}')

    from_flags(Options, {"seeds": 3, "grid": None, "name": None})  # Options(seeds=3, grid=(1.0, 3.0), name='seeds3')
    command(Options(seeds=3, name="x"), ["prog"])                    # 'prog --seeds 3 --grid 1.0,3.0 --name x'
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import shlex
import typing
from collections.abc import Callable, Mapping
from typing import Any

from common.options import format_value

ALWAYS, CHANGED, NEVER = "always", "changed", "never"  # when `command` names a flag: CHANGED, where not the default
SETTING = "setting"  # the metadata key that marks a field declared with `setting`


def setting(default: Any = dataclasses.MISSING, help: str | None = None, *,
            flag: str | tuple[str, ...] | None = None, metavar: str | None = None, action: str | None = None,
            parse: Callable[[Any], Any] | None = None, show: Callable[[Any], str] = format_value,
            stored: bool = True, rerun: str | Callable[[Any], bool] = ALWAYS,
            left_out: Callable[[dict[str, Any]], Any] | None = None, before: Any = dataclasses.MISSING,
            store: Callable[[Any], Any] | None = None, load: Callable[[Any], Any] | None = None) -> Any:
    """A field of a command's options. With `help` it is a flag (`--name-with-dashes`, or `flag` and its aliases;
    `metavar`, `action`), whose text `parse` turns into the field's value and `show` writes back; a flag left out
    takes the default, or `left_out(values)` of the other fields' values. `stored`: part of the definition a study
    keeps (`store`/`load` where its JSON is not the value itself); `before`: what a definition stored before the
    field existed means. `rerun`: when `command` names it (ALWAYS, CHANGED, NEVER, or a test of the options)."""
    flags = (flag,) if isinstance(flag, str) else flag
    metadata = {SETTING: True, "help": help, "flags": flags, "metavar": metavar, "action": action, "parse": parse,
                "show": show, "stored": stored, "rerun": rerun, "left_out": left_out, "before": before,
                "store": store, "load": load}
    return dataclasses.field(default=default, metadata=metadata)


def _settings(cls: Any) -> list[dataclasses.Field]:
    """The fields declared with `setting` (a dataclass may have others, which are none of the command's options)."""
    return [field for field in dataclasses.fields(cls) if field.metadata.get(SETTING)]


def _flagged(cls: Any) -> list[dataclasses.Field]:
    return [field for field in _settings(cls) if field.metadata["help"] is not None]


def flags_of(field: dataclasses.Field) -> tuple[str, ...]:
    return field.metadata["flags"] or (f"--{field.name.replace('_', '-')}",)


def dest(field: dataclasses.Field) -> str:
    """Where argparse keeps the flag's value, and the experiment file's key for it: `--lr-multiples` -> lr_multiples."""
    return flags_of(field)[0].removeprefix("--").replace("-", "_")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _kind(cls: type, field: dataclasses.Field) -> Any:
    """The field's type, None removed from an optional one."""
    kind = _hints(cls)[field.name]
    members = [member for member in typing.get_args(kind) if member is not type(None)]
    return members[0] if type(None) in typing.get_args(kind) else kind


def add_flags(parser: argparse.ArgumentParser, cls: Any) -> None:
    """A flag for every field of `cls` with a help text, in the fields' order: an int field reads an integer, a bool
    one is --name/--no-name, any other reads text that the field's `parse` checks. A flag defaults to the field's
    default (as text where it is parsed); a repeated one, and one whose field has `left_out`, to None, which
    `from_flags` reads as left out. `%(default)s` in a help text shows the field's default."""
    for field in _flagged(cls):
        meta, kind, help = field.metadata, _kind(cls, field), field.metadata["help"]
        default = None if meta["left_out"] is not None or meta["action"] is not None else field.default
        if meta["parse"] is not None and default is not None:
            default = meta["show"](default)
        if "%(default)s" in help:
            help = help.replace("%(default)s", meta["show"](field.default))
        options: dict[str, Any] = {"default": default, "dest": dest(field), "help": help}
        if meta["action"] is not None:
            options["action"] = meta["action"]
        elif kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif kind is int and meta["parse"] is None:
            options["type"] = int
        if meta["metavar"] is not None:
            options["metavar"] = meta["metavar"]
        parser.add_argument(*flags_of(field), **options)


def from_flags(cls: Any, flags: Mapping[str, Any]) -> Any:
    """The options the flags' values give (`flags`: by their destinations, as argparse or an experiment file holds
    them; None where left out), each parsed by its field: a bad value is the field's one-sentence error."""
    given = {}
    for field in _flagged(cls):
        value = flags.get(dest(field))
        if value is not None:
            given[field.name] = value if field.metadata["parse"] is None else field.metadata["parse"](value)
    return resolved(cls, given)


def resolved(cls: Any, given: Mapping[str, Any]) -> Any:
    """The options of `cls` with the values `given` (typed, by field name): every other field its default, or where
    it has `left_out`, what that makes of the values of the fields that have none, in the fields' order."""
    values = {field.name: given[field.name] if field.name in given else field.default
              for field in dataclasses.fields(cls) if field.name in given
              or (field.default is not dataclasses.MISSING and field.metadata.get("left_out") is None)}
    for field in _settings(cls):
        if field.name not in given and field.metadata["left_out"] is not None:
            values[field.name] = field.metadata["left_out"](values)
    return cls(**values)


def stored(options: Any) -> dict[str, Any]:
    """The stored fields of `options` as JSON holds them (tuples as lists): the definition a study keeps."""
    return json.loads(json.dumps({
        field.name: (field.metadata["store"] or (lambda value: value))(getattr(options, field.name))
        for field in _settings(options) if field.metadata["stored"]}))


def upgraded(cls: Any, definition: Mapping[str, Any]) -> dict[str, Any]:
    """A stored definition in today's form: each field it lacks (stored by a version before the field) as what that
    version ran (the field's `before`); a field without one stays missing, for `from_stored` to name."""
    return {**{field.name: field.metadata["before"] for field in _settings(cls)
               if field.metadata["before"] is not dataclasses.MISSING}, **definition}


def from_stored(cls: Any, read: Callable[[str], Any], **local: Any) -> Any:
    """The options of `cls` from a stored definition, each stored field `read(name)` (which names a missing one in a
    sentence) and loaded (a list as the field's tuple); the fields not stored from `local`, else their defaults."""
    values = dict(local)
    for field in _settings(cls):
        if field.metadata["stored"]:
            value = read(field.name)
            if field.metadata["load"] is not None:
                value = field.metadata["load"](value)
            elif typing.get_origin(_kind(cls, field)) is tuple:
                value = tuple(value)
            values[field.name] = value
    return cls(**values)


def _named(field: dataclasses.Field, options: Any) -> bool:
    rule, value = field.metadata["rerun"], getattr(options, field.name)
    if callable(rule):
        return rule(options)
    return rule == ALWAYS or (rule == CHANGED and value != field.default)


def command(options: Any, words: list[str] | None = None) -> str:
    """The command line `words` (default: the options' own, their class's `COMMAND`) followed by the flags that give
    `options` again, in the fields' order, each as its `rerun` rule says: what a page prints so that a reader can
    run the same thing."""
    words = list(type(options).COMMAND if words is None else words)
    for field in _flagged(options):
        if not _named(field, options):
            continue
        flag, value, show = flags_of(field)[0], getattr(options, field.name), field.metadata["show"]
        if _kind(type(options), field) is bool:
            words.append(flag if value else f"--no-{flag.removeprefix('--')}")
        elif field.metadata["action"] == "append":
            words += [word for item in value for word in (flag, show(item))]
        else:
            words += [flag, show(value)]
    return shlex.join(words)
