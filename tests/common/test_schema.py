"""A command's options declared once (`common.schema`): the flags, the values they give, the stored definition (one
stored before a field existed included) and the command that reruns them all come from the dataclass's fields."""

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

from common.options import OptionError
from common.schema import (
    CHANGED,
    NEVER,
    add_flags,
    command,
    from_flags,
    from_stored,
    resolved,
    setting,
    stored,
    upgraded,
)


def parse_grid(text):
    try:
        return tuple(float(item) for item in text.split(","))
    except ValueError:
        raise OptionError(f"Grid got {text!r}; accepted: numbers, comma-separated.") from None


@dataclass(frozen=True)
class Options:
    seeds: int = setting(6, "fresh seeds (default: %(default)s)", metavar="N")
    grid: tuple[float, ...] = setting((1.0, 3.0), "multiples (default: %(default)s)", parse=parse_grid, before=(1.0,))
    name: str = setting("", "its name", stored=False, left_out=lambda values: f'seeds{values["seeds"]}')
    fast: bool = setting(True, "--no-fast: slowly", rerun=CHANGED)
    kernel: str = setting("auto", "a kernel", flag=("--kernel", "--backend"), rerun=CHANGED)
    sets: tuple[str, ...] = setting((), "assignments", flag="--set", action="append", parse=tuple)
    storage: str | None = setting(None, "where", stored=False, rerun=CHANGED, show=lambda url: url.upper())
    interval: int = setting(60, "a heartbeat", stored=False, rerun=NEVER)
    kept: bool = setting(False, before=True)  # stored, no flag


def parser():
    parser = argparse.ArgumentParser()
    add_flags(parser, Options)
    return parser


def test_every_field_with_a_help_text_is_a_flag_named_after_it_and_the_rest_are_not():
    actions = {action.dest: action for action in parser()._actions if action.dest != "help"}
    assert list(actions) == ["seeds", "grid", "name", "fast", "kernel", "set", "storage", "interval"]
    assert actions["kernel"].option_strings == ["--kernel", "--backend"] and actions["seeds"].type is int
    assert actions["fast"].option_strings == ["--fast", "--no-fast"]
    assert actions["seeds"].default == 6 and actions["grid"].default == "1.0,3.0"  # as text: the field parses it
    assert actions["name"].default is None and actions["set"].default is None  # left out: None
    assert "fresh seeds (default: 6)" in parser().format_help()


def test_the_flags_give_typed_values_and_a_value_left_out_its_default_or_what_the_others_make_of_it():
    options = from_flags(Options, vars(parser().parse_args(["--seeds", "3", "--grid", "0.5,2", "--set", "a=1",
                                                            "--set", "b=2", "--backend", "sdpa", "--no-fast"])))
    assert options == Options(seeds=3, grid=(0.5, 2.0), name="seeds3", fast=False, kernel="sdpa", sets=("a=1", "b=2"))
    assert from_flags(Options, vars(parser().parse_args([]))) == Options(name="seeds6")
    assert resolved(Options, {"seeds": 2, "name": "given"}).name == "given"
    with pytest.raises(OptionError, match=r"Grid got '1,x'; accepted: numbers"):
        from_flags(Options, {"grid": "1,x"})


def test_the_definition_holds_the_stored_fields_as_json_and_reads_back_one_stored_before_a_field_existed():
    options = Options(seeds=3, grid=(0.5, 2.0), name="x", sets=("a=1",), storage="db", interval=5)
    definition = stored(options)
    assert definition == {"seeds": 3, "grid": [0.5, 2.0], "fast": True, "kernel": "auto", "sets": ["a=1"],
                          "kept": False}
    local = {"name": "x", "storage": "db", "interval": 5}
    assert from_stored(Options, definition.__getitem__, **local) == options  # lists read back as the tuples
    older = upgraded(Options, {key: value for key, value in definition.items() if key not in ("grid", "kept")})
    assert (older["grid"], older["kept"]) == ((1.0,), True)  # what a version before the fields ran
    assert "seeds" not in upgraded(Options, {})  # no `before`: a definition without it stays without it


def test_the_rerun_command_names_each_flag_in_the_fields_order_as_its_rule_says():
    assert command(Options(name="x"), ["prog"]) == "prog --seeds 6 --grid 1.0,3.0 --name x"
    changed = dataclasses.replace(Options(name="x"), fast=False, kernel="sdpa", sets=("a=1", "b c=2"),
                                  storage="db", interval=5)
    assert command(changed, ["prog", "run"]) == ("prog run --seeds 6 --grid 1.0,3.0 --name x --no-fast --kernel sdpa "
                                                 "--set a=1 --set 'b c=2' --storage DB")
