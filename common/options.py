"""Typed, validated options for attention variants.

Every variant declares its options as a frozen dataclass whose fields carry a one-line help text (and,
where it belongs in the variant's self-describing name, a short tag). `build_options` turns the keyword
arguments a user passed into that dataclass, or raises `OptionError` with one sentence that names the
bad option, the bad value and what would be accepted.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from typing import Any, Literal


class OptionError(ValueError):
    """A user-supplied option is unknown or has a value the variant cannot accept."""


def option(default: Any, help: str, *, tag: str | None = None, tag_default: bool = True) -> Any:
    """A dataclass field with its documentation; `tag` marks it as part of `describe()` names, and
    `tag_default=False` leaves it out of them while it holds its default (a shared option such as the
    normaliser, so that the names of runs that never set it stay as they were)."""
    return dataclasses.field(default=default, metadata={"help": help, "tag": tag, "tag_default": tag_default})


def ordered_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of an options dataclass, those it declares first, then those it inherits (options shared by
    a family of variants): the order of `describe()` names and of listings."""
    own = cls.__dict__.get("__annotations__", {})
    fields = dataclasses.fields(cls)
    return [field for field in fields if field.name in own] + [field for field in fields if field.name not in own]


def closest(name: str, choices: typing.Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest choice, or '' when nothing is close."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _accepted(annotation: Any) -> str:
    members = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in members:
        (inner,) = [member for member in members if member is not type(None)]
        return f"None or {_accepted(inner)}"
    if typing.get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(choice) for choice in typing.get_args(annotation))
    if typing.get_origin(annotation) is tuple and typing.get_origin(members[0]) is Literal:
        return "a comma-separated list drawn from " + ", ".join(repr(choice) for choice in typing.get_args(members[0]))
    if typing.get_origin(annotation) is tuple:
        return f"a comma-separated list of {_accepted(members[0]).removeprefix('an ').removeprefix('a ')}s"
    return {bool: "True or False", int: "an integer", float: "a number", str: "text"}.get(annotation, str(annotation))


def _coerce(owner: str, name: str, annotation: Any, value: Any) -> Any:
    """Check `value` against a field's annotation; ints are accepted where floats are."""
    members = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in members:
        if value is None:
            return None
        (annotation,) = [member for member in members if member is not type(None)]
    if typing.get_origin(annotation) is tuple:  # tuple[X, ...]: a list, a tuple or one bare value
        (member, _) = typing.get_args(annotation)
        items = value if isinstance(value, (list, tuple)) else [value]
        try:
            return tuple(_coerce(owner, name, member, item) for item in items)
        except OptionError:
            raise OptionError(f"{owner} option {name!r} got {value!r}; accepted: {_accepted(annotation)}.") from None
    if typing.get_origin(annotation) is Literal:
        if value is None and "none" in typing.get_args(annotation):
            value = "none"  # the command line reads the word `none` as None before the option sees it
        ok = value in typing.get_args(annotation)
    elif annotation is bool:
        ok = isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif annotation is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif annotation is str:  # a folder's path, say: text as given
        ok = isinstance(value, str)
    else:  # pragma: no cover - a variant author declared a type this module does not know
        raise TypeError(f"{owner} option {name!r} has unsupported type {annotation!r}")
    if not ok:
        raise OptionError(f"{owner} option {name!r} got {value!r}; accepted: {_accepted(annotation)}.")
    return value


def checked_values(cls: type, owner: str, values: dict[str, Any]) -> dict[str, Any]:
    """User `values` for the options dataclass `cls`, each name one of its fields and each value of the field's
    type (an int where a float is read as that float); the dataclass's own checks are not made."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    for name in values:
        if name not in fields:
            allowed = ", ".join(fields) or "none"
            raise OptionError(
                f"{owner} has no option {name!r}{closest(name, fields)}; its options are: {allowed}."
            )
    hints = typing.get_type_hints(cls)
    return {name: _coerce(owner, name, hints[name], value) for name, value in values.items()}


def build_options(cls: type, owner: str, values: dict[str, Any]) -> Any:
    """Instantiate the options dataclass `cls` from user `values`, validating names and types."""
    checked = checked_values(cls, owner, values)
    # inf passes a range check such as lr > 0 and a run then diverges; nan fails every range check, whose sentence
    # says what the option accepts, so the options' own checks speak first and this one catches what they let by
    not_finite = next(((name, value) for name, value in checked.items() for item in
                       (value if isinstance(value, tuple) else (value,))
                       if isinstance(item, float) and not math.isfinite(item)), None)
    try:
        options = cls(**checked)
    except OptionError as error:  # range checks in __post_init__ do not know the variant's name
        raise OptionError(f"{owner} {error}") from None
    except (ValueError, ArithmeticError):  # arithmetic on inf or nan in __post_init__ (int(inf), say)
        if not_finite is None:
            raise
    if not_finite is not None:
        raise OptionError(f"{owner} option {not_finite[0]!r} got {not_finite[1]!r}; accepted: a finite number.")
    return options


def require(ok: bool, name: str, value: Any, accepted: str) -> None:
    """Raise `OptionError` unless `ok`: for range checks in an options class's `__post_init__`."""
    if not ok:
        raise OptionError(f"option {name!r} got {value!r}; accepted: {accepted}.")


