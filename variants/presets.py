"""Rows and sets of rows: what a list of variants names, wherever one is read (`--variant`, `VARIANT=`).

A row is a registered variant (or baseline) by name, or a preset: the variant with some of its options fixed,
written `name:option=value[:option=value]` (`relative:kind=alibi`, `sparse:pattern=bigbird`). A preset is a row
of its own: its runs are the variant's with those options, and pages show it under the text it was written as
(`canonical`: option values as `--set` writes them). A set names a list of rows (`core`, the design card's
seven); `expand` replaces each set in a comma-separated list by its rows.

    >>> expand("core")[:3]
    ('dense', 'unscaled', 'temperature:learnable=true')
    >>> parse("relative:kind=alibi")
    ('relative', {'kind': 'alibi'})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.options import OptionError, closest, format_value, merged_preset, parse_preset
from variants.registry import list_baselines, list_variants, options_of

# The design card's seven, one row each: dense scaled and unscaled dot product, temperature (learned, per head),
# additive, local window, block-sparse (BigBird), and relative position as ALiBi and as RoPE.
CORE = ("dense", "unscaled", "temperature:learnable=true", "additive", "local", "sparse:pattern=bigbird",
        "relative:kind=alibi", "relative:kind=rope")
# The Long Range Arena's eleven (Tay et al. 2021, Table 1): the Transformer, Local Attention, Sparse Transformer
# (LRA's code runs its fixed pattern), Longformer, Linformer, Reformer, Sinkhorn, Synthesizer, BigBird, Linear
# Transformer, Performer.
LRA = ("dense", "local", "sparse:pattern=fixed", "sparse:pattern=longformer", "linformer", "reformer", "sinkhorn",
       "synthesizer", "sparse:pattern=bigbird", "linear", "performer")

# name: (what it is, its rows). Rows are computed on use, so a newly registered variant joins `all` by itself.
SETS: dict[str, tuple[str, Callable[[], tuple[str, ...]]]] = {
    "core": ("the design card's seven, relative as ALiBi and as RoPE (the default of `make benchmark`)",
             lambda: CORE),
    "kernelised": ("the kernelised and low-rank family", lambda: ("linear", "performer", "cosformer", "based",
                                                                  "linformer", "nystromformer")),
    "lra": ("the Long Range Arena's eleven", lambda: LRA),
    "saturation": ("the fixes to softmax saturation", lambda: ("qknorm", "softcap", "ssmax")),
    "baselines": ("the token mixers run in attention's place", lambda: tuple(list_baselines())),
    "all": ("every registered variant, then every baseline", lambda: (*list_variants(), *list_baselines())),
}


def parse(row: str) -> tuple[str, dict[str, Any]]:
    """'relative:kind=t5:num_buckets=16' -> ('relative', {'kind': 't5', 'num_buckets': 16}), checked against the
    variant's options: an unknown name, option or value is a one-sentence error."""
    name = row.split(":", 1)[0]
    if name in SETS:
        raise OptionError(f"{name!r} is a set of variants, which cannot take options; accepted: a variant name "
                          "before the options, e.g. relative:kind=alibi.")
    known = (*list_variants(), *list_baselines())
    if name not in known:
        raise OptionError(f"Unknown variant {name!r}{closest(name, [*known, *SETS])}; available: {', '.join(known)}; "
                          f"or a set ({', '.join(SETS)}), or a preset name:option=value.")
    _, options = parse_preset(row, what="Variant", example="relative:kind=alibi")
    typed = options_of(name, options)  # an unknown option or a bad value: the variant's own sentence
    return name, {key: getattr(typed, key) for key in options}  # as the variant reads them: '2' -> 2.0


def canonical(row: str) -> str:
    """The row as pages show it: the name, then its options as `--set` writes their values."""
    name, options = parse(row)
    return ":".join([name, *(f"{key}={format_value(value)}" for key, value in options.items())])


def expand(text: str | None, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """A comma-separated list of rows and sets -> its rows (each set replaced by its own, in order), each checked
    and canonical; `default` when the list is empty. A row listed twice is a one-sentence error."""
    rows: list[str] = []
    for item in (item.strip() for item in (text or "").split(",")):
        if item in SETS:
            rows.extend(SETS[item][1]())
        elif item:
            rows.append(canonical(item))
    rows = rows or list(default or ())
    for row in rows:
        if rows.count(row) > 1:
            raise OptionError(f"Variant {row!r} is listed twice (sets included); accepted: each row once.")
    return tuple(rows)


def base(row: str) -> str:
    """The registered variant a row runs: 'relative:kind=alibi' -> 'relative'."""
    return row.split(":", 1)[0]


def with_preset(row: str, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the variant's name, its options): the preset's options, then the user's --set for the variant, which may
    not give one of the preset's options another value."""
    name, fixed = parse(row)
    return name, merged_preset(row, name, fixed, overrides, section="variant")


def describe_sets() -> str:
    """The sets with their rows (what `attnlab list` prints after the variants)."""
    lines = ["Sets (--variant SET, VARIANT=SET; presets name:option=value are rows of their own):"]
    lines += [f"{name}: {what}\n    {', '.join(rows())}" for name, (what, rows) in SETS.items()]
    return "\n".join(lines)
