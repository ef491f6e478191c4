"""Search spaces of sweeps: each variant's declared options, the shared training hyperparameters, and
the narrowing a user asks for.

    variant.window    Range(8, "seq_len", log=True)   declared beside the variant (variants/local.py)
    train.lr          Range(1e-4, 1e-2, log=True)     shared by every variant (TRAIN_SPACE below)

Bounds that name a size of the run are resolved when the sweep starts: `window` on passkey with
seq_len 128 is searched over 8..128. A user narrows or fixes any name from the command line,
`--space variant.window=16:64`, `--space train.lr=1e-3`, `--space variant.pattern=strided,fixed`,
or from a TOML file (`--space-file`; the command line wins where both name something):

    [variant]
    window = [16, 64]
    [train]
    lr = 1e-3

A name outside the space, a value of the wrong kind, and a range that is empty or leaves the declared
one are one-sentence errors. Integer options are searched over integers, log-uniformly where declared.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

import variants
from common.options import OptionError, closest
from experiments.run.config import TrainConfig, parse_value
from variants.base import Choice, Range

# Shared by every variant. warmup_steps is bounded by the run's length: at most a fifth of it.
TRAIN_SPACE: dict[str, Range | Choice] = {
    "lr": Range(1e-4, 1e-2, log=True),
    "weight_decay": Range(0.0, 0.2),
    "warmup_steps": Range(0, "steps/5"),
}
SIZES = ("seq_len", "head_dim", "steps")  # what a declared bound may name
SECTIONS = ("variant", "train")  # what a space may search: the variant's options and training's
_BOUND = re.compile(r"(?P<size>[a-z_]+)(?:(?P<op>[*/])(?P<factor>[0-9]+))?")
KINDS: dict[str, type] = {"int": int, "float": float, "choice": object}  # a parameter's kind, as data names it


@dataclass(frozen=True)
class Param:
    """One name of a resolved space: a numeric range, or choices (one choice: fixed)."""

    name: str  # "variant.window"
    kind: type  # int or float for ranges; object for choices
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    when: tuple[str, tuple[Any, ...]] | None = None  # ("variant.pattern", ("strided", "fixed"))

    def describe(self) -> str:
        """`variant.window: integers 8..128, log-uniform`, `train.lr: fixed at 0.001`."""
        if self.choices is not None:
            what = (f"fixed at {self.choices[0]!r}" if len(self.choices) == 1
                    else "one of " + ", ".join(map(repr, self.choices)))
        else:
            numbers = "integers" if self.kind is int else "numbers"
            what = f"{numbers} {self.low:g}..{self.high:g}, {'log-uniform' if self.log else 'uniform'}"
        condition = f" (when {self.when[0]} is {' or '.join(map(repr, self.when[1]))})" if self.when else ""
        return f"{self.name}: {what}{condition}"

    def to_dict(self) -> dict[str, Any]:
        """The parameter as JSON data, which `from_dict` reads back: a sweep's stored definition holds its space so."""
        kind = next(name for name, kind in KINDS.items() if kind is self.kind)
        return {"name": self.name, "kind": kind, "low": self.low, "high": self.high, "log": self.log,
                "choices": None if self.choices is None else list(self.choices),
                "when": None if self.when is None else [self.when[0], list(self.when[1])]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Param:
        return cls(data["name"], KINDS[data["kind"]], data["low"], data["high"], data["log"],
                   None if data["choices"] is None else tuple(data["choices"]),
                   None if data["when"] is None else (data["when"][0], tuple(data["when"][1])))


@dataclass(frozen=True)
class Space:
    """The resolved space of one sweep, in declaration order (a condition's selector comes first)."""

    params: tuple[Param, ...]

    def suggest(self, trial: optuna.Trial) -> dict[str, dict[str, Any]]:
        """The trial's values as config overrides, {"variant": {...}, "train": {...}}; an option whose
        condition is not met is not suggested and keeps its default."""
        chosen: dict[str, Any] = {}
        for param in self.params:
            if param.when is not None and chosen.get(param.when[0]) not in param.when[1]:
                continue
            if param.choices is not None:
                chosen[param.name] = trial.suggest_categorical(param.name, param.choices)
            elif param.kind is int:
                chosen[param.name] = trial.suggest_int(param.name, int(param.low), int(param.high), log=param.log)
            else:
                chosen[param.name] = trial.suggest_float(param.name, param.low, param.high, log=param.log)
        return as_overrides(chosen)


def as_overrides(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"variant.window": 16, "train.lr": 0.001} -> {"variant": {"window": 16}, "train": {"lr": 0.001}}."""
    overrides: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for name, value in values.items():
        section, _, option = name.partition(".")
        overrides[section][option] = value
    return overrides


def declared(variant: str) -> dict[str, Range | Choice]:
    """The declared space of `variant`: its own options' ranges, then the training hyperparameters."""
    own = variants.variant_class(variant).search_space
    return {**{f"variant.{name}": item for name, item in own.items()},
            **{f"train.{name}": item for name, item in TRAIN_SPACE.items()}}


def _option_type(variant: str, name: str) -> type:
    """int or float: the annotation of the option (None allowed) that `name` searches."""
    section, _, option = name.partition(".")
    owner = variants.variant_class(variant).Options if section == "variant" else TrainConfig
    annotation = typing.get_type_hints(owner)[option]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (annotation,) = [member for member in typing.get_args(annotation) if member is not type(None)]
    return annotation


def _resolve_bound(bound: int | float | str, sizes: dict[str, int]) -> int | float:
    if not isinstance(bound, str):
        return bound
    match = _BOUND.fullmatch(bound)
    if match is None or match["size"] not in sizes:  # a declaration bug, caught by the registry tests
        raise ValueError(f"Search-space bound {bound!r} names no size; accepted: {', '.join(SIZES)}, "
                         "optionally followed by *k or /k.")
    value, factor = sizes[match["size"]], int(match["factor"] or 1)
    return value * factor if match["op"] == "*" else value // factor


def _is_number(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind is int else isinstance(value, (int, float))


def _narrow(name: str, base: Param, wanted: Any, where: str) -> Param:
    """`base` narrowed to what the user asked: a fixed value, [low, high], or a subset of the choices."""
    if base.choices is not None:
        subset = tuple(wanted) if isinstance(wanted, list) else (wanted,)
        outside = [value for value in subset if value not in base.choices]
        if not subset or outside:
            raise OptionError(f"{where} {name}={wanted!r} is not among its choices; accepted: one or more of "
                              f"{', '.join(map(repr, base.choices))}.")
        return dataclasses.replace(base, choices=tuple(dict.fromkeys(subset)))
    number = "an integer" if base.kind is int else "a number"
    accepted = f"{number} or a range LOW:HIGH within {base.low:g}..{base.high:g}"
    if isinstance(wanted, list):
        if len(wanted) != 2 or not all(_is_number(value, base.kind) for value in wanted):
            raise OptionError(f"{where} {name}={wanted!r} is not a range; accepted: {accepted}.")
        low, high = wanted
        if low > high:
            raise OptionError(f"{where} {name}={low:g}:{high:g} is an empty range (low > high); accepted: {accepted}.")
    elif _is_number(wanted, base.kind):
        low = high = wanted
    else:
        raise OptionError(f"{where} {name}={wanted!r} has the wrong kind of value; accepted: {accepted}.")
    if low < base.low or high > base.high:
        asked = f"{low:g}" if low == high else f"{low:g}:{high:g}"
        raise OptionError(f"{where} {name}={asked} leaves the declared range {base.low:g}..{base.high:g}; "
                          f"accepted: {accepted}.")
    if low == high:
        return dataclasses.replace(base, low=None, high=None, log=False, choices=(base.kind(low),))
    return dataclasses.replace(base, low=low, high=high)


def resolve(variant: str, sizes: dict[str, int], narrowing: dict[str, tuple[Any, str]]) -> Space:
    """The declared space of `variant` with bounds resolved against `sizes` and the user's narrowing
    applied; `narrowing` maps a name to (what was asked, where it was asked, for messages)."""
    spec = declared(variant)
    for name, (_, where) in narrowing.items():
        if name not in spec:
            raise OptionError(f"{where} names {name!r}{closest(name, spec)}, which the sweep of {variant!r} does not "
                              f"search; accepted: {', '.join(spec)}.")
    params = []
    for name, item in spec.items():
        when = (f"{name.partition('.')[0]}.{item.when[0]}", item.when[1]) if item.when else None
        if isinstance(item, Choice):
            param = Param(name, object, choices=tuple(item.choices), when=when)
        else:
            low, high = _resolve_bound(item.low, sizes), _resolve_bound(item.high, sizes)
            if low > high or (item.log and low <= 0):
                shown = ", ".join(f"{size} = {value}" for size, value in sizes.items())
                raise OptionError(f"{name}'s declared range {item.low}..{item.high} is empty at {shown}; accepted: "
                                  "sizes where it is not (for example a longer task.seq_len), or another variant.")
            param = Param(name, _option_type(variant, name), low=low, high=high, log=item.log, when=when)
        if name in narrowing:
            param = _narrow(name, param, *narrowing[name])
        params.append(param)
    by_name = {param.name: param for param in params}
    for name in narrowing:
        when = by_name[name].when
        if when is not None and not set(by_name[when[0]].choices) & set(when[1]):
            raise OptionError(f"{narrowing[name][1]} narrows {name}, which is searched only when {when[0]} is "
                              f"{' or '.join(map(repr, when[1]))}, and the sweep excludes that; accepted: narrowing "
                              f"{when[0]} to include it, or leaving {name} out.")
    return Space(tuple(params))


def parse_space_args(assignments: list[str]) -> dict[str, tuple[Any, str]]:
    """['variant.window=16:64', 'train.lr=1e-3', 'variant.pattern=strided,fixed'] -> {name: (value, where)}:
    LOW:HIGH is a range ([low, high]), a comma-separated list is a set of choices, anything else one value."""
    narrowing = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or "." not in name:
            raise OptionError(f"--space {assignment!r} is malformed; accepted: section.name=VALUE, "
                              f"section.name=LOW:HIGH or section.name=A,B, with section one of {', '.join(SECTIONS)}.")
        low, colon, high = text.partition(":")
        value = [parse_value(low), parse_value(high)] if colon else parse_value(text)
        narrowing[name] = (value, "--space")
    return narrowing


def read_space_file(path: Path) -> dict[str, tuple[Any, str]]:
    """A TOML file of [variant] and [train] tables: name = value, name = [low, high] or name = [choices]."""
    where = f"--space-file {path}:"
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise OptionError(f"--space-file {path} cannot be read as TOML ({error}); accepted: a TOML file with "
                          f"tables {' and '.join(f'[{section}]' for section in SECTIONS)}.") from None
    narrowing = {}
    for section, table in document.items():
        if section not in SECTIONS or not isinstance(table, dict):
            raise OptionError(f"{where} {section!r} is not a table of the space{closest(section, SECTIONS)}; "
                              f"accepted: tables {' and '.join(f'[{section}]' for section in SECTIONS)}.")
        for name, value in table.items():
            narrowing[f"{section}.{name}"] = (value, where)
    return narrowing