def fill_choice_defaults(options: Any, selector: str, defaults: dict[str, dict[str, Any]]) -> None:
    """For options that depend on a choice (relative's `kind`, sparse's `pattern`), in `__post_init__`:
    reject an option the chosen value does not use, and fill in the chosen value's defaults. The options that
    depend on the choice are those declared with the default None; the others (the normaliser) serve every
    value of it."""
    chosen = getattr(options, selector)
    used = defaults[chosen]
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if field.name == selector or value is None or field.default is not None:
            continue
        if field.name not in used:
            readers = " or ".join(repr(choice) for choice, names in defaults.items() if field.name in names)
            raise OptionError(f"option {field.name!r} got {value!r} but {selector} {chosen!r} does not use it; "
                              f"accepted: leave it unset, or use {selector} {readers}.")
    for name, default in used.items():
        if getattr(options, name) is None:
            object.__setattr__(options, name, default)  # frozen: filled once, while being constructed


def tag_value(value: Any) -> str:
    """Compact, filename-safe rendering of an option value for self-describing names."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_options(cls: type) -> list[str]:
    """One line per option: name, type, default and help, for `make list`."""
    hints = typing.get_type_hints(cls)
    lines = []
    for field in ordered_fields(cls):
        kind = _accepted(hints[field.name])
        lines.append(f"{field.name}={field.default!r} ({kind}): {field.metadata['help']}")
    return lines


def tagged_name(name: str, options: Any) -> str:
    """A variant's (or baseline's) short self-describing name: `name` plus its tagged options, its own first,
    then the shared ones (the normaliser, named unless it is the softmax); no module needs to be built."""
    parts = [name]
    for field in ordered_fields(type(options)):
        value, tag = getattr(options, field.name), field.metadata.get("tag")
        if tag is None or value is None or value is False:
            continue
        if not field.metadata.get("tag_default", True) and value == field.default:
            continue
        parts.append(tag if value is True else f"{tag}{tag_value(value)}")
    return "_".join(parts)


def parse_value(text: str) -> Any:
    """Command-line text to a value: true/false, none, integers, floats, a comma-separated list of those
    (`256,512` -> [256, 512]; `[]`, the empty list), otherwise the string itself."""
    if "," in text:
        return [parse_value(item.strip()) for item in text.split(",")]
    if text == "[]":
        return []
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def format_value(value: Any) -> str:
    """A config value as `--set` text that `parse_value` reads back to the same value (floats exactly)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(item) for item in value) if value else "[]"
    return repr(value) if isinstance(value, float) else str(value)


def shown(url: str) -> str:
    """A storage URL as a message or a page shows it: its password hidden."""
    return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


def parse_preset(row: str, *, what: str, example: str) -> tuple[str, dict[str, Any]]:
    """'relative:kind=t5:num_buckets=16' -> ('relative', {'kind': 't5', 'num_buckets': 16}): a registered name,
    then options fixed to values (`what`: 'Variant' or 'Task', as the sentence names the row; `example` a row
    the sentence shows). The caller checks the name and the options against its registry."""
    name, *pairs = row.split(":")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key or key in options:
            raise OptionError(f"{what} preset {row!r} has {pair!r}; accepted: name:option=value[:option=value], "
                              f"each option once (e.g. {example}).")
        options[key] = parse_value(text)
    return name, options


def merged_preset(row: str, name: str, fixed: dict[str, Any], overrides: dict[str, Any], *,
                  section: str) -> dict[str, Any]:
    """A preset's fixed options, then the user's --set of `section` (which may not give one of the preset's options
    another value): what the run of preset `row` (of registered `name`) takes."""
    for key, value in overrides.items():
        if key in fixed and fixed[key] != value:
            raise OptionError(f"--set {section}.{key}={format_value(value)} contradicts preset {row!r}; accepted: "
                              f"another row (e.g. {name}:{key}={format_value(value)}), or no --set of {key}.")
    return {**fixed, **overrides}
